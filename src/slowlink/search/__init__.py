"""Design search: clusters x parallel layouts, swept on Dask for the cheapest design per token (docs/cost.md)."""
