"""slowlink.observe: read what users already have (nccl-tests tables, NCCL_DEBUG logs, nvidia-smi, ibstat),
diagnose bottom-up (``doctor``), collect an inventory, and export metrics for Prometheus.

Every reader is a pure function ``parse_*(text, source)`` that returns a frozen record or raises
:class:`slowlink.errors.SpecError` naming the line and its content. nccl-tests output is read by
:mod:`slowlink.bench.nccl_tests`, beside the other result formats (observe imports bench, never the reverse).
The doctor and the inventory on the emulated cluster are in :mod:`slowlink.probe.doctor`.
"""
