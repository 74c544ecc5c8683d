"""Training across sites: what the long haul between data centres carries, how fast, and what the step waits for
(docs/sites.md)."""
