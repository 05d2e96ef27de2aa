"""``ctxbench tools SESSION_OR_FILE [--top N] [--json]``: tokens by tool for a session.

For each tool, largest first: its calls, the tokens of their arguments and of their results, and the
share of the session's history (every message, those a compaction removed included); then the
``--top`` (10) largest tool results with their tool, tokens, position and message id (what a view
links to) and first line. ``SESSION_OR_FILE`` is read as by ``ctxbench diff`` (:mod:`app.cli_diff`).
``--json`` prints one object instead: :meth:`engine.context.attribution.Attribution.to_json` plus
``session``, ``path`` and ``cost`` (the session's cost at litellm's prices: ``cost_usd``, ``calls``,
``unpriced_calls``, ``cost_problem``; null when its calls cannot be read). The text output says the cost
under its first line. Problems are one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.context.attribution import DEFAULT_TOP, Attribution
from engine.usage.costs import RecordsCost


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``tools`` sub-command to ``sub`` (the CLI's subparsers)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "tools", help="tokens by tool (calls and results) for a session, and its largest tool results")
    p.add_argument("path", type=Path, metavar="SESSION_OR_FILE",
                   help="a ctxbench session folder or an agent's session file (Claude Code, Codex, ...)")
    p.add_argument("--top", type=_count, default=DEFAULT_TOP, metavar="N",
                   help=f"how many of the largest tool results to list (default {DEFAULT_TOP})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def cost_line(cost: RecordsCost | None) -> str:
    """The session's cost at litellm's prices ("" when its calls cannot be read here)."""
    if cost is None or not cost.calls:
        return ""
    if cost.usd is None:
        return f"cost: unknown for its {cost.calls} calls ({cost.problem or 'no price'})"
    text = f"cost: ${cost.usd:,.4f} for {cost.calls} calls at litellm's prices"
    if cost.unpriced:
        text += f" (+ {cost.unpriced} calls without a price: {cost.problem or 'no price'})"
    return text


def describe(att: Attribution, label: str, cost: RecordsCost | None = None) -> list[str]:
    """The text output of one attribution."""
    lines = [f"{label}: {att.tool_tokens:,} of {att.history_tokens:,} history tokens are tool calls and results "
             f"({att.tool_share:.1%}), {att.messages} messages (estimated tokens)"]
    if line := cost_line(cost):
        lines.append(line)
    if not att.tools:
        return [*lines, "no tool call or tool result"]
    width = max(12, *(len(t.tool) for t in att.tools))
    lines.append(f"{'tool':{width}} {'calls':>6} {'results':>8} {'arg tokens':>11} {'result tokens':>14} {'share':>7}")
    lines.extend(f"{t.tool:{width}} {t.calls:>6} {t.results:>8} {t.argument_tokens:>11,} {t.result_tokens:>14,} "
                 f"{t.share:>7.1%}" for t in att.tools)
    if att.largest:
        lines.append(f"largest tool results ({len(att.largest)}):")
        lines.extend(f"  {r.tokens:>9,}  {r.tool[:20]:20} #{r.index + 1:<6} {r.message_id}  {r.first_line}"
                     for r in att.largest)
    return lines


def cmd_tools(args: argparse.Namespace, out: Any, error: type[Exception]) -> int:
    """Run the command; ``out`` prints one JSON object (app.cli.Printer); problems raise ``error``."""
    from app.cli_diff import load_history, write_lines
    from engine.context.attribution import attribute
    from engine.sources.model import SourceError
    from engine.usage.costs import session_cost

    history = load_history(args.path, error)
    att = attribute(history, top=args.top)
    try:
        cost = session_cost(args.path)
    except (SourceError, OSError, ValueError):
        cost = None
    if args.json:
        data = att.to_json()
        data.update(session=history.label, path=str(args.path), cost=cost.to_json() if cost else None)
        out(data)
        return 0
    write_lines(describe(att, history.label, cost))
    return 0
