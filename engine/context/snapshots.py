"""The one snapshot builder: every :class:`ContextSnapshot` is made by :func:`build_snapshot`.

:func:`snapshot_of` — the next request of a session (or of other messages / another summary), the
way the agent, the compactor, the app and the CLI ask for it; :func:`build_snapshot` — the regions
from raw per-region estimates, calibrated when a provider report exists (imports call it directly,
with the counts of a log's own calls).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from engine.context.calibration import Calibrator, IdSpan
from engine.context.tokens import Estimator
from engine.context.window import window_for
from engine.model.messages import Message, now_iso
from engine.model.snapshot import CALIBRATED, ESTIMATED, EXACT, ContextSnapshot, WindowInfo
from engine.store.config import Settings


class CountedHistory(Protocol):
    """What :func:`snapshot_of` reads of a session (:class:`engine.context.conversation.Session`)."""

    estimator: Estimator
    calibrator: Calibrator
    messages: list[Message]

    @property
    def summary(self) -> str: ...

    @property
    def system_prompt(self) -> str: ...

    def token_counts(
        self, estimator: Estimator | None = None, messages: Sequence[Message] | None = None
    ) -> list[int]: ...


def snapshot_of(
    session: CountedHistory,
    settings: Settings,
    estimator: Estimator | None = None,
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    draft: str = "",
    *,
    window: WindowInfo | int | None = None,
    messages: Sequence[Message] | None = None,
    summary: str | None = None,
    provider_prompt_tokens: int | None = None,
    call_index: int | None = None,
    calibrated: bool = True,
    model: str | None = None,
    prefix_tokens: int | tuple[int, int] | None = None,
) -> ContextSnapshot:
    """The regions of the next request of ``session`` (:meth:`engine.context.conversation.Session.snapshot`)."""
    est = estimator or session.estimator
    msgs = session.messages if messages is None else list(messages)
    counts = session.token_counts(est, messages)
    system = session.system_prompt if system_prompt is None else system_prompt
    if isinstance(prefix_tokens, tuple):
        system_tokens, tools_tokens = prefix_tokens  # both as another agent's file holds them
    elif prefix_tokens is not None:
        system_tokens, tools_tokens = prefix_tokens, 0
    else:
        system_tokens, tools_tokens = (est.text(system) if system else 0) + est.framing(), est.tools(tools)
    return build_snapshot(
        window=window_for(settings, window),
        system_tokens=system_tokens,
        summary_tokens=est.text(session.summary if summary is None else summary),
        tools_tokens=tools_tokens,
        history=msgs,
        history_counts=counts,
        estimator_name=est.name,
        threshold_ratio=settings.compact_threshold_ratio,
        calibrator=session.calibrator if calibrated else None,
        provider_prompt_tokens=provider_prompt_tokens,
        draft_tokens=est.text(draft) if draft else 0,
        model=settings.model if model is None else model,
        ts=now_iso(),
        call_index=call_index,
        exact_system=prefix_tokens is not None,
        exact_tools=isinstance(prefix_tokens, tuple),
    )


def _scale_parts(parts: list[int], target: int) -> list[int]:
    """Scale non-negative integers so they add up to ``target`` (largest-remainder rounding)."""
    total = sum(parts)
    if total <= 0 or target <= 0:
        return [0 for _ in parts] if target <= 0 else parts[:]
    exact = [p * target / total for p in parts]
    floors = [int(x) for x in exact]
    rest = target - sum(floors)
    order = sorted(range(len(parts)), key=lambda i: exact[i] - floors[i], reverse=True)
    for i in order[:rest]:
        floors[i] += 1
    return floors


def scaled_sum(total: int, target: int) -> int:
    """``sum(_scale_parts(parts, target))`` for parts adding up to ``total`` (all non-negative)."""
    if target <= 0:
        return 0
    return total if total <= 0 else target


def build_snapshot(
    *,
    window: WindowInfo,
    system_tokens: int,
    summary_tokens: int,
    tools_tokens: int,
    history: Sequence[Message],
    history_counts: Sequence[int],
    estimator_name: str,
    threshold_ratio: float,
    calibrator: Calibrator | None = None,
    provider_prompt_tokens: int | None = None,
    draft_tokens: int = 0,
    model: str = "",
    ts: str = "",
    call_index: int | None = None,
    exact_system: bool = False,
    exact_tools: bool = False,
) -> ContextSnapshot:
    """Assemble a snapshot from raw per-region estimates, calibrated when a provider report exists.

    ``exact_system``: the system region is already the provider's count (another agent's system
    prompt and tools, inferred from its first call): calibration scales the other regions only.
    ``exact_tools`` (with ``exact_system``): the tool definitions are held too (both read from the file as
    they were sent), so only the summary and the history absorb the calibration.
    ``provider_prompt_tokens`` (the call this snapshot is the request of was made): when the provider took
    it with no more tokens than the window, the estimate is never above the window. The request fit, so an
    estimate past the window line (a scale learnt on another stretch of the session, a file that holds
    more than was sent) would draw an overflow that never happened: it is bounded at the window."""
    by_role = {"user": 0, "assistant": 0, "tool": 0}
    for msg, tokens in zip(history, history_counts, strict=True):
        role = msg.get("role")
        by_role[role if role in by_role else "user"] += tokens
    ids = [str(m.get("id", "")) for m in history]
    snap = snapshot_from_totals(
        window=window, system_tokens=system_tokens, summary_tokens=summary_tokens, tools_tokens=tools_tokens,
        history_tokens=(by_role["user"], by_role["assistant"], by_role["tool"]), history_ids=ids,
        estimator_name=estimator_name, threshold_ratio=threshold_ratio, calibrator=calibrator,
        provider_prompt_tokens=provider_prompt_tokens, draft_tokens=draft_tokens, model=model, ts=ts,
        call_index=call_index, exact_system=exact_system, exact_tools=exact_tools)
    snap.message_tokens = list(zip(ids, (int(c) for c in history_counts), strict=True))
    return snap


def snapshot_from_totals(
    *,
    window: WindowInfo,
    system_tokens: int,
    summary_tokens: int,
    tools_tokens: int,
    history_tokens: tuple[int, int, int],
    history_ids: Sequence[str],
    estimator_name: str,
    threshold_ratio: float,
    calibrator: Calibrator | None = None,
    provider_prompt_tokens: int | None = None,
    draft_tokens: int = 0,
    model: str = "",
    ts: str = "",
    call_index: int | None = None,
    exact_system: bool = False,
    exact_tools: bool = False,
) -> ContextSnapshot:
    """:func:`build_snapshot` from the history's raw totals by role (user, assistant, tool) and its message ids
    (``str(message.get("id", ""))`` each, what the calibrator matches requests by), with no per-message counts
    (``message_tokens`` empty): what a caller keeping running totals (:class:`RunningHistory`) asks once per call,
    without walking the history. The same regions, calibration and figures as :func:`build_snapshot`."""
    user, assistant, tool = history_tokens
    raw_parts = [system_tokens, summary_tokens, user, assistant, tool, tools_tokens]
    raw_total = sum(raw_parts)
    ids = history_ids
    accuracy = EXACT if estimator_name == "exact" else ESTIMATED
    parts = raw_parts
    draft = draft_tokens
    total = raw_total
    calibrated = calibrator is not None and calibrator.calibrated
    if calibrator is not None and calibrated:
        total = calibrator.calibrate(raw_total, ids, (system_tokens, summary_tokens, tools_tokens))
        draft = round(draft_tokens * (calibrator.ratio or 1.0))
        accuracy = CALIBRATED
    reported = provider_prompt_tokens
    if reported is not None and 0 < reported <= window.context_window < total:
        total = window.context_window  # the provider took this request with fewer tokens: it fit the window
    if calibrated or total != raw_total:
        held = system_tokens + (tools_tokens if exact_tools else 0)
        if exact_system and exact_tools and 0 < held <= total:
            parts = [system_tokens, *_scale_parts(raw_parts[1:5], total - held), tools_tokens]
        elif exact_system and 0 < system_tokens <= total:
            parts = [system_tokens, *_scale_parts(raw_parts[1:], total - system_tokens)]
        elif exact_tools and 0 < tools_tokens <= total:  # only the tool definitions held (inferred from the provider)
            parts = [*_scale_parts(raw_parts[:5], total - tools_tokens), tools_tokens]
        else:
            parts = _scale_parts(raw_parts, total)
    return ContextSnapshot(
        window=window.context_window,
        max_tokens=window.max_tokens,
        system=parts[0],
        summary=parts[1],
        history_user=parts[2],
        history_assistant=parts[3],
        history_tool=parts[4],
        tools=parts[5],
        threshold_tokens=int(threshold_ratio * window.context_window),
        estimator=estimator_name,
        accuracy=accuracy,
        provider_prompt_tokens=provider_prompt_tokens,
        raw_prompt_tokens=raw_total,
        draft=draft,
        window_source=window.source,
        model=model,
        ts=ts,
        call_index=call_index,
        # the prefix held through calibration: both as sent (the file's), or one count inferred from the provider
        prefix_source="file" if exact_system and exact_tools else "inferred" if exact_system or exact_tools else "",
    )


class RunningHistory:
    """Running per-region totals of a message list read in order (a source's messages as an import or a followed
    view counts them): per-role prefix sums of the messages' raw token counts and their ids, extended with the
    messages added since the last call, cut back where messages changed (a rewind, a response that grew).

    The request of a call is a stretch ``[start, end)`` of the list (``start``: the last compaction before it),
    so its totals by role are two subtractions and its ids one slice: each call costs the same however long the
    context has grown (:func:`build_snapshot` walks every message of the request), with the same sums."""

    def __init__(self) -> None:
        self.ids: list[str] = []  # str(message.get("id", "")) of each message
        # _user[i]: the user (and other non-assistant, non-tool) tokens of messages[:i]; machine integers (8 bytes
        # a message each, not an int object and its slot: a followed session appends to them for as long as it grows)
        self._user = array("q", [0])
        self._assistant = array("q", [0])
        self._tool = array("q", [0])
        self._no_id: list[int] = []  # positions of the messages without an "id" key, ascending

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, messages: Iterable[Message], counts: Iterable[int]) -> None:
        """Messages appended after those held, with their raw token counts."""
        ids, users, assistants, tools = self.ids, self._user, self._assistant, self._tool
        user, assistant, tool = users[-1], assistants[-1], tools[-1]
        for msg, tokens in zip(messages, counts, strict=True):
            role = msg.get("role")
            if role == "assistant":
                assistant += tokens
            elif role == "tool":
                tool += tokens
            else:
                user += tokens
            users.append(user)
            assistants.append(assistant)
            tools.append(tool)
            if "id" in msg:
                ids.append(str(msg["id"]))
            else:
                self._no_id.append(len(ids))
                ids.append("")

    def truncate(self, index: int) -> None:
        """Messages from ``index`` on changed or went: forgotten (they are extended again when counted)."""
        index = max(0, index)
        if index < len(self.ids):  # a new list: the spans given out (IdSpan) keep the ids they were given
            self.ids = self.ids[:index]
        del self._user[index + 1:]
        del self._assistant[index + 1:]
        del self._tool[index + 1:]
        del self._no_id[bisect_left(self._no_id, index):]

    def totals(self, start: int, end: int) -> tuple[int, int, int]:
        """The raw tokens of ``messages[start:end]`` by role: user (and any other role), assistant, tool."""
        return (self._user[end] - self._user[start], self._assistant[end] - self._assistant[start],
                self._tool[end] - self._tool[start])

    def ids_of(self, start: int, end: int) -> IdSpan:
        """``str(m.get("id", ""))`` of each of ``messages[start:end]`` (what :func:`build_snapshot` calibrates by),
        not copied."""
        return IdSpan(self.ids, start, end)

    def named_ids(self, start: int, end: int, ids: Sequence[str] | None = None) -> Sequence[str]:
        """``str(m.get("id"))`` of each of ``messages[start:end]``: a message without an id is ``"None"``
        (``ids``: :meth:`ids_of` the same stretch, already made: returned as it is when every message has an id)."""
        out = self.ids_of(start, end) if ids is None else ids
        lo = bisect_left(self._no_id, start)
        if lo == len(self._no_id) or self._no_id[lo] >= end:
            return out
        named = list(out)
        for i in self._no_id[lo:bisect_left(self._no_id, end)]:
            named[i - start] = "None"
        return tuple(named)
