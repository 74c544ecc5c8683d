"""slowlink.collectives: an NCCL-faithful cost model of collectives (see docs/collectives.md)."""

from slowlink.collectives.model import Group, Prediction, predict
from slowlink.collectives.ops import OPS

__all__ = ["OPS", "Group", "Prediction", "predict"]
