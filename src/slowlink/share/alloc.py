"""Where a job's ranks go: whole GPUs packed on nodes, or MIG instances and time slices on shared GPUs.

Two allocators with one interface (``try_place``, ``release``, ``allocated``): :class:`WholeNodes` keeps only
a free-GPU count per node and nodes bucketed by that count, so a placement costs O(GPUs per node) however
large the cluster; :class:`SharedGpus` keeps each GPU's MIG instances or time-sliced residents.

Placement rule of both (gang scheduling): a job that fits in one node goes on one node (best fit: the node
with the fewest free GPUs that still fit, which keeps whole nodes free for large jobs); a larger job takes
whole free nodes and one more node for the rest, as topology-aware gang schedulers place NCCL jobs.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from slowlink.share import mig
from slowlink.share.jobs import Job


@dataclass(frozen=True)
class Placement:
    """Where one job runs: (node, GPUs) pairs for whole GPUs, or GPU indices with MIG masks for shared GPUs."""

    nodes: tuple[tuple[int, int], ...] = ()
    gpus: tuple[int, ...] = ()
    masks: tuple[int, ...] = ()
    profile: mig.MigProfile | None = None


class WholeNodes:
    """Whole GPUs on nodes: free counts per node, nodes bucketed by free count."""

    def __init__(self, nodes: int, gpus_per_node: int, exclusive: bool = False) -> None:
        self.g, self.exclusive = gpus_per_node, exclusive
        self.free = [gpus_per_node] * nodes
        self.bucket: list[set[int]] = [set() for _ in range(gpus_per_node + 1)]
        self.bucket[gpus_per_node] = set(range(nodes))
        self.allocated = 0.0
        self.total = nodes * gpus_per_node

    def _take(self, node: int, k: int) -> None:
        f = self.free[node]
        self.bucket[f].discard(node)
        self.free[node] = f - k
        self.bucket[f - k].add(node)

    def _best(self, need: int, top: int) -> int | None:
        for k in range(need, top + 1):
            if self.bucket[k]:
                return next(iter(self.bucket[k]))
        return None

    def try_place(self, job: Job) -> Placement | None:
        g = job.gpus
        if g > self.total - self.allocated:
            return None
        if g <= self.g:
            node = self._best(g, self.g)
            if node is None:
                return None
            self._take(node, g)
            self.allocated += g
            return Placement(nodes=((node, g),))
        q, r = divmod(g, self.g)
        if self.exclusive and r:  # whole nodes only: the rest node is taken whole too
            q, r = q + 1, 0
        rest = self._best(r, self.g - 1) if r else None
        need_full = q + (1 if r and rest is None else 0)
        if len(self.bucket[self.g]) < need_full:
            return None
        full = list(self.bucket[self.g])[:q]
        pairs = [(n, self.g) for n in full]
        for n in full:
            self._take(n, self.g)
        if r:
            rest = rest if rest is not None else next(iter(self.bucket[self.g]))
            self._take(rest, r)
            pairs.append((rest, r))
        self.allocated += sum(k for _, k in pairs)
        return Placement(nodes=tuple(pairs))

    def release(self, job: Job, p: Placement) -> None:
        for node, k in p.nodes:
            self._take(node, -k)
            self.allocated -= k


@dataclass
class _Gpu:
    mask: int = 0  # MIG: occupied memory slices
    compute: int = 0  # MIG: compute slices in use
    whole: bool = False  # taken whole (MIG off) by one job
    residents: dict[str, tuple[float, float]] = field(default_factory=dict)  # timeslice: id -> (compute, memory)
    memory: float = 0.0  # timeslice: bytes in use
    share: float = 0.0  # timeslice: sum of the residents' compute_fraction


class SharedGpus:
    """GPUs shared by MIG instances (``mode="mig"``) or time slices (``mode="timeslice"``).

    MIG shortcut: a GPU is re-partitioned for free whenever it is empty (real MIG changes need the GPU idle
    and, on A100, a reset). A multi-GPU job takes whole GPUs with MIG off: the MIG user guide states that
    MIG instances have no GPU-to-GPU P2P (PCIe or NVLink), which NCCL needs.
    """

    def __init__(self, nodes: int, gpus_per_node: int, mode: str, gpu: str, hbm_bytes: float,
                 replicas: int, reserve: bool = False) -> None:
        self.g, self.n, self.mode, self.gpu, self.reserve = gpus_per_node, nodes, mode, gpu, reserve
        self.hbm, self.replicas = hbm_bytes, replicas
        self.gpus = [_Gpu() for _ in range(nodes * gpus_per_node)]
        self.allocated = 0.0
        self.total = nodes * gpus_per_node
        # GPUs that can take one more job (time slicing: a free replica; MIG: not taken whole, a free compute
        # slice), in index order, so that a saturated cluster is searched in O(open GPUs), not O(GPUs)
        self.open = list(range(self.total))
        # time slicing: (free memory, GPU) of the open GPUs, sorted, so that a request no GPU has the memory
        # for fails in O(log GPUs)
        self.room = [(hbm_bytes, i) for i in range(self.total)]
        self.room_key: list[tuple[float, int] | None] = list(self.room)

    def _update_open(self, i: int) -> None:
        s = self.gpus[i]
        is_open = (not s.whole and s.compute < mig.COMPUTE_SLICES) if self.mode == "mig" else \
            len(s.residents) < self.replicas
        k = bisect.bisect_left(self.open, i)
        present = k < len(self.open) and self.open[k] == i
        if is_open and not present:
            self.open.insert(k, i)
        elif present and not is_open:
            del self.open[k]
        old = self.room_key[i]
        if old is not None:
            del self.room[bisect.bisect_left(self.room, old)]
        new = (self.hbm - s.memory, i) if is_open and self.mode == "timeslice" else None
        if new is not None:
            bisect.insort(self.room, new)
        self.room_key[i] = new

    def _room(self, i: int, job: Job, whole: bool) -> bool:
        s = self.gpus[i]
        if self.mode == "mig":
            return s.compute == 0 if whole else True
        return s.memory + job.memory_bytes <= self.hbm

    def _candidates(self, job: Job, whole: bool) -> list[int]:
        """The GPUs that can take one rank of ``job``, in index order."""
        if self.mode == "timeslice":  # those with a free replica and the memory, from the sorted room list
            fits = (i for _, i in self.room[bisect.bisect_left(self.room, (job.memory_bytes, -1)):])
            if self.reserve:
                fits = (i for i in fits if self.gpus[i].share + job.compute_fraction <= 1 + 1e-9)
            return sorted(fits)
        return [i for i in self.open if self._room(i, job, whole)]

    def _pick(self, job: Job, whole: bool) -> list[int] | None:
        """GPUs for ``job`` (one node if it fits in one); time slicing shares a GPU only when no empty GPU
        will do, as kube-scheduler's default LeastAllocated scoring spreads pods over the emptiest nodes;
        reserved shares are packed best-fit (the baseline of the FGD paper)."""
        ok_all = self._candidates(job, whole)
        if len(ok_all) < job.gpus:
            return None
        if self.reserve and job.gpus == 1:  # shares are reservations: best fit, the fullest GPU that holds it
            return [max(ok_all, key=lambda i: (self.gpus[i].share, -i))]
        if self.mode == "timeslice":
            empty = [i for i in ok_all if not self.gpus[i].residents]
            if len(empty) >= job.gpus:
                picked = self._pick_from(empty, job.gpus)
                if picked is not None:
                    return picked
        return self._pick_from(ok_all, job.gpus)

    def _pick_from(self, ok_all: list[int], g: int) -> list[int] | None:
        if g > self.g:
            return ok_all[:g]
        node, ok = -1, list[int]()
        for i in ok_all:
            if i // self.g != node:
                node, ok = i // self.g, []
            ok.append(i)
            if len(ok) == g:
                return ok
        return None

    def profile_of(self, job: Job) -> mig.MigProfile:
        """The MIG profile a single-GPU job runs in: its own, or the smallest holding its compute and memory."""
        if job.mig_profile is not None:
            return mig.profiles(self.gpu)[job.mig_profile]
        return mig.smallest_fitting(self.gpu, job.compute_fraction, job.memory_bytes / self.hbm)

    def _place_mig_slice(self, job: Job, prof: mig.MigProfile) -> Placement | None:
        # already-partitioned GPUs first, so that empty GPUs stay whole for distributed jobs
        for want_busy in (True, False):
            for i in self.open:
                s = self.gpus[i]
                if (s.compute > 0) != want_busy:
                    continue
                m = mig.place(s.mask, s.compute, prof)
                if m is not None:
                    s.mask |= m
                    s.compute += prof.compute_slices
                    self.allocated += prof.compute_fraction
                    self._update_open(i)
                    return Placement(gpus=(i,), masks=(m,), profile=prof)
        return None

    def try_place(self, job: Job) -> Placement | None:
        if self.mode == "mig":
            prof = None if job.distributed else self.profile_of(job)
            if prof is not None and prof.compute_slices < mig.COMPUTE_SLICES:
                return self._place_mig_slice(job, prof)
        picked = self._pick(job, whole=self.mode == "mig")
        if picked is None:
            return None
        for i in picked:
            s = self.gpus[i]
            if self.mode == "mig":
                s.whole = True
                self.allocated += 1.0
            else:
                self.allocated += job.compute_fraction if self.reserve else 0.0 if s.residents else 1.0
                s.residents[job.id] = (job.compute_fraction, job.memory_bytes)
                s.memory += job.memory_bytes
                s.share += job.compute_fraction
            self._update_open(i)
        return Placement(gpus=tuple(picked))

    def release(self, job: Job, p: Placement) -> None:
        for k, i in enumerate(p.gpus):
            s = self.gpus[i]
            if p.profile is not None:
                s.mask &= ~p.masks[k]
                s.compute -= p.profile.compute_slices
                self.allocated -= p.profile.compute_fraction
            elif self.mode == "mig":
                s.whole = False
                self.allocated -= 1.0
            else:
                del s.residents[job.id]
                s.memory -= job.memory_bytes
                s.share -= job.compute_fraction
                self.allocated -= job.compute_fraction if self.reserve else 0.0 if s.residents else 1.0
            self._update_open(i)

    def shares(self, i: int) -> dict[str, float]:
        """Time slicing: each resident's share of GPU ``i`` (max-min fair over their compute demands: a job
        that needs less than an equal slice keeps its need, the rest is split among the others)."""
        demands = sorted(self.gpus[i].residents.items(), key=lambda kv: kv[1][0])
        left, out = 1.0, {}
        for n, (key, (f, _)) in enumerate(demands):
            out[key] = min(f, left / (len(demands) - n))
            left -= out[key]
        return out
