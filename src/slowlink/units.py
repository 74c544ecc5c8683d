"""Units: every conversion factor lives here, and human strings are parsed here, once, at load.

Inside slowlink every quantity is a plain SI float: bytes, seconds, bytes/s, FLOP/s. NIC rates are
quoted by vendors in bits per second and converted here; GB (1e9) and GiB (2**30) never share a spelling.
"""

from __future__ import annotations

import math
import re
from typing import Any

# Sizes in bytes.
KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2.0**10
MiB = 2.0**20
GiB = 2.0**30
TiB = 2.0**40

# Bits, expressed in bytes.
BIT = 1.0 / 8.0
Gbit = 1e9 / 8.0
Mbit = 1e6 / 8.0

# Time in seconds.
NS = 1e-9
US = 1e-6
MS = 1e-3
MINUTE = 60.0
HOUR = 60 * MINUTE
DAY = 24 * HOUR
YEAR = 365.25 * DAY  # a Julian year: 365.25 days, the mean calendar year over a leap cycle

# Compute.
TFLOPS = 1e12
PFLOPS = 1e15

_SIZE_UNITS: dict[str, float] = {
    "": 1.0, "b": 1.0, "byte": 1.0, "bytes": 1.0,
    "k": KiB, "kb": KB, "kib": KiB,
    "m": MiB, "mb": MB, "mib": MiB,
    "g": GiB, "gb": GB, "gib": GiB,
    "t": TiB, "tb": TB, "tib": TiB,
}
_RATE_UNITS: dict[str, float] = {
    "b/s": 1.0, "bps": BIT, "bit/s": BIT,
    "kb/s": 1e3 * BIT, "kbit/s": 1e3 * BIT, "kbps": 1e3 * BIT,
    "mb/s": Mbit, "mbit/s": Mbit, "mbps": Mbit,
    "gb/s": Gbit, "gbit/s": Gbit, "gbps": Gbit,
    "tb/s": 1e12 * BIT, "tbit/s": 1e12 * BIT,
    "kbyte/s": KB, "mbyte/s": MB, "gbyte/s": GB, "tbyte/s": TB,
}
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"


def parse_size(text: str | float | int) -> float:
    """Parse a size such as ``"1.5 GiB"``, ``"64MiB"``, ``"8"`` or ``"1GB"`` into bytes.

    Binary prefixes (KiB, MiB, GiB, and the nccl-tests shorthand K, M, G) are powers of two; decimal
    ones (KB, MB, GB) are powers of ten, as in nccl-tests' ``-b 8 -e 8G``.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"size ({text}) must be >= 0")
        return float(text)
    s = str(text).strip()
    m = re.fullmatch(_NUMBER + r"\s*([A-Za-z]*)", s)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"size ({text!r}) is not a size: use a number with B, KiB, MiB, GiB, KB, MB or GB")
    return float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]


def parse_rate(text: str | float | int) -> float:
    """Parse a link rate such as ``"400Gb/s"`` or ``"200 Gbit/s"`` into bytes/s.

    Lower-case ``b`` means bits (the vendors' habit for NICs); write ``GByte/s`` for bytes.
    A bare number is taken as Gbit/s.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text) * Gbit
    s = str(text).strip()
    m = re.fullmatch(_NUMBER + r"\s*([A-Za-z/]+)", s)
    if not m or m.group(2).lower() not in _RATE_UNITS:
        raise ValueError(f"rate ({text!r}) is not a rate: use e.g. 400Gb/s, 200Gbit/s or 50GByte/s")
    return float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]


def parse_ratio(text: str | float | int) -> float:
    """Parse an oversubscription ratio ``"4:1"`` (downlink:uplink) or a bare number into a float >= 1."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.fullmatch(_NUMBER + r"\s*:\s*" + _NUMBER, str(text).strip())
        if m:
            down, up = float(m.group(1)), float(m.group(2))
            if up <= 0:
                raise ValueError(f"ratio ({text!r}) has no uplink ({m.group(2)}): the uplink side must be > 0, "
                                 "e.g. 4:1")
            value = down / up
        else:
            try:
                value = float(str(text))
            except ValueError:
                raise ValueError(f"ratio ({text!r}) is not a ratio: write 4:1 or 4") from None
    if not math.isfinite(value) or value < 1.0:
        raise ValueError(f"ratio ({text!r}) must be a finite number >= 1 (downlink:uplink)")
    return value


def format_size(size_bytes: float) -> str:
    """Short binary-prefixed size for tables: 1024 -> '1KiB', 1.5 * 2**30 -> '1.5GiB'."""
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size_bytes >= factor:
            return f"{size_bytes / factor:g}{unit}"
    return f"{size_bytes:g}B"


def parse_sweep(text: str) -> list[float]:
    """Parse an nccl-tests style sweep ``MIN:MAX:FACTOR`` (e.g. ``8:8GiB:2``) into sizes in bytes."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"sweep ({text!r}) must be MIN:MAX:FACTOR, e.g. 8:8GiB:2")
    lo, hi = parse_size(parts[0]), parse_size(parts[1])
    try:
        factor = float(parts[2])
    except ValueError:
        raise ValueError(f"sweep factor ({parts[2]!r}) must be a number > 1") from None
    if lo <= 0 or hi < lo:
        raise ValueError(f"sweep ({text!r}) needs 0 < MIN <= MAX")
    if factor <= 1:
        raise ValueError(f"sweep factor ({parts[2]!r}) must be > 1")
    sizes = []
    size = lo
    while size <= hi * (1 + 1e-9):
        sizes.append(size)
        size *= factor
    return sizes


