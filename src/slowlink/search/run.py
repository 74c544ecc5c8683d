"""Sweep a design space on Dask, then keep what meets the constraints: the cheapest design per token, the
Pareto front of training-run cost vs time-to-train, what each constraint costs, and which rule removed what.

Chunks of hardware designs (each with all its parallel layouts) are tasks on a ``dask.distributed`` client:
a ``LocalCluster`` of ``workers`` processes, or a running scheduler at ``scheduler``; ``workers=0`` runs in this
process. On Linux the local workers are forked from this process (a fraction of a second, the model's modules
already imported); elsewhere they are spawned in the background while this process works through the first
chunks itself. Each worker holds the chunk it works on and the next one, and keeps the model's caches (placed
groups, collective shapes, catalog) from one task to the next.
Points come back sorted by index, so the result does not depend on the workers. With a
``resume`` folder each finished chunk is kept, and a rerun evaluates only what is missing.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slowlink.errors import SpecError
from slowlink.search.evaluate import Point, evaluate_hardware
from slowlink.search.space import Space
from slowlink.search.store import ChunkStore

CHUNK_CONFIGS = 2000  # configurations per Dask task: seconds of work, so scheduling overhead stays small
CONSTRAINT_ORDER = ("max_gpus", "max_nodes_per_site", "budget_usd", "power_kw", "deadline_days")


def chunks(space: Space, per_task: int = CHUNK_CONFIGS) -> list[list[int]]:
    """Hardware indices grouped so that each task evaluates about ``per_task`` configurations."""
    step = max(1, per_task // max(1, len(space.layouts)))
    idx = list(range(len(space.hardware)))
    return [idx[i:i + step] for i in range(0, len(idx), step)]


Done = Callable[[list[int], list[Point]], None]  # called with each finished chunk and its points


def _forks() -> bool:
    """Local workers are forked from this process: on Linux (fork is unsafe on macOS, absent on Windows). A
    forked worker is up in ~0.2 s with every module imported; a spawned one takes seconds to import them again."""
    return sys.platform.startswith("linux")


def _start_local(workers: int) -> tuple[threading.Thread, dict[str, object]]:
    """Start a ``LocalCluster`` of ``workers`` processes in a thread; the box gets ``cluster`` or ``error``. Its
    workers run without Dask's sampling profiler (a stack walk of the task's thread every 10 ms, for a dashboard
    nobody opens here)."""
    import dask
    from dask.distributed import LocalCluster

    box: dict[str, object] = {}
    config: dict[str, object] = {"distributed.worker.profile.enabled": False}
    if _forks():
        config["distributed.worker.multiprocessing-method"] = "fork"

    def start() -> None:
        try:
            with dask.config.set(config):
                box["cluster"] = LocalCluster(  # type: ignore[no-untyped-call]
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                    silence_logs=logging.ERROR)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    th = threading.Thread(target=start, name="slowlink-local-cluster", daemon=True)
    th.start()
    return th, box


def _on_dask(space: Space, parts: list[list[int]], workers: int, scheduler: str | None, done: Done) -> list[Point]:
    """The chunks on Dask. A forked local cluster is waited for (it is up in a fraction of a second); a spawned
    one starts in the background while this process evaluates chunks itself (its seconds of start-up are not
    waited for, and a search that ends before it is up never uses it). Once it is up each worker holds two
    chunks, the one it works on and the next (no idle round trip between them), another sent as one comes
    back, and this process keeps taking chunks itself while it waits (on a remote cluster, or when the local
    workers leave a core free)."""
    try:
        from dask.distributed import Client, wait
    except ImportError:
        raise SpecError("--workers / --scheduler need dask.distributed: pip install 'slowlink[sweep]', or run "
                        "in this process with --workers 0") from None
    out: list[Point] = []
    todo = list(parts)

    def here() -> None:
        part = todo.pop(0)
        points = evaluate_hardware(space, part)
        done(part, points)
        out.extend(points)

    cluster = None
    if scheduler is None:
        th, box = _start_local(workers)
        while todo and th.is_alive() and not _forks():
            here()
        th.join()
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        cluster = box["cluster"]
    try:
        if not todo:
            return out
        client = Client(scheduler or cluster)  # type: ignore[no-untyped-call]
        try:
            shared = client.scatter(space, broadcast=True)  # type: ignore[no-untyped-call]
            slots = 2 * max(1, len(client.scheduler_info()["workers"]))  # one running and one waiting each
            running: dict[object, list[int]] = {}
            spare = scheduler is not None or workers < (os.cpu_count() or 1)
            while todo or running:
                while todo and len(running) < slots:
                    part = todo.pop(0)
                    running[client.submit(evaluate_hardware, shared, part, pure=False)] = part
                finished = [f for f in running if f.done()]  # type: ignore[attr-defined]
                if not finished and todo and spare:
                    here()  # this process works too while the workers are busy, on a core they leave free
                    continue
                if not finished:
                    finished = list(wait(list(running), return_when="FIRST_COMPLETED").done)  # type: ignore[no-untyped-call]
                for fut in finished:
                    points = fut.result()  # type: ignore[attr-defined]
                    done(running.pop(fut), points)
                    out += points
            return out
        finally:
            client.close()  # type: ignore[no-untyped-call]
    finally:
        if cluster is not None:
            cluster.close()  # type: ignore[attr-defined]


def evaluate_space(space: Space, workers: int = 0, scheduler: str | None = None,
                   progress: Callable[[int], None] | None = None, resume: Path | None = None) -> list[Point]:
    """Every configuration of ``space``, sorted by index (module docstring for where it runs).

    ``resume``: a folder that keeps each finished chunk (:class:`~slowlink.search.store.ChunkStore`); chunks
    already there are read back instead of evaluated.
    """
    parts = chunks(space)
    store = ChunkStore(resume, space, parts) if resume is not None else None
    out: list[Point] = []
    todo = []
    for part in parts:
        kept = store.load(part) if store is not None else None
        if kept is None:
            todo.append(part)
        else:
            out += kept
            if progress is not None:
                progress(1)

    def done(part: list[int], points: list[Point]) -> None:
        if store is not None:
            store.save(part, points)
        if progress is not None:
            progress(1)

    if todo and workers <= 0 and scheduler is None:
        for part in todo:
            points = evaluate_hardware(space, part)
            done(part, points)
            out += points
    elif todo:
        out += _on_dask(space, todo, workers, scheduler, done)
    return sorted(out, key=lambda p: p.index)


def broken_constraint(space: Space, p: Point, skip: str = "") -> str:
    """The first constraint (other than ``skip``) a plan-feasible point breaks ("" if none)."""
    c = space.constraints
    d = space.design_of(p.index)
    values = {"max_gpus": (p.gpus, c.max_gpus), "max_nodes_per_site": (d.nodes / d.sites, c.max_nodes_per_site),
              "budget_usd": (p.capex_usd, c.budget_usd),
              "power_kw": (p.facility_power_kw, c.power_kw), "deadline_days": (p.days, c.deadline_days)}
    for name in CONSTRAINT_ORDER:
        value, limit = values[name]
        if name != skip and limit is not None and value > limit:
            return name
    return ""


def pareto(points: list[Point]) -> list[Point]:
    """Points no other beats on both time-to-train and run cost, fastest first (ties: lower index)."""
    front: list[Point] = []
    best_cost = math.inf
    for p in sorted(points, key=lambda q: (q.days, q.run_usd, q.index)):
        if p.run_usd < best_cost:
            front.append(p)
            best_cost = p.run_usd
    return front


def cheapest(points: list[Point]) -> Point | None:
    return min(points, key=lambda p: (p.usd_per_million_tokens, p.index), default=None)


@dataclass(frozen=True)
class SearchResult:
    """What `slowlink search` reports (see :func:`summarize`)."""

    space: Space
    points: list[Point]
    feasible: list[Point]
    removed_by_rule: dict[str, int]
    front: list[Point]
    best: Point | None
    fastest: Point | None
    constraint_cost: dict[str, dict[str, float | None]]


def summarize(space: Space, points: list[Point]) -> SearchResult:
    """Apply the constraints; the front, the cheapest, and per constraint the cheapest $/M tokens without it."""
    planned = [p for p in points if not p.rule]
    removed: Counter[str] = Counter(p.rule for p in points if p.rule)
    feasible = []
    for p in planned:
        why = broken_constraint(space, p)
        if why:
            removed[why] += 1
        else:
            feasible.append(p)
    best = cheapest(feasible)
    costs: dict[str, dict[str, float | None]] = {}
    for name in CONSTRAINT_ORDER:
        if getattr(space.constraints, name) is None:
            continue
        free = cheapest([p for p in planned if not broken_constraint(space, p, skip=name)])
        costs[name] = {"usd_per_million_tokens_without": None if free is None else free.usd_per_million_tokens,
                       "usd_per_million_tokens_with": None if best is None else best.usd_per_million_tokens}
    ordered = dict(sorted(removed.items(), key=lambda kv: (-kv[1], kv[0])))
    fastest = min(feasible, key=lambda p: (p.days, p.run_usd, p.index), default=None)
    return SearchResult(space, points, feasible, ordered, pareto(feasible), best, fastest, costs)
