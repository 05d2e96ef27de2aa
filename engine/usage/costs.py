"""Dollar cost of the calls a session recorded: its ``context`` records (``events.jsonl``) priced with
:mod:`engine.usage.prices`.

A record carries the call's figures as the provider reported them: ``provider_prompt_tokens`` (the whole
prompt, cached part included), ``cache_read_tokens``, ``cache_write_tokens``, ``completion_tokens``,
``reasoning_tokens``, ``model``; an imported one also ``source_format`` (whether the output figure already
holds the reasoning: :data:`engine.usage.prices.REASONING_SEPARATE`). A record without a model or of a model
the price table does not know costs ``None`` with the reason (never $0).

- :func:`priced_record` — a copy of the record with ``cost_usd`` and ``cost_problem`` (the timeline's
  columns: the tooltip shows it);
- :func:`priced_call` — a record with its price, typed (:class:`engine.model.timeline.TimelineCall`: what the
  window's timeline holds);
- :func:`records_cost` — the cost of some calls: the sum of the known costs, how many calls have none;
- :class:`SessionCost` — **a session's cost, the one definition every view shows** (status bar, Tools tab,
  ``ctxbench tools``, the Usage view and ``ctxbench usage``, the Markdown export): its own calls (*main*) +
  its subagents' calls (*subagents*: Claude Code's Task subagents, their calls streamed into the parent file
  as ``progress`` records where no subagent file holds them) + the compactions' own summarising calls
  (*compaction*), with the agent's own cost beside it where the agent records one;
- :func:`folder_cost` (a session folder: its ``context`` records, the ``cost`` of its ``compaction`` records,
  its ``subagents/*`` folders), :func:`source_cost` (a reader's session, the calls :func:`session_parts`
  lists — what the usage index makes its rows of) and :func:`session_cost` (either, by path) compute it;
  an import's folder and its source file give the same figures (a test compares them);
- :func:`folder_records` — a session folder's ``context`` records, in order (one per call).

A call's cost uses every figure it carries, the one-hour cache writes (``cache_write_1h_tokens``) included.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.model.call_meta import beside_of
from engine.model.records import (
    CompactionRecord,
    ContextRecord,
    Record,
    compaction_records,
    context_records,
    records_json,
)
from engine.model.timeline import Price, TimelineCall
from engine.sources.model import ProviderCall, SourceSession
from engine.store.event_log import folder_records as read_folder_records
from engine.usage.prices import (
    REASONING_SEPARATE,
    CallCost,
    PriceTable,
    PriceTableError,
    compare_agent_cost,
    load_table,
)
from engine.usage.responses import PartKind as PartKind
from engine.usage.responses import session_parts as session_parts

NO_TABLE = "no price table (litellm is not installed)"
PLACEHOLDER = "output tokens unknown: the file holds only a streaming placeholder (priced without the output)"


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
    model = str(record.get("model") or "")
    cost = table.cost(
        model, prompt=_int(record.get("provider_prompt_tokens")),
        completion=_int(record.get("completion_tokens")), cache_read=_int(record.get("cache_read_tokens")),
        cache_write=_int(record.get("cache_write_tokens")), reasoning=_int(record.get("reasoning_tokens")),
        cache_write_1h=_int(record.get("cache_write_1h_tokens")),
        reasoning_in_output=record.get("source_format") not in REASONING_SEPARATE)
    beside = record.get("billed_beside")  # server-side iterations billed beside the top-level usage (Claude Code)
    if isinstance(beside, list) and beside:
        return table.add_beside(cost, model, [it for it in beside if isinstance(it, Mapping)])
    return cost


def priced_record(record: Mapping[str, Any], table: PriceTable | None = None) -> dict[str, Any]:
    """A copy of ``record`` with ``cost_usd`` (None when unknown) and ``cost_problem`` (why; "" when known).
    ``table`` defaults to :func:`price_table`."""
    cost = record_cost(record, table if table is not None else price_table())
    out = dict(record)
    out["cost_usd"] = None if cost.usd is None else round(cost.usd, 8)
    out["cost_problem"] = cost.problem
    return out


def priced_call(record: ContextRecord, table: PriceTable | None = None) -> TimelineCall:
    """``record`` as a timeline column, with its price (the same figures :func:`priced_record` gives its line).
    ``table`` defaults to :func:`price_table`."""
    cost = record_cost(record.to_json(), table if table is not None else price_table())
    return TimelineCall(record, Price(None if cost.usd is None else round(cost.usd, 8), cost.problem))


@dataclass(frozen=True)
class RecordsCost:
    """The cost of a session's calls: ``usd`` sums the known costs (None when no call has one);
    ``unpriced`` calls have none (then ``usd`` is a lower bound); ``problem`` is the first reason."""

    usd: float | None
    calls: int
    unpriced: int
    problem: str = ""
    partial: int = 0  # calls priced without their output (the file holds only a placeholder): usd a lower bound

    @property
    def lower_bound(self) -> bool:
        return bool(self.unpriced or self.partial)

    def to_json(self) -> dict[str, Any]:
        return {"cost_usd": self.usd, "calls": self.calls, "unpriced_calls": self.unpriced,
                "cost_problem": self.problem, "partial_calls": self.partial}


def call_record(call: ProviderCall, fmt: str = "") -> dict[str, Any]:
    """A reader's call as the figures of a ``context`` record (what :func:`record_cost` prices)."""
    return {"model": call.model, "provider_prompt_tokens": call.prompt_tokens,
            "cache_read_tokens": call.cache_read_tokens, "cache_write_tokens": call.cache_write_tokens,
            "completion_tokens": call.completion_tokens, "reasoning_tokens": call.reasoning_tokens,
            "cache_write_1h_tokens": call.cache_write_1h_tokens, "source_format": fmt,
            "completion_placeholder": call.completion_placeholder, "billed_beside": beside_of(call.iterations)}


