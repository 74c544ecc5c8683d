"""``--emit-slurm``: an sbatch script that runs a bench command under torchrun on every node of a job.

One task per node runs torchrun; torchrun starts one rank per GPU and the c10d rendezvous on the job's
first host joins them (``--rdzv-backend c10d --rdzv-endpoint HEAD:PORT --rdzv-id $SLURM_JOB_ID``).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from slowlink.errors import BenchError

RDZV_PORT = 29500


def strip_slurm_flags(argv: list[str]) -> list[str]:
    """The bench command line without the flags that only shape the script (and without --nproc)."""
    drop_with_value = {"--emit-slurm", "--nodes", "--gpus-per-node", "--partition", "--time-limit", "--nproc"}
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        key = a.split("=", 1)[0]
        if key in drop_with_value:
            skip = "=" not in a
            continue
        out.append(a)
    return out


def sbatch_script(bench_args: list[str], nodes: int, gpus_per_node: int, partition: str | None = None,
                  time_limit: str = "00:30:00") -> str:
    """The script text: #SBATCH header, head-node lookup, srun torchrun --no-python slowlink bench ..."""
    if nodes < 1 or gpus_per_node < 1:
        raise BenchError(f"--nodes ({nodes}) and --gpus-per-node ({gpus_per_node}) must be >= 1")
    cmd = " ".join(shlex.quote(a) for a in ["slowlink", "bench", *bench_args])
    lines = [
        "#!/bin/bash",
        "#SBATCH --job-name=slowlink-bench",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={gpus_per_node}",
        "#SBATCH --exclusive",
        f"#SBATCH --time={time_limit}",
        "#SBATCH --output=slowlink-bench-%j.out",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    lines += [
        "set -euo pipefail",
        'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "srun --kill-on-bad-exit=1 torchrun \\",
        '  --nnodes "$SLURM_NNODES" \\',
        f"  --nproc-per-node {gpus_per_node} \\",
        "  --rdzv-backend c10d \\",
        f'  --rdzv-endpoint "$HEAD:{RDZV_PORT}" \\',
        '  --rdzv-id "$SLURM_JOB_ID" \\',
        "  --max-restarts 0 \\",
        f"  --no-python {cmd}",
        "",
    ]
    return "\n".join(lines)


def write_sbatch(path: Path, text: str) -> None:
    try:
        path.write_text(text)
        path.chmod(0o755)
    except OSError as exc:
        raise BenchError(f"--emit-slurm ({str(path)!r}) cannot be written: {exc.strerror}") from None
