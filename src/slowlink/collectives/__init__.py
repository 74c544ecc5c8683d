"""slowlink.collectives: an NCCL-faithful cost model of collectives (see docs/collectives.md).

The model (numpy) loads on first use of ``Group``, ``Prediction`` or ``predict`` (PEP 562 module
``__getattr__``), so that a command's help can read :data:`OPS` and the constants without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slowlink.collectives.ops import OPS

if TYPE_CHECKING:
    from slowlink.collectives.model import Group, Prediction, predict

__all__ = ["OPS", "Group", "Prediction", "predict"]


def __getattr__(name: str) -> Any:
    if name in ("Group", "Prediction", "predict"):
        from slowlink.collectives import model

        return getattr(model, name)
    raise AttributeError(f"module 'slowlink.collectives' has no attribute {name!r}")
