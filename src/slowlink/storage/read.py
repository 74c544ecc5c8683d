"""Reading the training data: demand per GPU and in aggregate, and the stall when a supply cannot keep up.

Demand (the step model gives the rate): ``D = r x S`` bytes/s for ``r`` samples/s of ``S`` bytes; a language
model's sample is one sequence of ``seq_len`` tokens of ``bytes_per_token``. Each supply is priced as the time
it needs to deliver one step's data:

  storage      t = B_step / min(aggregate read, data tier's read)
  client NICs  t = B_step / (nodes x min(NICs x efficiency, per-client read limit))
  metadata     t = files_step x ops_per_file / metadata_ops_s     (files: one per sample or samples_per_file;
                                                                 shards: B_step / shard_size)
  reader CPU   t = samples_step x decode_s / (dp x workers_per_gpu)

Data loading overlaps compute (PyTorch DataLoader workers prefetch ``prefetch_factor`` batches ahead; DLIO
models a training step the same way, Devarajan et al., CCGrid'21), so the stall per step is
``max(0, max_x t_x - step_time)``. The article's ~1 GB/s per GPU is shown beside the demand, never used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slowlink import units
from slowlink.spec.cluster import Cluster
from slowlink.spec.storage import Data
from slowlink.spec.workload import Workload
from slowlink.storage.paths import client_bytes_s, details_of, storage_bytes_s, storage_of

# The background article (sections 2.7 and 2.17): "about 1 GB/s of read per GPU". A comparison, not an input.
RULE_OF_THUMB_BYTES_S_PER_GPU = 1.0 * units.GB
# Megatron-LM's indexed dataset stores token ids as uint16 when the vocabulary has fewer than 65,500 entries,
# else as int32 (megatron/core/datasets/indexed_dataset.py, DType.optimal_dtype).
UINT16_VOCAB_LIMIT = 65500


def read_demand_bytes_s(samples_per_s: float, bytes_per_sample: float) -> float:
    """Read demand ``D = r x S``, bytes/s."""
    return samples_per_s * bytes_per_sample


def samples_per_s_at_utilisation(batch: int, compute_s_per_batch: float, utilisation: float) -> float:
    """Samples/s one accelerator consumes at accelerator utilisation ``AU``: ``r = AU x B / t_compute``.

    DLIO (the MLPerf Storage harness) sleeps ``t_compute`` per batch of ``B`` samples and overlaps reads with
    it; AU = compute time / wall time, so a run at AU consumes AU x B / t_compute samples/s
    (mlcommons/storage, Submission_guidelines.md).
    """
    return utilisation * batch / compute_s_per_batch


def default_bytes_per_token(vocab: int) -> float:
    """2 bytes (uint16) when the vocabulary fits, else 4 (int32), as Megatron-LM stores token ids."""
    return 2.0 if vocab < UINT16_VOCAB_LIMIT else 4.0


def read_time_s(n_files: float, file_bytes: float, bw_bytes_s: float, metadata_ops_s: float,
                ops_per_file: float = 1.0) -> float:
    """Time to read ``n_files`` of ``file_bytes`` each: ``max(N S / bw, N ops / metadata_ops_s)``.

    The bandwidth bound and the metadata bound, whichever binds: with many readers in flight the opens of
    some files overlap the transfers of others, so the two do not add.
    """
    return max(n_files * file_bytes / bw_bytes_s, n_files * ops_per_file / metadata_ops_s)


def reader_cpu_samples_s(readers: int, workers_per_reader: int, decode_s_per_sample: float) -> float:
    """Samples/s the reader processes can decode: ``readers x workers / decode_s`` (inf when decode_s is 0)."""
    return float("inf") if decode_s_per_sample <= 0 else readers * workers_per_reader / decode_s_per_sample


def bytes_per_sample(w: Workload, data: Data) -> float:
    """Bytes read per sample: as given, else ``seq_len x bytes_per_token`` (a language model's sequence)."""
    if data.bytes_per_sample is not None:
        return data.bytes_per_sample
    per_token = data.bytes_per_token or default_bytes_per_token(w.model.vocab)
    return w.model.seq_len * per_token


def files_per_step(data: Data, samples: float, step_bytes: float) -> float:
    """Files opened per step: one per ``samples_per_file`` samples, or one per shard of ``shard_size`` bytes."""
    if data.layout == "files":
        return samples / data.samples_per_file
    return step_bytes / data.shard_bytes


@dataclass(frozen=True)
class DataFeed:
    """One step's data: its bytes and files, the demand, and the time each supply needs to deliver it."""

    layout: str
    bytes_per_sample: float
    step_bytes: float
    files_per_step: float
    demand_bytes_s: float
    demand_bytes_s_per_gpu: float
    rule_of_thumb_bytes_s: float
    supply_s: dict[str, float] = field(default_factory=dict)
    step_time_s: float = 0.0

    @property
    def binding(self) -> str:
        """The supply that needs the most time per step."""
        return max(self.supply_s, key=lambda k: self.supply_s[k]) if self.supply_s else "none"

    @property
    def stall_s(self) -> float:
        """Wait per step: the slowest supply's time beyond the step (loading overlaps compute)."""
        return max(0.0, max(self.supply_s.values(), default=0.0) - self.step_time_s)

    def to_json(self) -> dict[str, object]:
        return {"layout": self.layout, "bytes_per_sample": self.bytes_per_sample, "step_bytes": self.step_bytes,
                "files_per_step": self.files_per_step, "read_demand_gbyte_s": self.demand_bytes_s / units.GB,
                "read_demand_gbyte_s_per_gpu": self.demand_bytes_s_per_gpu / units.GB,
                "rule_of_thumb_gbyte_s": self.rule_of_thumb_bytes_s / units.GB,
                "supply_s": self.supply_s, "binding": self.binding, "data_stall_s": self.stall_s}


def data_feed(w: Workload, cluster: Cluster, step_time_s: float) -> DataFeed:
    """Demand and per-supply delivery times of one step of ``w`` on ``cluster`` (module docstring)."""
    data = w.data or Data.of()
    samples = float(w.training.global_batch)
    per_sample = bytes_per_sample(w, data)
    step_bytes = samples * per_sample
    files = files_per_step(data, samples, step_bytes)
    demand = read_demand_bytes_s(samples / step_time_s, per_sample)
    supply: dict[str, float] = {}
    if cluster.storage is not None:
        st = storage_of(cluster, "the data stall")
        supply["storage"] = step_bytes / storage_bytes_s(cluster, "read", details_of(st).data_tier)
        supply["client NICs"] = step_bytes / (cluster.nodes * client_bytes_s(cluster, "read"))
        supply["metadata"] = files * data.metadata_ops_per_file / st.metadata_ops_s
    if data.decode_s_per_sample is not None:
        readers = w.parallel.dp  # each data-parallel rank loads its own micro-batches
        rate = reader_cpu_samples_s(readers, data.reader_workers_per_gpu, data.decode_s_per_sample)
        supply["reader CPU"] = samples / rate if rate != float("inf") else 0.0
    return DataFeed(data.layout, per_sample, step_bytes, files, demand, demand / cluster.gpus,
                    RULE_OF_THUMB_BYTES_S_PER_GPU * cluster.gpus, supply, step_time_s)
