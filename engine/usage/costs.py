"""Dollar cost of the calls a session recorded: its ``context`` records (``events.jsonl``) priced with
:mod:`engine.usage.prices`.

A record carries the call's figures as the provider reported them: ``provider_prompt_tokens`` (the whole
prompt, cached part included), ``cache_read_tokens``, ``cache_write_tokens``, ``completion_tokens``,
``reasoning_tokens``, ``model``; an imported one also ``source_format`` (whether the output figure already
holds the reasoning: :data:`engine.usage.prices.REASONING_SEPARATE`). A record without a model or of a model
the price table does not know costs ``None`` with the reason (never $0).

- :func:`priced_record` — a copy of the record with ``cost_usd`` and ``cost_problem`` (the timeline's
  columns: the tooltip shows it);
- :func:`records_cost` — the session's cost so far: the sum of the known costs, how many calls have none;
- :func:`session_cost` — the same for a session folder or an agent's session file (cost by tool:
  :mod:`engine.usage.tool_costs`);
- :func:`folder_records` — a session folder's ``context`` records, in order (one per call).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sources.model import ProviderCall
from engine.usage.prices import REASONING_SEPARATE, CallCost, PriceTable, PriceTableError, load_table

NO_TABLE = "no price table (litellm is not installed)"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def price_table() -> PriceTable | None:
    """litellm's price table (read once per process), or None when litellm is not installed."""
    try:
        return load_table()
    except PriceTableError:
        return None


def record_cost(record: Mapping[str, Any], table: PriceTable | None) -> CallCost:
    """What the call of a ``context`` record cost (see the module's doc)."""
    if table is None:
        return CallCost(None, problem=NO_TABLE)
    return table.cost(
        str(record.get("model") or ""), prompt=_int(record.get("provider_prompt_tokens")),
        completion=_int(record.get("completion_tokens")), cache_read=_int(record.get("cache_read_tokens")),
        cache_write=_int(record.get("cache_write_tokens")), reasoning=_int(record.get("reasoning_tokens")),
        reasoning_in_output=record.get("source_format") not in REASONING_SEPARATE)


def priced_record(record: Mapping[str, Any], table: PriceTable | None = None) -> dict[str, Any]:
    """A copy of ``record`` with ``cost_usd`` (None when unknown) and ``cost_problem`` (why; "" when known).
    ``table`` defaults to :func:`price_table`."""
    cost = record_cost(record, table if table is not None else price_table())
    out = dict(record)
    out["cost_usd"] = None if cost.usd is None else round(cost.usd, 8)
    out["cost_problem"] = cost.problem
    return out


@dataclass(frozen=True)
class RecordsCost:
    """The cost of a session's calls: ``usd`` sums the known costs (None when no call has one);
    ``unpriced`` calls have none (then ``usd`` is a lower bound); ``problem`` is the first reason."""

    usd: float | None
    calls: int
    unpriced: int
    problem: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"cost_usd": self.usd, "calls": self.calls, "unpriced_calls": self.unpriced,
                "cost_problem": self.problem}


def call_record(call: ProviderCall, fmt: str = "") -> dict[str, Any]:
    """A reader's call as the figures of a ``context`` record (what :func:`record_cost` prices)."""
    return {"model": call.model, "provider_prompt_tokens": call.prompt_tokens,
            "cache_read_tokens": call.cache_read_tokens, "cache_write_tokens": call.cache_write_tokens,
            "completion_tokens": call.completion_tokens, "reasoning_tokens": call.reasoning_tokens,
            "source_format": fmt}


def folder_records(folder: Path) -> list[dict[str, Any]]:
    """The ``context`` records of a ctxbench session folder's ``events.jsonl`` in order, one per call (what
    :func:`engine.context.diff.history_from_folder` makes its calls of); [] without one."""
    from engine.store.fsutil import read_jsonl_objects

    events = Path(folder) / "events.jsonl"
    return [r for r in read_jsonl_objects(events, []) if r.get("type") == "context"] if events.exists() else []


def session_cost(path: Path) -> RecordsCost | None:
    """The cost of the calls of a ctxbench session folder (its ``context`` records) or of an agent's session
    file a reader knows (its calls); None for a file no reader knows."""
    from engine.sources.detect import detect_format
    from engine.sources.readers import READERS, read_source

    path = Path(path)
    if path.is_dir():
        return records_cost(folder_records(path))
    fmt = detect_format(path)
    if fmt not in READERS:
        return None
    src = read_source(path, fmt)
    return records_cost(call_record(c, src.format) for c in src.calls)


def records_cost(records: Iterable[Mapping[str, Any]], table: PriceTable | None = None) -> RecordsCost:
    """The cost of ``records``: each record's ``cost_usd`` when it has been priced (:func:`priced_record`),
    else priced now with ``table`` (default :func:`price_table`)."""
    total: float | None = None
    calls = unpriced = 0
    problem = ""
    loaded: PriceTable | None = table
    for rec in records:
        calls += 1
        if "cost_usd" in rec:
            usd, why = rec.get("cost_usd"), str(rec.get("cost_problem") or "")
        else:
            loaded = loaded if loaded is not None else price_table()
            cost = record_cost(rec, loaded)
            usd, why = cost.usd, cost.problem
        if isinstance(usd, int | float) and not isinstance(usd, bool):
            total = (total or 0.0) + float(usd)
        else:
            unpriced += 1
            problem = problem or why
    return RecordsCost(total, calls, unpriced, problem)


__all__ = ["NO_TABLE", "RecordsCost", "call_record", "folder_records", "price_table", "priced_record", "record_cost",
           "records_cost", "session_cost"]
