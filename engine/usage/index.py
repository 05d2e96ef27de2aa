"""An index of every provider call of every agent session on this machine, queried with embedded DuckDB.

Built from the sources scan (:func:`engine.sources.discovery.scan_sources` lists the session files; each is
read with :func:`engine.sources.readers.read_source`, its subagents' files included). Kept in
``<data dir>/usage/``::

    files.json                      one entry per session file: size + mtime, its days, its session row
    calls/day=YYYY-MM-DD/*.parquet  one row per call (main session, subagents, compaction calls)
    tool_results/day=…/*.parquet    one row per tool result (tool, estimated tokens)
    sessions.parquet                one row per session file (peak fullness, compactions, the agent's own cost)
    call_rollup.parquet             the calls summed per (day, agent, project, session file, model)
    tool_rollup.parquet             per (day, tool, session file): its results (count, tokens, largest) and
                                    the calls that used it (count, cost)

The queries (:func:`summarize`, :func:`engine.usage.report.usage_report`) read the two rollups, not the
call rows: about 1 % of their rows. Each rollup is one file, rewritten with the index's touched days (their
rows recomputed from those days' Parquet files, the other days' rows kept); an index without them (written
by an older version) gets them built from its rows on its first query.

Incremental: a file whose size and mtime did not change is not read again; a new or grown file is read
and its rows replace the ones it had (only the days it touches are rewritten, one Parquet file a day). A Claude
Code file that grows while the same :class:`UsageIndex` object lives (the window's) is read whole once, then
only from where its reader stopped (:class:`engine.sources.claude_code.ClaudeCodeReader`, up to :data:`FOLLOWED`
files kept).
A session file that disappears (Claude Code removes old ones) keeps its rows: what was spent stays
spent. A new litellm price table (another litellm version) prices everything again.

Costs come from :mod:`engine.usage.prices`; a call of a model the table does not know has no cost
(``cost_usd`` NULL and ``cost_problem``), never $0. Claude Code's one-hour cache writes
(``usage.cache_creation.ephemeral_1h_input_tokens``) are read from the file by a light pass, as the
readers' :class:`ProviderCall` does not carry them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

from engine.context.tokens import estimate_message_tokens
from engine.sources.discovery import SourceEntry, scan_sources
from engine.sources.model import ProviderCall, SourceError, SourceFormat, SourceSession, int_or_none
from engine.sources.readers import read_source
from engine.store.config import Settings, data_dir
from engine.store.fsutil import atomic_write_bytes
from engine.usage.prices import REASONING_SEPARATE, PriceTable, PriceTableError, litellm_version, load_table

INDEX_DIR = "usage"
MANIFEST = "files.json"
INDEX_VERSION = 1
UNKNOWN_DAY = "1970-01-01"  # a call without any time (rare): kept, under this day
FOLLOWED = 8  # grown Claude Code files whose readers an index keeps (read from where they stopped)

GroupBy = Literal["day", "project", "model", "session", "tool", "agent"]
GROUPS: tuple[str, ...] = ("day", "project", "model", "session", "tool", "agent")

CALL_COLUMNS: dict[str, str] = {
    "agent": "VARCHAR", "project": "VARCHAR", "session_id": "VARCHAR", "file_id": "VARCHAR",
    "subagent": "VARCHAR", "kind": "VARCHAR", "call_index": "INTEGER", "request_id": "VARCHAR",
    "model": "VARCHAR", "ts": "TIMESTAMP", "day": "DATE", "prompt_tokens": "BIGINT", "input_tokens": "BIGINT",
    "cache_read_tokens": "BIGINT", "cache_write_tokens": "BIGINT", "cache_write_1h_tokens": "BIGINT",
    "output_tokens": "BIGINT", "reasoning_tokens": "BIGINT", "cost_usd": "DOUBLE", "cost_problem": "VARCHAR",
    "price_key": "VARCHAR", "window": "BIGINT", "tools": "VARCHAR[]",
}
TOOL_COLUMNS: dict[str, str] = {
    "agent": "VARCHAR", "project": "VARCHAR", "session_id": "VARCHAR", "file_id": "VARCHAR",
    "subagent": "VARCHAR", "ts": "TIMESTAMP", "day": "DATE", "tool": "VARCHAR", "tool_call_id": "VARCHAR",
    "tokens": "BIGINT",
}
ROLLUPS = ("call_rollup", "tool_rollup")
# a call rollup row: (day, agent, project, session_id, file_id, model) and the sums of its calls
_CALL_ROLLUP = """
    SELECT CAST(day AS DATE) AS day, agent, project, session_id, file_id, model,
           any_value(price_key) AS price_key, count(*)::BIGINT AS calls,
           sum(prompt_tokens)::BIGINT AS prompt_tokens, sum(input_tokens)::BIGINT AS input_tokens,
           sum(cache_read_tokens)::BIGINT AS cache_read_tokens, sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
           sum(cache_write_1h_tokens)::BIGINT AS cache_write_1h_tokens, sum(output_tokens)::BIGINT AS output_tokens,
           sum(reasoning_tokens)::BIGINT AS reasoning_tokens, sum(cost_usd) AS cost_usd,
           count(*) FILTER (WHERE cost_usd IS NULL)::BIGINT AS unpriced_calls,
           (count(*) FILTER (WHERE cost_usd IS NOT NULL) = count(*)) AS cost_known,
           min(ts) AS first_call, max(ts) AS last_call, max(prompt_tokens) AS peak_prompt_tokens,
           max(prompt_tokens / nullif("window", 0)) AS peak_fullness,
           count(*) FILTER (WHERE kind = 'compaction')::BIGINT AS compaction_calls
    FROM {source} GROUP BY ALL"""
# a tool rollup row: (day, tool, file_id), its results and the calls that used it
_TOOL_ROLLUP = """
    WITH r AS (
        SELECT CAST(day AS DATE) AS day, tool, file_id, count(*)::BIGINT AS results,
               sum(tokens)::BIGINT AS result_tokens, max(tokens) AS largest
        FROM {results} GROUP BY ALL),
    u AS (
        SELECT day, tool, file_id, count(*)::BIGINT AS used_calls, sum(cost_usd) AS cost_usd_of_calls FROM (
            SELECT CAST(day AS DATE) AS day, unnest(tools) AS tool, file_id, cost_usd FROM {calls})
        GROUP BY ALL)
    SELECT coalesce(r.day, u.day) AS day, coalesce(r.tool, u.tool) AS tool, coalesce(r.file_id, u.file_id) AS file_id,
           coalesce(r.results, 0) AS results, r.result_tokens, r.largest, coalesce(u.used_calls, 0) AS used_calls,
           u.cost_usd_of_calls
    FROM r FULL OUTER JOIN u
        ON r.day = u.day AND r.tool IS NOT DISTINCT FROM u.tool AND r.file_id IS NOT DISTINCT FROM u.file_id"""

SESSION_COLUMNS: dict[str, str] = {
    "agent": "VARCHAR", "project": "VARCHAR", "session_id": "VARCHAR", "file_id": "VARCHAR", "path": "VARCHAR",
    "title": "VARCHAR", "model": "VARCHAR", "started": "VARCHAR", "last_activity": "VARCHAR", "calls": "BIGINT",
    "compactions": "BIGINT", "window": "BIGINT", "peak_prompt_tokens": "BIGINT", "peak_fullness": "DOUBLE",
    "agent_cost_usd": "DOUBLE",
}


def index_dir() -> Path:
    return data_dir() / INDEX_DIR


def file_id(path: str) -> str:
    return hashlib.sha1(path.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class IndexReport:
    """What one :meth:`UsageIndex.update` did."""

    files: int = 0  # session files the scan listed
    read: int = 0  # new or changed: read
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    calls: int = 0  # call rows written for the files read
    tool_results: int = 0
    days_rewritten: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "read": self.read, "unchanged": self.unchanged,
                "failed": [{"path": p, "reason": r} for p, r in self.failed], "calls": self.calls,
                "tool_results": self.tool_results, "days_rewritten": self.days_rewritten,
                "seconds": round(self.seconds, 3)}


# --------------------------------------------------------------------------- rows of one session file


def _day(ts: str, fallback: str) -> str:
    return (ts or fallback or UNKNOWN_DAY)[:10]


def _ts(ts: str) -> str | None:
    """An ISO timestamp as naive UTC for DuckDB's TIMESTAMP, or None."""
    if not ts:
        return None
    try:
        parsed = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.isoformat(sep=" ")


