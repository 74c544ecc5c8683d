"""How far to trust a plan: the step model's error on the published runs most like it.

``slowlink validate`` prices every held-out run (``data/heldout_runs.yaml``; never used to set a constant) and
compares the predicted MFU with the measured one: error = predicted / measured - 1, which is also measured step
time / predicted step time - 1 (both MFUs count the same FLOPs). Its errors are not random: they follow the GPU
and the TP degree (H100 at TP 1 within 1% on average, at TP 4 and 8 measured steps 7-10% longer than predicted;
docs/workload.md) and parameter sharding (the DeepSpeed ZeRO-3 rows, 13-25%). :func:`accuracy` hands a plan the
runs alike in those three (same GPU, TP and ZeRO-3 or not) and all runs on its GPU, so that a user reads the
prediction with the error measured where it applies, or learns that none was.

Pricing 71 runs takes about a second, longer than a plan may take (benchmarks/bench_cli.py), so their errors are
recorded in ``data/heldout_accuracy.json`` by ``python -m slowlink.workload.validate``; a test fails when the
record differs from what ``slowlink validate`` prices (run the command after changing the model).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

RECORD = "heldout_accuracy.json"
DIGITS = 4  # errors recorded to 0.01%: the record's rounding, and the tolerance its test allows


@dataclass(frozen=True)
class RecordedRun:
    """One held-out run as ``slowlink validate`` priced it: where it ran and the model's MFU error there."""

    id: str
    gpu: str
    tp: int
    sharded_params: bool
    error: float
    stack: str = "megatron-core"  # the stack it ran (a bundled stack's name, or the software the source names)


@dataclass(frozen=True)
class RunGroup:
    """Held-out runs and their error: count, mean signed error (positive: measured steps longer than predicted),
    mean |error| and the range."""

    runs: tuple[RecordedRun, ...]

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def mean_error(self) -> float:
        return sum(r.error for r in self.runs) / self.n if self.runs else 0.0

    @property
    def mean_abs_error(self) -> float:
        return sum(abs(r.error) for r in self.runs) / self.n if self.runs else 0.0

    @property
    def low(self) -> float:
        return min((r.error for r in self.runs), default=0.0)

    @property
    def high(self) -> float:
        return max((r.error for r in self.runs), default=0.0)

    def to_json(self) -> dict[str, object]:
        """The runs (ids), mean signed and absolute error (MFU predicted / measured - 1) and range."""
        return {"runs": [r.id for r in self.runs], "mean_error": self.mean_error,
                "mean_abs_error": self.mean_abs_error, "min_error": self.low, "max_error": self.high}


@dataclass(frozen=True)
class Accuracy:
    """What the held-out runs say about a plan of ``tp`` (ZeRO-3 or not) on ``gpu``: the runs ``alike`` (same
    GPU, TP and parameter sharding) and every run on the GPU (``same_gpu``); both empty where no run on that GPU
    was published (``gpus_measured`` then says which GPUs have runs); and every run of the plan's ``stack``
    (``same_stack``, any GPU)."""

    gpu: str
    tp: int
    sharded_params: bool
    alike: RunGroup
    same_gpu: RunGroup
    gpus_measured: tuple[str, ...]
    stack: str = "megatron-core"
    same_stack: RunGroup = RunGroup(())

    def to_json(self) -> dict[str, object]:
        """The ``accuracy`` object of ``slowlink plan --json``, as the analytical model priced the runs
        (``model``)."""
        return {"model": "analytical", "gpu": self.gpu, "tp": self.tp, "sharded_params": self.sharded_params,
                "alike": self.alike.to_json(), "same_gpu": self.same_gpu.to_json(),
                "gpus_measured": list(self.gpus_measured), "stack": self.stack,
                "same_stack": self.same_stack.to_json()}


def layout_key(gpu: str, tp: int, sharded_params: bool) -> str:
    """The group a run's error is reported by and a plan is matched on: its GPU and TP, ZeRO-3 / FSDP apart
    (``validate``'s ``gpu_tp`` breakdown, :func:`accuracy`)."""
    return f"{gpu or '-'} tp{tp}{' zero3' if sharded_params else ''}"


def record_rows(runs: list[RecordedRun]) -> list[dict[str, object]]:
    """The record's rows, errors rounded to ``DIGITS`` decimals."""
    return [{"id": r.id, "gpu": r.gpu, "tp": r.tp, "sharded_params": r.sharded_params,
             "error": round(r.error, DIGITS), "stack": r.stack} for r in runs]


@functools.cache
def recorded_runs() -> tuple[RecordedRun, ...]:
    """The held-out runs as last recorded (``data/heldout_accuracy.json``)."""
    data = json.loads(resources.files("slowlink.workload.data").joinpath(RECORD).read_text("utf-8"))
    return tuple(RecordedRun(r["id"], r["gpu"], int(r["tp"]), bool(r["sharded_params"]), float(r["error"]),
                             str(r["stack"])) for r in data["runs"])


def accuracy(gpu: str, tp: int, sharded_params: bool, stack: str = "megatron-core") -> Accuracy:
    """The recorded held-out runs alike a plan of TP ``tp`` on ``gpu`` (catalog name), ZeRO-3 / FSDP or not, and
    those of its ``stack``."""
    runs = recorded_runs()
    same = tuple(r for r in runs if r.gpu == gpu)
    key = layout_key(gpu, tp, sharded_params)
    alike = tuple(r for r in same if layout_key(r.gpu, r.tp, r.sharded_params) == key)
    return Accuracy(gpu, tp, sharded_params, RunGroup(alike), RunGroup(same),
                    tuple(sorted({r.gpu for r in runs})), stack, RunGroup(tuple(r for r in runs if r.stack == stack)))
