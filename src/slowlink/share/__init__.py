"""A shared GPU cluster: whole GPUs, MIG instances and time slices; per-GPU vs gang scheduling; the
deadlocks, fragmentation, queueing and slowdowns they cause (issue 20, docs/share.md)."""
