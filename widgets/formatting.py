"""Text helpers shared by the widgets: tool-call arguments the model wrote are untrusted text."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from engine.model.timeline import TimelineCall
from engine.usage.costs import usd_text

# json.loads raises RecursionError on deeply nested input, besides ValueError/TypeError
_BAD_JSON = (ValueError, TypeError, RecursionError)


def parse_arguments(arguments: str) -> Any:
    """The JSON value of a tool call's arguments, or None when they are not JSON."""
    try:
        return json.loads(arguments)
    except _BAD_JSON:
        return None


def pretty_arguments(arguments: str) -> str:
    """Arguments as indented JSON; the text as it is when it is not JSON."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except _BAD_JSON:
        return arguments


def local_datetime(ts: Any) -> datetime | None:
    """An ISO-8601 timestamp as a datetime in local time (naive ones as they are); None if not one."""
    if not isinstance(ts, str) or not ts:
        return None
    try:
        dt = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return dt.astimezone() if dt.tzinfo is not None else dt


def local_time_text(ts: Any, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """An ISO timestamp in local time as ``fmt``; an unparsable string is returned as it is."""
    dt = local_datetime(ts)
    if dt is None:
        return ts if isinstance(ts, str) else ""
    return dt.strftime(fmt)


def format_usd(value: float) -> str:
    """"$0.0670" below a dollar, "$12.34" from a dollar on (:func:`engine.usage.costs.usd_text`)."""
    return usd_text(value)


def cost_lines(call: TimelineCall) -> list[str]:
    """A timeline column's cost lines: its price (litellm's prices) or why it is unknown, and the agent's own
    cost of the call where its record has one; [] when the call was not priced."""
    lines = []
    if call.price is not None and call.price.usd is not None:
        lines.append(f"Cost: {format_usd(call.price.usd)} (litellm's prices)")
    elif call.price is not None:
        lines.append(f"Cost: unknown ({call.price.problem or 'no price'})")
    if call.agent_cost_usd is not None:
        lines.append(f"The agent's own cost: {format_usd(call.agent_cost_usd)}")
    return lines


def cost_tooltip(total: float | None, by_model: dict[str, float] | None = None) -> str:
    """The agent's own cost (from its cost records), total then per model, largest first; "" when unknown."""
    if total is None:
        return ""
    lines = [f"The agent's own cost, from its cost records: {format_usd(total)}"]
    lines += [f"  {m}: {format_usd(v)}" for m, v in sorted((by_model or {}).items(), key=lambda kv: -kv[1])]
    return "\n".join(lines)
