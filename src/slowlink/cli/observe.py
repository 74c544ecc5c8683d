"""CLI of the observe area: `slowlink read ...`, `slowlink doctor`, `slowlink inventory`, `slowlink exporter`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from slowlink.cli.common import clean_errors, err, out, print_json
from slowlink.cli.trace import read_kineto

READ_HELP = ("Read what users already have: nccl-tests output, NCCL_DEBUG logs, ibstat, perfquery/ethtool "
             "counters, nvidia-smi CSV, PyTorch profiler traces.")
read_app = typer.Typer(help=READ_HELP, add_completion=False, no_args_is_help=True)
_JSON = typer.Option(False, "--json", help="Print JSON.")
_FILE = typer.Argument(..., help="The tool's output, saved to a file.")
_OUT = typer.Option(None, "--out", help="Also write the record here (JSON).")
_FILES = typer.Argument(None, help="nccl-tests outputs, NCCL logs, ibstat, perfquery, ethtool -S, nvidia-smi CSV, "
                        "records.")
_INPUTS = typer.Argument(..., help="Result files or folders (the newest file in each), plan --json outputs.")
_NODE_FILES = typer.Option([], "--nodes", help="Inventory JSON files of several nodes (`inventory --json`).")
_CLUSTER = typer.Option(None, "--cluster", help="Cluster file: check busbw against the model.")
_BASELINE = typer.Option(None, "--baseline", help="A baseline record or nccl-tests output.")


@clean_errors
def read_nccl_tests(
    file: Path = _FILE,
    op: str | None = typer.Option(None, "--op", help="The collective, when no '<op>_perf' names it."),
    ranks: int | None = typer.Option(None, "--ranks", help="Ranks, when the output has no '# Rank' lines."),
    output: Path | None = _OUT,
    as_json: bool = _JSON,
) -> None:
    """nccl-tests stdout (all_reduce_perf...) as a slowlink collectives record: compare/calibrate read it too."""
    from slowlink.bench.nccl_tests import load_nccl_tests
    from slowlink.bench.record import nccl_tests_record
    from slowlink.report.bench import collectives_table

    run = load_nccl_tests(file, op, ranks)
    rec = nccl_tests_record(run, str(file))
    if output is not None:
        output.write_text(json.dumps(rec.to_json(), indent=2) + "\n")
        err.print(f"record: {output}")
    if as_json:
        print_json(rec.to_json())
        return
    out.print(collectives_table(rec.rows, f"{file}: {run.op} x{run.ranks} ranks on {run.nodes} node(s) "
                                f"(nccl-tests {run.generation} table)"))


@clean_errors
def read_nccl_log(file: Path = _FILE, as_json: bool = _JSON) -> None:
    """An NCCL_DEBUG=INFO log: version, ranks, nodes, transports, channels, algorithms, warnings."""
    from slowlink.observe.nccl_log import load_nccl_log
    from slowlink.report.observe import nccl_log_table

    log = load_nccl_log(file)
    if as_json:
        print_json(log.to_json())
        return
    out.print(nccl_log_table(log, str(file)))
    for w in log.warnings:
        out.print(f"NCCL WARN {w}", markup=False)


@clean_errors
def read_ibstat(file: Path = _FILE, as_json: bool = _JSON) -> None:
    """ibstat output: every port's state, physical state, rate and firmware."""
    from dataclasses import asdict

    from slowlink.observe.hardware import load_ibstat
    from slowlink.report.observe import ib_table

    ports = load_ibstat(file)
    if as_json:
        print_json([asdict(p) for p in ports])
        return
    out.print(ib_table(ports, str(file)))


@clean_errors
def read_nvidia_smi(file: Path = _FILE, as_json: bool = _JSON) -> None:
    """nvidia-smi --query-gpu=... --format=csv: driver, temperature, clocks, power and slowdown reasons."""
    from dataclasses import asdict

    from slowlink.observe.hardware import load_nvidia_smi
    from slowlink.report.observe import gpu_table

    gpus = load_nvidia_smi(file)
    if as_json:
        print_json([{**asdict(g), "throttle_reasons": list(g.throttle_reasons)} for g in gpus])
        return
    out.print(gpu_table(gpus, str(file)))


@clean_errors
def doctor(
    files: list[Path] = _FILES,
    cluster: Path | None = _CLUSTER,
    baseline: Path | None = _BASELINE,
    tolerance: float = typer.Option(20.0, "--tolerance", help="Allowed busbw shortfall, percent."),
    emulated: str | None = typer.Option(None, "--emulated", help="Also probe this emulated cluster (run id)."),
    as_json: bool = _JSON,
) -> None:
    """Bottom-up checks (links, GPUs, versions, NCCL transport, busbw); exit 0 clean, 1 warnings, 3 errors."""
    from slowlink.errors import SpecError
    from slowlink.observe.doctor import diagnose, model_predictor, read_inputs
    from slowlink.report.observe import doctor_summary, findings_table

    if not files and emulated is None:
        raise SpecError("doctor: FILES (none) must name at least one input, or give --emulated RUN")
    if not 0 < tolerance < 100:
        raise SpecError(f"--tolerance ({tolerance:g}%) must be between 0 and 100%")
    inp = read_inputs(list(files or []))
    extra = []
    if emulated is not None:
        from slowlink.probe.doctor import probe
        from slowlink.progress import progress

        with progress(f"doctor: emulated run {emulated}", 3) as steps:  # shapers, throughput, collective
            extra = probe(emulated, cluster, tolerance / 100, on_step=steps.begin)
    predictor = model_predictor(cluster) if cluster and inp.tables else None
    diag = diagnose(inp, predictor, baseline, tolerance / 100, extra)
    if as_json:
        print_json(diag.to_json())
    else:
        out.print(findings_table(list(diag.findings), "doctor: bottom-up"))
        out.print(doctor_summary(list(diag.findings)))
    raise typer.Exit(diag.exit_code)