def claude_one_hour_writes(path: Path) -> dict[str, int]:
    """{requestId: one-hour cache write tokens} of a Claude Code file (the largest figure seen per request)."""
    found: dict[str, int] = {}
    try:
        with open(path, "rb") as fh:
            _one_hour_of_lines(fh, found)
    except OSError:
        pass
    return found


def _one_hour_of_lines(lines: Any, found: dict[str, int]) -> dict[str, int]:
    """Add the one-hour cache writes of ``lines`` (bytes lines of a Claude Code file) to ``found``."""
    for raw in lines:
        if b"ephemeral_1h_input_tokens" not in raw:
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        msg = obj.get("message") if isinstance(obj, dict) else None
        usage = msg.get("usage") if isinstance(msg, dict) else None
        creation = usage.get("cache_creation") if isinstance(usage, dict) else None
        if not isinstance(creation, dict):
            continue
        value = int_or_none(creation.get("ephemeral_1h_input_tokens"))
        request = str(obj.get("requestId") or obj.get("requestRef") or "")
        if value and request:
            found[request] = max(found.get(request, 0), value)
    return found


@dataclass
class _Followed:
    """A grown Claude Code file's incremental reader, kept by a long-lived :class:`UsageIndex` so that the
    next growth is read from where it stopped (only the appended bytes)."""

    reader: Any  # engine.sources.claude_code.ClaudeCodeReader
    offset: int  # bytes of the file fed to the reader (its partial last line waits inside it)
    inode: int
    one_hour: dict[str, int]


