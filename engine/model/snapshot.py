"""The snapshot of a request, region by region, and the window it is measured against: pure data.

:class:`ContextSnapshot` is what the chart, the inspector, the CLI and events.jsonl show; it is
built in one place (:func:`engine.context.snapshots.build_snapshot`). :class:`WindowInfo` is what the
one window resolver (:mod:`engine.context.window`) returns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Accuracy(StrEnum):
    """How a number was obtained; every number the app shows carries one of these."""

    ESTIMATED = "estimated"  # raw heuristic estimate, no provider report yet
    EXACT = "exact"  # the model's tokenizer, no provider report yet
    CALIBRATED = "calibrated"  # anchored on the provider's reported prompt tokens
    REPORTED = "reported"  # the provider's own number for a call that happened


ESTIMATED = Accuracy.ESTIMATED
EXACT = Accuracy.EXACT
CALIBRATED = Accuracy.CALIBRATED
REPORTED = Accuracy.REPORTED

# the prompt's regions at full detail (history split by role), in stacking order
PROMPT_REGIONS = ("system", "summary", "history_user", "history_assistant", "history_tool", "tools")
# every region the window is drawn with, in stacking order, and what people call each
REGION_ORDER = (*PROMPT_REGIONS, "draft", "reserve", "free")
REGION_LABELS: dict[str, str] = {
    "system": "System prompt",
    "summary": "Summary",
    "history_user": "History · user",
    "history_assistant": "History · assistant",
    "history_tool": "History · tool results",
    "tools": "Tool definitions",
    "draft": "Draft",
    "reserve": "Output reserve",
    "free": "Free",
}


# how a region's tokens were obtained (per region; the snapshot's ``accuracy`` is the whole prompt's): the three
# accuracies, and two that only some regions have
INFERRED = "inferred"  # another agent's system prompt + tools the file lacks: its first call's count − the rest's
SET = "set"  # the output reserve: the max_tokens sent with the request, a setting, not a count
FILE_PREFIX = "file"  # ``prefix_source``: the system prompt and tools read from the file as sent
REGION_ACCURACY_LABELS: dict[str, str] = {
    EXACT: "exact (the model's tokenizer)",
    ESTIMATED: "estimated (heuristic)",
    CALIBRATED: "estimated share, scaled to the provider's count",
    INFERRED: "inferred: the provider's count of the first call minus the estimate of the rest",
    SET: "set: the output reserve sent with every request",
}


def region_accuracy(record: Mapping[str, Any]) -> dict[str, str]:
    """How each region of a snapshot or of a call record (its JSON form) was obtained, region → one of exact,
    estimated, calibrated (a share of the provider's count, split by the estimate), inferred, set.

    The prompt's regions share the snapshot's ``accuracy``, except the system prompt and tool definitions of another
    agent's file (``prefix_source``): read from the file as sent they are counted, not scaled (exact with the
    model's tokenizer, else estimated); missing from the file they are inferred. The output reserve is set."""
    accuracy = str(record.get("accuracy") or ESTIMATED)
    base = accuracy if accuracy in (EXACT, CALIBRATED) else ESTIMATED
    out = dict.fromkeys(REGION_ORDER, base)
    prefix = record.get("prefix_source")
    if prefix == INFERRED:
        out["system"] = out["tools"] = INFERRED
    elif prefix == FILE_PREFIX:
        out["system"] = out["tools"] = EXACT if record.get("estimator") == "exact" else ESTIMATED
    out["reserve"] = SET
    return out


def history_budget(context_window: int, system: int, summary: int, tools: int, max_tokens: int) -> int:
    """Tokens left for history: window − system − summary − tools − max_tokens (may be negative)."""
    return context_window - system - summary - tools - max_tokens


@dataclass(frozen=True)
class WindowInfo:
    context_window: int
    max_tokens: int
    source: str  # "override" | "model" | "fallback"


@dataclass(slots=True)  # (slots: one a call's record, for as long as a followed session grows)
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
    # another agent's system prompt + tools: "file" (read as sent, counted), "inferred" (its first call's count −
    # the rest's), "" (counted like the rest: our own sessions)
    prefix_source: str = ""

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

    def region_accuracy(self) -> dict[str, str]:
        """How each region was obtained (:func:`region_accuracy`)."""
        return region_accuracy({"accuracy": self.accuracy, "estimator": self.estimator,
                                "prefix_source": self.prefix_source})

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
        # a shallow copy: every field but message_tokens is a str/int/None (asdict's deep copy of the
        # per-message pairs was most of an import's time)
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["message_tokens"] = [list(p) for p in self.message_tokens]
        data["regions"] = self.regions()
        data["history"] = self.history
        data["overflow"] = self.overflow
        return data

    def call_record(self, message_count: int | None = None) -> dict[str, Any]:
        """The record of one call (an ``events.jsonl`` ``context`` line, a timeline column): the JSON
        form without the per-message counts, with how many messages the request held."""
        data = self.to_json()
        data["message_count"] = len(self.message_tokens) if message_count is None else message_count
        data["message_tokens"] = []
        data["type"] = "context"
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
        if kwargs.get("prefix_source") is None:
            kwargs.pop("prefix_source", None)  # an import's record says None when it had no prefix
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


def context_report(snap: ContextSnapshot) -> str:
    """What fills the next request, one line per region (``/context``), labelled as the chart labels them."""
    w = snap.window or 1
    values = {key: int(getattr(snap, key)) for key in (*PROMPT_REGIONS, "reserve", "free")}
    rows = [(REGION_LABELS[key], n) for key, n in values.items()]
    lines = [
        f"Context: {snap.used:,} of {snap.window:,} tokens ({100 * snap.used / w:.1f}%, {snap.accuracy}); "
        f"compaction at {snap.threshold_tokens:,}"
    ]
    lines += [f"  {label}: {n:,} ({100 * n / w:.1f}%)" for label, n in rows]
    if snap.overflow:
        lines.append(f"  Over the window by {snap.overflow:,} tokens")
    return "\n".join(lines)
