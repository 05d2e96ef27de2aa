"""One column of the timeline, typed: a recorded call (:class:`engine.model.records.ContextRecord`) and its price.

The service hands the window these (:attr:`engine.workbench.views.SessionView.timeline`, the ``CallRecorded`` and
``CallUpdated`` events); the chart, the status bar and the Usage wiring read their attributes. The figures an
import's file gave beyond the record's declared fields (kept in its ``extra``) that the window shows are read here,
once, with their types checked: :attr:`TimelineCall.prefix_tokens`, :attr:`TimelineCall.prompt_unlike_file`,
:attr:`TimelineCall.agent_cost_usd`.

:meth:`TimelineCall.to_json` is the record's line with the price (``cost_usd``, ``cost_problem``): the form the
engine's analyses of records read (:func:`engine.context.cache.analyze`, :func:`engine.usage.costs.records_cost`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.model.records import ContextRecord
from engine.model.snapshot import ContextSnapshot

PRICE_FIELDS = ("cost_usd", "cost_problem")


@dataclass(frozen=True, slots=True)  # (slots: one a call, for as long as a followed session grows)
class Price:
    """What a call cost: ``usd`` (None: unknown) and why it is unknown (``problem``; "" when known)."""

    usd: float | None
    problem: str = ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usd(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


@dataclass(frozen=True, slots=True)
class TimelineCall:
    """A recorded call as the timeline shows it: its record and its price (None: not priced)."""

    record: ContextRecord
    price: Price | None = None

    @property
    def snapshot(self) -> ContextSnapshot:
        return self.record.snapshot

    @property
    def prefix_tokens(self) -> int | None:
        """An import's inferred system prompt + tools (``prefix_source`` "inferred"), when it wrote the figure."""
        return _int(self.record.extra.get("prefix_tokens"))

    @property
    def prompt_unlike_file(self) -> str:
        """Why the provider's prompt figure counts what the agent's file does not hold ("" when it does not)."""
        value = self.record.extra.get("prompt_unlike_file")
        return value if isinstance(value, str) else ""

    @property
    def agent_cost_usd(self) -> float | None:
        """The agent's own cost of this call, where its file records one."""
        return _usd(self.record.extra.get("agent_cost_usd"))

    def to_json(self) -> dict[str, Any]:
        """The record's line with its price (``cost_usd``, ``cost_problem``) when priced: made at each call (4 µs),
        not kept — kept, every column of a followed timeline held a second copy of its record (1.2 KB a call)."""
        data = self.record.to_json()
        if self.price is not None:
            data["cost_usd"] = self.price.usd
            data["cost_problem"] = self.price.problem
        return data

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TimelineCall:
        """The call of a record's line, priced when the line carries ``cost_usd`` (the form :meth:`to_json` gives);
        :class:`engine.model.records.RecordError` when the line is not a ``context`` record."""
        line = {k: v for k, v in obj.items() if k not in PRICE_FIELDS}
        price = None
        if "cost_usd" in obj:
            price = Price(_usd(obj.get("cost_usd")), str(obj.get("cost_problem") or ""))
        return cls(ContextRecord.from_json(line), price)


__all__ = ["PRICE_FIELDS", "Price", "TimelineCall"]