def _tool_names(session: SourceSession) -> dict[str, str]:
    names: dict[str, str] = {}
    for msg in session.messages:
        for call in msg.get("tool_calls") or ():
            if isinstance(call, dict):
                fn = call.get("function")
                if isinstance(fn, dict) and isinstance(call.get("id"), str):
                    names[call["id"]] = str(fn.get("name") or "")
    return names


def _tools_of(session: SourceSession, call: ProviderCall) -> list[str]:
    if not 0 <= call.message_index < len(session.messages):
        return []
    msg = session.messages[call.message_index]
    if msg.get("role") != "assistant":
        return []
    out = []
    for tc in msg.get("tool_calls") or ():
        fn = tc.get("function") if isinstance(tc, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            out.append(str(fn["name"]))
    return out


@dataclass
class FileRows:
    calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    session: dict[str, Any] = field(default_factory=dict)


def rows_of(entry: SourceEntry, session: SourceSession, prices: PriceTable | None, fid: str,
            one_hour_main: dict[str, int] | None = None) -> FileRows:
    """The index rows of one session file, read (its subagents included); ``one_hour_main``: the main file's
    one-hour cache writes when already known (else read from the file)."""
    out = FileRows()
    fmt: SourceFormat = session.format
    reasoning_in_output = fmt not in REASONING_SEPARATE
    fallback = session.started or entry.started or session.last_activity or entry.last_activity
    base = {"agent": entry.agent, "project": entry.project or session.project, "session_id": entry.session_id,
            "file_id": fid}
    parts: list[tuple[str, str, SourceSession]] = [("", "main", session)]
    for sub in session.subagents:
        if sub.session is not None:
            parts.append((sub.id, sub.kind, sub.session))
    peak_prompt, peak_full = 0, 0.0
    window_seen: int | None = None
    in_calls = {id(c) for _, _, part in parts for c in part.calls}
    for sub_id, kind, part in parts:
        if fmt != "claude-code":
            one_hour = {}
        elif sub_id == "" and one_hour_main is not None:
            one_hour = one_hour_main
        else:
            one_hour = claude_one_hour_writes(part.path) if part.path.is_file() else {}
        calls = list(part.calls)
        # a compaction's own call that is no call of any part (OpenCode's summary message; Claude Code's
        # derived from cost-state lines); Claude Code's agent-acompact file is a part already
        calls += [c.cost for c in part.compactions if c.cost is not None and id(c.cost) not in in_calls]
        for call in calls:
            window = call.window or part.window or session.window
            is_main = id(call) in in_calls
            write_1h = one_hour.get(call.request_id)
            if prices is None:
                cost_usd, problem, key = None, "no price table (litellm is not installed)", ""
            else:
                cost = prices.call_cost(call, cache_write_1h_tokens=write_1h, reasoning_in_output=reasoning_in_output)
                cost_usd, problem, key = cost.usd, cost.problem, cost.price_key
            prompt = call.prompt_tokens
            uncached = None if prompt is None else max(0, prompt - (call.cache_read_tokens or 0)
                                                       - (call.cache_write_tokens or 0))
            out.calls.append({
                **base, "subagent": sub_id, "kind": kind if is_main else "compaction", "call_index": call.index,
                "request_id": call.request_id, "model": call.model, "ts": _ts(call.ts),
                "day": _day(call.ts, fallback), "prompt_tokens": prompt, "input_tokens": uncached,
                "cache_read_tokens": call.cache_read_tokens, "cache_write_tokens": call.cache_write_tokens,
                "cache_write_1h_tokens": write_1h, "output_tokens": call.completion_tokens,
                "reasoning_tokens": call.reasoning_tokens, "cost_usd": cost_usd, "cost_problem": problem,
                "price_key": key, "window": window, "tools": _tools_of(part, call) if is_main else [],
            })
            if sub_id == "" and is_main and prompt:
                peak_prompt = max(peak_prompt, prompt)
                if window:
                    window_seen = max(window_seen or 0, window)
                    peak_full = max(peak_full, prompt / window)
        names = _tool_names(part)
        for msg in part.messages:
            if msg.get("role") != "tool":
                continue
            call_id = str(msg.get("tool_call_id") or "")
            ts = str(msg.get("ts") or "")
            out.tool_results.append({
                **base, "subagent": sub_id, "ts": _ts(ts), "day": _day(ts, fallback),
                "tool": names.get(call_id) or str(msg.get("name") or "") or "(unknown)", "tool_call_id": call_id,
                "tokens": estimate_message_tokens(msg),
            })
    out.session = {
        **base, "path": str(session.path), "title": entry.title, "model": session.model or entry.model,
        "started": session.started or entry.started, "last_activity": session.last_activity or entry.last_activity,
        "calls": len(session.calls), "compactions": len(session.compactions),
        "window": window_seen or session.window or entry.window, "peak_prompt_tokens": peak_prompt or None,
        "peak_fullness": round(peak_full, 6) if peak_full else None,
        "agent_cost_usd": session.agent_cost_usd if session.agent_cost_usd is not None else entry.agent_cost_usd,
    }
    return out


# --------------------------------------------------------------------------- the index


def _stamp(entry: SourceEntry) -> list[Any] | None:
    """What tells that a session changed: the file's size and mtime; for a session inside a database
    (OpenCode's ``opencode.db#ses_…``, whose file changes with every session) the scan's own figures."""
    path = Path(entry.path)
    try:
        st = path.stat()
    except OSError:
        if "#" not in entry.path or not Path(entry.path.split("#", 1)[0]).exists():
            return None
        return [entry.last_activity, entry.calls, entry.last_prompt_tokens]
    return [st.st_size, st.st_mtime_ns]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer at a time (POSIX advisory lock; elsewhere no lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        try:
            import fcntl
        except ImportError:
            yield
            return
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _columns_sql(columns: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{_sql_str(k)}: {_sql_str(v)}" for k, v in columns.items()) + "}"


class UsageIndex:
    """The usage index in ``root`` (default ``<data dir>/usage``)."""

    def __init__(self, root: Path | None = None, *, prices: PriceTable | None = None) -> None:
        self.root = Path(root) if root is not None else index_dir()
        self._prices = prices
        # incremental readers of Claude Code files that grew while this object lived (most recent last):
        # the next growth of such a file is read from where its reader stopped, not whole
        self._followed: dict[str, _Followed] = {}

    def _read(self, entry: SourceEntry, grew: bool) -> tuple[SourceSession, dict[str, int] | None]:
        """The session of ``entry`` and, for Claude Code, its main file's one-hour cache writes. A Claude Code
        file that grew is read incrementally: whole the first time (its reader then kept, at most
        :data:`FOLLOWED` of them), then only what was appended since (same inode, not shorter)."""
        path = Path(entry.path)
        if entry.agent != "claude-code" or not (grew or entry.path in self._followed):
            self._followed.pop(entry.path, None)
            return read_source(path, entry.agent), None
        from engine.sources.claude_code import ClaudeCodeReader

        st = path.stat()
        kept = self._followed.pop(entry.path, None)
        if kept is None or kept.inode != st.st_ino or st.st_size < kept.offset:
            kept = _Followed(ClaudeCodeReader(path, bulk=True), 0, st.st_ino, {})
        with open(path, "rb") as fh:
            fh.seek(kept.offset)
            data = fh.read()
        kept.offset += len(data)
        whole = kept.reader.bulk
        if whole:  # the whole file, complete lines: scanned, then built once
            cut = data.rfind(b"\n") + 1
            kept.reader.feed(data[:cut])
            kept.reader.settle()
            if cut < len(data):
                kept.reader.feed(data[cut:])
        else:
            kept.reader.feed(data)
        _one_hour_of_lines(data.splitlines(), kept.one_hour)
        session = kept.reader.read_beside(subagents=True)
        self._followed[entry.path] = kept
        while len(self._followed) > FOLLOWED:
            self._followed.pop(next(iter(self._followed)))
        return session, kept.one_hour

    # ------------------------------------------------------------------ manifest

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def _load_manifest(self) -> dict[str, Any]:
        try:
            data = json.loads(self.manifest_path.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != INDEX_VERSION or not isinstance(
                data.get("files"), dict):
            return {}
        return data

    def prices(self) -> PriceTable | None:
        if self._prices is None:
            try:
                self._prices = load_table()
            except PriceTableError:
                return None
        return self._prices

    # ------------------------------------------------------------------ update

    def update(self, settings: Settings | None = None, *, refresh: bool = False,
               env: Mapping[str, str] | None = None, home: Path | None = None,
               entries: list[SourceEntry] | None = None) -> IndexReport:
        """Bring the index up to date with the session files on the machine (see the module's doc)."""
        started = time.perf_counter()
        report = IndexReport()
        if entries is None:
            entries = scan_sources(settings, env=env, home=home, index=self.root / "sources-index.json")
        with _locked(self.root / ".lock"):
            manifest = self._load_manifest()
            prices = self.prices()
            version = litellm_version() if prices is not None else ""
            if manifest.get("prices") != version:
                refresh = True  # another price table: price everything again
            known: dict[str, Any] = {} if refresh else dict(manifest.get("files") or {})
            if refresh:
                self._clear()
            changed: dict[str, FileRows] = {}
            old_days: set[str] = set()
            report.files = len(entries)
            for entry in entries:
                stamp = _stamp(entry)
                if stamp is None:
                    report.failed.append((entry.path, "the file is gone"))
                    continue
                old = known.get(entry.path)
                if isinstance(old, dict) and old.get("stamp") == stamp:
                    report.unchanged += 1
                    continue
                fid = file_id(entry.path)
                try:
                    session, one_hour = self._read(entry, grew=isinstance(old, dict) and not refresh)
                except (SourceError, OSError, ValueError, RecursionError) as exc:
                    self._followed.pop(entry.path, None)
                    report.failed.append((entry.path, str(exc)))
                    continue
                rows = rows_of(entry, session, prices, fid, one_hour)
                changed[fid] = rows
                if isinstance(old, dict):
                    old_days.update(str(d) for d in old.get("days") or ())
                days = sorted({r["day"] for r in rows.calls} | {r["day"] for r in rows.tool_results})
                known[entry.path] = {"stamp": stamp, "file_id": fid, "days": days, "session": rows.session}
                report.read += 1
                report.calls += len(rows.calls)
                report.tool_results += len(rows.tool_results)
            if changed or refresh or not self.manifest_path.exists():
                report.days_rewritten = self._write(changed, old_days, known)
                manifest = {"version": INDEX_VERSION, "prices": version, "files": known}  # compact: written often
                atomic_write_bytes(self.manifest_path, json.dumps(manifest, ensure_ascii=False,
                                                                  separators=(",", ":")).encode("utf-8"))
        report.seconds = time.perf_counter() - started
        return report

    def _clear(self) -> None:
        for name in ("calls", "tool_results"):
            shutil.rmtree(self.root / name, ignore_errors=True)
        for name in ("sessions", *ROLLUPS):
            with contextlib.suppress(OSError):
                (self.root / f"{name}.parquet").unlink()

    def _write(self, changed: dict[str, FileRows], old_days: set[str], known: dict[str, Any]) -> int:
        import duckdb

        self.root.mkdir(parents=True, exist_ok=True)
        fids = set(changed)
        with tempfile.TemporaryDirectory(dir=self.root, prefix=".tmp-") as tmp:
            tmp_dir = Path(tmp)
            con = duckdb.connect()
            try:
                days: set[str] = set(old_days)
                for table, columns, rows_key in (("calls", CALL_COLUMNS, "calls"),
                                                 ("tool_results", TOOL_COLUMNS, "tool_results")):
                    rows = [r for fr in changed.values() for r in getattr(fr, rows_key)]
                    self._load_rows(con, f"new_{table}", columns, rows, tmp_dir / f"{table}.jsonl")
                    days.update(r["day"] for r in rows)
                for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
                    self._rewrite_days(con, table, columns, sorted(days), fids, tmp_dir)
                self._write_rollups(con, sorted(days), tmp_dir)
                sessions = [v["session"] for v in known.values() if isinstance(v, dict) and v.get("session")]
                self._load_rows(con, "new_sessions", SESSION_COLUMNS, sessions, tmp_dir / "sessions.jsonl")
                target = tmp_dir / "sessions.parquet"
                con.execute(f"COPY new_sessions TO {_sql_str(str(target))} (FORMAT PARQUET)")
                os.replace(target, self.root / "sessions.parquet")
            finally:
                con.close()
        return len(days)

    @staticmethod
    def _load_rows(con: Any, name: str, columns: Mapping[str, str], rows: list[dict[str, Any]], spool: Path) -> None:
        cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({cols})")
        if not rows:
            return
        with open(spool, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps({k: row.get(k) for k in columns}, ensure_ascii=False, default=str) + "\n")
        con.execute(f"INSERT INTO {name} SELECT * FROM read_json({_sql_str(str(spool))}, format='newline_delimited', "
                    f"columns={_columns_sql(columns)})")

    def _rewrite_days(self, con: Any, table: str, columns: Mapping[str, str], days: list[str], fids: set[str],
                      tmp_dir: Path) -> None:
        """Each day in ``days``: its old rows of files not in ``fids`` + the new rows, as one Parquet file."""
        base = self.root / table
        names = ", ".join(f'"{k}"' for k in columns if k != "day")
        fid_list = ", ".join(_sql_str(f) for f in sorted(fids)) or "''"
        for day in days:
            folder = base / f"day={day}"
            old_files = sorted(str(p) for p in folder.glob("*.parquet")) if folder.is_dir() else []
            parts = [f"SELECT {names}, DATE {_sql_str(day)} AS day FROM new_{table} WHERE day = DATE {_sql_str(day)}"]
            if old_files:
                listing = "[" + ", ".join(_sql_str(f) for f in old_files) + "]"
                parts.insert(0, f"SELECT {names}, DATE {_sql_str(day)} AS day FROM read_parquet({listing}, "
                                f"hive_partitioning=false) WHERE file_id NOT IN ({fid_list})")
            query = " UNION ALL ".join(parts)
            count = con.execute(f"SELECT count(*) FROM ({query})").fetchone()[0]
            staged = tmp_dir / table / f"day={day}"
            if count:
                staged.mkdir(parents=True, exist_ok=True)
                out_file = staged / f"data-{uuid.uuid4().hex[:12]}.parquet"
                con.execute(f"COPY (SELECT {names} FROM ({query}) ORDER BY ts NULLS LAST) TO "
                            f"{_sql_str(str(out_file))} (FORMAT PARQUET)")
            # swap: the day's folder becomes the staged one (or goes, when nothing is left)
            trash = tmp_dir / f"old-{table}-{day}"
            if folder.is_dir():
                os.replace(folder, trash)
            if count:
                base.mkdir(parents=True, exist_ok=True)
                os.replace(staged, folder)

    def _day_files(self, table: str, days: list[str] | None) -> list[str]:
        base = self.root / table
        if days is None:
            return sorted(str(p) for p in base.glob("day=*/*.parquet"))
        return sorted(str(p) for day in days for p in (base / f"day={day}").glob("*.parquet"))

    def _write_rollups(self, con: Any, days: list[str] | None, tmp_dir: Path) -> None:
        """Rewrite the rollups: the rows of ``days`` (None: all) recomputed from their day files (written
        already), the other days' rows kept."""
        if days is not None and not all((self.root / f"{name}.parquet").is_file() for name in ROLLUPS):
            days = None  # an index written before the rollups: all of it
        sources = {}
        for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
            files = self._day_files(table, days)
            if files:
                listing = "[" + ", ".join(_sql_str(f) for f in files) + "]"
                sources[table] = f"read_parquet({listing}, hive_partitioning=true, union_by_name=true)"
            else:  # none left: an empty relation of the table's columns
                cols = ", ".join(f"NULL::{v} AS \"{k}\"" for k, v in columns.items())
                sources[table] = f"(SELECT {cols} LIMIT 0)"
        fresh = {"call_rollup": _CALL_ROLLUP.format(source=sources["calls"]),
                 "tool_rollup": _TOOL_ROLLUP.format(results=sources["tool_results"], calls=sources["calls"])}
        day_list = ", ".join(f"DATE {_sql_str(d)}" for d in days or ())
        for name, query in fresh.items():
            target = self.root / f"{name}.parquet"
            if days is not None and target.is_file():
                keep = f"SELECT * FROM read_parquet({_sql_str(str(target))})"
                if day_list:
                    keep += f" WHERE day NOT IN ({day_list})"
                query = f"{keep} UNION ALL BY NAME ({query})"
            staged = tmp_dir / f"{name}.parquet"
            con.execute(f"COPY (SELECT * FROM ({query}) ORDER BY day) TO {_sql_str(str(staged))} (FORMAT PARQUET)")
            os.replace(staged, target)

    def rebuild_rollups(self) -> None:
        """Write the rollups from all the call and tool-result rows (an index of an older version)."""
        import duckdb

        with _locked(self.root / ".lock"), tempfile.TemporaryDirectory(dir=self.root, prefix=".tmp-") as tmp:
            con = duckdb.connect()
            try:
                self._write_rollups(con, None, Path(tmp))
            finally:
                con.close()

    # ------------------------------------------------------------------ query

    def _layout(self) -> tuple[bool, ...]:
        """Which of the index's parts exist (a cached connection is made again when this changes)."""
        return (any((self.root / "calls").glob("day=*/*.parquet")),
                any((self.root / "tool_results").glob("day=*/*.parquet")),
                *((self.root / f"{name}.parquet").is_file() for name in ("sessions", *ROLLUPS)))

    def connect(self) -> Any:
        """A DuckDB connection with the views ``calls``, ``tool_results``, ``sessions``, ``call_rollup`` and
        ``tool_rollup`` (empty tables when the index holds none): a cursor of an in-memory database kept per
        index folder for the process, whose views read the files when queried. Close it when done."""
        layout = self._layout()
        if (layout[0] or layout[1]) and not all(layout[3:]):
            self.rebuild_rollups()  # an index written before the rollups
            layout = self._layout()
        key = (str(self.root.resolve()), layout)
        with _DATABASES_LOCK:
            base = _DATABASES.get(key)
            if base is None:
                base = self._database(layout)
                for old in [k for k in _DATABASES if k[0] == key[0]]:
                    del _DATABASES[old]  # the old layout: dropped (its open cursors keep it alive)
                _DATABASES[key] = base
                while len(_DATABASES) > MAX_DATABASES:
                    del _DATABASES[next(iter(_DATABASES))]
            return base.cursor()

    def _database(self, layout: tuple[bool, ...]) -> Any:
        import duckdb

        con = duckdb.connect()
        for table, columns, there in (("calls", CALL_COLUMNS, layout[0]), ("tool_results", TOOL_COLUMNS, layout[1])):
            pattern = self.root / table / "day=*" / "*.parquet"
            if there:  # every day file is written with the table's columns (no union_by_name: binds 3× faster)
                con.execute(f"CREATE VIEW {table} AS SELECT * REPLACE (CAST(day AS DATE) AS day) FROM "
                            f"read_parquet({_sql_str(str(pattern))}, hive_partitioning=true)")
            else:
                cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
                con.execute(f"CREATE TABLE {table} ({cols})")
        for name, there in zip(("sessions", *ROLLUPS), layout[2:], strict=True):
            path = self.root / f"{name}.parquet"
            if there:  # a view, read when queried (loaded as a table: 40 ms more for a process's first query)
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_sql_str(str(path))})")
            elif name == "sessions":
                cols = ", ".join(f'"{k}" {v}' for k, v in SESSION_COLUMNS.items())
                con.execute(f"CREATE TABLE sessions ({cols})")
            else:  # the rollup of no rows
                query = (_CALL_ROLLUP.format(source="calls") if name == "call_rollup" else
                         _TOOL_ROLLUP.format(results="tool_results", calls="calls"))
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM ({query}) LIMIT 0")
        return con

    def query(self, by: str = "day", since: date | None = None) -> list[dict[str, Any]]:
        """The figures per group (see :func:`summarize`)."""
        con = self.connect()
        try:
            return summarize(con, by, since)
        finally:
            con.close()

    def totals(self, since: date | None = None) -> dict[str, Any]:
        con = self.connect()
        try:
            rows = _fetch(con, f"SELECT {_SUMS} FROM call_rollup WHERE {_since(since)}")
            return rows[0] if rows else {}
        finally:
            con.close()


# --------------------------------------------------------------------------- queries

_DATABASES: dict[tuple[str, tuple[bool, ...]], Any] = {}  # (index folder, layout) -> its in-memory database
_DATABASES_LOCK = threading.Lock()
MAX_DATABASES = 8


def _sums(t: str = "") -> str:
    """The figures of a group of ``call_rollup`` rows (``t``: the table's alias and a dot, or ""); sums as BIGINT,
    not DuckDB's HUGEINT, which turns into Python ints 4× slower."""
    return f"""coalesce(sum({t}calls), 0)::BIGINT AS calls,
    sum({t}prompt_tokens)::BIGINT AS prompt_tokens, sum({t}input_tokens)::BIGINT AS input_tokens,
    sum({t}cache_read_tokens)::BIGINT AS cache_read_tokens, sum({t}cache_write_tokens)::BIGINT AS cache_write_tokens,
    sum({t}output_tokens)::BIGINT AS output_tokens, sum({t}reasoning_tokens)::BIGINT AS reasoning_tokens,
    sum({t}cost_usd) AS cost_usd, coalesce(sum({t}unpriced_calls), 0)::BIGINT AS unpriced_calls,
    sum({t}cache_read_tokens) / nullif(sum({t}prompt_tokens), 0) AS cache_hit_rate"""


_SUMS = _sums()
# a group's models, distinct, in order, comma-separated (NULL when none): string_agg(DISTINCT … ORDER BY …)
# but twice as fast
_MODELS = "CASE WHEN count(c.model) > 0 THEN array_to_string(list_sort(list_distinct(list(c.model))), ',') END"


def _since(since: date | None) -> str:
    return "TRUE" if since is None else f"day >= DATE {_sql_str(since.isoformat())}"


def _fetch(con: Any, sql: str) -> list[dict[str, Any]]:
    """The rows of ``sql`` as dicts: dates and times as ISO text, rates and fullness rounded to 6 places
    (converted column by column, the columns picked from their first value)."""
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    rows: Any = cur.fetchall()
    if not rows:
        return []
    columns = list(zip(*rows, strict=True))
    converted = False
    for k, name in enumerate(names):
        value = next((v for v in columns[k] if v is not None), None)
        if isinstance(value, date | datetime):
            columns[k] = tuple(None if v is None else v.isoformat() for v in columns[k])
        elif isinstance(value, float) and name != "cost_usd" and name.endswith(("rate", "fullness")):
            columns[k] = tuple(None if v is None else round(v, 6) for v in columns[k])
        else:
            continue
        converted = True
    if converted:
        rows = zip(*columns, strict=True)
    return [dict(zip(names, row, strict=True)) for row in rows]


def summarize(con: Any, by: str = "day", since: date | None = None) -> list[dict[str, Any]]:
    """Figures per group from a :meth:`UsageIndex.connect` connection: calls, tokens (prompt, uncached input,
    cache read / write, output, reasoning), cost (the sum of the known costs; ``unpriced_calls`` counts those
    without), cache hit rate. Per session also peak fullness, compactions and the agent's own cost; per tool
    the tool results' estimated tokens and the calls that used it."""
    where = _since(since)
    if by == "day":
        return _fetch(con, f"SELECT day, {_SUMS} FROM call_rollup WHERE {where} GROUP BY day ORDER BY day")
    if by in ("project", "agent"):
        return _fetch(con, f"SELECT {by}, {_SUMS} FROM call_rollup WHERE {where} GROUP BY {by} "
                           f"ORDER BY cost_usd DESC NULLS LAST, {by}")
    if by == "model":
        return _fetch(con, f"SELECT model, any_value(price_key) AS price_key, {_SUMS} FROM call_rollup "
                           f"WHERE {where} GROUP BY model ORDER BY cost_usd DESC NULLS LAST, model")
    if by == "session":
        return _fetch(con, f"""
            SELECT c.agent, c.project, c.session_id, c.file_id, min(c.first_call) AS first_call,
                   max(c.last_call) AS last_call, {_MODELS} AS models,
                   {_sums('c.')},
                   any_value(s.peak_prompt_tokens) AS peak_prompt_tokens, any_value(s.window) AS window,
                   any_value(s.peak_fullness) AS peak_fullness, any_value(s.compactions) AS compactions,
                   any_value(s.agent_cost_usd) AS agent_cost_usd, any_value(s.title) AS title,
                   any_value(s.path) AS path
            FROM call_rollup c LEFT JOIN sessions s USING (file_id)
            WHERE {where.replace('day', 'c.day')}
            GROUP BY c.agent, c.project, c.session_id, c.file_id ORDER BY last_call NULLS FIRST""")
    if by == "tool":
        return _fetch(con, f"""
            WITH results AS (
                SELECT tool, sum(results)::BIGINT AS results, sum(result_tokens)::BIGINT AS result_tokens
                FROM tool_rollup WHERE {where} AND results > 0 GROUP BY tool),
            used AS (
                SELECT tool, sum(used_calls)::BIGINT AS calls, sum(cost_usd_of_calls) AS cost_usd_of_calls
                FROM tool_rollup WHERE {where} AND used_calls > 0 GROUP BY tool)
            SELECT coalesce(r.tool, u.tool) AS tool, coalesce(u.calls, 0) AS calls,
                   coalesce(r.results, 0) AS results, coalesce(r.result_tokens, 0) AS result_tokens,
                   u.cost_usd_of_calls
            FROM results r FULL OUTER JOIN used u ON r.tool = u.tool
            ORDER BY result_tokens DESC, tool""")
    raise ValueError(f"cannot group by {by!r}: one of {', '.join(GROUPS)}")