def folder_records(folder: Path) -> list[dict[str, Any]]:
    """The ``context`` records of a ctxbench session folder's ``events.jsonl`` in order, one per call (what
    :func:`engine.context.diff.history_from_folder` makes its calls of); [] without one."""
    return records_json(context_records(read_folder_records(folder)))


CallLike = Mapping[str, Any] | TimelineCall  # a record's line or a timeline column (its line: to_json())


def records_cost(records: Iterable[CallLike], table: PriceTable | None = None) -> RecordsCost:
    """The cost of ``records``: each record's ``cost_usd`` when it has been priced (:func:`priced_record`,
    :func:`priced_call`), else priced now with ``table`` (default :func:`price_table`)."""
    total: float | None = None
    calls = unpriced = partial = 0
    problem = ""
    loaded: PriceTable | None = table
    for call in records:
        rec = call.to_json() if isinstance(call, TimelineCall) else call
        calls += 1
        if rec.get("completion_placeholder") is not None and rec.get("completion_tokens") is None:
            partial += 1
            problem = problem or PLACEHOLDER
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
    return RecordsCost(total, calls, unpriced, problem, partial)


def usd_text(value: float) -> str:
    """"$0.0670" below a dollar, "$12.34" from a dollar on (every view's dollar figure)."""
    return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"


def add_costs(*costs: RecordsCost) -> RecordsCost:
    """Several :class:`RecordsCost` as one (the known sums added; None when none is known)."""
    known = [c.usd for c in costs if c.usd is not None]
    return RecordsCost(sum(known) if known else None, sum(c.calls for c in costs), sum(c.unpriced for c in costs),
                       next((c.problem for c in costs if c.problem), ""), sum(c.partial for c in costs))


NONE = RecordsCost(None, 0, 0)


class RunningCost:
    """:func:`records_cost` of a growing list of records whose last one may still change (a followed session's
    timeline), kept in constant time per change: the records before the last are summed once, in order, so
    :meth:`cost` equals ``records_cost(records)`` exactly (the same additions in the same order)."""

    def __init__(self, records: Sequence[CallLike] = (), table: PriceTable | None = None) -> None:
        self._table = table
        self._before = records_cost(records[:-1], table)  # every record but the last
        self._last: list[CallLike] = list(records[-1:])

    def append(self, record: CallLike) -> None:
        """A new last record (the one before it is final now)."""
        if self._last:
            self._before = add_costs(self._before, records_cost(self._last, self._table))
        self._last = [record]

    def replace_last(self, record: CallLike) -> None:
        """The last record's figures changed (appended when there is none)."""
        if not self._last:
            self.append(record)
        self._last = [record]

    def cost(self) -> RecordsCost:
        """The cost of all the records so far."""
        return add_costs(self._before, records_cost(self._last, self._table)) if self._last else self._before


