"""The usage index: one row per call and per tool result, Parquet by day, kept up to date incrementally."""

from __future__ import annotations

import json
import os
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from engine.usage import index as index_mod
from engine.usage import storage
from engine.usage.index import UsageIndex
from engine.usage.prices import load_table
from engine.usage.rows import file_id
from tests.conftest import SHARED

CLAUDE = SHARED / "data" / "sessions" / "claude-code"


def _line(kind: str, n: int, ts: str, **extra: Any) -> str:
    obj = {"type": kind, "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n > 1 else None, "sessionId": "s1",
           "timestamp": ts, "cwd": "/home/u/proj", **extra}
    return json.dumps(obj) + "\n"


def _call(n: int, ts: str, model: str = "claude-opus-4-6", *, tool: str = "", one_hour: int = 40) -> str:
    content: list[dict[str, Any]] = [{"type": "text", "text": f"answer {n}"}]
    if tool:
        content.append({"type": "tool_use", "id": f"tu{n}", "name": tool, "input": {"command": "ls"}})
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000,
             "output_tokens": 5, "cache_creation": {"ephemeral_1h_input_tokens": one_hour,
                                                    "ephemeral_5m_input_tokens": 100 - one_hour}}
    return _line("assistant", n, ts, requestId=f"req_{n}",
                 message={"id": f"msg_{n}", "role": "assistant", "model": model, "content": content, "usage": usage})


def _user(n: int, ts: str, text: str = "hello") -> str:
    return _line("user", n, ts, message={"role": "user", "content": text})


