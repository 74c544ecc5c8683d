"""Fault drills: a small training job under torchrun with elastic restarts, a fault injected, resumed from
its checkpoint and checked bit-identical against the same job without the fault, on this machine
(:mod:`.harness`) or on the emulated cluster (:mod:`.emulated`); :mod:`.worker` is one rank of that job.
The recovery it measures is set beside :mod:`slowlink.reliability.recovery`'s prediction."""
