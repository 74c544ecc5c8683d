"""Streaming reader of a Chrome trace JSON file (what ``torch.profiler`` exports): the top-level object's keys
one by one, and each element of its ``traceEvents`` array one at a time, so a trace is never held whole.

The file (plain or gzip) is read in chunks; every JSON value is decoded by the standard library's C scanner
(``json.JSONDecoder.raw_decode``) from a buffer that holds the value being read and little more. Memory is
bounded by the chunk size plus the largest single value (an event, or a metadata section such as
``deviceProperties``), whatever the file's size. No third-party parser is needed: ijson would do the same with
a C backend, but the events are small objects that ``raw_decode`` takes whole at C speed, which is all the
streaming a Chrome trace needs (its one large value is the events array).
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from slowlink.errors import SpecError

CHUNK_BYTES = 1 << 20
# The largest trace read (bytes of JSON, after decompression): past it a file is refused, not read for minutes.
MAX_TRACE_BYTES = 2 * 2**30
EVENTS_KEY = "traceEvents"
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _Buffer:
    """Text read so far and not yet consumed, refilled from the file on demand."""

    def __init__(self, fh: IO[bytes], source: str, max_bytes: int) -> None:
        self.fh, self.source, self.max_bytes = fh, source, max_bytes
        self.text, self.pos, self.read_bytes, self.eof = "", 0, 0, False
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character cut by a chunk waits

    def more(self) -> bool:
        """Read one more chunk; False at the end of the file."""
        if self.eof:
            return False
        try:
            raw = self.fh.read(CHUNK_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            raise SpecError(f"{self.source}: ({exc}) cannot be read: a trace must be JSON or gzip'd JSON") from None
        self.read_bytes += len(raw)
        if self.read_bytes > self.max_bytes:
            raise _too_big(self.source, self.read_bytes, self.max_bytes)
        if not raw:
            self.eof = True
            return False
        if self.pos > len(self.text) // 2:
            self.text, self.pos = self.text[self.pos:], 0
        self.text += self._utf8.decode(raw)
        return True

    def skip_space(self) -> None:
        while True:
            self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.text) or not self.more():
                return

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, chars: str) -> str:
        ch = self.peek()
        if not ch or ch not in chars:
            got = repr(ch) if ch else "the end of the file"
            raise SpecError(f"{self.source}: ({got} at byte ~{self.read_bytes}) expected one of {chars!r}: the trace "
                            "is not a complete Chrome trace JSON object (truncated, or not a trace)")
        self.pos += 1
        return ch

    def value(self) -> Any:
        """Decode the JSON value at the cursor, reading more of the file until it is complete."""
        self.skip_space()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.more():
                    continue
                raise SpecError(f"{self.source}: ({exc.msg} near byte ~{self.read_bytes}) the trace is not complete "
                                "JSON (truncated while written?)") from None
            # a number cut at the chunk's end: decode it again with what follows
            if end == len(self.text) and not self.eof and isinstance(obj, (int, float)) and self.more():
                continue
            self.pos = end
            return obj


def _too_big(source: str, size: int, max_bytes: int) -> SpecError:
    return SpecError(f"{source}: ({size / 2**30:.3g}+ GiB of JSON) a trace must be at most {max_bytes / 2**30:.3g} "
                     "GiB: profile fewer steps (torch.profiler.schedule's active)")


def _open(path: Path) -> IO[bytes]:
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def iter_trace(path: Path, max_bytes: int | None = None) -> Iterator[tuple[str, Any]]:
    """(key, value) for every top-level key of the trace, except that ``traceEvents`` yields
    (``"traceEvents"``, event) once per event, in file order; at most ``max_bytes`` of JSON (default
    :data:`MAX_TRACE_BYTES`). A bad file is a :class:`SpecError`."""
    source = str(path)
    max_bytes = MAX_TRACE_BYTES if max_bytes is None else max_bytes
    try:
        fh = _open(path)
        size = path.stat().st_size
    except OSError as exc:
        raise SpecError(f"{source}: ({exc.strerror}) cannot be opened") from None
    if size > max_bytes:  # a plain file says so at once; a gzip'd one is counted as it is decompressed
        fh.close()
        raise _too_big(source, size, max_bytes)
    with fh:
        buf = _Buffer(fh, source, max_bytes)
        buf.expect("{")
        if buf.peek() == "}":
            return
        while True:
            key = buf.value()
            if not isinstance(key, str):
                raise SpecError(f"{source}: ({key!r}) a top-level key must be a string")
            buf.expect(":")
            if key == EVENTS_KEY:
                buf.expect("[")
                if buf.peek() == "]":
                    buf.pos += 1
                else:
                    while True:
                        yield key, buf.value()
                        if buf.expect(",]") == "]":
                            break
            else:
                yield key, buf.value()
            if buf.expect(",}") == "}":
                return
