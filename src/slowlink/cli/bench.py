"""CLI for the bench area: ``slowlink bench collectives|compute|train|storage|checkpoint`` (what happens to the results,
``baseline``, ``compare`` and ``calibrate``, is cli/baseline.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.bench_record import RESULTS, save_record
from slowlink.cli.bench_storage import checkpoint, storage
from slowlink.cli.common import clean_errors, err, out, print_json
from slowlink.errors import BenchError
from slowlink.units import parse_size

bench_app = typer.Typer(help="Measure collectives, GEMMs and a small training job on this machine.",
                        add_completion=False, no_args_is_help=True)

_NPROC = typer.Option(None, "--nproc", help="Local ranks to launch (default 2; under torchrun: this rank).")
_BACKEND = typer.Option("auto", "--backend", help="auto (nccl with a GPU, else gloo), gloo or nccl.")
_TIMEOUT = typer.Option(300.0, "--timeout", help="Seconds before a rendezvous or the run is given up.")
_RESULTS = RESULTS
_NO_RESULTS = typer.Option(False, "--no-results", help="Do not write a record.")
_CLUSTER = typer.Option(None, "--cluster", help="Cluster file this run describes (kept in the record).")
_SLURM = typer.Option(None, "--emit-slurm", help="Write an sbatch script for this command and exit.")
_NODES = typer.Option(2, "--nodes", help="--emit-slurm: nodes of the job.")
_GPN = typer.Option(8, "--gpus-per-node", help="--emit-slurm: ranks (GPUs) per node.")
_CATALOG_OUT = typer.Option(None, "--catalog-out", help="Write a catalog file with the peaks.")
_TRAIN_CLUSTER = typer.Option(None, "--cluster", help="Cluster file: peak for MFU, and plan to compare.")
_PARTITION = typer.Option(None, "--partition", help="--emit-slurm: Slurm partition.")


def _sizes(lo: str, hi: str, factor: float, elem_bytes: int = 1, dtype: str = "int8") -> tuple[float, ...]:
    """nccl-tests' -b/-e/-f sizes; each must hold at least one element of ``dtype`` (count = size / elem > 0)."""
    try:
        a, b = parse_size(lo), parse_size(hi)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    if a <= 0 or b < a or factor <= 1:
        raise BenchError(
            f"sizes (-b {lo} -e {hi} -f {factor:g}) need 0 < minbytes <= maxbytes and factor > 1"
        )
    if a < elem_bytes:
        raise BenchError(f"-b/--minbytes ({lo!r}) must be >= one {dtype} element ({elem_bytes} B): "
                         "a smaller size has a count of 0")
    sizes = []
    s = a
    while s <= b * (1 + 1e-9):
        sizes.append(s)
        s *= factor
    return tuple(sizes)


def emit_slurm(path: Path, args: list[str], nodes: int, gpus_per_node: int, partition: str | None) -> None:
    """Write the sbatch script for ``slowlink bench ARGS`` and say so on stderr."""
    from slowlink.bench.slurm import sbatch_script, write_sbatch

    write_sbatch(path, sbatch_script(args, nodes, gpus_per_node, partition))
    err.print(f"wrote {path}: sbatch {path}")


TEST_DELAY_ENV = "SLOWLINK_BENCH_TEST_DELAY"


def delay_hook() -> tuple[int | None, float]:
    """Test hook ``SLOWLINK_BENCH_TEST_DELAY=RANK:SECONDS``: that rank sleeps before every timed call of
    `bench collectives`, a straggler made on purpose (tests and docs/straggler.md use it)."""
    import os

    text = os.environ.get(TEST_DELAY_ENV)
    if not text:
        return None, 0.0
    rank, _, secs = text.partition(":")
    try:
        r, s = int(rank), float(secs)
    except ValueError:
        r, s = -1, -1.0
    if r < 0 or not 0 < s <= 1:
        raise BenchError(f"{TEST_DELAY_ENV} ({text!r}) must be RANK:SECONDS, a rank >= 0 and 0 < seconds <= 1")
    return r, s


