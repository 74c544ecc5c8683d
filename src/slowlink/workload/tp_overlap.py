"""TP communication overlapped with the GEMMs the way Transformer Engine's userbuffers does it (``overlap.tp_comm``),
under the workload's userbuffers config (``overlap.tp_comm_config``, :mod:`slowlink.catalog.tp_comm`).

Source: NVIDIA/TransformerEngine tag v1.13 (the TE of the NeMo 24.12 container).
``transformer_engine/pytorch/module/base.py``, ``initialize_ub``: the method of each GEMM is
  ring_exchange  qkv_fprop, fc1_fprop (all-gather of the layer-norm output), proj_dgrad, fc2_dgrad (all-gather
                 of the output gradient); tp chunks, P2P copies on the copy engine (``use_ce``);
  pipeline       proj_fprop, fc2_fprop (reduce-scatter of the output), ``num_splits`` chunks (default 4);
  bulk           qkv_dgrad, fc1_dgrad (all-gather of the saved input for the weight gradient, beside the data
                 gradient GEMM), qkv_wgrad, fc1_wgrad (reduce-scatter of the data gradient, beside the weight
                 gradient GEMM).
Schedules, from ``transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp``:
  ``CommOverlapP2PBase::split_overlap_ag`` (ring_exchange): tp GEMMs of m/tp rows; chunk i+1 waits for the
      i-th neighbour exchange, which starts beside GEMM chunk i:  (tp - 1) x max(GEMM chunk, step) + GEMM chunk;
      with ``aggregate``: one exposed 1x exchange, then tp/2 GEMMs of 2 chunks, each but the last beside a 2x
      exchange:  step + (tp/2 - 1) x max(GEMM pair, 2 steps) + GEMM pair;
  ``CommOverlapBase::split_overlap_rs`` (pipeline): n GEMMs of m/n rows; the reduce-scatter of chunk i runs beside
      GEMM chunk i+1, the last one after the last GEMM:  GEMM chunk + (n - 1) x max(GEMM chunk, RS chunk) + RS chunk;
  ``CommOverlapBase::bulk_overlap``: the whole collective beside the whole GEMM:  max(GEMM, collective).
Every GEMM of a config with ``set_sm_margin`` runs on sm_count - num_sm SMs (``CommOverlapCore``: ``_math_sms``,
passed to cuBLAS): priced as a GPU of that many SMs and that share of the peak (:func:`math_gpu`).
A window's exposed time is what it lasts beyond the unsplit GEMM on the whole GPU that the layer's compute already
counts (:func:`~slowlink.workload.compute.layer_compute`): the collective's uncovered part, the split GEMMs' own
cost (chunks priced by :func:`~slowlink.workload.compute.gemm_time_s`, up to three at once as TE's three compute
streams run them: wave quantisation makes small chunks slower) and the SM margin's, never less than nothing.
SM contention: a window with an SM margin has paid for its communication's SMs in its GEMM; the hidden part of the
others stays the caller's (:func:`~slowlink.workload.traffic.overlap_contention_s`) at NCCL's 24 CTAs. Their own
kernels hold fewer SMs (TE default num_sm 1 for ring_exchange, whose copies run on the copy engine, 16 for pipeline
and bulk; the dgxc 25.02 configs set 2-24 for bulk) but also take HBM bandwidth, which the SM-only rule does not
count. With TE's counts the rule would give 1-12% compute slowdown under overlap on an H100, below the 18.9% Lee
et al. 2025 measured on average (24 CTAs: 22%); so the one count stays, and per-method SMs plus the HBM share are
open (with them the held-out mean read 7.6% instead of 6.6%, 2026-12-04).
Megatron-Core asserts sequence parallelism for TP overlap (core_r0.10.0 megatron/training/arguments.py): without
it the all-reduces stay exposed. Not modelled: the last RS chunk's larger SM count (UB_MAX_SM), ``cga_size``,
atomic GEMMs and FP8 buffers (FP8 only), methods other than each GEMM's default (no bundled config uses one).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slowlink.catalog import Gpu
from slowlink.catalog.tp_comm import GemmOverlap, tp_comm_config
from slowlink.errors import SpecError
from slowlink.spec.workload import Workload
from slowlink.workload.comm import CommCost, groups_of
from slowlink.workload.compute import Gemm, gemm_time_s, layer_gemms
from slowlink.workload.traffic import micro_batch_act_bytes

UB_STREAMS = 3  # TE v1.13 base.py _NUM_MAX_UB_STREAMS: compute streams the chunk GEMMs rotate over


@dataclass(frozen=True)
class TpOverlap:
    """TP seconds of one layer and micro-batch under userbuffers: every collective (``total_s``), what the layer
    waits beyond its unsplit GEMMs (``exposed_s``), and the communication that ran beside a GEMM on SMs the GEMM
    also used (``hidden_s``: the caller prices its contention; a GEMM with an SM margin already paid for it)."""

    total_s: float
    exposed_s: float
    hidden_s: float


@dataclass(frozen=True)
class _Window:
    time_s: float  # the GEMM(s) and the collective together
    split_gemm_s: float  # the GEMM as run (chunks, on the SMs it is given)
    comm_s: float


def math_gpu(gpu: Gpu, o: GemmOverlap) -> Gpu:
    """The GPU a GEMM runs on: with ``set_sm_margin`` cuBLAS gets sm_count - num_sm SMs (TE v1.13
    comm_gemm_overlap.cpp, CommOverlapCore: ``_math_sms``), so its peak scales by that share and its waves are
    that many SMs wide; without it, the whole GPU."""
    if not o.set_sm_margin:
        return gpu
    sms = gpu.sms - o.num_sm
    if sms < 1:
        raise SpecError(f"overlap.tp_comm_config: num_sm ({o.num_sm}) with set_sm_margin must be < the SMs of "
                        f"gpu {gpu.name} ({gpu.sms}): the GEMM runs on the rest")
    return replace(gpu, sms=sms, peak_flops={k: v * sms / gpu.sms for k, v in gpu.peak_flops.items()})


def chunk_time_s(g: Gemm, n: int, gpu: Gpu, precision: str) -> float:
    """Seconds of one of ``n`` row chunks of ``g``: TE issues chunk i on compute stream i mod 3, so up to
    UB_STREAMS chunks share the SMs; priced as 1/s of one GEMM of s chunks' rows (their tiles fill the same
    waves), s = min(UB_STREAMS, n)."""
    s = min(UB_STREAMS, n)
    return gemm_time_s(Gemm(g.m * s / n, g.n, g.k, g.batch), gpu, precision) / s


def ring_exchange_ag(g: Gemm, gather_s: float, tp: int, gpu: Gpu, precision: str,
                     aggregate: bool = False) -> _Window:
    """All-gather of the GEMM's row-sharded input by tp - 1 neighbour exchanges (each 1/(tp-1) of ``gather_s``),
    beside tp GEMMs of m/tp rows (TE ``split_overlap_ag``). ``aggregate``: one exposed 1x exchange, then tp/2
    GEMMs of 2 chunks, each beside a 2x exchange but the last (same function, ``_aggregate`` branch)."""
    step = gather_s / (tp - 1)
    if aggregate:
        pair = chunk_time_s(g, tp // 2, gpu, precision)
        return _Window(step + (tp // 2 - 1) * max(pair, 2 * step) + pair, tp // 2 * pair, gather_s)
    chunk = chunk_time_s(g, tp, gpu, precision)
    return _Window((tp - 1) * max(chunk, step) + chunk, tp * chunk, gather_s)


def pipeline_rs(g: Gemm, rs_chunk_s: float, splits: int, gpu: Gpu, precision: str) -> _Window:
    """GEMM in ``splits`` row chunks, each chunk's output reduce-scattered (``rs_chunk_s``) beside the next chunk's
    GEMM, the last after the last GEMM (TE ``split_overlap_rs``)."""
    chunk = chunk_time_s(g, splits, gpu, precision)
    return _Window(chunk + (splits - 1) * max(chunk, rs_chunk_s) + rs_chunk_s, splits * chunk, splits * rs_chunk_s)


def bulk(g: Gemm, comm_s: float, gpu: Gpu, precision: str) -> _Window:
    """A whole collective beside a whole GEMM (TE ``bulk_overlap``)."""
    t = gemm_time_s(g, gpu, precision)
    return _Window(max(t, comm_s), t, comm_s)


def _blocks(w: Workload) -> list[tuple[str, Gemm, Gemm]]:
    """(TE name prefix pair, column-parallel, row-parallel) GEMMs of each TP block: attention (QKV, output
    projection: ``qkv``/``proj``) and the MLP (in, out: ``fc1``/``fc2``), the shared experts' for an MoE layer with
    them; a routed-only MoE layer's experts have none (their TP traffic is the dispatcher's,
    :func:`~slowlink.workload.traffic.ep_layer`)."""
    gemms = layer_gemms(w)
    moe = w.model.moe
    pairs = [("qkv proj", gemms[0], gemms[1])]
    if moe is None:
        pairs.append(("fc1 fc2", gemms[2], gemms[3]))
    elif moe.shared_experts:
        pairs.append(("fc1 fc2", gemms[-2], gemms[-1]))
    return pairs


def tp_overlap(w: Workload, cost: CommCost, gpu: Gpu) -> TpOverlap:
    """TP seconds of one layer and micro-batch with every collective paired to its GEMM as TE v1.13 does, under
    the workload's userbuffers config (module docstring). Per block, forward: all-gather -> column GEMM
    (``qkv/fc1_fprop``, ring_exchange), row GEMM -> reduce-scatter (``proj/fc2_fprop``, pipeline); backward:
    output-gradient all-gather -> row data-gradient GEMM (``proj/fc2_dgrad``, ring_exchange), input all-gather
    beside the column data-gradient GEMM (``qkv/fc1_dgrad``) and its reduce-scatter beside the column
    weight-gradient GEMM (``qkv/fc1_wgrad``; bulk, ``layernorm_linear.py`` backward). Full recompute runs the
    forward windows twice."""
    p = w.parallel
    if p.tp == 1 or not p.sequence_parallel:
        return TpOverlap(0.0, 0.0, 0.0)
    cfg = tp_comm_config(w.overlap.tp_comm_config)
    prec = w.training.precision
    size = micro_batch_act_bytes(w)
    grp = groups_of(p, "tp")
    ag, rs = cost("all_gather", size, grp), cost("reduce_scatter", size, grp)
    passes = 2 if w.training.recompute == "full" else 1

    def window(name: str, g: Gemm) -> tuple[_Window, Gemm, bool]:
        o = cfg.gemms[name]
        on = math_gpu(gpu, o)
        if o.method == "ring_exchange":
            if o.aggregate and p.tp % 2:
                raise SpecError(f"overlap.tp_comm_config ({cfg.name!r}): gemms.{name}.aggregate needs an even "
                                f"parallel.tp ({p.tp}): TE exchanges pairs of chunks")
            return ring_exchange_ag(g, ag, p.tp, on, prec, o.aggregate), g, o.set_sm_margin
        if o.method == "pipeline":
            splits = o.num_splits or 1  # the config's rule: a pipeline GEMM has num_splits
            return pipeline_rs(g, cost("reduce_scatter", size / splits, grp), splits, on, prec), g, o.set_sm_margin
        return bulk(g, rs if name.endswith("wgrad") else ag, on, prec), g, o.set_sm_margin

    windows: list[tuple[_Window, Gemm, bool]] = []
    for names, col, row in _blocks(w):
        c, r = names.split()
        col_dgrad, col_wgrad = col.backward()
        row_dgrad, _ = row.backward()
        fwd = [window(f"{c}_fprop", col), window(f"{r}_fprop", row)]
        windows += fwd * passes + [window(f"{r}_dgrad", row_dgrad), window(f"{c}_dgrad", col_dgrad),
                                   window(f"{c}_wgrad", col_wgrad)]
    total = sum(x.comm_s for x, _, _ in windows)
    exposed = sum(max(0.0, x.time_s - gemm_time_s(g, gpu, prec)) for x, g, _ in windows)
    hidden = sum(x.comm_s - max(0.0, x.time_s - x.split_gemm_s) for x, _, margin in windows if not margin)
    return TpOverlap(total, exposed, hidden)
