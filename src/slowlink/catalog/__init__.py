"""The hardware catalog: GPUs, scale-up links and transports, as data files with their sources."""

from slowlink.catalog.gpu import Gpu
from slowlink.catalog.scale_up import ScaleUpLink
from slowlink.catalog.store import Catalog, load_catalog
from slowlink.catalog.transport import Transport

__all__ = ["Catalog", "Gpu", "ScaleUpLink", "Transport", "load_catalog"]
