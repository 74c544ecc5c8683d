"""slowlink.emulate: a scaled-down copy of a cluster in Linux network namespaces (needs root)."""

from slowlink.emulate.net import current, down, impair, kill_all, kill_node, run, set_link, set_rate, spawn, up
from slowlink.emulate.plan import DEFAULT_SCALE, Link, Plan, build_plan

__all__ = ["DEFAULT_SCALE", "Link", "Plan", "build_plan", "current", "down", "impair", "kill_all", "kill_node",
           "run", "set_link", "set_rate", "spawn", "up"]
