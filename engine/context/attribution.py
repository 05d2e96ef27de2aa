"""Per-tool attribution: the tokens each tool put into a session's history.

For every tool name: how many times it was called, the tokens of those calls' arguments (the
assistants' ``tool_calls``: id, type, name and arguments, counted as
:func:`engine.context.tokens.estimate_message_tokens` counts them), the tokens of their results (the
``tool`` messages that answer them, counted as whole messages, as the timeline draws them), and the
share of the session's history (every message, those a compaction removed included) they make up.
The largest tool results come with their message id and position so that a view can link to them.

:func:`attribute` reads a :class:`engine.context.diff.History`; each message is counted once (the
history memoises it), so a session costs one pass over its messages.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.context.diff import History, first_line, tool_calls_of
from engine.context.tokens import Estimator, HeuristicEstimator

UNKNOWN_TOOL = "(unknown)"  # a tool result whose call is not in the history
DEFAULT_TOP = 10


@dataclass(frozen=True)
class ToolResult:
    """One tool result, a link to its message."""

    message_id: str
    index: int  # position in History.messages
    tool: str
    tokens: int
    first_line: str

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "index": self.index, "tool": self.tool, "tokens": self.tokens,
                "first_line": self.first_line}


@dataclass(frozen=True)
class ToolTotals:
    """What one tool put into the history."""

    tool: str
    calls: int
    results: int
    argument_tokens: int
    result_tokens: int
    share: float  # (arguments + results) / the history's tokens; 0.0 for an empty history

    @property
    def tokens(self) -> int:
        return self.argument_tokens + self.result_tokens

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "calls": self.calls, "results": self.results,
                "argument_tokens": self.argument_tokens, "result_tokens": self.result_tokens,
                "tokens": self.tokens, "share": round(self.share, 4)}


@dataclass(frozen=True)
class Attribution:
    """Tokens by tool for one session, largest first, and its largest tool results."""

    tools: tuple[ToolTotals, ...]
    largest: tuple[ToolResult, ...]
    history_tokens: int  # every message of the session
    messages: int

    @property
    def tool_tokens(self) -> int:
        return sum(t.tokens for t in self.tools)

    @property
    def tool_share(self) -> float:
        return self.tool_tokens / self.history_tokens if self.history_tokens else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"type": "tools", "messages": self.messages, "history_tokens": self.history_tokens,
                "tool_tokens": self.tool_tokens, "tool_share": round(self.tool_share, 4),
                "tools": [t.to_json() for t in self.tools], "largest": [r.to_json() for r in self.largest]}


def call_tokens(call_id: str, name: str, arguments: str) -> int:
    """Tokens of one tool call inside its assistant message (id + "function" + name + arguments),
    by the heuristic's ratio (the message's own overhead is not a call's)."""
    return (len(call_id) + len("function") + len(name) + len(arguments)) * 2 // 5


@dataclass
class _Tally:
    calls: int = 0
    results: int = 0
    arguments: int = 0
    result_tokens: int = 0


def argument_counter(estimator: Estimator) -> Callable[[str, str, str], int]:
    """How one tool call's arguments are counted with ``estimator``: :func:`call_tokens` for the heuristic,
    else the estimator on the call's text (also :mod:`engine.usage.tool_costs`)."""
    if isinstance(estimator, HeuristicEstimator):
        return call_tokens
    return lambda call_id, name, args: estimator.text(call_id + "function" + name + args)


def attribute(history: History, top: int = DEFAULT_TOP) -> Attribution:
    """Tokens by tool over ``history``'s messages and its ``top`` largest tool results.

    Argument tokens: :func:`call_tokens` with the heuristic estimator, else the history's estimator on
    the call's text."""
    count_args = argument_counter(history.estimator)
    tallies: dict[str, _Tally] = {}
    results: list[tuple[int, int]] = []  # (tokens, -index) of every tool result
    total = 0
    for index, msg in enumerate(history.messages):
        tokens = history.tokens(index)
        total += tokens
        role = msg.get("role")
        if role == "assistant":
            for call_id, name, args in tool_calls_of(msg):
                tally = tallies.setdefault(name, _Tally())
                tally.calls += 1
                tally.arguments += count_args(call_id, name, args)
        elif role == "tool":
            tally = tallies.setdefault(history.tool_of(msg) or UNKNOWN_TOOL, _Tally())
            tally.results += 1
            tally.result_tokens += tokens
            results.append((tokens, -index))
    tools = tuple(sorted(
        (ToolTotals(name, t.calls, t.results, t.arguments, t.result_tokens,
                    (t.arguments + t.result_tokens) / total if total else 0.0) for name, t in tallies.items()),
        key=lambda t: (-t.tokens, t.tool)))
    largest = tuple(_result(history, -neg) for _tokens, neg in heapq.nlargest(max(0, top), results))
    return Attribution(tools=tools, largest=largest, history_tokens=total, messages=len(history.messages))


def _result(history: History, index: int) -> ToolResult:
    msg = history.messages[index]
    return ToolResult(message_id=str(msg.get("id") or ""), index=index, tool=history.tool_of(msg) or UNKNOWN_TOOL,
                      tokens=history.tokens(index), first_line=first_line(msg))
