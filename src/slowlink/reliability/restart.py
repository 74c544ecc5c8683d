"""What a restart costs at scale, from its parts: the seconds between a detected failure and every rank of the
new gang holding its communicator, as a function of the job's ranks. Each part and its source is in
``data/failures.yaml`` (``recovery.restart``)::

    restart(N) = reschedule + process start + NCCL init (one node) + star phases x N x store_init_s / store_init_ranks

  reschedule      putting the gang back on healthy nodes (not modelled: 0 unless set)
  process start   interpreter + ``import torch`` (measured here; a lower bound for a GPU node)
  NCCL init       one node's ``ncclCommInitRank`` (8 H100, NCCL 2.22)
  star phases     all-to-one connections, each priced per rank like the libuv TCPStore's published 100 s at
                  98,304 ranks: the c10d store, and NCCL's bootstrap root (by analogy)

The restore (storage model) and the detection (failure kinds) are separate phases of
:class:`~slowlink.reliability.recovery.RecoveryCost`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slowlink import units

# InfiniBand's local ACK timeout unit: the QP's timeout field t means 4.096 us x 2^t (the IB spec, as Linux's
# drivers/infiniband/hw/qib/qib_rc.c computes it: '4.096 usec. * (1 << qp->timeout)').
IB_ACK_TIMEOUT_UNIT_US = 4.096


@dataclass(frozen=True)
class RestartModel:
    """The restart's parts (module docstring); ``override_s`` (``reliability.restart_overhead_s``) replaces
    the sum."""

    reschedule_s: float
    process_start_s: float
    nccl_init_base_s: float
    store_init_s: float  # seconds for every rank of ``store_init_ranks`` to connect to one server
    store_init_ranks: int
    star_phases: int
    override_s: float | None = None

    def connect_s(self, ranks: int) -> float:
        """Seconds for ``ranks`` clients to reach one server, linear in ranks through the published point."""
        return ranks * self.store_init_s / self.store_init_ranks

    def parts(self, ranks: int) -> dict[str, float]:
        """Each part's seconds for a job of ``ranks`` (one rank per GPU)."""
        return {"reschedule_s": self.reschedule_s, "process_start_s": self.process_start_s,
                "nccl_init_base_s": self.nccl_init_base_s,
                "all_to_one_connect_s": self.star_phases * self.connect_s(ranks)}

    def restart_s(self, ranks: int) -> float:
        """The restart of a job of ``ranks``: the override when set, else the sum of :meth:`parts`."""
        if self.override_s is not None:
            return self.override_s
        return sum(self.parts(ranks).values())


def restart_model(data: dict[str, Any]) -> RestartModel:
    """The defaults of ``failures.yaml``'s ``recovery.restart`` section."""
    store = data["store_init"]
    return RestartModel(float(data["reschedule_s"]["value"]), float(data["process_start_s"]["value"]),
                        float(data["nccl_init_base_s"]["value"]), float(store["seconds"]), int(store["ranks"]),
                        int(data["star_phases"]["value"]))


def transport_timeout_s(ib_timeout: int, ib_retry_cnt: int) -> float:
    """Seconds until an RDMA queue pair to a vanished peer fails: the InfiniBand local ACK timeout
    ``4.096 us x 2^ib_timeout``, tried once and retried ``ib_retry_cnt`` times (``failures.yaml``,
    ``recovery.transport_detect_s``)."""
    return IB_ACK_TIMEOUT_UNIT_US * units.US * 2.0**ib_timeout * (1 + ib_retry_cnt)