@clean_errors
def collectives(
    op: str = typer.Option("all_reduce", "--op", help="Collective to measure."),
    redop: str = typer.Option("sum", "-o", "--redop", help="Reduction: sum, prod, min, max, avg or all."),
    dtype: str = typer.Option("float", "-d", "--datatype", help="float, half, bfloat16, double, int8, ..."),
    minbytes: str = typer.Option("1MiB", "-b", "--minbytes", help="Smallest size."),
    maxbytes: str = typer.Option("64MiB", "-e", "--maxbytes", help="Largest size."),
    stepfactor: float = typer.Option(2.0, "-f", "--stepfactor", help="Size multiplier."),
    iters: int = typer.Option(20, "-n", "--iters", help="Timed iterations per size."),
    warmup: int = typer.Option(5, "-w", "--warmup_iters", help="Warm-up iterations per size."),
    rounds: int = typer.Option(4, "--rounds", help="Time each size's iterations in this many rounds over all "
                               "sizes, so a slow spell of a shared machine hits every size alike (1: "
                               "nccl-tests' one size after the other)."),
    check: int = typer.Option(1, "-c", "--check", help="Check results (1) or not (0)."),
    root: int = typer.Option(0, "-r", "--root", help="Root rank of broadcast and reduce."),
    nproc: int | None = _NPROC,
    backend: str = _BACKEND,
    timeout_s: float = _TIMEOUT,
    as_json: bool = typer.Option(False, "--json", help="Print rows as JSON."),
    results: Path | None = _RESULTS,
    no_results: bool = _NO_RESULTS,
    cluster: Path | None = _CLUSTER,
    emit: Path | None = _SLURM,
    nodes: int = _NODES,
    gpus_per_node: int = _GPN,
    partition: str | None = _PARTITION,
) -> None:
    """Sweep one collective over sizes, nccl-tests style (out-of-place and in-place, #wrong)."""
    from slowlink.bench import launch
    from slowlink.bench.collectives import DTYPES, BenchConfig, redops_for, total_wrong
    from slowlink.bench.record import CollectiveRow, RankRows
    from slowlink.collectives.ops import OPS
    from slowlink.report.bench import collectives_table

    if op not in OPS:
        raise BenchError(f"--op ({op!r}) must be one of {', '.join(OPS)}")
    if dtype not in DTYPES:
        raise BenchError(f"-d/--datatype ({dtype!r}) must be one of {', '.join(DTYPES)}")
    if iters < 1 or warmup < 0:
        raise BenchError(f"iters ({iters}) must be >= 1 and warmup_iters ({warmup}) >= 0")
    if rounds < 1:
        raise BenchError(f"--rounds ({rounds}) must be >= 1")
    from slowlink.units import DTYPE_BYTES

    sizes = _sizes(minbytes, maxbytes, stepfactor, DTYPE_BYTES[dtype], dtype)
    redops_for(op, redop, "nccl")  # the name is checked before anything starts
    if emit is not None:
        args = ["collectives", "--op", op, "-o", redop, "-d", dtype, "-b", minbytes, "-e", maxbytes,
                "-f", f"{stepfactor:g}", "-n", str(iters), "-w", str(warmup), "--rounds", str(rounds),
                "-c", str(check), "-r", str(root), "--backend", backend, "--timeout", f"{timeout_s:g}",
                "--results", str(results)]
        emit_slurm(emit, args, nodes, gpus_per_node, partition)
        return
    be = launch.resolve_backend(backend)
    redops_for(op, redop, be)
    delay_rank, delay_s = delay_hook()
    cfg = BenchConfig(op=op, sizes_bytes=sizes, iters=iters, warmup_iters=warmup, rounds=rounds, check=bool(check),
                      backend=be, redop=redop, dtype=dtype, root=root, test_delay_rank=delay_rank,
                      test_delay_s=delay_s)
    res: RankRows | None = launch.run("slowlink.bench.collectives:sweep_rank", cfg, nproc, be, timeout_s)
    if res is None:  # not rank 0 of a torchrun job
        return
    config = {"op": op, "redop": redop, "dtype": dtype, "sizes_bytes": list(sizes), "iters": iters,
              "warmup_iters": warmup, "rounds": rounds, "check": bool(check), "backend": be,
              "ranks": len(res.hostnames)}
    rec = save_record("collectives", op, res.rows, res.hostnames, config, be, cluster, results, no_results)
    swept = [r for r in rec.rows if isinstance(r, CollectiveRow)]
    wrong = total_wrong(swept)
    if as_json:
        print_json(rec.to_json()["rows"])
    else:
        out.print(collectives_table(swept, f"{op} over {be}, {swept[0].ranks} ranks"))
        out.print(f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}")
    if wrong:
        raise typer.Exit(1)