@dataclass(frozen=True)
class SessionCost:
    """A session's cost (see the module's doc): ``main`` its own calls, ``subagents`` its subagents' calls,
    ``compaction`` the compactions' own calls; ``total`` all three; ``agent_usd`` the agent's own cost where it
    records one (Claude Code's ``cost-state``), None elsewhere."""

    main: RecordsCost
    subagents: RecordsCost = NONE
    compaction: RecordsCost = NONE
    agent_usd: float | None = None

    @property
    def total(self) -> RecordsCost:
        return add_costs(self.main, self.subagents, self.compaction)

    def with_main(self, records: Iterable[Mapping[str, Any]] | RunningCost,
                  table: PriceTable | None = None) -> SessionCost:
        """The same cost with the main session's calls now ``records`` (a followed session's timeline grew; a
        :class:`RunningCost` of them: its cost, kept as they came)."""
        return replace(self, main=records.cost() if isinstance(records, RunningCost) else records_cost(records, table))

    @property
    def usd(self) -> float | None:
        return self.total.usd

    def breakdown(self) -> str:
        """"main $10.54 · subagents $0.26 (3 calls) · compaction $0.11 (1 call)" (the parts that have calls)."""
        parts = []
        for name, cost in (("main", self.main), ("subagents", self.subagents), ("compaction", self.compaction)):
            if cost.calls:
                usd = "unknown" if cost.usd is None else usd_text(cost.usd) + ("+" if cost.lower_bound else "")
                parts.append(f"{name} {usd} ({cost.calls:,} call{'s' if cost.calls != 1 else ''})")
        return " · ".join(parts)

    def lines(self) -> list[str]:
        """The cost said in full (a tooltip, the Markdown export's head): total, breakdown, the agent's own."""
        total = self.total
        head = ("unknown" if total.usd is None else usd_text(total.usd) + ("+" if total.lower_bound else ""))
        out = [f"Cost {head} at litellm's prices: {self.breakdown()}" if total.calls else "No calls"]
        if total.unpriced:
            out.append(f"{total.unpriced} call(s) without a price are not counted"
                       + (f": {total.problem}" if total.problem else ""))
        if total.partial:
            out.append(f"{total.partial} call(s) priced without their output: {PLACEHOLDER.split(': ', 1)[1]}")
        if self.agent_usd is not None:
            diff = compare_agent_cost(total.usd, self.agent_usd)
            line = f"The agent's own cost: {usd_text(self.agent_usd)}"
            if (d := diff.get("difference_usd")) is not None:
                line += f" (ours {'+' if d >= 0 else '−'}{usd_text(abs(d))})"
            out.append(line)
        return out

    def to_json(self) -> dict[str, Any]:
        """The total's fields (``cost_usd``, ``calls``, ``unpriced_calls``, ``cost_problem``), each part's
        (``main``, ``subagents``, ``compaction``) and the agent's own cost with the difference."""
        return {**self.total.to_json(), "main": self.main.to_json(), "subagents": self.subagents.to_json(),
                "compaction": self.compaction.to_json(), **compare_agent_cost(self.total.usd, self.agent_usd)}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _usd(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def row_cost(row: Mapping[str, Any]) -> SessionCost:
    """The cost of a usage index's session row (``main_cost_usd`` / ``main_calls``, ``subagents_cost_usd`` /
    ``subagent_calls``, ``compaction_cost_usd`` / ``compaction_calls``, ``agent_cost_usd``): the same
    :class:`SessionCost` the window and ``ctxbench tools`` make of the session file, so the Usage view and
    ``ctxbench usage`` say its parts with :meth:`SessionCost.breakdown` (each part's calls without a price:
    ``main_unpriced``, ``subagents_unpriced``, ``compaction_unpriced``)."""
    parts = [RecordsCost(_usd(row.get(f"{name}_cost_usd")), _count(row.get(calls)), _count(row.get(f"{name}_unpriced")))
             for name, calls in (("main", "main_calls"), ("subagents", "subagent_calls"),
                                 ("compaction", "compaction_calls"))]
    return SessionCost(parts[0], parts[1], parts[2], _usd(row.get("agent_cost_usd")))


def source_cost(src: SourceSession, table: PriceTable | None = None) -> SessionCost:
    """The cost of a reader's session (see :func:`session_parts`)."""
    table = table if table is not None else price_table()
    groups: dict[str, list[dict[str, Any]]] = {"main": [], "task": [], "compaction": []}
    for _, kind, _, call in session_parts(src):
        groups[kind].append(call_record(call, src.format))
    return SessionCost(records_cost(groups["main"], table), records_cost(groups["task"], table),
                       records_cost(groups["compaction"], table), src.agent_cost_usd)


def compaction_call_record(event: CompactionRecord) -> dict[str, Any] | None:
    """The call of a ``compaction`` record's ``cost`` (its summarising call), as a record to price; None when it
    has none or the call is counted as a call of the session already (``cost_separate`` false)."""
    cost = event.cost
    if cost is None or cost.get("cost_separate") is False:
        return None
    return _compaction_call(event.source_format, cost)


def compaction_call_cost(event: CompactionRecord, table: PriceTable | None = None) -> CallCost | None:
    """What a ``compaction`` record's own call cost at litellm's prices (shown by the Compactions tab and the
    export whether or not it is also a call of the session); None when the record holds no call. A call whose
    output the file does not hold (``completion_placeholder``) is priced without it, ``problem`` saying so."""
    cost = event.cost
    if cost is None or (cost.get("prompt_tokens") is None and cost.get("completion_tokens") is None
                        and cost.get("completion_placeholder") is None):
        return None
    record = _compaction_call(event.source_format, cost)
    priced = record_cost(record, table if table is not None else price_table())
    if priced.usd is not None and record.get("completion_tokens") is None \
            and record.get("completion_placeholder") is not None:
        priced.problem = PLACEHOLDER
    return priced


def _compaction_call(source_format: str, cost: Mapping[str, Any]) -> dict[str, Any]:
    return {"model": cost.get("model"), "provider_prompt_tokens": cost.get("prompt_tokens"),
            "cache_read_tokens": cost.get("cache_read_tokens"), "cache_write_tokens": cost.get("cache_write_tokens"),
            "cache_write_1h_tokens": cost.get("cache_write_1h_tokens"),
            "completion_tokens": cost.get("completion_tokens"), "reasoning_tokens": cost.get("reasoning_tokens"),
            "completion_placeholder": cost.get("completion_placeholder"),
            "source_format": source_format}




def _agent_cost(folder: Path) -> float | None:
    try:
        meta = json.loads((Path(folder) / "session.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    imported = meta.get("import") if isinstance(meta, dict) else None
    usd = imported.get("agent_cost_usd") if isinstance(imported, dict) else None
    return float(usd) if isinstance(usd, int | float) and not isinstance(usd, bool) else None


def folder_cost(folder: Path, table: PriceTable | None = None,
                records: Iterable[CallLike] | None = None,
                events: Sequence[Record] | None = None) -> SessionCost:
    """The cost of a session folder (ctxbench's own, an import, a source view): its ``context`` records (or
    ``records``, the same records already read and priced: the window's timeline), the ``cost`` of its
    ``compaction`` records, and each subagent folder under ``subagents/`` (its calls under *subagents*, its
    compactions' under *compaction*). ``events``: the folder's records already read (the open session's)."""
    folder = Path(folder)
    events = read_folder_records(folder) if events is None else events
    main_records = ([r.to_json() if isinstance(r, TimelineCall) else r for r in records] if records is not None
                    else records_json(context_records(events)))
    comp = [r for e in compaction_records(events) if (r := compaction_call_record(e)) is not None]
    if (main_records or comp) and table is None and any("cost_usd" not in r for r in (*main_records, *comp)):
        table = price_table()
    subs, sub_comp = [], []
    sub_dir = folder / "subagents"
    if sub_dir.is_dir():
        for child in sorted(p for p in sub_dir.iterdir() if p.is_dir()):
            cost = folder_cost(child, table)
            subs += [cost.main, cost.subagents]
            sub_comp.append(cost.compaction)
    return SessionCost(records_cost(main_records, table), add_costs(*subs),
                       add_costs(records_cost(comp, table), *sub_comp), _agent_cost(folder))


def session_cost(path: Path) -> SessionCost | None:
    """The cost of a ctxbench session folder (:func:`folder_cost`) or of an agent's session file a reader knows
    (:func:`source_cost`); None for a file no reader knows."""
    from engine.sources.detect import detect_format
    from engine.sources.readers import READERS, read_source

    path = Path(path)
    if path.is_dir():
        return folder_cost(path)
    fmt = detect_format(path)
    if fmt not in READERS:
        return None
    return source_cost(read_source(path, fmt))


__all__ = ["NO_TABLE", "RecordsCost", "RunningCost", "SessionCost", "add_costs", "call_record", "compaction_call_cost",
           "compaction_call_record", "folder_cost", "folder_records", "price_table", "priced_call", "priced_record",
           "record_cost", "records_cost", "row_cost",
           "session_cost", "session_parts", "source_cost", "usd_text"]
