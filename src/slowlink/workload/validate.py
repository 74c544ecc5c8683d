"""Published-runs validation: model each case of published_runs.yaml on a Selene-like cluster.

Selene (both papers): 8x A100 80GB per node, NVLink3, 8x HDR 200G compute NICs per node, three-tier
non-blocking fat tree. Korthikanti 'present' = selective recompute + SP, 'full' = full recompute without
SP, vp as given, micro-batch as given. Narayanan Table 1 does not print micro-batch, vp or the DDP
implementation: they come from the authors' reproduction script (narayanan_2021_runs.yaml); full
recompute, SP off, no distributed optimizer (zero 0: gradient all-reduce, unsharded Adam), the
all-reduce overlapped with the backward under PyTorch DDP and after it under Megatron's local DDP.
Both papers predate flash attention: attention is unfused.
Held-out runs (heldout_runs.yaml: other GPUs, fabrics, scales) are modelled as written there and
reported apart; no constant is set from them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from slowlink.catalog.stack import stacks
from slowlink.fileio import parse_text
from slowlink.spec.cluster import Cluster, cluster_from_mapping
from slowlink.spec.workload import Model, Workload, workload_from_mapping
from slowlink.workload.accuracy import RECORD, RecordedRun, layout_key, record_rows
from slowlink.workload.flops import model_flops_per_step
from slowlink.workload.step import plan


@dataclass(frozen=True)
class Case:
    """One published run: the model's value and the measured one (step time in s, or MFU)."""

    id: str
    predicted_s: float
    measured_s: float
    quantity: str = "step time (s)"
    gpu: str = ""  # the run's GPU (catalog name), for the breakdown by generation
    tp: int = 1  # the run's TP degree and whether it shards parameters (ZeRO-3 / FSDP): the error's two
    sharded_params: bool = False  # strongest patterns (workload.accuracy)
    stack: str = "megatron-core"  # the stack it ran: the workload's, or the software its source names

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0

    @property
    def source(self) -> str:
        """The publication family, the id's prefix (llama3, dgxc, hag23, n21, ...)."""
        return self.id.split("-", 1)[0]


def selene(nodes: int) -> Cluster:
    """A Selene-like cluster of ``nodes`` DGX A100 nodes."""
    return cluster_from_mapping({
        "name": f"selene-{nodes}", "nodes": nodes, "gpus_per_node": 8, "gpu": "a100-80gb",
        "scale_up": {"link": "nvlink3", "domain_gpus": 8},
        "nics": {"compute": {"per_node": 8, "speed_gbit_s": 200}},
        "fabric": {"transport": "infiniband", "topology": "fat-tree", "tiers": 3}})


def _data(name: str) -> dict[str, Any]:
    text = resources.files("slowlink.workload.data").joinpath(name).read_text("utf-8")
    data: dict[str, Any] = parse_text(text, name, False)
    return data


def published_runs() -> dict[str, Any]:
    """The calibration set (a copy of shared/calibration/published_runs.yaml)."""
    return _data("published_runs.yaml")


def narayanan_eq3_flops(model: Model, global_batch: int) -> float:
    """FLOPs of one step as Narayanan et al. 2021 count them (Eq. 3, full recomputation included):
    F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h))."""
    s, h, n_layers, v = model.seq_len, model.hidden, model.layers, model.vocab
    return 96.0 * global_batch * s * n_layers * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * n_layers * h))


def measured_mfu(case: dict[str, Any], w: Workload, cluster: Cluster) -> float:
    """The case's MFU: as published (``mfu``), or from teraFLOP/s per GPU counted with Narayanan's Eq. 3
    (``tflops_eq3``): step time t = F_eq3 / (gpus x rate), MFU = model FLOPs / (t x gpus x peak)."""
    if "mfu" in case:
        return float(case["mfu"])
    rate = float(case["tflops_eq3"]) * 1e12
    step_s = narayanan_eq3_flops(w.model, w.training.global_batch) / (cluster.gpus * rate)
    flops = model_flops_per_step(w.model, w.training.global_batch)
    return flops / (step_s * cluster.gpus * cluster.gpu.peak(w.training.precision))


def heldout_cases() -> list[Case]:
    """Predicted vs measured MFU of every held-out run (heldout_runs.yaml): never used to set a constant."""
    out: list[Case] = []
    for c in _data("heldout_runs.yaml")["cases"]:
        w, cluster = workload_from_mapping(c["workload"], c["id"]), cluster_from_mapping(c["cluster"], c["id"])
        # they ran; the memory model puts 5 of 71 over HBM: Nemotron-4 340B (+7.6 GiB), fa2-gpt2.7b-8k (its
        # assumed micro-batch 8 without recompute: 160 GiB of activations), the three Llama 3 405B rows (+2.5-2.7
        # GiB: FSDP's unsharded fp32 gradient accumulator, 11.8 GiB, beside 62 GiB of activations for 17.9
        # micro-batches in flight on the first stage; Meta frees stage inputs/outputs early, Sec. 3.3.2)
        r = plan(w, cluster, check_memory=False)
        out.append(Case(c["id"], r.mfu, measured_mfu(c, w, cluster), "MFU", cluster.gpu.name, w.parallel.tp,
                        w.parallel.zero == 3, c.get("software", w.stack.name)))
    return out