def _result(n: int, ts: str, tool_use: str) -> str:
    return _line("user", n, ts, message={"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tool_use, "content": "file_a\nfile_b\n" * 50}]})


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home" / ".claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    (folder / "s1.jsonl").write_text(
        _user(1, "2026-03-01T10:00:00.000Z") + _call(2, "2026-03-01T10:00:05.000Z", tool="Bash")
        + _result(3, "2026-03-01T10:00:06.000Z", "tu2") + _call(4, "2026-03-01T10:00:09.000Z"))
    return tmp_path / "home"


def _update(ix: UsageIndex, home: Path, **kw: Any) -> index_mod.IndexReport:
    return ix.update(home=home, env={}, **kw)


def _expected_call_cost(one_hour: int = 40) -> float:
    return load_table().cost("claude-opus-4-6", prompt=1110, completion=5, cache_read=1000, cache_write=100,
                             cache_write_1h=one_hour).usd or 0.0


def test_first_index(home: Path, tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    report = _update(ix, home)
    assert (report.files, report.read, report.calls, report.tool_results) == (1, 1, 2, 1)
    assert sorted(p.name for p in (ix.root / "calls").iterdir()) == ["day=2026-03-01"]
    con = ix.connect()
    rows = con.execute("SELECT call_index, model, prompt_tokens, input_tokens, cache_read_tokens, cache_write_tokens, "
                       "cache_write_1h_tokens, output_tokens, cost_usd, tools, day, project, agent FROM calls "
                       "ORDER BY call_index").fetchall()
    assert rows[0][:8] == (0, "claude-opus-4-6", 1110, 10, 1000, 100, 40, 5)
    assert rows[0][8] == pytest.approx(_expected_call_cost())
    assert rows[0][9] == ["Bash"] and rows[1][9] == []
    assert rows[0][10] == date(2026, 3, 1) and rows[0][11] == "/home/u/proj" and rows[0][12] == "claude-code"
    tools = con.execute("SELECT tool, tokens FROM tool_results").fetchall()
    assert tools[0][0] == "Bash" and tools[0][1] > 100
    con.close()
    (day,) = ix.query("day")
    assert day["calls"] == 2 and day["cost_usd"] == pytest.approx(2 * _expected_call_cost())
    assert day["unpriced_calls"] == 0 and day["cache_hit_rate"] == pytest.approx(1000 / 1110, abs=1e-6)
    (session,) = ix.query("session")
    assert session["compactions"] == 0 and session["peak_prompt_tokens"] == 1110
    assert session["peak_fullness"] == pytest.approx(1110 / session["window"], abs=1e-6)
    (tool,) = ix.query("tool")
    assert (tool["tool"], tool["calls"], tool["results"]) == ("Bash", 1, 1)


def test_an_unchanged_file_is_not_read_again(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    reads: list[Path] = []
    real = index_mod.read_source
    monkeypatch.setattr(index_mod, "read_source", lambda p, f: reads.append(p) or real(p, f))
    report = _update(ix, home)
    assert (report.read, report.unchanged, report.days_rewritten) == (0, 1, 0) and reads == []


def test_a_grown_file_adds_its_calls(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ix = UsageIndex(tmp_path / "usage")
    other = home / ".claude" / "projects" / "-home-u-other"
    other.mkdir()
    (other / "s2.jsonl").write_text(_user(1, "2026-03-01T11:00:00.000Z") + _call(2, "2026-03-01T11:00:01.000Z"))
    _update(ix, home)
    reads: list[str] = []
    real = UsageIndex._read  # a grown Claude Code file is read by the index's incremental reader
    monkeypatch.setattr(UsageIndex, "_read",
                        lambda self, e, grew: reads.append(Path(e.path).name) or real(self, e, grew))
    with open(home / ".claude" / "projects" / "-home-u-proj" / "s1.jsonl", "a") as fh:
        fh.write(_user(5, "2026-03-02T09:00:00.000Z") + _call(6, "2026-03-02T09:00:03.000Z", one_hour=0))
    report = _update(ix, home)
    assert reads == ["s1.jsonl"] and report.read == 1 and report.calls == 3
    days = {d["day"]: d for d in ix.query("day")}
    assert days["2026-03-01"]["calls"] == 3 and days["2026-03-02"]["calls"] == 1  # s2's call kept, s1's replaced
    assert ix.totals()["calls"] == 4
    assert [d["day"] for d in ix.query("day", since=date(2026, 3, 2))] == ["2026-03-02"]
    assert len(list((ix.root / "calls" / "day=2026-03-01").glob("*.parquet"))) == 1  # one file a day


def test_unknown_model_is_unpriced_not_free(home: Path, tmp_path: Path) -> None:
    path = home / ".claude" / "projects" / "-home-u-proj" / "s1.jsonl"
    with open(path, "a") as fh:
        fh.write(_call(5, "2026-03-01T10:01:00.000Z", model="mystery-model-9"))
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    models = {m["model"]: m for m in ix.query("model")}
    assert models["mystery-model-9"]["cost_usd"] is None and models["mystery-model-9"]["unpriced_calls"] == 1
    assert ix.totals()["unpriced_calls"] == 1
    con = ix.connect()
    problem = con.execute("SELECT cost_problem FROM calls WHERE model = 'mystery-model-9'").fetchone()[0]
    assert "mystery-model-9" in problem


def test_a_vanished_file_keeps_its_rows(home: Path, tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    (home / ".claude" / "projects" / "-home-u-proj" / "s1.jsonl").unlink()
    _update(ix, home)
    assert ix.totals()["calls"] == 2


def test_another_price_table_prices_again(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    monkeypatch.setattr(index_mod, "litellm_version", lambda: "9.9.9")
    assert _update(ix, home).read == 1
    assert ix.totals()["calls"] == 2


def test_empty_index_queries(tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    assert ix.query("day") == [] and ix.query("session") == [] and ix.query("tool") == []
    with pytest.raises(ValueError):
        ix.query("colour")


def _raw_claude_figures(paths: list[Path]) -> tuple[int, int, int, int]:
    """(uncached input, cache read, cache write, output) of the raw lines: one call per message id +
    requestId, each figure the largest seen (computed here, not by the reader); a subagent's call streamed into
    its parent file as a ``progress`` record is a call too, once (its subagent file, where there is one, holds
    the same ids)."""
    calls: dict[tuple[str, str], list[int]] = {}
    for path in paths:
        for raw in path.read_text().splitlines():
            obj = json.loads(raw)
            if obj.get("type") == "progress" and isinstance((obj.get("data") or {}).get("message"), dict):
                obj = obj["data"]["message"]  # a subagent's call streamed into the parent file (counted once)
            msg = obj.get("message") or {}
            usage = msg.get("usage") if isinstance(msg, dict) else None
            if obj.get("type") != "assistant" or not usage or msg.get("model") == "<synthetic>":
                continue
            key = (str(msg.get("id")), str(obj.get("requestId")))
            figs = [usage.get("input_tokens") or 0, usage.get("cache_read_input_tokens") or 0,
                    usage.get("cache_creation_input_tokens") or 0, usage.get("output_tokens") or 0]
            if path.name.startswith("agent-acompact-"):  # 2.1.39: only the placeholder of the summary's output
                figs[3] = 0  # (the reader leaves it unknown: engine.sources.claude_code._placeholder_output)
            old = calls.get(key, [0, 0, 0, 0])
            calls[key] = [max(a, b) for a, b in zip(old, figs, strict=True)]
    return tuple(sum(c[i] for c in calls.values()) for i in range(4))  # type: ignore[return-value]


@pytest.mark.skipif(not CLAUDE.is_dir(), reason="the shared sessions are not on this machine")
def test_shared_sessions_token_totals_match_the_raw_files(tmp_path: Path) -> None:
    projects = tmp_path / "home" / ".claude" / "projects" / "-home-u-shared"
    shutil.copytree(CLAUDE, projects, ignore=shutil.ignore_patterns("*.md", "LICENSE"))
    for root, dirs, files in os.walk(projects):
        for name in dirs + files:
            os.chmod(Path(root) / name, 0o755)
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, tmp_path / "home")
    totals = ix.totals()
    raw = _raw_claude_figures(sorted(projects.rglob("*.jsonl")))
    assert (totals["input_tokens"], totals["cache_read_tokens"], totals["cache_write_tokens"],
            totals["output_tokens"]) == raw
    assert totals["unpriced_calls"] == 0


@pytest.mark.parametrize("batch", [storage.LOAD_BATCH, 2])
def test_rows_reach_duckdb_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    """Rows go to DuckDB as text cast in SQL (in batches): floats and big ints come back exactly, None stays NULL
    (a column of only None too), a list column keeps its items (an empty list too), text keeps any character."""
    monkeypatch.setattr(storage, "LOAD_BATCH", batch)
    ix = UsageIndex(tmp_path / "usage")
    columns = {"f": "DOUBLE", "n": "BIGINT", "none": "BIGINT", "t": "VARCHAR", "ts": "TIMESTAMP", "d": "DATE",
               "tools": "VARCHAR[]"}
    rows = [{"f": 0.1 + 0.2, "n": 2**62 + 1, "none": None, "t": "a\nb\t\"é\"", "ts": "2026-03-01 10:00:05.123000",
             "d": "2026-03-01", "tools": ["Bash", "mcp__srv__do"]},
            {"f": 1e-7, "n": None, "none": None, "t": None, "ts": None, "d": None, "tools": []},
            {"f": 12.5, "n": 0, "none": None, "t": "", "ts": "2026-03-02 00:00:00", "d": "2026-03-02", "tools": None}]
    con = ix.connection()
    try:
        storage.load_rows(con, "t_rows", columns, rows)
        got = con.execute("SELECT f, n, none, t, CAST(ts AS VARCHAR), CAST(d AS VARCHAR), tools FROM t_rows "
                          "ORDER BY f DESC").fetchall()
    finally:
        con.close()
    assert got == [(12.5, 0, None, "", "2026-03-02 00:00:00", "2026-03-02", []),
                   (0.1 + 0.2, 2**62 + 1, None, "a\nb\t\"é\"", "2026-03-01 10:00:05.123", "2026-03-01",
                    ["Bash", "mcp__srv__do"]),
                   (1e-7, None, None, None, None, None, [])]


def test_what_a_stopped_writer_left_goes(home: Path, tmp_path: Path) -> None:
    """Files are staged beside their target and renamed over it; what a writer stopped midway left (a staged
    file, an older version's temporary folder) goes with the next update, and updates leave nothing hidden."""
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    (ix.root / ".call_rollup.parquet.0badc0de.tmp").write_bytes(b"half")
    (ix.root / ".tmp-old" / "calls").mkdir(parents=True)
    with open(home / ".claude" / "projects" / "-home-u-proj" / "s1.jsonl", "a") as fh:
        fh.write(_call(5, "2026-03-02T09:00:00.000Z"))
    assert _update(ix, home).read == 1
    hidden = [p for p in ix.root.rglob(".*") if p.name != ".lock"]
    assert hidden == []
    assert sorted(p.parent.name for p in (ix.root / "calls").rglob("*.parquet")) == ["day=2026-03-01", "day=2026-03-02"]
    assert len(list((ix.root / "calls").rglob("*.parquet"))) == 2  # one file a day: the old one went


def test_days_are_utc_and_a_time_that_is_no_time_is_null(tmp_path: Path) -> None:
    folder = tmp_path / "home" / ".claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    (folder / "s1.jsonl").write_text(
        _user(1, "2026-03-01T10:00:00.000Z") + _call(2, "2026-03-01T23:30:00.000-02:00")
        + _call(3, "2026-13-45T99:00:00.000Z"))
    ix = UsageIndex(tmp_path / "usage")
    report = _update(ix, tmp_path / "home")
    assert report.read == 1 and report.calls == 2 and not report.failed
    con = ix.connect()
    try:
        rows = con.execute("SELECT request_id, CAST(ts AS VARCHAR), CAST(day AS VARCHAR) FROM calls "
                           "ORDER BY request_id").fetchall()
    finally:
        con.close()
    # the second call's day is its UTC day; the third's time is no time: NULL, filed under the session's start
    assert rows == [("req_2", "2026-03-02 01:30:00", "2026-03-02"), ("req_3", None, "2026-03-01")]


def _grown_pieces(data: bytes, pieces: int, inside: bytes = b"") -> list[bytes]:
    """``data`` in ``pieces`` parts, each cut in the middle of a line (of a line holding ``inside``, when given)."""
    starts = [0, *(k + 1 for k in range(len(data)) if data[k:k + 1] == b"\n")][:-1]
    lines = [(a, data.index(b"\n", a)) for a in starts]
    if inside:
        lines = [(a, b) for a, b in lines if inside in data[a:b]]
    chosen = [lines[len(lines) * k // pieces] for k in range(1, pieces)]
    cuts = sorted({(a + b) // 2 for a, b in chosen})
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def _file_rows(ix: UsageIndex, path: Path) -> list[tuple[Any, ...]]:
    con = ix.connect()
    try:
        return con.execute(
            "SELECT call_index, request_id, model, CAST(ts AS VARCHAR), prompt_tokens, cache_read_tokens, "
            "output_tokens, reasoning_tokens, cache_write_1h_tokens, cost_usd, kind, tools FROM calls "
            "WHERE file_id = ? ORDER BY kind, call_index", [file_id(str(path))]).fetchall()
    finally:
        con.close()


def _codex_home(tmp_path: Path) -> tuple[Path, bytes]:
    src = max((SHARED / "data" / "sessions" / "codex").glob("rollout-*.jsonl"), key=lambda p: p.stat().st_size)
    folder = tmp_path / "home" / ".codex" / "sessions" / "2026" / "02" / "23"
    folder.mkdir(parents=True)
    return folder / src.name, src.read_bytes()


def _gemini_home(tmp_path: Path) -> tuple[Path, bytes]:
    from tests.engine.sources.test_gemini_cli import resumed_and_compressed

    folder = tmp_path / "home" / ".gemini" / "tmp" / "proj" / "chats"
    folder.mkdir(parents=True)
    rows = resumed_and_compressed()
    return folder / "session-2026-11-25T10-00-abc12345.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def _claude_home(tmp_path: Path) -> tuple[Path, bytes]:
    folder = tmp_path / "home" / ".claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    return folder / "subagent.jsonl", (CLAUDE / "subagent.jsonl").read_bytes()  # one-hour cache writes on 38 lines


def _claude_one_line_calls_home(tmp_path: Path) -> tuple[Path, bytes]:
    """Calls of one line each: a line cut in two is the only one that tells its one-hour cache writes."""
    folder = tmp_path / "home" / ".claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    text = _user(1, "2026-03-01T10:00:00.000Z") + "".join(
        _call(n, f"2026-03-01T10:00:{n:02d}.000Z", one_hour=10 * n) for n in range(2, 12))
    return folder / "one-line-calls.jsonl", text.encode()


@pytest.mark.parametrize("make", [_claude_home, _claude_one_line_calls_home, _codex_home, _gemini_home],
                         ids=["claude-code", "claude-code-one-line-calls", "codex", "gemini-cli"])
def test_a_growing_file_is_read_from_where_it_stopped(
        make: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that grows while the index lives (cut mid-line at every step) is fed to its reader only what was
    appended (a file written in the last hour is read by a reader that is kept), and its rows end equal to a whole
    read's (a new index of the finished file)."""
    path, data = make(tmp_path)
    # Claude Code: cut inside lines that carry one-hour cache writes (read by a pass of their own)
    pieces = _grown_pieces(data, 6, b"ephemeral_1h_input_tokens" if "claude" in str(path) else b"")
    fed: list[int] = []
    real_reader = index_mod._reader

    def counting_reader(agent: str, p: Path) -> Any:
        reader = real_reader(agent, p)
        real_feed = reader.feed
        reader.feed = lambda chunk: (fed.append(len(chunk)), real_feed(chunk))[1]
        return reader

    monkeypatch.setattr(index_mod, "_reader", counting_reader)
    ix = UsageIndex(tmp_path / "usage")
    path.write_bytes(pieces[0])
    _update(ix, tmp_path / "home")  # a new file, changed just now: read whole by a reader that is kept
    for piece in pieces[1:]:
        with open(path, "ab") as fh:
            fh.write(piece)
        report = _update(ix, tmp_path / "home")
        assert report.read == 1 and not report.failed
    assert sum(fed) == len(data)  # each byte once
    whole = UsageIndex(tmp_path / "usage-whole")
    _update(whole, tmp_path / "home")
    assert _file_rows(ix, path) == _file_rows(whole, path) and len(_file_rows(ix, path)) >= 4
