"""``ctxbench tools SESSION_OR_FILE [--top N] [--json]``: tokens and dollars by tool for a session.

For each tool, largest first: its calls, the tokens of their arguments and of their results, the
share of the session's history (every message, those a compaction removed included), and two costs at
litellm's prices (:mod:`engine.usage.tool_costs`): ``calls $`` — what the provider calls whose response
called the tool cost (a response calling several tools is split evenly over its tool calls, so the
tools plus the responses without a tool call add up to the session's total) — and ``context $`` — what
carrying the tool's calls and results in later prompts cost (each call's input cost × the tool's
estimated tokens in its context / its provider prompt tokens; a compaction stops the messages it removed
from costing). An ``(all tools)`` row sums them, and a line sets them against the session's total and its
input cost (the two overlap — a call's input is in both — and are not to be added). ``?`` is a cost
that cannot be known (no usage recorded, no price for the model), never $0.
Then the ``--top`` (10) largest tool results with their tool, tokens, position and message id (what a view
links to) and first line. ``SESSION_OR_FILE`` is read as by ``ctxbench diff`` (:mod:`app.cli_diff`),
once: the calls' figures come from the same read.

``--json`` prints one object instead: :meth:`engine.context.attribution.Attribution.to_json` with each
tool's cost fields (:meth:`engine.usage.tool_costs.ToolCost.to_json`: ``calls_cost_usd``, ``responses``,
``calls_cost_share``, ``context_cost_usd``, ``prompts``, ``context_cost_share`` — shares of the session's
total — and the unpriced counts; null when the calls cannot be priced here), ``tool_costs`` (the totals:
:meth:`engine.usage.tool_costs.ToolCosts.to_json` without its tools), plus ``session``, ``path`` and
``cost`` (the session's cost at litellm's prices, :meth:`engine.usage.costs.SessionCost.to_json`: the total
``cost_usd``, ``calls``, ``unpriced_calls``, ``cost_problem``, each part — ``main``, ``subagents``,
``compaction`` — and ``agent_cost_usd`` with ``difference_usd``; null when it has no calls). The text output says
the cost, its parts and the agent's own under its first line; the costs by tool share out the main calls.
Problems are one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.context.attribution import DEFAULT_TOP, Attribution
from engine.model.text import printable
from engine.usage.costs import SessionCost, usd_text
from engine.usage.tool_costs import ToolCost, ToolCosts


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


def cost_line(session: SessionCost | None) -> str:
    """The session's cost at litellm's prices, its parts (main, subagents, compaction) and the agent's own ("" when
    its calls cannot be read here)."""
    cost = session.total if session is not None else None
    if session is None or cost is None or not cost.calls:
        return ""
    if cost.usd is None:
        text = f"cost: unknown for its {cost.calls} calls ({printable(cost.problem or 'no price')})"
    else:
        text = f"cost: {usd_text(cost.usd)}{'+' if cost.partial else ''} for {cost.calls} calls at litellm's prices"
        if cost.unpriced:
            text += f" (+ {cost.unpriced} calls without a price: {printable(cost.problem or 'no price')})"
    text += f" — {session.breakdown()}"
    if session.agent_usd is not None:
        text += f"; the agent's own cost {usd_text(session.agent_usd)}"
    return text


def usd(value: float | None) -> str:
    """A dollar figure as the table shows it ("?" when unknown)."""
    return "?" if value is None else f"${value:,.4f}"


def _pct(part: float | None, whole: float | None) -> str:
    return "?" if part is None or not whole else f"{part / whole:.1%}"


def totals_line(costs: ToolCosts) -> str:
    """The tools' costs summed, beside the session's total and its input side."""
    total = costs.total.usd
    if total is None:
        return f"cost by tool: unknown (no call has a price: {printable(costs.total.problem or 'no price')})"
    plus = "+" if costs.total.unpriced else ""
    return (f"cost by tool: responses that called a tool {usd(costs.calls_usd)} ({_pct(costs.calls_usd, total)} of "
            f"the main calls' {usd(total)}{plus}; {costs.no_tool_responses} without a tool call "
            f"{usd(costs.no_tool_usd)}), "
            f"tool calls and results carried in prompts {usd(costs.context_usd)} "
            f"({_pct(costs.context_usd, total)} of the total, {_pct(costs.context_usd, costs.prompt_usd)} of the "
            f"{usd(costs.prompt_usd)} input cost; estimated)")


def describe(att: Attribution, label: str, cost: SessionCost | None = None,
             costs: ToolCosts | None = None) -> list[str]:
    """The text output of one attribution (``costs``: the cost columns and their totals). Names and text from the
    session (its label, tool names, message ids, first lines) are printed with control characters escaped."""
    lines = [f"{printable(label)}: {att.tool_tokens:,} of {att.history_tokens:,} history tokens are tool calls and "
             f"results ({att.tool_share:.1%}), {att.messages} messages (estimated tokens)"]
    if line := cost_line(cost):
        lines.append(line)
    if not att.tools:
        return [*lines, "no tool call or tool result"]
    priced = costs is not None and costs.total.calls > 0
    names = {t.tool: printable(t.tool) for t in att.tools}
    width = max(12, *(len(name) for name in names.values()))
    head = f"{'tool':{width}} {'calls':>6} {'results':>8} {'arg tokens':>11} {'result tokens':>14} {'share':>7}"
    lines.append(head + (f" {'calls $':>10} {'context $':>10}" if priced else ""))
    for t in att.tools:
        row = (f"{names[t.tool]:{width}} {t.calls:>6} {t.results:>8} {t.argument_tokens:>11,} {t.result_tokens:>14,} "
               f"{t.share:>7.1%}")
        if costs is not None and priced:
            tc = costs.of(t.tool)
            row += f" {usd(tc.calls_usd):>10} {usd(tc.context_usd):>10}"
        lines.append(row)
    if costs is not None and priced:
        lines.append(f"{'(all tools)':{width}} {sum(t.calls for t in att.tools):>6} "
                     f"{sum(t.results for t in att.tools):>8} {sum(t.argument_tokens for t in att.tools):>11,} "
                     f"{sum(t.result_tokens for t in att.tools):>14,} {att.tool_share:>7.1%} "
                     f"{usd(costs.calls_usd):>10} {usd(costs.context_usd):>10}")
        lines.append(totals_line(costs))
    if att.largest:
        lines.append(f"largest tool results ({len(att.largest)}):")
        lines.extend(f"  {r.tokens:>9,}  {printable(r.tool)[:20]:20} #{r.index + 1:<6} {printable(r.message_id)}  "
                     f"{printable(r.first_line)}"
                     for r in att.largest)
    return lines


def to_json(att: Attribution, costs: ToolCosts | None) -> dict[str, Any]:
    """:meth:`Attribution.to_json` with each tool's cost fields (:meth:`ToolCost.to_json`; null when the
    calls cannot be priced here) and ``tool_costs``: the totals (:meth:`ToolCosts.to_json` without its tools)."""
    data = att.to_json()
    total = costs.total.usd if costs is not None else None
    for tool in data["tools"]:
        name = tool["tool"]
        tc = ToolCost(name, None, 0, 0, None, 0, 0) if costs is None else costs.of(name)
        tool.update(tc.to_json(total))
    data["tool_costs"] = None if costs is None else {k: v for k, v in costs.to_json().items() if k != "tools"}
    return data


def cmd_tools(args: argparse.Namespace, out: Any, error: type[Exception]) -> int:
    """Run the command; ``out`` prints one JSON object (app.cli.Printer); problems raise ``error``."""
    from app.cli_diff import load_session, write_lines
    from engine.context.attribution import attribute
    from engine.usage.tool_costs import session_tool_costs

    history, records, cost = load_session(args.path, error)
    att = attribute(history, top=args.top)
    cost = cost if cost is not None and cost.total.calls else None
    costs = session_tool_costs(history, records)
    if args.json:
        data = to_json(att, costs)
        data.update(session=history.label, path=str(args.path), cost=cost.to_json() if cost else None)
        out(data)
        return 0
    write_lines(describe(att, history.label, cost, costs))
    return 0
