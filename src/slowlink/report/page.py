"""The parts every ``--html`` page is built of: a matplotlib figure rendered to inline SVG with its ids
salted, a figure block, an escaped table, the page shell with its inline CSS, the inputs section, and
writing the page. Nothing here runs a model."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slowlink import __version__, units
from slowlink.errors import SpecError

if TYPE_CHECKING:
    from slowlink.spec.cluster import Cluster
    from slowlink.spec.workload import Workload

_NUMBER = re.compile(r"^[+-]?[0-9][0-9.,]*\s*(%|x|s)?( ?/ ?[0-9][0-9.,]*)?$")  # 1.5 s, 12%, 0.3 / 0.9, 8/10
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:1200px;
color:#222;padding:0 1rem;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.meta{color:#666;font-size:.85rem}
.bottleneck{background:#fff4e5;border-left:4px solid #e8a33d;padding:.6rem 1rem;margin:.6rem 0}
.bottleneck b{display:block}ul.advice{margin:.3rem 0 0 0}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .6rem;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child,td.w{text-align:left}
figure{margin:1rem 0}figure svg{max-width:100%;height:auto}figcaption{color:#555;font-size:.9rem}
"""



@contextmanager
def new_figure(salt: str, width_in: float, height_in: float, ncols: int = 1, nrows: int = 1,
            **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """A matplotlib figure (Agg, no display) whose SVG ids are salted per figure, so they stay unique.

    Yields the figure and its axes row by row; ``subplots`` goes to ``plt.subplots`` (``sharex``...).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "font.size": 10}):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width_in, height_in), squeeze=False, **subplots)
        try:
            yield fig, list(axes.flat)
        finally:
            plt.close(fig)


def figure_svg(fig: Any, prefix: str) -> str:
    """The figure as an inline <svg> element (XML prolog and DOCTYPE dropped), every id prefixed.

    matplotlib numbers its groups per figure (``figure_1``, ``patch_1``); two figures on one page would
    repeat those ids, so each id and each reference to one (``url(#..)``, ``href="#.."``) gets ``prefix``.
    """
    buf = io.StringIO()
    fig.tight_layout()
    fig.savefig(buf, format="svg")
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', text)
    text = re.sub(r'url\(#([^)]+)\)', rf"url(#{prefix}-\1)", text)
    return re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', text)


def figure_block(svg: str, caption: str, fig_id: str) -> str:
    return (f'<figure id="{fig_id}" class="plot">{svg}<figcaption>{html.escape(caption)}</figcaption>'
            "</figure>")


def _cell(value: object) -> str:
    """A <td>, numbers right-aligned (the default) and words left-aligned."""
    text = str(value)
    cls = "" if _NUMBER.match(text) else ' class="w"'
    return f"<td{cls}>{html.escape(text)}</td>"


def html_table(header: Sequence[str], rows: Sequence[Sequence[object]], cls: str = "") -> str:
    """An HTML table; every cell escaped."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def html_page(title: str, body: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p class=\"meta\">slowlink {__version__}, {stamp}</p>"
            f"{body}</body></html>\n")


def write_page(path: Path, page: str) -> None:
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"--html ({str(path)!r}): cannot write: {exc.strerror}") from None


# ---- inputs -------------------------------------------------------------------------------------------

def cluster_rows(c: Cluster) -> list[tuple[str, str]]:
    """The fields that set a cluster's speed, in words."""
    f = c.fabric
    over = ":".join(f"{o:g}" for o in f.oversubscription)
    return [("nodes x GPUs", f"{c.nodes} x {c.gpus_per_node} {c.gpu.name} = {c.gpus}"),
            ("scale-up", f"{c.scale_up.link.name}, {c.scale_up.domain_gpus} GPUs per domain, "
                         f"{c.scale_up.bw_bytes_s / units.GB:.0f} GB/s per GPU"),
            ("compute NICs", f"{c.compute_nics.per_node} x {c.compute_nics.speed_bytes_s / units.Gbit:.0f} Gbit/s "
                             f"per node ({f.transport.name})"),
            ("fabric", f"{f.topology}, {f.tiers} tiers, oversubscription {over}, routing {f.routing}")]


def workload_rows(w: Workload) -> list[tuple[str, str]]:
    """Model, batch and parallel layout in words."""
    m, t, p = w.model, w.training, w.parallel
    moe = f", MoE {m.moe.experts} experts top-{m.moe.top_k}" if m.moe else ""
    return [("model", f"{m.name}: {m.layers} layers, hidden {m.hidden}, seq {m.seq_len}{moe}"),
            ("batch", f"global {t.global_batch}, micro {t.micro_batch}, {t.precision}, recompute {t.recompute}"),
            ("parallel", f"tp {p.tp}, pp {p.pp}, dp {p.dp or 'auto'}, cp {p.cp}, ep {p.ep}, vp {p.vp}, zero {p.zero}")]


def inputs_block(clusters: Sequence[Cluster], w: Workload | None) -> str:
    parts = ["<h2>Inputs</h2>"]
    if w is not None:
        parts.append(f"<p><b>workload</b> {html.escape(w.name)}</p>" + html_table(("field", "value"), workload_rows(w)))
    for c in clusters:
        parts.append(f"<p><b>cluster</b> {html.escape(c.name)}</p>" + html_table(("field", "value"), cluster_rows(c)))
    return "".join(parts)
