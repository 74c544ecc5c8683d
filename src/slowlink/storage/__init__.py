"""The storage model: the second bill of a training cluster, next to communication.

Pure functions, each citing its formula: how fast training must read its data and whether the storage,
the client NICs, the metadata servers or the reader CPUs keep up (:mod:`~slowlink.storage.read`); how big
a checkpoint is, how long it takes to write, to stage asynchronously and to restore
(:mod:`~slowlink.storage.checkpoint`); how many fit under the retention policy
(:mod:`~slowlink.storage.capacity`); a checkpoint burst's slowdown of gradient sync on a converged fabric
(:mod:`~slowlink.storage.converged`); and everything joined for ``slowlink plan`` (:mod:`~slowlink.storage.plan`).
"""
