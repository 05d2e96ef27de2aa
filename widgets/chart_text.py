"""What the context chart (:mod:`widgets.context_chart`) says in words and draws across: a call's tooltip, the
timeline's header and legend (HTML), and the window / threshold lines across the chart. Functions of the data they
are given (the timeline's columns, the palette, the cache layer's texts when it is shown), so that the chart draws
and these say."""

from __future__ import annotations

import math

import numpy as np

from engine.context.cache import cache_miss_line
from widgets.chart_marks import subagent_color
from widgets.chart_parts import TIMELINE_REGIONS, Timeline
from widgets.formatting import cost_lines
from widgets.theme import REGION_LABELS, Palette, format_tokens

FAR = 1e6  # the window and threshold lines run to x = ±FAR: across the chart, however it is panned


def column_tooltip(tl: Timeline, index: int, cache_lines: list[str] | None) -> str:
    """Call ``index``'s tooltip: its regions and how each was counted, the estimate against the provider's figure,
    the cache (``cache_lines``: the cache view's lines when it is shown; else the figures and the provider's own
    cache-miss reason), the window and the cost."""
    call = tl.records[index]
    rec, snap = call.record, call.snapshot
    lines = [f"Call {index + 1}" + (f" · {snap.ts}" if snap.ts else "")]
    if snap.model:
        lines.append(f"model {snap.model}")
    accuracy = snap.region_accuracy()
    for r, key in enumerate(TIMELINE_REGIONS):
        lines.append(f"{REGION_LABELS[key]}: {format_tokens(tl.values[r, index])} ({accuracy[key]})")
    est = tl.total(index)
    lines.append(f"Estimate: {format_tokens(est)} ({snap.accuracy or 'estimated'})")
    prov = tl.provider[index]
    if not math.isnan(prov):
        diff = (est - prov) / prov * 100 if prov else 0.0
        lines.append(f"Reported by provider: {format_tokens(prov)} (estimate {diff:+.1f}%)")
        if call.prompt_unlike_file:  # the provider counted what the file does not hold
            lines.append(f"Different basis: {call.prompt_unlike_file}")
    else:
        lines.append("Reported by provider: —")
    cached = [f"{label} {format_tokens(value)}" for value, label in
              ((rec.cache_read_tokens, "read"), (rec.cache_write_tokens, "written")) if value is not None]
    if cache_lines is not None:  # (a provider's cache-miss reason among them: the re-write's cause)
        lines += cache_lines
    else:
        if cached:
            lines.append("Cache: " + ", ".join(cached))
        if miss := cache_miss_line(call.to_json()):  # the provider's own reason the cache missed (the engine's words)
            lines.append(miss)
    if snap.prefix_source == "inferred" and call.prefix_tokens is not None:
        lines.append(f"System prompt + tools (inferred): {format_tokens(call.prefix_tokens)}")
    if not math.isnan(tl.raw[index]):
        lines.append(f"Raw estimate: {format_tokens(tl.raw[index])}")
    if not math.isnan(tl.window[index]):
        lines.append(f"Window: {format_tokens(tl.window[index])}")
    lines += cost_lines(call)
    return "\n".join(lines)


def timeline_header(tl: Timeline, compactions: int, pal: Palette, *, next_request: bool,
                    cache_header: str | None) -> str:
    """The line above the timeline (HTML): the calls, the last estimate against the provider's figure (or, with the
    cache view shown, ``cache_header``), the compactions; with no call yet, what the lone pale column is."""
    n, m = tl.n, compactions
    if n == 0:
        return ("No calls yet" + (f" · <span style='color:{pal.muted}'>the pale column: the next request, "
                                  f"estimated</span>" if next_request else ""))
    est = tl.total(n - 1)
    prov = tl.provider[n - 1]
    text = f"{n:,} call{'s' if n != 1 else ''}"
    if cache_header is not None:  # one line: the cache's figures instead of the estimate's
        text += " · " + cache_header
        if not math.isnan(prov):
            text += f" · last prompt <b>{format_tokens(prov)}</b>"
        return text + (f" · {m} compaction{'s' if m != 1 else ''}" if m else "")
    text += f" · last estimate <b>{format_tokens(est)}</b>"
    if not math.isnan(prov):
        diff = (est - prov) / prov * 100 if prov else 0.0
        text += f" · reported <b>{format_tokens(prov)}</b> ({diff:+.1f}%)"
    else:
        text += f" · <span style='color:{pal.muted}'>no provider report</span>"
    if m:
        text += f" · {m} compaction{'s' if m != 1 else ''}"
    return text


def timeline_legend(pal: Palette, *, subagents: bool, cache_legend: str | None) -> str:
    """The legend under the timeline (HTML): its lines and marks, or ``cache_legend`` with the cache view shown;
    the subagent mark when there are some."""
    sub = (f" &nbsp; <span style='white-space:nowrap'><span style='color:{subagent_color(pal)}'>◆</span>"
           "&nbsp;subagent</span>") if subagents else ""
    if cache_legend is not None:
        return cache_legend + sub
    items = [
        (pal.provider, "━━", "reported by provider"),
        (pal.estimate, "┈┈", "raw estimate"),
        (pal.marker, "▼", "compaction"),
        (pal.limit, "╌╌", "window"),
        (pal.threshold, "╌╌", "threshold"),
    ]
    return " &nbsp; ".join(
        f"<span style='white-space:nowrap'><span style='color:{c}'>{g}</span>&nbsp;{t}</span>" for c, g, t in items
    ) + sub


def across(values: np.ndarray, after: float) -> tuple[np.ndarray, np.ndarray]:
    """A per-call line (window, threshold) drawn across the chart: from x = −FAR at the first call's value, a
    step over each column (x ± 0.5; NaN: a gap), then on at ``after`` (the next request's; NaN: the last call's)
    to x = FAR."""
    n = len(values)
    if math.isnan(after):
        after = float(values[-1]) if n else math.nan
    first = float(values[0]) if n else after
    x = np.empty(2 * n + 3)
    y = np.empty(2 * n + 3)
    x[0], y[0] = -FAR, first
    centres = np.arange(1, n + 1, dtype=float)
    x[1 : 2 * n + 1 : 2] = centres - 0.5
    x[2 : 2 * n + 2 : 2] = centres + 0.5
    y[1 : 2 * n + 1 : 2] = values
    y[2 : 2 * n + 2 : 2] = values
    x[-2], y[-2] = n + 0.5, after
    x[-1], y[-1] = FAR, after
    return x, y


def thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same line with fewer points: a point between two neighbours at its own y (inside a level run of
    :func:`across`'s line: the window and the threshold rarely change) left out, as it lies on the segment that
    joins them (x only grows). Drawn alike, dashes included (a pen's dashes run on over a path's points): a
    line of four points instead of 10,000 at 5,000 calls. The first and last segments (from −FAR, on to FAR)
    are not joined to the ones on the columns: a dashed segment of more than some thousands of dashes is drawn
    solid by Qt, and the columns' part would be."""
    if len(y) < 5:
        return x, y
    inner = (y[1:-1] == y[:-2]) & (y[1:-1] == y[2:])  # (NaN is equal to nothing: gaps and their ends kept)
    keep = np.concatenate(([True], ~inner, [True]))
    keep[[1, -2]] = True  # the segments from −FAR and to FAR kept apart: Qt draws a dashed line that long solid
    return x[keep], y[keep]


__all__ = ["FAR", "across", "column_tooltip", "thin", "timeline_header", "timeline_legend"]
