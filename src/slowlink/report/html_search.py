"""The HTML page of ``slowlink search``: the Pareto front of run cost vs days, what each rule removed, the inputs.

Draws the :class:`~slowlink.search.run.SearchResult` the command computed, with the front figure of
``--plot`` (:func:`slowlink.report.search.draw_front`); the page scaffolding is :mod:`slowlink.report.page`'s.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from slowlink.report.page import figure_block, figure_svg, html_page, html_table, new_figure, workload_rows, write_page
from slowlink.report.search import draw_front, empty_message, point_json, summary_lines
from slowlink.search.space import PARALLEL_KEYS

if TYPE_CHECKING:
    from slowlink.search.evaluate import Point
    from slowlink.search.run import SearchResult


def front_svg(r: SearchResult) -> str:
    """:func:`draw_front` as inline SVG, its legend beside the plot."""
    salt = "search-front"
    with new_figure(salt, 11, 5.0) as (fig, (ax,)):
        draw_front(ax, r)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        return figure_svg(fig, salt)


def _mark(r: SearchResult, p: Point) -> str:
    return ", ".join(name for q, name in ((r.best, "cheapest"), (r.fastest, "fastest")) if q is p)


def front_rows(r: SearchResult) -> list[tuple[object, ...]]:
    """One row per front point, numbered as on the figure (1 = fastest)."""
    rows: list[tuple[object, ...]] = []
    for i, p in enumerate(r.front, 1):
        d = point_json(r.space, p)
        rows.append((i, d["design"], f"{d['tp']}/{d['pp']}/{d['vp']}/{d['micro_batch']}/{d['zero']}",
                     f"{p.days:.1f}", f"{p.run_usd / 1e6:.2f}", f"{p.usd_per_million_tokens:.3f}",
                     f"{p.capex_usd / 1e6:.1f}", f"{p.network_share:.1%}", _mark(r, p), p.bottleneck))
    return rows


def rule_rows(r: SearchResult) -> list[tuple[object, ...]]:
    """What each feasibility rule and constraint removed (``removed_by_rule``), then what is left."""
    n = len(r.points)
    rows: list[tuple[object, ...]] = [(rule, f"{count:,}", f"{count / n:.1%}")
                                      for rule, count in r.removed_by_rule.items()]
    return [*rows, ("feasible (kept)", f"{len(r.feasible):,}", f"{len(r.feasible) / n:.1%}")]


def _axes_rows(values: Sequence[tuple[str, Sequence[object]]]) -> list[tuple[str, str]]:
    return [(name, ", ".join(map(str, dict.fromkeys(vs)))) for name, vs in values]


def search_inputs(r: SearchResult) -> str:
    """The space as searched: token budget, workload, each axis's values and the constraints."""
    s = r.space
    hw = _axes_rows([(f.name, [getattr(d, f.name) for d in s.hardware]) for f in fields(s.hardware[0])])
    par = _axes_rows([(k, [lay[i] for lay in s.layouts]) for i, k in enumerate(PARALLEL_KEYS)])
    limits = [(k, f"{v:g}") for k, v in s.constraints.given().items()] or [("none", "")]
    return ("<h2>Inputs</h2>"
            f"<p><b>space</b> {html.escape(s.name)}: {len(s.hardware):,} hardware designs x {len(s.layouts):,} "
            f"layouts = {s.size:,} configurations, {s.tokens:.3g} tokens</p>"
            f"<p><b>workload</b> {html.escape(s.workload.name)} (its parallel section replaced by each layout)</p>"
            f"{html_table(('field', 'value'), workload_rows(s.workload)[:2])}"
            f"<p><b>hardware axes</b></p>{html_table(('axis', 'values'), hw)}"
            f"<p><b>parallel axes</b></p>{html_table(('axis', 'values'), par)}"
            f"<p><b>constraints</b></p>{html_table(('constraint', 'limit'), limits)}")


def search_page(r: SearchResult) -> str:
    """Summary (cheapest, fastest, what constraints cost), the front figure and table, the rules, the inputs."""
    lines = summary_lines(r)
    head = [x for x in lines if x.startswith(("cheapest", "fastest"))]
    rest = [x for x in lines if x.startswith("constraint ")]
    items = "".join(f"<li>{html.escape(x)}</li>" for x in rest)
    if not r.feasible:
        return html_page(f"slowlink search: {r.space.name}", f'<h2>Result</h2><div class="bottleneck"><b>no feasible '
                     f'design</b><span class="sentence">{html.escape(empty_message(r))}</span></div>'
                     f"<h2>Feasibility</h2>{html_table(('rule', 'configurations removed', 'share'), rule_rows(r))}"
                     f"{search_inputs(r)}")
    fig = figure_block(front_svg(r), f"Run cost against days to train {r.space.tokens:.3g} tokens, before "
                        "failures: every feasible design in grey, the Pareto front numbered and coloured by its "
                        "bottleneck, the cheapest per token (star) and the fastest (diamond) ringed.", "front")
    front = html_table(("#", "design", "tp/pp/vp/mb/zero", "days", "run MUSD", "USD/M tok", "capex MUSD",
                    "net share", "", "bottleneck"), front_rows(r), "metrics")
    body = (f'<h2>Result</h2><div class="bottleneck"><b>{html.escape(lines[0])}</b>'
            + "".join(f'<span class="sentence">{html.escape(x)}</span><br>' for x in head)
            + (f'<ul class="advice">{items}</ul>' if items else "") + "</div>"
            f"<h2>Pareto front</h2>{fig}{front}"
            f"<h2>Feasibility</h2><p>Each configuration is counted under the first rule it breaks.</p>"
            f"{html_table(('rule', 'configurations removed', 'share'), rule_rows(r))}{search_inputs(r)}")
    return html_page(f"slowlink search: {r.space.name}", body)


def write_search(path: Path, r: SearchResult) -> None:
    write_page(path, search_page(r))
