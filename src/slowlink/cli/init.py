"""CLI: ``slowlink init`` writes a commented cluster file and workload file to start from.

The files are built from the options, checked by the same loaders ``plan`` uses before anything is written,
and planned once so that the user sees at once whether the starting point fits.
"""

from __future__ import annotations

from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, err, out
from slowlink.errors import SlowlinkError, SpecError

_CLUSTER = """\
# A cluster for slowlink (keys: docs/spec.md). Written by `slowlink init`; edit freely.
name: {name}
nodes: {nodes}                  # servers
gpus_per_node: {gpn}
gpu: {gpu}                    # a catalog name: `slowlink catalog gpus`
scale_up:
  link: {link}                # NVLink / PCIe / xGMI inside the node: `slowlink catalog links`
  domain_gpus: {gpn}            # GPUs that share one scale-up domain (72 for an NVL72 rack)
nics:
  compute: {{per_node: {nics}, speed_gbit_s: {speed}}}   # scale-out NICs for training traffic
  storage: {{per_node: 1, speed_gbit_s: {speed}}}        # separate storage NICs; delete for a converged fabric
fabric:
  transport: {transport}          # infiniband | roce | ethernet
  lossless: true                # RoCE: PFC + ECN tuned (false = untuned, tail-latency losses)
  topology: fat-tree            # fat-tree | rail-optimized | dragonfly | single-switch
  tiers: 2
  oversubscription: 1           # leaf down:up bandwidth; e.g. 2 for 2:1
  switch_radix: 64              # ports per switch (64: Quantum-2 NDR / Spectrum-4 at 400G)
storage:
  system: parallel-fs           # nfs | parallel-fs | nvme-of | object
  shared_with_compute: false
  read_gbyte_s: {read}            # aggregate, GB/s
  write_gbyte_s: {read}
  metadata_ops_s: 100000
"""

_WORKLOAD = """\
# A training job for slowlink (keys: docs/workload.md). Written by `slowlink init`; edit freely.
name: {model}
model: {{preset: {model}}}       # a bundled preset; any field (layers, hidden, seq_len, ...) may be given here
training:
  global_batch: {gb}             # sequences per optimizer step
  micro_batch: 1
  precision: bf16               # bf16 | fp16 | fp8 | fp32
  recompute: selective          # none | selective | full
  grad_comm_dtype: bf16
parallel:                       # tp * pp * dp * cp must equal the cluster's GPUs ({gpus})
  tp: {tp}
  pp: {pp}
  dp: {dp}
  cp: 1
  zero: 1                       # 0 none, 1 optimizer states, 2 + gradients, 3 + parameters (FSDP)
overlap: {{grad_reduce: true, param_gather: true, tp_comm: false}}
"""


_FOLDER = typer.Argument(Path("."), help="Folder to write cluster.yaml and workload.yaml into.")


@clean_errors
def init_cmd(
    folder: Path = _FOLDER,
    gpu: str = typer.Option("h100-sxm", "--gpu", help="GPU, a catalog name."),
    nodes: int = typer.Option(8, "--nodes", help="Servers."),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node"),
    transport: str = typer.Option("infiniband", "--transport", help="infiniband, roce or ethernet."),
    nic_gbit: float = typer.Option(400, "--nic-gbit", help="Line rate of each compute NIC, Gbit/s."),
    nics: int = typer.Option(8, "--nics", help="Compute NICs per node (8: one per GPU, rail-style)."),
    model: str = typer.Option("llama3-8b", "--model", help="A bundled model preset."),
    tp: int | None = typer.Option(None, "--tp", help="Tensor-parallel size; default: the smallest that fits."),
    pp: int | None = typer.Option(None, "--pp", help="Pipeline stages; default: the fewest that fit."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files."),
) -> None:
    """Write a commented example cluster file and workload file to start from, checked and planned."""
    from slowlink.catalog.store import load_catalog
    from slowlink.fileio import parse_text
    from slowlink.spec.cluster import cluster_from_mapping
    from slowlink.spec.workload import workload_from_mapping
    from slowlink.workload.step import plan

    if folder.exists() and not folder.is_dir():
        raise SpecError(f"FOLDER ({str(folder)!r}) is a file: give a folder (it is created when missing)")
    targets = (folder / "cluster.yaml", folder / "workload.yaml")
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:
        raise SpecError(f"{', '.join(existing)} already exist(s): pass --force to overwrite")
    for flag, value in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node), ("--nics", nics), ("--tp", tp),
                        ("--pp", pp)):
        if value is not None and value < 1:
            raise SpecError(f"{flag} ({value}) must be >= 1")
    link = load_catalog().gpu(gpu, "--gpu").scale_up or "pcie-gen5"
    gpus = nodes * gpus_per_node
    fields: dict[str, object] = {
        "name": f"{nodes}x{gpus_per_node}-{gpu}", "nodes": nodes, "gpn": gpus_per_node, "gpu": gpu,
        "link": link, "nics": nics, "speed": f"{nic_gbit:g}",
        "transport": transport, "read": gpus, "model": model, "gpus": gpus}
    cluster_text = _CLUSTER.format(**fields)
    cluster = cluster_from_mapping(parse_text(cluster_text, "--gpu/--nodes/...", False), "the new cluster.yaml",
                                   folder)
    # the given tp/pp, or the smallest model-parallel layout (tp inside the node first) whose plan runs
    tps = [tp] if tp is not None else [t for t in (1, 2, 4, 8) if gpus_per_node % t == 0]
    pps = [pp] if pp is not None else [1, 2, 4, 8, 16]
    layouts = sorted(((t, p) for t in tps for p in pps if gpus % (t * p) == 0), key=lambda tp_pp: tp_pp[0] * tp_pp[1])
    if not layouts:
        raise SpecError(f"--tp ({tp or 'auto'}) * --pp ({pp or 'auto'}) must divide the GPUs "
                        f"({nodes} x {gpus_per_node} = {gpus})")
    problem: SlowlinkError | None = None
    for t, p in layouts:
        dp = gpus // (t * p)
        workload_text = _WORKLOAD.format(**fields, tp=t, pp=p, dp=dp, gb=dp * 8)
        workload = workload_from_mapping(parse_text(workload_text, "--model/--tp/--pp", False),
                                         "the new workload.yaml")
        try:
            result = plan(workload, cluster)
            problem = None
            break
        except SlowlinkError as exc:
            problem = exc  # the last layout tried, the one closest to fitting
    try:  # every check passed: only now is anything created
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"FOLDER ({str(folder)!r}) cannot be created: {exc.strerror}") from None
    for target, text in zip(targets, (cluster_text, workload_text), strict=True):
        target.write_text(text, encoding="utf-8")
        out.print(f"wrote {target}")
    if problem is not None:
        err.print(f"note: the files are valid, but the plan does not run yet: {problem}", soft_wrap=True)
        return
    out.print(f"tp {t}, pp {p}, dp {dp}: "f"step {result.step_time_s:.3f} s, MFU {result.mfu:.1%}: "
              f"slowlink plan {targets[0]} {targets[1]}", soft_wrap=True)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    app.command("init")(init_cmd)
