"""slowlink: find where multi-node GPU training waits, before the hardware is bought and after it is racked."""

__version__ = "0.1.0"
