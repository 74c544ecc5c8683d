"""What the readers share: reading a file, a line-numbered error, and telling a file's format by its content."""

from __future__ import annotations

from pathlib import Path

from slowlink.errors import SpecError, line_error

# (format, a marker only that format prints). Order matters: an nccl-tests run with NCCL_DEBUG=INFO holds NCCL
# log lines too, and is read as a table (its log lines are read by the log reader when asked).
_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nccl-tests", ("busbw",)),
    ("nccl-log", (" NCCL INFO ", " NCCL WARN ", "NCCL version ")),
    ("perfquery", ("SymbolErrorCounter:",)),
    ("ethtool", ("NIC statistics:",)),
    ("ethtool-i", ("firmware-version:", "bus-info:")),
    ("nvidia-smi-topo", ("CPU Affinity",)),
    ("lspci", ("LnkSta:",)),
    ("ibstat", ("CA '",)),
    ("ibv_devinfo", ("hca_id:",)),
    ("nvidia-smi-xml", ("<nvidia_smi_log",)),
    ("nvidia-smi", ("driver_version",)),
)
FORMATS = tuple(name for name, _ in _MARKERS)


def read_input(path: Path | str, what: str) -> str:
    """The text of ``path`` (undecodable bytes replaced), or a :class:`SpecError` naming the file."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{what} ({str(p)!r}) does not exist or is not a file")
    try:
        return p.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise SpecError(f"{what} ({str(p)!r}) cannot be read: {exc.strerror}") from None


def sniff(text: str) -> str | None:
    """The format of ``text`` (one of :data:`FORMATS`), or None when none of their markers appears."""
    for name, marks in _MARKERS:
        if any(m in text for m in marks):
            return name
    return None


__all__ = ["FORMATS", "line_error", "read_input", "sniff"]
