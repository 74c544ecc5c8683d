"""The HTML page of ``slowlink share``: the policies side by side (utilisation, allocation, fragmentation,
queueing), the timeline of ``--plot``, the tables and the scenario.

Draws the :class:`~slowlink.share.result.ShareResult` the command computed (with its timeline); the rows and
the timeline drawing are :mod:`slowlink.report.share`'s, the page scaffolding :mod:`slowlink.report.page`'s.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from slowlink.report.page import figure_block, figure_svg, html_page, html_table, new_figure, write_page
from slowlink.report.share import (
    POLICY_HEADER,
    SLOWDOWN_HEADER,
    deadlock_lines,
    draw_timeline,
    policy_rows,
    slowdown_rows,
)

if TYPE_CHECKING:
    from slowlink.share.jobs import Job
    from slowlink.share.result import ShareResult
    from slowlink.spec.share import Share

SHARES = (("utilisation", "#4c72b0"), ("allocated", "#55a868"), ("fragmentation", "#dd8452"),
          ("held_idle", "#c44e52"))  # PolicyResult fields, shares of the cluster's GPUs
HTML_POINTS = 4000  # steps per policy in the page's timeline: a 10^5-job run stays a page of a few MB at most
QUEUES = (("mean_queue_s", "mean queue", "#8172b3"), ("p95_queue_s", "p95 queue", "#937860"))


def policies_svg(result: ShareResult) -> str:
    """Left: each policy's utilisation, allocation, fragmentation and GPUs held idle (% of GPUs). Right: its
    mean and p95 queueing time (a policy whose jobs never started draws none)."""
    pols = result.policies
    y = np.arange(len(pols))
    salt = "share-policies"
    with new_figure(salt, 11, 1.6 + 0.9 * len(pols), ncols=2, sharey=True) as (fig, (ax1, ax2)):
        h = 0.8 / len(SHARES)
        for k, (attr, colour) in enumerate(SHARES):
            vals = [100 * getattr(p, attr) for p in pols]
            ax1.barh(y + (k - 1.5) * h, vals, height=h, color=colour, label=attr.replace("_", " "))
            for yi, v in zip(y, vals, strict=True):
                ax1.text(v, yi + (k - 1.5) * h, f" {v:.0f}%", va="center", fontsize=7)
        ax1.set_xlim(0, 118)
        ax1.set_xlabel("share of the cluster's GPUs (%), time average")
        ax1.legend(fontsize=8, frameon=False, loc="best")
        h = 0.8 / len(QUEUES)
        top = max((getattr(p, a) for p in pols for a, _, _ in QUEUES if not math.isnan(getattr(p, a))), default=1)
        for k, (attr, label, colour) in enumerate(QUEUES):
            vals = [getattr(p, attr) for p in pols]
            ax2.barh(y + (k - 0.5) * h, [0 if math.isnan(v) else v for v in vals], height=h, color=colour,
                     label=label)
            for yi, v in zip(y, vals, strict=True):
                ax2.text(0 if math.isnan(v) else v, yi + (k - 0.5) * h, " -" if math.isnan(v) else f" {v:,.0f} s",
                         va="center", fontsize=7)
        ax2.set_xlim(0, max(top, 1) * 1.3)
        ax2.set_xlabel("queueing time (s)")
        ax2.legend(fontsize=8, frameon=False, loc="best")
        ax1.set_yticks(y, [p.name for p in pols])
        ax1.invert_yaxis()
        for ax in (ax1, ax2):
            ax.spines[["top", "right"]].set_visible(False)
        return figure_svg(fig, salt)


def timeline_svg(result: ShareResult) -> str:
    """:func:`~slowlink.report.share.draw_timeline` as inline SVG, its legend beside the plot."""
    salt = "share-timeline"
    with new_figure(salt, 11, 5.5, nrows=2, sharex=True) as (fig, (top, bottom)):
        draw_timeline(top, bottom, result, HTML_POINTS)
        top.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        bottom.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        for ax in (top, bottom):
            ax.spines[["top", "right"]].set_visible(False)
        return figure_svg(fig, salt)


def summary_lines(result: ShareResult) -> list[str]:
    """The policy that keeps the GPUs busiest, the one that queues least, and each deadlock."""
    busiest = max(result.policies, key=lambda p: p.utilisation)
    others = ", ".join(f"{p.name} {p.utilisation:.1%}" for p in result.policies if p is not busiest)
    lines = [f"highest utilisation: {busiest.name}, {busiest.utilisation:.1%} of the GPUs busy"
             + (f" ({others})" if others else "")]
    queued = [p for p in result.policies if not p.deadlocks and not math.isnan(p.mean_queue_s)]
    if queued:  # a deadlocked policy's queue counts only the jobs that started: not comparable
        q = min(queued, key=lambda p: p.mean_queue_s)
        lines.append(f"shortest mean queue without a deadlock: {q.name}, {q.mean_queue_s:,.1f} s "
                     f"({q.finished}/{q.jobs} jobs finished)")
    return lines + deadlock_lines(result)


def scenario_inputs(spec: Share, jobs: Sequence[Job]) -> str:
    """The shared cluster, the jobs by kind and every policy's settings."""
    kinds = Counter(j.kind for j in jobs)
    rows = [("cluster", f"{spec.nodes} x {spec.gpus_per_node} {spec.gpu} = {spec.nodes * spec.gpus_per_node} GPUs"),
            ("jobs", f"{len(jobs)}: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common())),
            ("GPUs asked", f"{sum(j.gpus for j in jobs):,} in all, largest job {max(j.gpus for j in jobs)}")]
    pols = [(p.label, p.scheduler, p.slicing, "yes" if p.backfill else "no", p.window,
             "yes" if p.exclusive_nodes else "no") for p in spec.policies]
    return ("<h2>Inputs</h2>" + html_table(("field", "value"), rows)
            + html_table(("policy", "scheduler", "slicing", "backfill", "window", "exclusive nodes"), pols))


def share_page(result: ShareResult, spec: Share, jobs: Sequence[Job]) -> str:
    """Summary, the policies compared, the timeline, the tables and the scenario."""
    summary = "".join(f'<span class="sentence">{html.escape(x)}</span><br>' for x in summary_lines(result))
    fig = figure_block(policies_svg(result), "Each policy on the same jobs: how much of the cluster does work, "
                        "is reserved, is left free in unusable fragments or is held idle by half-started gangs "
                        "(left), and how long jobs wait (right).", "policies")
    timeline = figure_block(timeline_svg(result), "Allocated share (solid) and utilisation (dotted) of the GPUs, "
                             "and the jobs waiting, over time.", "timeline")
    body = (f'<h2>Summary</h2><div class="bottleneck"><b>{html.escape(result.name)}: {result.jobs} jobs on '
            f"{result.gpus} GPUs</b>{summary}</div>"
            f"<h2>Policies</h2>{fig}{html_table(POLICY_HEADER, policy_rows(result), 'metrics')}"
            f"<h2>Timeline</h2>{timeline}"
            f"<h2>Slowdown by kind</h2><p>run: (finish - start) / alone; JCT: (finish - arrival) / alone</p>"
            f"{html_table(SLOWDOWN_HEADER, slowdown_rows(result))}{scenario_inputs(spec, jobs)}")
    return html_page(f"slowlink share: {result.name}", body)


def write_share(path: Path, result: ShareResult, spec: Share, jobs: Sequence[Job]) -> None:
    write_page(path, share_page(result, spec, jobs))
