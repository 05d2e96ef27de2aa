"""Dollar cost by tool: what the provider calls that called a tool cost, and what carrying a tool's
calls and results in the prompt cost.

Every figure comes from a call's own usage (as the agent recorded it) priced with litellm's table
(:mod:`engine.usage.prices`: the same per-call cost as :func:`engine.usage.costs.session_cost`, so the
figures add up to the session's total). A call without a price (no usage, a model the table does not
know) adds nothing and is counted as unpriced; a tool all of whose calls are unpriced has ``None``, never $0.

For each tool, two figures:

- ``calls_usd`` — the cost of the provider calls whose response called the tool. A call's response is
  the messages from the first one it produced (:attr:`engine.context.diff.CallPoint.end`) up to the
  first one the next call produced; its cost is split evenly over the tool calls of the assistant
  messages in it (a response calling Read twice and Bash once gives Read 2/3 and Bash 1/3), so the
  tools' figures plus the responses that called no tool (:attr:`ToolCosts.no_tool_usd`) are the session's
  total. Claude Code and OpenHands write one assistant message per call; Codex can put several
  function calls of one response in several messages (all in the range, all counted).
- ``context_usd`` — what carrying the tool's results and its call arguments in the prompt cost: for
  every call whose context held them (``messages[start:end]`` of its :class:`CallPoint`: after a
  compaction, the messages it removed are no longer in a call's context and stop costing), the call's
  input cost (uncached input + cache reads + cache writes at their prices:
  :attr:`engine.usage.prices.CallCost.prompt_usd`) × the tool's tokens in that context / the call's
  prompt tokens as the provider counted them. This is an estimate in two ways: the tool's tokens are
  the history's per-message estimate (the heuristic unless another estimator is given; arguments counted as
  :mod:`engine.context.attribution` counts them) set against the provider's exact prompt, and every prompt
  token of a call is priced at that call's average input price (a result read from the cache and one just
  written cost the same per token within one call). Where the estimated tool tokens of a call exceed its
  provider prompt, the call's shares are scaled down to the prompt (:attr:`ToolCosts.scaled_calls`), so
  the tools' context costs never exceed the input cost. A call whose prompt size is unknown is not shared out.

Which messages a call's context held is what :mod:`engine.context.diff` reads: for an agent's file, the
messages from the last compaction before the call up to the first message it produced (the reader's
``ProviderCall.message_index``); for a session folder, its ``context`` records (``message_id`` or time, and
``message_count``). The compaction summary in front of a context belongs to no tool.

The two figures overlap (a call's input cost is in its ``calls_usd`` and shared out in ``context_usd``):
they are two views of the same dollars, not parts to be added.

:func:`tool_costs` takes the history and one :class:`CallCost` per call of ``history.calls`` (in order);
:func:`price_records` prices ``context`` records (a folder's ``events.jsonl`` or
:func:`engine.usage.costs.call_record` of a reader's calls) as :func:`engine.usage.costs.session_cost` does;
:func:`session_tool_costs` puts the two together for a history and its calls' records (what ``ctxbench tools``
and the window's Tools tab show).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.context.attribution import UNKNOWN_TOOL, argument_counter
from engine.context.diff import History, tool_calls_of
from engine.usage.costs import RecordsCost, SessionCost, price_table, record_cost
from engine.usage.prices import CallCost, PriceTable
from engine.usage.responses import response_ends as response_ends
from engine.usage.responses import response_tools as response_tools


@dataclass(frozen=True)
class ToolCost:
    """The cost of one tool (see the module's doc); a figure is None when every call behind it is unpriced."""

    tool: str
    calls_usd: float | None
    responses: int  # provider calls whose response called the tool
    unpriced_responses: int  # of those, without a price
    context_usd: float | None
    prompts: int  # provider calls whose prompt held the tool's results or arguments
    unpriced_prompts: int  # of those, without a price

    def to_json(self, total: float | None = None) -> dict[str, Any]:
        """The figures; with ``total`` (the session's cost), each one's share of it."""
        return {"tool": self.tool, "calls_cost_usd": _round(self.calls_usd), "responses": self.responses,
                "unpriced_responses": self.unpriced_responses, "calls_cost_share": _share(self.calls_usd, total),
                "context_cost_usd": _round(self.context_usd), "prompts": self.prompts,
                "unpriced_prompts": self.unpriced_prompts, "context_cost_share": _share(self.context_usd, total)}


@dataclass(frozen=True)
class ToolCosts:
    """The cost of each tool of a session (largest ``calls_usd`` first) beside the session's total."""

    tools: tuple[ToolCost, ...]
    total: RecordsCost  # every call of the session, as engine.usage.costs.records_cost sums them
    prompt_usd: float | None  # the input side of every priced call (what context costs are a part of)
    no_tool_usd: float | None  # the priced responses that called no tool (None: all of them unpriced)
    no_tool_responses: int
    scaled_calls: int  # calls whose estimated tool tokens exceeded the provider's prompt (shares scaled down)
    # the whole session's cost (main + subagents + compaction calls; ``total`` is its main part), where known
    session: SessionCost | None = None

    def get(self, tool: str) -> ToolCost | None:
        return next((t for t in self.tools if t.tool == tool), None)

    def of(self, tool: str) -> ToolCost:
        """The cost of ``tool``; a tool no call's response or prompt held (its only results came after the
        last call) costs a known nothing."""
        return self.get(tool) or ToolCost(tool, 0.0, 0, 0, 0.0, 0, 0)

    @property
    def calls_usd(self) -> float | None:
        """The tools' known ``calls_usd`` summed (+ :attr:`no_tool_usd` = the session's total); None when no
        call has a price."""
        return None if self.total.usd is None else sum(t.calls_usd or 0.0 for t in self.tools)

    @property
    def context_usd(self) -> float | None:
        """The tools' known ``context_usd`` summed (≤ :attr:`prompt_usd`); None when no call has a price."""
        return None if self.total.usd is None else sum(t.context_usd or 0.0 for t in self.tools)

    def to_json(self) -> dict[str, Any]:
        total = self.total.usd
        return {"total": self.total.to_json(), "prompt_cost_usd": _round(self.prompt_usd),
                "calls_cost_usd": _round(self.calls_usd), "calls_cost_share": _share(self.calls_usd, total),
                "no_tool_cost_usd": _round(self.no_tool_usd), "no_tool_responses": self.no_tool_responses,
                "context_cost_usd": _round(self.context_usd), "context_cost_share": _share(self.context_usd, total),
                "context_prompt_share": _share(self.context_usd, self.prompt_usd), "scaled_calls": self.scaled_calls,
                "tools": [t.to_json(total) for t in self.tools]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 8)


def _share(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else round(part / whole, 4)


def price_records(records: Iterable[Mapping[str, Any]], table: PriceTable | None = None) -> list[CallCost]:
    """One :class:`CallCost` per ``context`` record (``table`` defaults to :func:`price_table`)."""
    table = table if table is not None else price_table()
    return [record_cost(rec, table) for rec in records]


class _Tally:
    __slots__ = ("calls", "context", "prompts", "responses", "unpriced_prompts", "unpriced_responses")

    def __init__(self) -> None:
        self.calls: float | None = None
        self.context: float | None = None
        self.responses = self.unpriced_responses = self.prompts = self.unpriced_prompts = 0


class _Positions:
    """Where each tool's tokens are in the history: message indexes and running sums, so that a call's
    context (a slice of messages) costs a bisection per tool, not a pass over its messages."""

    def __init__(self, history: History) -> None:
        count_args = argument_counter(history.estimator)
        self.index: dict[str, list[int]] = {}
        self.running: dict[str, list[int]] = {}
        for i, msg in enumerate(history.messages):
            role = msg.get("role")
            if role == "tool":
                self._add(history.tool_of(msg) or UNKNOWN_TOOL, i, history.tokens(i))
            elif role == "assistant" and msg.get("tool_calls"):
                for call_id, name, args in tool_calls_of(msg):
                    self._add(name, i, count_args(call_id, name, args))

    def _add(self, tool: str, index: int, tokens: int) -> None:
        running = self.running.setdefault(tool, [0])
        self.index.setdefault(tool, []).append(index)
        running.append(running[-1] + tokens)

    def tokens(self, start: int, end: int) -> dict[str, int]:
        """Each tool's tokens in ``messages[start:end]`` (tools with none left out)."""
        out = {}
        for tool, index in self.index.items():
            running = self.running[tool]
            n = running[bisect.bisect_left(index, end)] - running[bisect.bisect_left(index, start)]
            if n:
                out[tool] = n
        return out


def tool_costs(history: History, costs: Sequence[CallCost]) -> ToolCosts:
    """The cost of each tool of ``history`` (see the module's doc); ``costs[i]`` is the cost of
    ``history.calls[i]``. ValueError when the two do not have the same length."""
    if len(costs) != len(history.calls):
        raise ValueError(f"{len(costs)} call costs for {len(history.calls)} calls")
    tallies: dict[str, _Tally] = {}
    positions = _Positions(history)
    total: float | None = None
    prompt_total: float | None = None
    no_tool: float | None = None
    no_tool_responses = no_tool_unpriced = scaled = unpriced = 0
    problem = ""
    responses = response_tools(history.messages, [c.end for c in history.calls])
    for call, cost, names in zip(history.calls, costs, responses, strict=True):
        usd = cost.usd
        if usd is None:
            unpriced += 1
            problem = problem or cost.problem
        else:
            total = (total or 0.0) + usd
        # the response: tool calls of the assistant messages it produced (response_tools: the one rule)
        if not names:
            no_tool_responses += 1
            if usd is not None:
                no_tool = (no_tool or 0.0) + usd
            else:
                no_tool_unpriced += 1
        for name in dict.fromkeys(names):
            tally = tallies.setdefault(name, _Tally())
            tally.responses += 1
            if usd is None:
                tally.unpriced_responses += 1
            else:
                tally.calls = (tally.calls or 0.0) + usd * names.count(name) / len(names)
        # the prompt: the tools' calls and results in its context
        held = positions.tokens(call.start, call.end)
        prompt_usd = cost.prompt_usd
        if prompt_usd is not None:
            prompt_total = (prompt_total or 0.0) + prompt_usd
        prompt = call.prompt_tokens
        if not held:
            continue
        if prompt_usd is None or not prompt:
            for tool in held:
                tally = tallies.setdefault(tool, _Tally())
                tally.prompts += 1
                tally.unpriced_prompts += 1
            continue
        carried = sum(held.values())
        if carried > prompt:
            scaled += 1
        per_token = prompt_usd / max(prompt, carried)
        for tool, tokens in held.items():
            tally = tallies.setdefault(tool, _Tally())
            tally.prompts += 1
            tally.context = (tally.context or 0.0) + tokens * per_token
    for tally in tallies.values():  # a tool no call priced or unpriced touched: a known $0
        if tally.calls is None and not tally.unpriced_responses:
            tally.calls = 0.0
        if tally.context is None and not tally.unpriced_prompts:
            tally.context = 0.0
    if no_tool is None and not no_tool_unpriced:
        no_tool = 0.0
    tools = sorted((ToolCost(name, t.calls, t.responses, t.unpriced_responses, t.context, t.prompts,
                             t.unpriced_prompts) for name, t in tallies.items()),
                   key=lambda t: (-(t.calls_usd or 0.0), -(t.context_usd or 0.0), t.tool))
    return ToolCosts(tools=tuple(tools), total=RecordsCost(total, len(costs), unpriced, problem),
                     prompt_usd=prompt_total, no_tool_usd=no_tool, no_tool_responses=no_tool_responses,
                     scaled_calls=scaled)


def session_tool_costs(history: History, records: Sequence[Mapping[str, Any]],
                       table: PriceTable | None = None) -> ToolCosts | None:
    """The cost of each tool of ``history`` from its calls' ``context`` records (one per call of
    ``history.calls``, in order: :func:`engine.usage.costs.folder_records` for a session folder); None when
    there is no record or they are not one per call (nothing to share out)."""
    if not records or len(records) != len(history.calls):
        return None
    return tool_costs(history, price_records(records, table))


__all__ = ["ToolCost", "ToolCosts", "price_records", "response_ends", "response_tools", "session_tool_costs",
           "tool_costs"]
