"""Loading the hardware catalog: the bundled YAML files, plus users' own entries from their files."""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from slowlink.catalog.gpu import Gpu, GpuEntry
from slowlink.catalog.scale_up import ScaleUpEntry, ScaleUpLink
from slowlink.catalog.transport import Transport, TransportEntry
from slowlink.errors import CatalogError
from slowlink.fileio import read_mapping, validated


class CatalogFile(BaseModel):
    """A user's catalog file: any of the three sections, each a mapping from name to entry."""

    model_config = ConfigDict(extra="forbid")

    gpus: dict[str, GpuEntry] = Field(default_factory=dict, description="GPUs by name.")
    scale_up: dict[str, ScaleUpEntry] = Field(default_factory=dict, description="Scale-up links by name.")
    transports: dict[str, TransportEntry] = Field(default_factory=dict, description="Transports by name.")


def nearest(name: str, choices: list[str]) -> str:
    """A ' (did you mean ...?)' hint naming the closest catalog names, or the full list."""
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.4)
    if close:
        return f"; did you mean {', '.join(close)}?"
    return f"; known: {', '.join(sorted(choices))}"


@dataclass
class Catalog:
    """Every GPU, scale-up link and transport slowlink knows, by name."""

    gpus: dict[str, Gpu] = field(default_factory=dict)
    scale_up: dict[str, ScaleUpLink] = field(default_factory=dict)
    transports: dict[str, Transport] = field(default_factory=dict)

    def gpu(self, name: str, where: str = "gpu") -> Gpu:
        if name not in self.gpus:
            raise CatalogError(f"{where} ({name!r}) is not in the catalog{nearest(name, list(self.gpus))}")
        return self.gpus[name]

    def link(self, name: str, where: str = "scale_up.link") -> ScaleUpLink:
        if name not in self.scale_up:
            raise CatalogError(f"{where} ({name!r}) is not in the catalog{nearest(name, list(self.scale_up))}")
        return self.scale_up[name]

    def transport(self, name: str, where: str = "fabric.transport_profile") -> Transport:
        if name not in self.transports:
            raise CatalogError(
                f"{where} ({name!r}) is not in the catalog{nearest(name, list(self.transports))}"
            )
        return self.transports[name]

    def add_file(self, data: dict[str, Any], source: str) -> None:
        """Add (or override) entries from a parsed catalog file."""
        parsed = validated(CatalogFile, data, source, "catalog", CatalogError)
        self.gpus.update({k: Gpu.from_entry(k, v) for k, v in parsed.gpus.items()})
        self.scale_up.update({k: ScaleUpLink.from_entry(k, v) for k, v in parsed.scale_up.items()})
        self.transports.update({k: Transport.from_entry(k, v) for k, v in parsed.transports.items()})


# The catalog's sections and the bundled file of each.
SECTIONS = {"gpus": "gpus.yaml", "scale_up": "scale_up.yaml", "transports": "transports.yaml"}


@functools.lru_cache(maxsize=1)
def _bundled() -> Catalog:
    """The bundled files, parsed and validated once per process (~0.14 s of YAML each time otherwise: a
    design search builds thousands of clusters, a multi-cluster plan and its advice several)."""
    data_dir = resources.files("slowlink.catalog") / "data"
    sections: dict[str, Any] = {}
    for section, filename in SECTIONS.items():
        with resources.as_file(data_dir / filename) as path:
            sections[section] = read_mapping(path)
    catalog = Catalog()
    catalog.add_file(sections, "bundled catalog")
    return catalog


def entry_sources(text: str) -> dict[str, str]:
    """Each top-level entry of a catalog file and the first comment line under it (where its figures come
    from, by the catalog's convention: ``h100-sxm:`` then ``  # NVIDIA H100 ... datasheet``)."""
    sources: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#") and line.rstrip().endswith(":"):
            current = line.rstrip()[:-1].strip()
        elif current is not None and current not in sources and line.strip().startswith("#"):
            sources[current] = line.strip().lstrip("#").strip()
    return sources


def catalog_entries(extra_files: list[Path] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Every catalog entry as written (the file's keys and units), section -> name -> entry, with a
    ``source`` key: the bundled file's comment for the entry, or the user's file that added or replaced it."""
    data_dir = resources.files("slowlink.catalog") / "data"
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for section, filename in SECTIONS.items():
        with resources.as_file(data_dir / filename) as path:
            raw = read_mapping(path)
            notes = entry_sources(path.read_text(encoding="utf-8"))
        out[section] = {name: {**entry, "source": notes.get(name, "")} for name, entry in raw.items()}
    for path in extra_files or []:
        data = read_mapping(path)
        validated(CatalogFile, data, str(path), "catalog", CatalogError)
        for section in SECTIONS:
            for name, entry in (data.get(section) or {}).items():
                out[section][name] = {**entry, "source": str(path)}
    return out


def load_catalog(extra_files: list[Path] | None = None) -> Catalog:
    """The bundled catalog, with each of ``extra_files`` added on top (later files win)."""
    b = _bundled()  # its entries are frozen; each catalog gets its own name -> entry mappings
    catalog = Catalog(dict(b.gpus), dict(b.scale_up), dict(b.transports))
    for path in extra_files or []:
        catalog.add_file(read_mapping(path), str(path))
    return catalog
