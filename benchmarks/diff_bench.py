"""Context diff and per-tool attribution on the largest shared Claude Code session (issue 13, items 7
and 9): the time a click on the timeline waits for. Target: each well under 100 ms.

Figures, best of several rounds:

- reading the session file (the readers; reported only, measured against its own target elsewhere);
- the diff of the two calls on either side of its compaction and of the first and last calls, from a
  fresh history (no token counted yet) and again on the same history (tokens memoised);
- the tokens by tool of the whole session, fresh and again; its cost by tool (pricing every call and
  sharing it out, :mod:`engine.usage.tool_costs`), fresh;
- the same diff and attribution from the session folder its import wrote (loading the folder
  reported beside them);
- both on a history ten times as long (the session's messages repeated with new ids, one call per
  ten messages): the largest diff (first call → last) and the attribution, fresh.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.engine_bench import MB, Figure, best_of
from engine.model.messages import Message

REPO = Path(__file__).resolve().parent.parent
SESSION = REPO.parent / "shared" / "data" / "sessions" / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
TARGET_S = 0.1


def _ms(name: str, seconds: float, target: float | None = TARGET_S) -> Figure:
    if target is None:
        return Figure(name, seconds * 1000, "ms", "reported", None)
    return Figure(name, seconds * 1000, "ms", f"< {target * 1000:.0f} ms", seconds < target)


def _size(path: Path) -> int:
    folder = path.with_suffix("")
    return path.stat().st_size + (sum(f.stat().st_size for f in folder.rglob("*.jsonl")) if folder.is_dir() else 0)


def bench_all() -> list[Figure]:
    from engine.context.attribution import attribute
    from engine.context.diff import History, diff_calls, history_from_folder, history_from_source
    from engine.ingest import import_source
    from engine.sources.readers import read_source
    from engine.usage.costs import call_record
    from engine.usage.tool_costs import price_records, tool_costs

    if not SESSION.exists():
        return [Figure(f"diff: {SESSION.name} is not on this machine", 0, "", "", None)]
    label = f"{_size(SESSION) / MB:.1f} MiB Claude Code session (with its subagents)"
    src = read_source(SESSION, "claude-code")
    figs = [_ms(f"diff: read the {label}", best_of(lambda: read_source(SESSION, "claude-code"), repeat=3), None)]
    fresh: Callable[[], History] = lambda: history_from_source(src)  # noqa: E731
    history = fresh()
    after = next(c.number for c in history.calls if c.summary is not None)
    last = len(history.calls)
    figs.append(_ms(f"diff: calls {after - 1} → {after} (compaction), fresh history",
                    best_of(lambda: diff_calls(fresh(), after - 1, after))))
    figs.append(_ms(f"diff: calls 1 → {last}, fresh history", best_of(lambda: diff_calls(fresh(), 1, last))))
    figs.append(_ms(f"diff: calls {after - 1} → {after}, tokens memoised",
                    best_of(lambda: diff_calls(history, after - 1, after), number=10)))
    figs.append(_ms(f"tools: attribution of {len(src.messages)} messages, fresh history",
                    best_of(lambda: attribute(fresh()))))
    figs.append(_ms("tools: attribution, tokens memoised", best_of(lambda: attribute(history), number=10)))
    records = [call_record(c, src.format) for c in src.calls]
    figs.append(_ms(f"tools: cost by tool of {len(records)} calls, fresh history",
                    best_of(lambda: tool_costs(fresh(), price_records(records)))))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "cc"
        import_source(SESSION, session_dir=folder)
        figs.append(_ms("diff: load the imported session folder", best_of(lambda: history_from_folder(folder),
                                                                            repeat=3), None))
        loaded = history_from_folder(folder)
        figs.append(_ms(f"diff: calls {after - 1} → {after} from the folder, fresh",
                        best_of(lambda: diff_calls(History(loaded.messages, loaded.calls, loaded.summaries),
                                                   after - 1, after))))
        figs.append(_ms("tools: attribution from the folder, fresh",
                        best_of(lambda: attribute(History(loaded.messages, loaded.calls, loaded.summaries)))))
    figs.extend(_scaled(src.messages))
    return figs


def _scaled(messages: list[Message], times: int = 10) -> list[Figure]:
    from engine.context.attribution import attribute
    from engine.context.diff import CallPoint, History, diff_calls

    big = [{**m, "id": f"{k}-{m.get('id')}"} for k in range(times) for m in messages]
    calls = [CallPoint(i + 1, 0, end, None, None) for i, end in enumerate(range(1, len(big) + 1, 10))]
    fresh = lambda: History(big, calls, [])  # noqa: E731
    return [_ms(f"diff: calls 1 → {len(calls)} of {len(big)} messages (10×), fresh",
                best_of(lambda: diff_calls(fresh(), 1, len(calls)), repeat=3)),
            _ms(f"tools: attribution of {len(big)} messages (10×), fresh",
                best_of(lambda: attribute(fresh()), repeat=3))]


ALL: dict[str, Callable[[], list[Figure]]] = {"diff": bench_all}

if __name__ == "__main__":
    for fig in bench_all():
        print(fig.line(), flush=True)