# Element types. Bytes of one element of each torch dtype (``torch.<name>``), each size written once; every
# name a spec or a command line accepts maps to one of these.
_TORCH_DTYPE_BYTES: dict[str, int] = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
                                      "int64": 8, "int32": 4, "int8": 1, "uint8": 1}
# The workload's precisions (training.precision, training.grad_comm_dtype, a checkpoint's weights_dtype) and the
# torch dtype each is; fp8 maps to E4M3 (E5M2, the other FP8 format, is 1 byte too).
PRECISION_TORCH: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}
# nccl-tests' -d/--datatype names (its ncclDataType_t names: float, half, bfloat16, double, int8, ...) and the
# torch spellings users type for them, with the torch dtype each is.
DATATYPE_TORCH: dict[str, str] = {
    "float": "float32", "float32": "float32", "half": "float16", "float16": "float16", "bf16": "bfloat16",
    "bfloat16": "bfloat16", "double": "float64", "int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64",
}
# How a PyTorch profiler trace names an element type, and the torch dtype each is: c10::ScalarType names in a
# collective's ``dtype`` argument (record_param_comms, c10/core/ScalarType.h) and the C++ type names in a gloo
# collective's ``Input type`` (``c10::Half`` and ``c10::BFloat16`` for the 16-bit floats).
TRACE_DTYPE_TORCH: dict[str, str] = {
    "Float": "float32", "Half": "float16", "BFloat16": "bfloat16", "Double": "float64", "Long": "int64",
    "Int": "int32", "Char": "int8", "Byte": "uint8", "Float8_e4m3fn": "float8_e4m3fn",
    "float": "float32", "c10::Half": "float16", "c10::BFloat16": "bfloat16", "double": "float64",
    "long int": "int64", "int64_t": "int64", "int": "int32", "signed char": "int8", "unsigned char": "uint8",
}
PRECISION_BYTES: dict[str, float] = {name: float(_TORCH_DTYPE_BYTES[t]) for name, t in PRECISION_TORCH.items()}
DTYPE_BYTES: dict[str, int] = {name: _TORCH_DTYPE_BYTES[t] for name, t in DATATYPE_TORCH.items()}
TRACE_DTYPE_BYTES: dict[str, int] = {name: _TORCH_DTYPE_BYTES[t] for name, t in TRACE_DTYPE_TORCH.items()}


def torch_dtype(torch: Any, name: str) -> Any:
    """``torch.<dtype>`` of a precision (``bf16``) or a datatype name (``half``); the caller passes the torch
    module in, imported when it needs it (torch is optional)."""
    return getattr(torch, PRECISION_TORCH.get(name) or DATATYPE_TORCH[name])


# Suffixes of a count of tokens or steps: thousand, million, billion (B or G), trillion.
_COUNT_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_COUNT = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGT]?)\s*$")


def parse_count(value: str | float | int) -> float:
    """A count written as a number or with a suffix: ``15e12``, ``15T``, ``2.5B``, ``300M`` -> float.

    Raises ValueError (pydantic turns it into ``field (value): rule``) when it is not a positive count.
    """
    if isinstance(value, bool):
        raise ValueError("must be a number, e.g. 15e12 or 15T")
    if isinstance(value, int | float):
        n = float(value)
    else:
        m = _COUNT.match(value.upper())
        if m is None:
            raise ValueError("must be a number with an optional K, M, B or T suffix, e.g. 15T or 15e12")
        n = float(m.group(1)) * _COUNT_SUFFIX[m.group(2)]
    if not n > 0 or n == float("inf"):
        raise ValueError("must be > 0")
    return n
