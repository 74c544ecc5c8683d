"""Naming the slow part from measurements: the attribution rules (:mod:`.find`: per-link probes, per-rank
times of a bench record), ``find-slow`` on the emulated cluster (:mod:`.slow`, its ranks :mod:`.worker`),
and the doctor and the inventory on the emulated cluster (:mod:`.doctor`). Each compares what it measured
with the models' prediction for the cluster as emulated."""
