"""What the usage index's rows need of a read session, kept apart from :mod:`engine.usage.costs` and
:mod:`engine.usage.tool_costs` (which import the event records, the archive and the diff) so that a first index's
worker processes import only this: every call a session paid for (:func:`session_parts`) and the tool calls of each
call's response (:func:`response_tools`, the rule ``ctxbench tools`` splits a response's cost by). Both modules give
these names on."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Literal

from engine.model.messages import Message, tool_calls_of
from engine.sources.model import ProviderCall, SourceSession

PartKind = Literal["main", "task", "compaction"]


def session_parts(src: SourceSession) -> Iterator[tuple[str, PartKind, SourceSession, ProviderCall]]:
    """Every call a session paid for, once: (subagent id, kind, the part it belongs to, the call) — the main
    session's calls (``""``, ``main``), each subagent's (its id, ``task``; Claude Code's ``agent-acompact`` file:
    ``compaction``), and a compaction's own call that is no call of any part (OpenCode's summary message, Claude
    Code's worked out from ``cost-state`` lines: ``compaction``). What the usage index makes its rows of."""
    parts: list[tuple[str, PartKind, SourceSession]] = [("", "main", src)]
    parts += [(sub.id, sub.kind, sub.session) for sub in src.subagents if sub.session is not None]
    in_calls = {id(c) for _, _, part in parts for c in part.calls}
    for sub_id, kind, part in parts:
        for call in part.calls:
            yield sub_id, kind, part, call
        for comp in part.compactions:
            if comp.cost is not None and id(comp.cost) not in in_calls:
                yield sub_id, "compaction", part, comp.cost


def response_ends(ends: Sequence[int], count: int) -> list[int]:
    """For each call (``ends[i]``: the first message it produced), where its response ends: the first message of the
    next call that produced one at or after this call's (``count``, the number of messages, after the last)."""
    ordered = sorted(set(ends))
    out = []
    for i, start in enumerate(ends):
        nxt = ends[i + 1] if i + 1 < len(ends) else count
        if nxt < start:  # out of order (a call that kept no message): the next larger first message
            k = bisect.bisect_right(ordered, start)
            nxt = ordered[k] if k < len(ordered) else count
        out.append(nxt)
    return out


def response_tools(messages: Sequence[Message], ends: Sequence[int]) -> list[list[str]]:
    """The rule "a response's cost is split evenly over its tool calls", its one definition: for each call
    (``ends[i]``: the first message it produced, clamped to the messages), the name of every tool call its
    response made, in order and repeated (Read twice and Bash once: ``["Read", "Read", "Bash"]``, Read's share
    2/3). The response is the assistant messages from ``ends[i]`` up to :func:`response_ends` (Codex can put
    one response's function calls in several messages: all counted). :func:`tool_costs` splits a call's cost
    by it, and the usage index's call rows hold it (:func:`engine.usage.rows.rows_of`, the ``tools`` column
    whose rollup gives each item ``cost / len(tools)``): ``ctxbench tools`` and the Usage view agree."""
    n = len(messages)
    clamped = [max(0, min(end, n)) for end in ends]
    return [[name for msg in messages[start:stop] if msg.get("role") == "assistant"
             for _id, name, _args in tool_calls_of(msg)]
            for start, stop in zip(clamped, response_ends(clamped, n), strict=True)]