def _group_key(c: Case, label: str) -> str:
    """A case's group under ``label``: its source, its GPU, or its GPU and TP (ZeRO-3 apart), the grouping
    ``slowlink plan`` reports its accuracy by (workload.accuracy)."""
    if label == "source":
        return c.source
    if label == "gpu":
        return c.gpu or "-"
    if label == "stack":
        return c.stack
    return layout_key(c.gpu, c.tp, c.sharded_params)


def breakdown(cases: list[Case]) -> dict[str, dict[str, tuple[int, float, float]]]:
    """Cases, mean |error| and mean signed error by source (id prefix), by GPU, by GPU and TP and by stack: where a
    set's error lives."""
    out: dict[str, dict[str, tuple[int, float, float]]] = {}
    for label in ("source", "gpu", "gpu_tp", "stack"):
        groups: dict[str, list[Case]] = {}
        for c in cases:
            groups.setdefault(_group_key(c, label), []).append(c)
        out[label] = {k: (len(v), mean_abs_error(v), sum(c.error for c in v) / len(v)) for k, v in groups.items()}
    return out


def mean_abs_error(cases: list[Case]) -> float:
    """Mean |predicted / measured - 1| over ``cases`` (0 for none)."""
    return sum(abs(c.error) for c in cases) / len(cases) if cases else 0.0


def cases() -> list[Case]:
    """Predicted vs measured step time of every Korthikanti (present, full) and Narayanan case."""
    data = published_runs()
    out: list[Case] = []
    for c in data["korthikanti_2022"]["cases"]:
        for mode, rec, sp in (("present", "selective", True), ("full", "full", False)):
            w = workload_from_mapping({
                "model": {"preset": c["id"]},
                "training": {"global_batch": c["global_batch"], "micro_batch": c["micro_batch"],
                             "precision": "fp16", "recompute": rec, "flash_attention": False},
                "parallel": {"tp": c["tp"], "pp": c["pp"], "dp": 1, "vp": c["vp"], "sequence_parallel": sp}})
            cl = selene(c["gpus"] // 8)
            r = plan(w, cl)
            out.append(Case(f"{c['id']}-{mode}", r.step_time_s, c[f"iter_time_{mode}_s"], gpu=cl.gpu.name,
                            tp=w.parallel.tp, stack=w.stack.name))
    runs = _data("narayanan_2021_runs.yaml")["runs"]
    for c in data["narayanan_2021"]["cases"]:
        run = runs[c["id"]]
        dp = c["gpus"] // (c["tp"] * c["pp"])
        stage = c["layers"] // c["pp"]
        w = workload_from_mapping({
            "model": {"preset": c["id"]},
            "training": {"global_batch": c["global_batch"], "micro_batch": run["micro_batch"],
                         "precision": "fp16", "recompute": "full", "flash_attention": False},
            "parallel": {"tp": c["tp"], "pp": c["pp"], "dp": dp,
                         "vp": stage // run.get("layers_per_virtual_stage", stage),
                         "sequence_parallel": False, "zero": 0},
            "overlap": {"grad_reduce": run["ddp"] == "torch"}, "stack": _ddp_stack(run["ddp"])})
        cl = selene(c["gpus"] // 8)
        r = plan(w, cl)
        out.append(Case(c["id"], r.step_time_s, c["iter_time_s_derived"], gpu=cl.gpu.name, tp=w.parallel.tp,
                        stack=w.stack.name))
    return out


def _ddp_stack(ddp: str) -> dict[str, object]:
    """The stack of a Narayanan Table 1 run: Megatron-LM with its own DDP (``local``: megatron-core's one call per
    buffer without overlap) or with PyTorch DDP (``torch``: PyTorch's 25 MiB buckets and 1 MiB first bucket, the
    ``fsdp`` stack's, catalog/data/stacks.yaml)."""
    if ddp != "torch":
        return {"name": "megatron-core"}
    torch_ddp = stacks()["fsdp"].fields
    return {"name": "megatron-core", "grad_bucket_bytes": torch_ddp.grad_bucket_bytes,
            "first_bucket_bytes": torch_ddp.first_bucket_bytes,
            "buckets_without_overlap": torch_ddp.buckets_without_overlap}


def priced_runs() -> list[RecordedRun]:
    """Every held-out run priced now by the step model (``slowlink validate``'s held-out set)."""
    return [RecordedRun(c.id, c.gpu, c.tp, c.sharded_params, c.error, c.stack) for c in heldout_cases()]


def write_record(path: Path) -> None:
    """Price every held-out run and write the record to ``path``, one run per line."""
    what = ("slowlink validate, held-out runs (heldout_runs.yaml): error = predicted MFU / measured MFU - 1, "
            "written by `python -m slowlink.workload.validate`")
    rows = ",\n".join(f"  {json.dumps(r)}" for r in record_rows(priced_runs()))
    path.write_text(f'{{"what": {json.dumps(what)},\n "runs": [\n{rows}\n ]}}\n', encoding="utf-8")


if __name__ == "__main__":  # maintainers: refresh the record after changing the model
    target = Path(str(resources.files("slowlink.workload.data").joinpath(RECORD)))
    write_record(target)
    sys.stdout.write(f"wrote {target}\n")
