"""Regions of the context window, the budget formula, calibration and ``ContextSnapshot``.

    history_budget = context_window − system − summary − tool_definitions − max_tokens

Budget functions are pure: messages and integers in, numbers out. They never build the request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.context.tokens import estimate_message_tokens, estimate_tool_defs_tokens
from engine.model.messages import Message

# How a number was obtained; every number the app shows carries one of these.
ESTIMATED = "estimated"  # raw heuristic estimate, no provider report yet
EXACT = "exact"  # the model's tokenizer, no provider report yet
CALIBRATED = "calibrated"  # anchored on the provider's reported prompt tokens
REPORTED = "reported"  # the provider's own number for a call that happened

WINDOW_FALLBACK_FACTOR = 4
# the prompt's regions at full detail (history split by role), in stacking order
PROMPT_REGIONS = ("system", "summary", "history_user", "history_assistant", "history_tool", "tools")


def is_over_context_budget(
    context_window: int,
    messages: Sequence[Message],
    tool_defs: Sequence[dict[str, Any]] | None,
    max_tokens: int,
) -> bool:
    """Σ estimate(messages) + estimate(tool_defs) + max_tokens > context_window."""
    total = sum(estimate_message_tokens(m) for m in messages)
    return total + estimate_tool_defs_tokens(tool_defs) + max_tokens > context_window


def history_budget(context_window: int, system: int, summary: int, tools: int, max_tokens: int) -> int:
    """Tokens left for history: window − system − summary − tools − max_tokens (may be negative)."""
    return context_window - system - summary - tools - max_tokens


@dataclass(frozen=True)
class WindowInfo:
    context_window: int
    max_tokens: int
    source: str  # "override" | "model" | "fallback"


def resolve_window(
    model_max_input: int | None,
    override: int | None,
    max_tokens: int,
) -> WindowInfo:
    """The window rules: a setting overrides model info; with neither, window = max_tokens × 4."""
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    if override is not None:
        if override <= 0:
            raise ValueError(f"context window override must be positive, got {override}")
        return WindowInfo(int(override), max_tokens, "override")
    if model_max_input and model_max_input > 0:
        return WindowInfo(int(model_max_input), max_tokens, "model")
    return WindowInfo(max_tokens * WINDOW_FALLBACK_FACTOR, max_tokens, "fallback")


def resolve_context_window(
    model: str,
    override: int | None,
    max_tokens: int,
    model_info: Callable[[str], dict[str, Any] | None] | None = None,
) -> WindowInfo:
    """Resolve the window for ``model`` using litellm's model info (via engine.llm.client) unless overridden."""
    if override is not None:
        return resolve_window(None, override, max_tokens)
    if model_info is None:
        from engine.llm import client as llm

        model_info = llm.model_info
    info = None
    try:
        info = model_info(model)
    except Exception:  # unknown models raise in litellm: fall back to settings
        info = None
    max_input = None
    if info:
        max_input = info.get("max_input_tokens") or info.get("max_tokens")
    return resolve_window(max_input if isinstance(max_input, int) else None, None, max_tokens)