bench_app.command("collectives")(collectives)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's subcommands to the root app and to `slowlink validate`."""
    app.add_typer(bench_app, name="bench")


@clean_errors
def compute(
    shapes: str = typer.Option("512,1024,2048", "--shapes", help="N (square) or MxNxK, comma separated."),
    dtypes: str = typer.Option("fp32,bf16,fp16", "--dtypes", help="fp32, bf16, fp16, comma separated."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads (one rank's share of the cores)."),
    catalog_out: Path | None = _CATALOG_OUT,
    name: str = typer.Option("measured-device", "--name", help="--catalog-out: the GPU entry's name."),
    as_json: bool = typer.Option(False, "--json", help="Print rows as JSON."),
    results: Path | None = _RESULTS,
    no_results: bool = _NO_RESULTS,
    cluster: Path | None = _CLUSTER,
) -> None:
    """Achieved GEMM TFLOP/s by shape and dtype, the measured peak, and memory bandwidth."""
    from slowlink.bench.compute import catalog_entry, parse_shapes, run_compute, write_catalog
    from slowlink.bench.record import ComputeRow
    from slowlink.report.bench import compute_table

    dts = tuple(d.strip() for d in dtypes.split(",") if d.strip())
    run = run_compute(parse_shapes(shapes), dts, threads)
    for note in run.notes:
        err.print(note)
    rec = save_record("compute", run.device, run.rows, None, {"shapes": shapes, "dtypes": list(dts),
                      "threads": run.threads}, "none", cluster, results, no_results, run.summary())
    if catalog_out is not None:
        arch = "cpu" if run.device == "cpu" else "gpu"
        write_catalog(catalog_out, name, catalog_entry(run, arch), f"{run.device} with {run.threads} thread(s)")
        err.print(f"catalog: {catalog_out} (gpu: {name}); list it under a cluster file's catalog:")
    if as_json:
        print_json({"rows": rec.to_json()["rows"], "summary": run.summary()})
        return
    out.print(compute_table([r for r in rec.rows if isinstance(r, ComputeRow)],
                            f"GEMM on {run.device} ({run.threads} threads)"))
    peaks = ", ".join(f"{k} {v:.4g}" for k, v in run.peak_tflops.items())
    out.print(f"peak TFLOP/s: {peaks}; k_half {run.gemm_k_half:.0f} ({run.k_half_dtype}, "
              f"rate ~ k / (k + k_half)); copy bandwidth {run.copy_gbyte_s:.1f} GB/s, "
              f"elementwise kernels {run.elementwise_gbyte_s:.1f} GB/s, AdamW "
              f"{run.adam_ns_per_param:.2f} ns/parameter")


_PROFILE_DIR = typer.Option(None, "--profile-dir", help="Every rank writes a torch.profiler trace of --steps more "
                            "distributed steps under DIR/<mode>-<N>ranks/ (read them with `slowlink read kineto`).")


@clean_errors
def train(
    mode: str = typer.Option("ddp", "--mode", help="ddp or fsdp."),
    nproc: str = typer.Option("2", "--nproc", help="Rank counts, comma separated (e.g. 1,2)."),
    layers: int = typer.Option(4, "--layers", help="Transformer blocks."),
    hidden: int = typer.Option(512, "--hidden", help="Hidden size."),
    heads: int = typer.Option(8, "--heads", help="Attention heads."),
    ffn_hidden: int = typer.Option(2048, "--ffn-hidden", help="MLP hidden size."),
    vocab: int = typer.Option(8192, "--vocab", help="Vocabulary."),
    seq_len: int = typer.Option(256, "--seq-len", help="Sequence length."),
    batch: int = typer.Option(4, "--batch", help="Sequences per rank per step."),
    steps: int = typer.Option(8, "--steps", help="Timed steps."),
    warmup_steps: int = typer.Option(2, "--warmup-steps", help="Warm-up steps."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads per rank (default: cores / ranks)."),
    precision: str = typer.Option("auto", "--precision", help="bf16 | fp16 (autocast) | fp32 | auto: bf16 on a "
                                  "GPU, on a CPU the faster of bf16 and fp32 there."),
    backend: str = _BACKEND,
    timeout_s: float = _TIMEOUT,
    cluster: Path | None = _TRAIN_CLUSTER,
    profile: bool = typer.Option(False, "--profile", help="Rank 0 profiles --steps more compute-only steps: "
                                 "time by kernel class (gemm, attention, elementwise, optimizer, other) and idle, "
                                 "against plan's split with --cluster."),
    profile_dir: Path | None = _PROFILE_DIR,
    as_json: bool = typer.Option(False, "--json", help="Print rows as JSON."),
    results: Path | None = _RESULTS,
    no_results: bool = _NO_RESULTS,
) -> None:
    """Train a small transformer for N steps: step, compute-only, exposed comm, ratio, MFU vs plan."""
    from slowlink.bench import launch
    from slowlink.bench.record import RankRows, TrainRow
    from slowlink.bench.train import TrainConfig, config_dict
    from slowlink.progress import progress
    from slowlink.report.bench import profile_table, train_table
    from slowlink.spec.cluster import load_cluster

    try:
        counts = [int(x) for x in nproc.split(",")]
    except ValueError:
        raise BenchError(f"--nproc ({nproc!r}) must be comma-separated integers, e.g. 1,2") from None
    cfg = TrainConfig(mode=mode, layers=layers, hidden=hidden, heads=heads, ffn_hidden=ffn_hidden, vocab=vocab,
                      seq_len=seq_len, batch=batch, steps=steps, warmup_steps=warmup_steps, threads=threads,
                      precision=precision, profile=profile,
                      trace_dir=None if profile_dir is None else str(profile_dir.resolve()))
    cfg.check()
    gpu = None if cluster is None else load_cluster(cluster).gpu
    be = launch.resolve_backend(backend)
    rows, hosts = [], []
    with progress("bench train", len(counts)) as bar:
        for n in counts:
            bar.begin(f"bench train: {n} ranks")
            res: RankRows = launch.run("slowlink.bench.train:train_rank", cfg, n, be, timeout_s)
            rows += res.rows
            hosts += res.hostnames
    for r in rows:  # the rank processes' rows, completed before they become the record
        peak = None if gpu is None else gpu.peak(r["precision"])
        r["mfu"] = r["model_flops_per_step"] / (r["step_time_s"] * r["ranks"] * peak) if peak else None
        if cluster is not None:
            from slowlink.bench.train_plan import compare_with_plan

            r["plan"] = compare_with_plan(cfg, cluster, r["ranks"], r["precision"], r["step_time_s"],
                                          r.get("profile")).to_json()
    rec = save_record("train", mode, rows, sorted(set(hosts)), config_dict(cfg), be, cluster, results, no_results)
    if as_json:
        print_json(rec.to_json()["rows"])
        return
    trained = [r for r in rec.rows if isinstance(r, TrainRow)]
    out.print(train_table(trained, f"{mode} training, {layers} x {hidden} transformer, batch {batch} x {seq_len}, "
                                   f"{trained[0].precision}"))
    for row in trained:
        if row.profile is not None:
            out.print(profile_table(row, row.profile))
    if profile_dir is not None:
        err.print(f"traces: {profile_dir}/{mode}-<N>ranks/rank-<r>.json.gz (slowlink read kineto DIR)")


bench_app.command("compute")(compute)
bench_app.command("train")(train)
bench_app.command("storage")(storage)
bench_app.command("checkpoint")(checkpoint)
