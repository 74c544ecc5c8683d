"""The bundled price and power book, and a user's quotes over it (``--prices FILE``).

The schema, the merge and the resolved :class:`~slowlink.spec.prices.PriceBook` are :mod:`slowlink.spec.prices`;
the bundled book is ``cost/data/prices.yaml`` (every entry with its source), parsed once per process.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from slowlink.fileio import parse_text, read_mapping
from slowlink.spec.prices import PriceBook, PricesSpec, price_book, validate_prices

__all__ = ["PriceBook", "bundled_prices", "load_prices"]

_BUNDLED: PricesSpec | None = None


def bundled_prices() -> PricesSpec:
    """The bundled book, parsed once per process."""
    global _BUNDLED
    if _BUNDLED is None:
        text = resources.files("slowlink.cost.data").joinpath("prices.yaml").read_text("utf-8")
        _BUNDLED = validate_prices(parse_text(text, "prices.yaml", False), "prices.yaml")
    return _BUNDLED


def load_prices(path: Path | str | None = None) -> PriceBook:
    """The bundled book, with the entries of the user's file ``path`` (if given) replacing its own."""
    return price_book(bundled_prices(), None if path is None else read_mapping(path), str(path))