@dataclass
class Calibrator:
    """Anchors estimates on the provider's reported prompt tokens.

    After each call, :meth:`record` stores the raw estimate of the request and the provider's
    ``prompt_tokens``. The number for the next request is the reported count of the part already
    sent plus the raw estimate of what was added since, scaled by the ratio actual/estimate of the
    last call. When the request no longer starts with what was sent (compaction, edits), the whole
    raw estimate is scaled instead.
    """

    last_raw: int | None = None
    last_actual: int | None = None
    last_prefix: tuple[str, ...] = ()
    last_fixed: tuple[int, int, int] = (0, 0, 0)  # system, summary, tools raw tokens at last call

    @property
    def ratio(self) -> float | None:
        if self.last_raw and self.last_actual:
            return self.last_actual / self.last_raw
        return None

    @property
    def calibrated(self) -> bool:
        return self.ratio is not None

    def record(
        self,
        raw_total: int,
        actual_prompt_tokens: int | None,
        message_ids: Sequence[str] = (),
        fixed: tuple[int, int, int] = (0, 0, 0),
    ) -> None:
        if actual_prompt_tokens is None or actual_prompt_tokens <= 0 or raw_total <= 0:
            return
        self.last_raw = raw_total
        self.last_actual = actual_prompt_tokens
        self.last_prefix = tuple(message_ids)
        self.last_fixed = fixed

    def calibrate(
        self,
        raw_total: int,
        message_ids: Sequence[str] = (),
        fixed: tuple[int, int, int] = (0, 0, 0),
    ) -> int:
        """Calibrated prompt tokens for a request whose raw estimate is ``raw_total``."""
        ratio = self.ratio
        if ratio is None or self.last_raw is None or self.last_actual is None:
            return raw_total
        n = len(self.last_prefix)
        same_prefix = (
            fixed == self.last_fixed
            and n <= len(message_ids)
            and tuple(message_ids[:n]) == self.last_prefix
        )
        if same_prefix and raw_total >= self.last_raw:
            return self.last_actual + round((raw_total - self.last_raw) * ratio)
        return round(raw_total * ratio)

    def to_json(self) -> dict[str, Any]:
        return {
            "last_raw": self.last_raw,
            "last_actual": self.last_actual,
            "last_prefix": list(self.last_prefix),
            "last_fixed": list(self.last_fixed),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Calibrator:
        if not data:
            return cls()
        fixed = data.get("last_fixed") or (0, 0, 0)
        return cls(
            last_raw=data.get("last_raw"),
            last_actual=data.get("last_actual"),
            last_prefix=tuple(data.get("last_prefix") or ()),
            last_fixed=(int(fixed[0]), int(fixed[1]), int(fixed[2])),
        )


@dataclass
class ContextSnapshot:
    """What the next request holds, region by region, in tokens.

    ``system + summary + history + tools + reserve + free == window`` whenever the request fits;
    ``free`` is 0 (never negative) when it overflows and ``overflow`` says by how much.
    """

    window: int
    max_tokens: int
    system: int
    summary: int
    history_user: int
    history_assistant: int
    history_tool: int
    tools: int
    threshold_tokens: int
    estimator: str
    accuracy: str  # ESTIMATED | EXACT | CALIBRATED
    message_tokens: list[tuple[str, int]] = field(default_factory=list)  # (message id, tokens)
    provider_prompt_tokens: int | None = None  # reported for the last call, when known
    raw_prompt_tokens: int = 0  # uncalibrated estimate of the prompt
    draft: int = 0  # tokens of the unsent draft (not part of history)
    window_source: str = "model"
    model: str = ""
    ts: str = ""
    call_index: int | None = None

    @property
    def history(self) -> int:
        return self.history_user + self.history_assistant + self.history_tool

    @property
    def reserve(self) -> int:
        return self.max_tokens

    @property
    def prompt(self) -> int:
        return self.system + self.summary + self.history + self.tools

    @property
    def used(self) -> int:
        return self.prompt + self.reserve

    @property
    def free(self) -> int:
        return max(0, self.window - self.used - self.draft)

    @property
    def overflow(self) -> int:
        return max(0, self.used + self.draft - self.window)

    @property
    def history_budget(self) -> int:
        return history_budget(self.window, self.system, self.summary, self.tools, self.max_tokens)

    @property
    def over_threshold(self) -> bool:
        return self.used > self.threshold_tokens

    @property
    def over_budget(self) -> bool:
        return self.used > self.window

    def regions(self) -> dict[str, int]:
        """The integer regions, in stacking order; they add up to the window when it fits."""
        return {
            "system": self.system,
            "summary": self.summary,
            "history": self.history,
            "tools": self.tools,
            "reserve": self.reserve,
            "free": self.free,
        }

    def detailed_regions(self, draft: int | None = None) -> dict[str, int]:
        """Every region with history split by role, plus the draft (``draft`` overrides the stored
        one, e.g. while typing), in stacking order: what the stacked bars draw."""
        draft = self.draft if draft is None else draft
        out = {key: int(getattr(self, key)) for key in PROMPT_REGIONS}
        out.update(draft=draft, reserve=self.reserve, free=max(0, self.window - self.used - draft))
        return out

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["message_tokens"] = [list(p) for p in self.message_tokens]
        data["regions"] = self.regions()
        data["history"] = self.history
        data["overflow"] = self.overflow
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ContextSnapshot:
        """The snapshot :meth:`to_json` wrote; ValueError naming the first field that is missing or
        of the wrong type (a damaged events.jsonl line must not become numbers the chart cannot add)."""
        if not isinstance(data, dict):
            raise ValueError(f"a snapshot must be a JSON object, got {type(data).__name__}")
        names = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in names}
        for key in (*_SNAPSHOT_INTS, "estimator", "accuracy"):
            if key not in kwargs:
                raise ValueError(f"snapshot field {key!r} is missing")
        for key, value in kwargs.items():
            if value is None and key in _SNAPSHOT_OPTIONAL:
                continue
            if key in _SNAPSHOT_INTS or key in _SNAPSHOT_OPTIONAL or key in ("raw_prompt_tokens", "draft"):
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise ValueError(f"snapshot field {key!r} must be a number, got {str(value)[:40]!r}")
                kwargs[key] = int(value)
            elif key != "message_tokens" and not isinstance(value, str):
                raise ValueError(f"snapshot field {key!r} must be a string, got {type(value).__name__}")
        pairs = data.get("message_tokens") or ()
        try:
            kwargs["message_tokens"] = [(str(a), int(b)) for a, b in pairs]
        except (TypeError, ValueError, OverflowError):
            raise ValueError("snapshot field 'message_tokens' must be a list of [id, tokens] pairs") from None
        return cls(**kwargs)


_SNAPSHOT_INTS = ("window", "max_tokens", "system", "summary", "history_user", "history_assistant",
                  "history_tool", "tools", "threshold_tokens")
_SNAPSHOT_OPTIONAL = ("provider_prompt_tokens", "call_index")


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
) -> ContextSnapshot:
    """Assemble a snapshot from raw per-region estimates, calibrated when a provider report exists."""
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
    if calibrator is not None and calibrator.calibrated:
        fixed = (system_tokens, summary_tokens, tools_tokens)
        calibrated_total = calibrator.calibrate(raw_total, ids, fixed)
        parts = _scale_parts(raw_parts, calibrated_total)
        ratio = calibrator.ratio or 1.0
        draft = round(draft_tokens * ratio)
        accuracy = CALIBRATED
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
    )
