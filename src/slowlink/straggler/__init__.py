"""The slowest rank, modelled: what one degraded part (:mod:`.degraded`) and everyday per-rank jitter
(:mod:`.jitter`, :mod:`.sweep`) cost a synchronous training step. Naming the slow part from measurements is
:mod:`slowlink.probe`. docs/straggler.md states the models and their sources."""
