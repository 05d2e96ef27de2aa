"""A compaction's before → after, one definition for every view (issue 27): the preview dialog, the chat's
marker, the inspector's Compactions tab, the chart's marker tooltip and the exports.

**The basis is the prompt as sent** — system prompt + summary + history + tool definitions, *without* the output
reserve — which is what a provider reports (``provider_prompt_tokens``) and what an imported compaction records
(Claude Code's ``preTokens`` and the first call after it). ctxbench's own compaction records written before this
basis was fixed hold the request with the output reserve (``tokens_basis`` absent, no ``source_format``): they are
read as they are and labelled so, never mixed with a prompt figure.

:func:`compaction_change` gives the figures and the text every view shows; ``grows`` (the compaction makes the
context larger) is decided here, and a view shows it as a warning (the preview asks before Apply).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PROMPT = "prompt"  # the prompt as sent, without the output reserve (the provider's figure)
REQUEST = "request"  # the prompt + the output reserve (ctxbench's own records before issue 27)
BASIS_LABELS = {PROMPT: "prompt tokens", REQUEST: "tokens incl. reserve"}


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class CompactionChange:
    """``before`` → ``after`` tokens on ``basis`` (:data:`PROMPT` or :data:`REQUEST`); None where not known."""

    before: int | None
    after: int | None
    basis: str = PROMPT

    @property
    def delta(self) -> int | None:
        return None if self.before is None or self.after is None else self.after - self.before

    @property
    def ratio(self) -> float | None:
        return None if self.delta is None or not self.before else self.delta / self.before

    @property
    def grows(self) -> bool:
        """The context is larger after the compaction than before it."""
        return self.delta is not None and self.delta > 0

    @property
    def label(self) -> str:
        return BASIS_LABELS.get(self.basis, "tokens")

    def text(self, fmt: Any = None, *, short: bool = False) -> str:
        """"880 → 1,149 prompt tokens (+31%)" (``fmt`` formats a count; default ``1,149``); ``short``: without the
        basis ("880 → 1,149 (+31%)", for a table cell whose tooltip says it)."""
        f = fmt or (lambda n: f"{n:,}")
        label = "" if short else f" {self.label}"
        if self.before is None:
            return "—"
        if self.after is None:
            return f"{f(self.before)}{label} before"
        pct = f" ({self.ratio * 100:+.0f}%)" if self.ratio is not None else ""
        return f"{f(self.before)} → {f(self.after)}{label}{pct}"

    def warning(self) -> str:
        """Why a compaction that grows the context is worth a second look ("" when it does not grow)."""
        if not self.grows or self.delta is None:
            return ""
        return (f"This compaction makes the context larger: {self.text()} — the summary is longer than what it "
                "replaces")


def compaction_change(before: Any, after: Any, basis: str = PROMPT) -> CompactionChange:
    """The change of figures ``before`` and ``after`` on ``basis``."""
    return CompactionChange(_int(before), _int(after), basis)


def event_change(event: Mapping[str, Any]) -> CompactionChange:
    """The change a ``compaction`` record holds (its ``tokens_basis``; an import's figures are prompts; an own
    record without one is of the older request basis)."""
    basis = str(event.get("tokens_basis") or (PROMPT if event.get("source_format") else REQUEST))
    return compaction_change(event.get("tokens_before"), event.get("tokens_after"), basis)


__all__ = ["BASIS_LABELS", "PROMPT", "REQUEST", "CompactionChange", "compaction_change", "event_change"]
