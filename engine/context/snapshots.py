"""The one snapshot builder: every :class:`ContextSnapshot` is made by :func:`build_snapshot`.

:func:`snapshot_of` — the next request of a session (or of other messages / another summary), the
way the agent, the compactor, the app and the CLI ask for it; :func:`build_snapshot` — the regions
from raw per-region estimates, calibrated when a provider report exists (imports call it directly,
with the counts of a log's own calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from engine.context.calibration import Calibrator
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
    raw_parts = [system_tokens, summary_tokens, by_role["user"], by_role["assistant"], by_role["tool"], tools_tokens]
    raw_total = sum(raw_parts)
    ids = [str(m.get("id", "")) for m in history]
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
        message_tokens=list(zip(ids, (int(c) for c in history_counts), strict=True)),
        provider_prompt_tokens=provider_prompt_tokens,
        raw_prompt_tokens=raw_total,
        draft=draft,
        window_source=window.source,
        model=model,
        ts=ts,
        call_index=call_index,
        # the prefix held through calibration: both as sent (the file's), or one count inferred from the provider
        prefix_source="file" if exact_system and exact_tools else "inferred" if exact_system else "",
    )
