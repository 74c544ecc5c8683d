"""The slowest rank: what one degraded part (:mod:`.degraded`) and everyday per-rank jitter (:mod:`.jitter`,
:mod:`.sweep`) cost a synchronous training step, and naming the slow part from probes (:mod:`.find`,
:mod:`.emulated`). docs/straggler.md states the models and their sources."""
