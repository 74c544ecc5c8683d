"""Bill of materials, prices and cost per token of a cluster (docs/cost.md)."""