@clean_errors
def inventory(
    nodes: list[Path] = _NODE_FILES,
    emulated: str | None = typer.Option(None, "--emulated", help="Collect in every node of this emulated run."),
    gather: bool = typer.Option(False, "--gather", help="Collect on every rank of this torchrun/Slurm job (gloo)."),
    nproc: int | None = typer.Option(None, "--nproc", help="--gather outside torchrun: local ranks to start."),
    as_json: bool = _JSON,
) -> None:
    """This node's versions, NICs, IB ports and GPUs; across nodes, what differs (exit 1 when anything does)."""
    from slowlink.observe.inventory import COMPARED, collect, load_node, mismatches
    from slowlink.report.observe import inventory_table

    if sum((bool(nodes), emulated is not None, gather)) > 1:
        raise typer.BadParameter("give one of --nodes, --emulated and --gather")
    if gather:
        from slowlink.bench.launch import run

        records = run("slowlink.observe.inventory:gather_rank", None, nproc, "gloo", 120.0)
        if records is None:  # not rank 0
            return
    elif emulated is not None:
        from slowlink.probe.doctor import inventory as emulated_inventory
        from slowlink.progress import status

        with status(f"inventory: emulated run {emulated}") as steps:
            records = emulated_inventory(emulated, on_step=steps.begin)
    else:
        records = [load_node(p) for p in nodes] if nodes else [collect()]
    diff = mismatches(records) if len(records) > 1 else {}
    if as_json:
        js = [r.to_json() for r in records]
        print_json(js[0] if len(js) == 1 else {"nodes": js, "mismatches": diff})
    else:
        out.print(inventory_table(records, ["host", "nic_summary", *COMPARED], set(diff), "inventory"))
        if len(records) > 1:
            out.print(f"{len(diff)} key(s) differ across {len(records)} nodes: {', '.join(diff)}" if diff
                      else f"no difference across {len(records)} nodes")
    if diff:
        raise typer.Exit(1)


@clean_errors
def exporter(
    inputs: list[Path] = _INPUTS,
    port: int = typer.Option(9710, "--port", help="Port to serve /metrics on."),
    baseline: Path | None = _BASELINE,
    addr: str = typer.Option("127.0.0.1", "--addr", help="Address to listen on (0.0.0.0: every interface)."),
) -> None:
    """Serve benchmark results and plans as Prometheus metrics (re-read at every scrape) until interrupted."""
    import time

    from slowlink.observe.exporter import serve

    server = serve(port, list(inputs), baseline, addr)
    err.print(f"serving http://{addr}:{server.server_port}/metrics (Ctrl-C to stop)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()


@clean_errors
def read_counters(file: Path = _FILE, as_json: bool = _JSON) -> None:
    """perfquery or ethtool -S output: every counter, and the error counters above 0."""
    from slowlink.errors import SpecError
    from slowlink.observe.common import read_input, sniff
    from slowlink.observe.counters import parse_ethtool_stats, parse_perfquery
    from slowlink.report.observe import counters_table

    text = read_input(file, "counters")
    kind = sniff(text)
    if kind not in ("perfquery", "ethtool"):
        raise SpecError(f"counters ({str(file)!r}) are neither perfquery nor ethtool -S output")
    found = parse_perfquery(text, str(file)) if kind == "perfquery" else (parse_ethtool_stats(text, str(file)),)
    if as_json:
        js = [{"tool": c.tool, "device": c.device, "values": c.values, "errors": c.errors()} for c in found]
        print_json(js[0] if len(js) == 1 else js)
        return
    for c in found:
        out.print(counters_table(c, str(file)))


@clean_errors
def read_topo(file: Path = _FILE, as_json: bool = _JSON) -> None:
    """nvidia-smi topo -m: each GPU's nearest NIC and the PCIe path to it (GPUDirect RDMA needs PIX or PXB)."""
    from dataclasses import asdict

    from slowlink.observe.common import read_input
    from slowlink.observe.topo import parse_topo
    from slowlink.report.observe import topo_table

    gpus = parse_topo(read_input(file, "nvidia-smi topo -m"), str(file))
    if as_json:
        print_json([{**asdict(g), "gdr": g.gdr} for g in gpus])
        return
    out.print(topo_table(gpus, str(file)))


read_app.command("nccl-tests")(read_nccl_tests)
read_app.command("topo")(read_topo)
read_app.command("counters")(read_counters)
read_app.command("nccl-log")(read_nccl_log)
read_app.command("ibstat")(read_ibstat)
read_app.command("nvidia-smi")(read_nvidia_smi)
read_app.command("kineto")(read_kineto)


def register(app: typer.Typer, validate_app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.add_typer(read_app, name="read")
    app.command("doctor")(doctor)
    app.command("exporter")(exporter)
    app.command("inventory")(inventory)
