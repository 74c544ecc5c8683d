"""Keeping the page cache out of a read benchmark, and checking that it stayed out.

Two ways work on Linux and were checked on this machine (ext4 on a virtio disk, kernel page cache observed
with util-linux ``fincore``): ``posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`` on a file evicts its clean
pages (no privilege needed; inodes and directory entries stay cached), and writing ``3`` to
``/proc/sys/vm/drop_caches`` (root) drops every clean page, inode and dentry of the machine
(Documentation/admin-guide/sysctl/vm.rst). :func:`resident_fraction` asks the kernel, through ``mincore(2)``,
which pages of a file are cached, so a benchmark can show its reads came from the disk.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable
from pathlib import Path

from slowlink.errors import BenchError

DROP_CACHES = Path("/proc/sys/vm/drop_caches")
METHODS = ("fadvise", "drop", "none")
_PAGE = mmap.PAGESIZE


def evict_fd(fd: int) -> None:
    """Drop the cached pages of an open file (POSIX_FADV_DONTNEED over the whole file)."""
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def evict(paths: Iterable[Path]) -> None:
    """Drop the cached pages of every file in ``paths``, after one ``sync()``: DONTNEED skips dirty pages, and
    one sync costs one disk cache flush where an fdatasync per file would cost one each (minutes for 100k)."""
    os.sync()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            evict_fd(fd)
        finally:
            os.close(fd)


def drop_all() -> None:
    """``sync; echo 3 > /proc/sys/vm/drop_caches``: every clean page, inode and dentry (root only)."""
    os.sync()
    try:
        DROP_CACHES.write_text("3\n")
    except OSError as exc:
        raise BenchError(f"--cache (drop) needs root to write {DROP_CACHES}: {exc.strerror}; "
                         "use --cache fadvise") from None


def check_method(method: str) -> None:
    if method not in METHODS:
        raise BenchError(f"--cache ({method!r}) must be one of {', '.join(METHODS)}")
    if method == "drop" and not os.access(DROP_CACHES, os.W_OK):
        raise BenchError(f"--cache (drop) needs root to write {DROP_CACHES}; use --cache fadvise")


def defeat(method: str, paths: list[Path]) -> None:
    """Empty the cache of ``paths`` before a pass: fadvise each file, or drop the whole cache, or nothing."""
    if method == "fadvise":
        evict(paths)
    elif method == "drop":
        drop_all()


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc


def resident_pages(path: Path) -> tuple[int, int]:
    """(cached pages, pages) of one file, from mincore(2) over a read-only mapping (no page is read)."""
    size = path.stat().st_size
    pages = -(-size // _PAGE)
    if pages == 0:
        return 0, 0
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return 0, pages
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                return 0, pages
            return sum(b & 1 for b in vec), pages
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def resident_fraction(paths: Iterable[Path]) -> float:
    """Fraction of the pages of ``paths`` in the page cache now (0: nothing cached)."""
    cached = total = 0
    for p in paths:
        c, n = resident_pages(p)
        cached, total = cached + c, total + n
    return cached / total if total else 0.0
