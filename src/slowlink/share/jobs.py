"""Job records of a shared cluster: what each job asks for and how long it runs alone.

A job is plain data (frozen dataclass) built once from a scenario's list, its synthetic stream or a trace;
the simulator never changes it. ``duration_s`` is the run time alone on whole GPUs; sharing stretches it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slowlink.spec.share import KINDS, JobClass, Kind

__all__ = ["KINDS", "Job", "JobClass", "Kind", "synthetic_jobs"]


@dataclass(frozen=True)
class Job:
    """One job: arrival, GPUs, run time alone, and what it uses of each GPU.

    ``compute_fraction``: share of a whole GPU's compute the job keeps busy when alone (an inference server
    idles between requests); ``memory_bytes``: GPU memory per rank; ``mig_profile``: the MIG instance it
    asks for (None: the smallest that holds its compute and memory); ``comm_fraction``: share of its run time
    alone spent in inter-node communication, which a neighbour on the same NICs stretches.
    """

    id: str
    arrival_s: float
    gpus: int
    duration_s: float
    kind: Kind = "training"
    compute_fraction: float = 1.0
    memory_bytes: float = 0.0
    mig_profile: str | None = None
    comm_fraction: float = 0.0

    @property
    def distributed(self) -> bool:
        """A job of several GPUs whose ranks all have to run at once (gang)."""
        return self.gpus > 1


def synthetic_jobs(count: int, mean_interarrival_s: float, classes: tuple[JobClass, ...],
                   rng: np.random.Generator) -> list[Job]:
    """``count`` jobs: Poisson arrivals (exponential gaps of mean ``mean_interarrival_s``), a class drawn by
    its share, a GPU count drawn uniformly from the class's list, an exponential run time of the class's mean
    (the memoryless stream of queueing theory's M/M/c, a shortcut: real traces are heavier-tailed)."""
    shares = np.array([c.share for c in classes], dtype=float)
    arrivals = np.cumsum(rng.exponential(mean_interarrival_s, count))
    which = rng.choice(len(classes), size=count, p=shares / shares.sum())
    unit = rng.exponential(1.0, count)
    picks = rng.random(count)
    jobs = []
    for i in range(count):
        c = classes[int(which[i])]
        gpus = c.gpus[int(picks[i] * len(c.gpus))]
        jobs.append(Job(f"j{i}", float(arrivals[i]), gpus, max(float(unit[i]) * c.mean_duration_s, 1e-3),
                        c.kind, c.compute_fraction, c.memory_bytes, c.mig_profile, c.comm_fraction))
    return jobs
