"""The usage index (issue 22) against its targets and against ccusage: ``python -m benchmarks usage``.

Data (made once, reused across runs; ``python -m benchmarks.usage_bench make`` makes it alone):

- ``/tmp/ctxbench-usage/home``: a HOME holding about 1 GiB of agent sessions — Claude Code sessions in
  ``.claude/projects/<project>/<session>.jsonl`` made by :mod:`benchmarks.bigsession`'s generator from the
  two shared real sessions (``8463c716…``, ``258c7280…``): each file is one or two copies of a real session
  with fresh ``uuid``/``msg_``/``req_``/``toolu_`` ids (nothing collapses, in ccusage as in ours), its own
  ``sessionId``, its own ``cwd`` (one of :data:`PROJECTS` projects), its first copy's root line a root
  (``parentUuid: null``); timestamps move on copy after copy (about a month of days). Plus
  :data:`CODEX_FILES` Codex rollouts (:class:`benchmarks.bigsession.CodexCopies`, each with its own id) in
  ``.codex/sessions/YYYY/MM/DD/`` — which ccusage's ``session`` command does not read (ours does: a
  little more work on our side). Beside it ``grow.jsonl``: the lines that come next in the last Claude
  Code session (to append: "one session grew").
- ``/tmp/ctxbench-usage/big-index``: a usage index of :data:`Q_SESSIONS` sessions / :data:`Q_CALLS` calls
  written directly as Parquet with DuckDB (synthetic rows: 90 days, 40 projects, 8 models with skewed
  shares, sessions of log-normal length, about one tool result per call), in the index's own layout, so
  :class:`engine.usage.index.UsageIndex` and :func:`engine.usage.report.usage_report` query it as they
  would a real one.

Figures:

- first index of the folder: ``ctxbench usage --json`` as its own process (``HOME`` the folder, a fresh
  data dir: the sources scan + every file read + Parquet written + the ``--by day`` query), wall time and
  peak RSS (``wait4``'s ``ru_maxrss``); ccusage 16.2.5 (``tests/agents/node_modules/.bin/ccusage session
  --json --offline``, ``HOME`` and ``CLAUDE_CONFIG_DIR`` the folder) in the same run, whole process, and its
  peak RSS; the calls and the prompt tokens each counted (they must agree: the same folder was read);
- re-index after one session grew: in a process holding that index, :data:`GROW_LINES` lines appended to
  the last Claude Code session, then ``UsageIndex.update`` (scan + the grown file + its days rewritten);
  :data:`GROW_ROUNDS` rounds, median and worst; the file is cut back to its size afterwards. Also a
  re-index with nothing changed;
- every query at 10,000 sessions / 2 M calls: ``UsageIndex.query(by)`` + ``totals()`` (what ``ctxbench usage
  --by …`` runs after its update) for each group, and each query of ``usage_report`` (the window's Usage view)
  over the whole range and over the last 30 days; each on its own ``connect()`` (a cursor of the database
  the process keeps per index), best of :data:`Q_ROUNDS`; ``--by day`` and ``--by session`` also as the first
  query of a process (the database and its views made first). The index's rollups are built once with it;
- the window's path at 10,000 sessions (offscreen Qt, its own process): the whole range's ``usage_report``
  handed to the Usage dock's view as the wiring hands it and painted, the first time and then as a refresh.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from benchmarks.bigsession import CLAUDE_SOURCE, SHARED, ClaudeCopies, CodexCopies
from benchmarks.engine_bench import MB, Figure, compiled

REPO = Path(__file__).resolve().parent.parent
DATA = Path("/tmp/ctxbench-usage")
HOME = DATA / "home"
GROW = DATA / "grow.jsonl"
TOTAL_BYTES = 1024 ** 3
PROJECTS = 12
CODEX_FILES = 3
CODEX_BYTES = 4 * MB
GROW_LINES = 40
GROW_ROUNDS = 7
CCUSAGE = REPO / "tests" / "agents" / "node_modules" / ".bin" / "ccusage"
CLAUDE_SOURCES = (CLAUDE_SOURCE, SHARED / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
DATA_VERSION = 1

BIG_INDEX = DATA / "big-index"
Q_SESSIONS = 10_000
Q_CALLS = 2_000_000
Q_ROUNDS = 5
MODELS = (  # (model, share of calls)
    ("claude-sonnet-4-5-20250929", 0.40), ("claude-opus-4-5-20251101", 0.18), ("claude-haiku-4-5-20251001", 0.12),
    ("gpt-5-codex", 0.12), ("gpt-5", 0.08), ("gemini-2.5-pro", 0.05), ("claude-sonnet-4-20250514", 0.04),
    ("<synthetic>", 0.01))
TOOLS = ("Bash", "Read", "Edit", "Grep", "Write", "Glob", "TodoWrite", "Task", "WebFetch", "shell", "apply_patch")

_CWD = re.compile(rb'"cwd":"[^"]*"')
_ROOT_PARENT = re.compile(rb'"parentUuid":"[^"]*"')


# ---------------------------------------------------------------------------------------------- the folder


def _claude_file(gen: ClaudeCopies, copies: int, dest: Path, project: str, first_root_null: bool = True) -> int:
    """``copies`` copies from ``gen`` as one session of its own (fresh sessionId, ``cwd`` = ``project``)."""
    sid = str(uuid.UUID(int=gen.rng.getrandbits(128), version=4)).encode()
    written = 0
    with open(dest.with_suffix(".part"), "wb") as fh:
        for k in range(copies):
            lines = gen.copy()
            if k == 0 and first_root_null:  # the session starts here: its root has no parent
                lines[gen.root] = _ROOT_PARENT.sub(b'"parentUuid":null', lines[gen.root], count=1)
            for raw in lines:
                raw = _CWD.sub(b'"cwd":"' + project.encode() + b'"', raw.replace(gen.session_id, sid))
                fh.write(raw)
                written += len(raw)
    final = dest.with_name(sid.decode() + ".jsonl")
    dest.with_suffix(".part").replace(final)
    gen.last_sid = sid  # type: ignore[attr-defined]
    gen.last_project = project  # type: ignore[attr-defined]
    return written


def make_folder(total_bytes: int = TOTAL_BYTES) -> None:
    """The HOME of :data:`HOME` (see the module's doc), made once."""
    stamp = DATA / f"home-v{DATA_VERSION}-{total_bytes}.done"
    if stamp.exists() and GROW.exists():
        return
    shutil.rmtree(HOME, ignore_errors=True)
    rng = random.Random(22)
    gens = []
    for i, src in enumerate(CLAUDE_SOURCES):
        g = ClaudeCopies(src, seed=100 + i)
        g.copy()  # copy 0 is the real session itself (its ids would be shared by two files): skip it
        g.span = timedelta(hours=4)  # copies 4 h apart: the sessions spread over about a month
        gens.append(g)
    projects = [f"/home/dev/work/project-{i:02d}" for i in range(PROJECTS)]
    written, n = 0, 0
    last: ClaudeCopies | None = None
    while written < total_bytes - CODEX_FILES * CODEX_BYTES:
        gen = gens[n % len(gens)]
        project = projects[min(int(rng.paretovariate(1.2)) - 1, PROJECTS - 1)]  # a few projects hold most
        folder = HOME / ".claude" / "projects" / project.replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        written += _claude_file(gen, 1 + (rng.random() < 0.3), folder / f"new-{n}.jsonl", project)
        last = gen
        n += 1
    # the lines that come next in the last session (its chain goes on: the next copy hangs off its tip)
    assert last is not None
    nxt = last.copy()
    GROW.write_bytes(b"".join(_CWD.sub(b'"cwd":"' + last.last_project.encode() + b'"',  # type: ignore[attr-defined]
                                       raw.replace(last.session_id, last.last_sid))  # type: ignore[attr-defined]
                              for raw in nxt))
    (DATA / "grow-target").write_text(str(next((HOME / ".claude" / "projects").glob(
        f"*/{last.last_sid.decode()}.jsonl"))))  # type: ignore[attr-defined]
    cx = CodexCopies(seed=7)
    cx.copy()
    meta = cx.lines[cx.meta]
    for i in range(CODEX_FILES):
        sid = str(uuid.UUID(int=cx.rng.getrandbits(128), version=4))
        day = f"{i + 1:02d}"
        dest = HOME / ".codex" / "sessions" / "2026" / "03" / day / f"rollout-2026-03-{day}T10-00-00-{sid}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        with open(dest, "wb") as fh:
            fh.write(meta.replace(cx.session_id, sid.encode()))
            while size < CODEX_BYTES:
                for raw in cx.copy():
                    fh.write(raw)
                    size += len(raw)
        written += size
    stamp.write_text(f"{n} claude files, {written} bytes\n")


def folder_size() -> tuple[int, int, int]:
    """(bytes, Claude Code files, Codex files) of :data:`HOME`."""
    claude = list((HOME / ".claude" / "projects").glob("*/*.jsonl"))
    codex = list((HOME / ".codex" / "sessions").rglob("rollout-*.jsonl"))
    return sum(p.stat().st_size for p in claude + codex), len(claude), len(codex)


# ---------------------------------------------------------------------------------------------- processes


def _run(cmd: list[str], env: dict[str, str], timeout: float = 600) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in bytes, stdout) of one process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, cwd=REPO)
        _, status, rusage = os.wait4(proc.pid, 0)
        took = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read().decode()
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[:3]} exited {proc.returncode}: {err.read().decode()[-600:]}")
    return took, rusage.ru_maxrss * 1024, text


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")
           and not k.startswith("CTXBENCH_")}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", TZ="UTC", NO_COLOR="1", **extra)
    return env


def first_index(data_dir: Path) -> dict[str, Any]:
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    env = _clean_env(HOME=str(HOME), CTXBENCH_DATA_DIR=str(data_dir), CTXBENCH_CONFIG_DIR=str(data_dir / "config"))
    took, rss, out = _run([sys.executable, "-m", "app.cli", "usage", "--json"], env)
    result = json.loads(out)
    return {"s": took, "rss": rss, "calls": result["total"]["calls"], "index": result["index"],
            "prompt": result["total"]["prompt_tokens"], "output": result["total"]["output_tokens"]}


def ccusage_run() -> dict[str, Any]:
    env = _clean_env(HOME=str(HOME), CLAUDE_CONFIG_DIR=str(HOME / ".claude"))
    took, rss, out = _run([str(CCUSAGE), "session", "--json", "--offline"], env)
    data = json.loads(out)
    sessions = data.get("sessions") or []
    prompt = sum(int(s.get("inputTokens") or 0) + int(s.get("cacheCreationTokens") or 0)
                 + int(s.get("cacheReadTokens") or 0) for s in sessions)
    return {"s": took, "rss": rss, "sessions": len(sessions), "prompt": prompt}


def claude_prompt_of_index(data_dir: Path) -> tuple[int, int]:
    """(calls, prompt tokens) of the Claude Code rows of the index in ``data_dir`` (main-session calls)."""
    from engine.usage.index import UsageIndex

    con = UsageIndex(data_dir / "usage").connect()
    try:
        calls, prompt = con.execute("SELECT count(*), sum(prompt_tokens) FROM calls WHERE agent = 'claude-code' "
                                    "AND kind = 'main' AND subagent = ''").fetchone()
    finally:
        con.close()
    return int(calls), int(prompt or 0)


def _regrow_child(data_dir: str) -> dict[str, Any]:
    """In a fresh process holding the first index: re-index with nothing changed, then after one session
    grew by GROW_LINES lines, GROW_ROUNDS times; the file is cut back afterwards."""
    os.environ["CTXBENCH_DATA_DIR"] = data_dir
    from engine.usage.index import UsageIndex

    ix = UsageIndex(Path(data_dir) / "usage")
    upd = dict(home=HOME, env={})
    ix.update(**upd)  # warm: imports, page cache
    ix.connect().close()  # duckdb imported (as the CLI and the window have it for their queries)
    nothing = []
    for _ in range(5):
        t0 = time.perf_counter()
        rep = ix.update(**upd)
        nothing.append(time.perf_counter() - t0)
        assert rep.read == 0, rep.to_json()
    target = Path((DATA / "grow-target").read_text())
    size = target.stat().st_size
    lines = GROW.read_bytes().splitlines(keepends=True)
    times, reports = [], []
    try:
        for k in range(GROW_ROUNDS):
            with open(target, "ab") as fh:
                fh.write(b"".join(lines[k * GROW_LINES:(k + 1) * GROW_LINES]))
            t0 = time.perf_counter()
            rep = ix.update(**upd)
            times.append(time.perf_counter() - t0)
            reports.append(rep.to_json())
            assert rep.read == 1, rep.to_json()
        check = _same_as_whole_read(ix, target)
    finally:
        os.truncate(target, size)
    ix.update(**upd)  # the index matches the folder again
    return {"nothing": min(nothing), "grow": times, "reports": reports[-1:], "file_mb": size / MB, "same": check}


def _same_as_whole_read(ix: Any, target: Path) -> bool:
    """Whether the index's rows of the grown ``target`` (read incrementally) equal a whole read's."""
    from engine.sources.readers import read_source
    from engine.usage.rows import file_id, rows_of

    entry = next(e for e in __import__("engine.sources.discovery", fromlist=["scan_sources"]).scan_sources(
        home=HOME, env={}, index=ix.root / "sources-index.json") if e.path == str(target))
    fid = file_id(entry.path)
    whole = rows_of(entry, read_source(target, "claude-code"), ix.prices(), fid)
    key = ("request_id", "model", "prompt_tokens", "output_tokens", "cache_write_1h_tokens", "cost_usd", "tools")
    con = ix.connect()
    try:
        cur = con.execute(f"SELECT {', '.join(key)} FROM calls WHERE file_id = '{fid}'")
        mine = sorted(map(repr, cur.fetchall()))
    finally:
        con.close()
    return mine == sorted(repr(tuple(r[k] for k in key)) for r in whole.calls)


def _child(args: list[str], timeout: float = 600) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.usage_bench", *args], cwd=REPO,
                          env=_clean_env(), capture_output=True, text=True, timeout=timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"child {args[0]} failed: {proc.stderr.strip()[-800:]}")


# ---------------------------------------------------------------------------------------------- queries


def make_big_index(root: Path = BIG_INDEX, sessions: int = Q_SESSIONS, calls: int = Q_CALLS) -> Path:
    """An index of ``sessions`` sessions / ``calls`` calls written as Parquet with DuckDB (synthetic rows)."""
    from engine.usage.index import UsageIndex
    from engine.usage.rows import CALL_COLUMNS, SESSION_COLUMNS, TOOL_COLUMNS

    done = root / f".done-{sessions}-{calls}"
    if done.exists() and UsageIndex(root).manifest(whole=False).rollups_current():
        return root
    import duckdb

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = random.Random(2)
    end = date(2026, 11, 20)
    days = 90
    # sessions: agent, project, day, length (log-normal, scaled to ``calls`` in all), main model
    names, weights = zip(*MODELS, strict=True)
    srows = []
    raw = [rng.lognormvariate(4.5, 1.1) for _ in range(sessions)]
    scale = calls / sum(raw)
    counts = [max(1, round(r * scale)) for r in raw]
    counts[-1] += calls - sum(counts)
    for i in range(sessions):
        model = rng.choices(names, weights)[0]
        agent = "codex" if model.startswith("gpt") else "gemini-cli" if model.startswith("gemini") else "claude-code"
        project = f"/home/dev/work/project-{min(int(rng.paretovariate(1.1)), 40):02d}"
        start = end - timedelta(days=int(days * rng.random() ** 1.5))  # more sessions lately
        srows.append((i, agent, project, start.isoformat(), counts[i], model))
    con = duckdb.connect()
    con.execute("CREATE TABLE s (i INTEGER, agent VARCHAR, project VARCHAR, start DATE, n INTEGER, model VARCHAR)")
    con.executemany("INSERT INTO s VALUES (?, ?, ?, ?, ?, ?)", srows)
    con.execute('CREATE TABLE m (model VARCHAR, price_key VARCHAR, p_in DOUBLE, p_out DOUBLE, "window" BIGINT)')
    con.executemany("INSERT INTO m VALUES (?, ?, ?, ?, ?)", [
        (n, "" if n == "<synthetic>" else n, 3e-6 if "sonnet" in n else 15e-6 if "opus" in n else 1e-6,
         15e-6 if "sonnet" in n else 75e-6 if "opus" in n else 5e-6, 200_000) for n in names])
    tools_sql = "[" + ", ".join(f"'{t}'" for t in TOOLS) + "]"
    con.execute("""
        CREATE TABLE c AS
        SELECT s.agent, s.project, printf('%08x-0000-4000-8000-%012x', s.i, s.i) AS session_id,
               printf('%016x', s.i * 2654435761 % 18446744073709551557) AS file_id,
               CASE WHEN hash(s.i, g.k) % 20 = 0 THEN 'agent-' || (hash(s.i) % 7) ELSE '' END AS subagent,
               CASE WHEN hash(s.i, g.k, 'c') % 400 = 0 THEN 'compaction' ELSE 'main' END AS kind,
               g.k::INTEGER AS call_index, printf('req_%d_%d', s.i, g.k) AS request_id,
               CASE WHEN hash(s.i, g.k, 'm') % 10 = 0 THEN 'claude-haiku-4-5-20251001' ELSE s.model END AS model,
               (s.start + INTERVAL (g.k * 40) SECOND + INTERVAL (s.i % 86400) SECOND)::TIMESTAMP AS ts,
               20000 + (hash(s.i, g.k, 'p') % 150000)::BIGINT AS prompt_tokens,
               (hash(s.i, g.k, 'o') % 3000)::BIGINT AS output_tokens
        FROM s, LATERAL (SELECT range AS k FROM range(s.n)) g""")
    con.execute(f"""
        CREATE TABLE calls_all AS
        SELECT c.agent, c.project, c.session_id, c.file_id, c.subagent, c.kind, c.call_index, c.request_id, c.model,
               c.ts, c.ts::DATE AS day, c.prompt_tokens,
               (c.prompt_tokens * 0.02)::BIGINT AS input_tokens, (c.prompt_tokens * 0.9)::BIGINT AS cache_read_tokens,
               (c.prompt_tokens * 0.08)::BIGINT AS cache_write_tokens, 0::BIGINT AS cache_write_1h_tokens,
               c.output_tokens, CASE WHEN c.agent = 'codex' THEN c.output_tokens // 3 END AS reasoning_tokens,
               CASE WHEN m.price_key = '' THEN NULL ELSE c.prompt_tokens * m.p_in * 0.2 + c.output_tokens * m.p_out END
                   AS cost_usd,
               CASE WHEN m.price_key = '' THEN 'no price for ' || c.model END AS cost_problem,
               m.price_key, m."window",
               CASE WHEN hash(c.session_id, c.call_index, 't') % 10 < 8
                    THEN [{tools_sql}[1 + (hash(c.session_id, c.call_index) % {len(TOOLS)})::INTEGER]]
                    ELSE []::VARCHAR[] END AS tools
        FROM c JOIN m USING (model)""")
    con.execute("""
        CREATE TABLE tools_all AS
        SELECT agent, project, session_id, file_id, subagent, ts + INTERVAL 5 SECOND AS ts,
               (ts + INTERVAL 5 SECOND)::DATE AS day, unnest(tools) AS tool, 'toolu_' || request_id AS tool_call_id,
               (hash(request_id) % 6000)::BIGINT AS tokens
        FROM calls_all""")
    ix = UsageIndex(root)
    day_files: dict[str, dict[str, str]] = {}
    for table, columns, src in (("calls", CALL_COLUMNS, "calls_all"), ("tool_results", TOOL_COLUMNS, "tools_all")):
        names_sql = ", ".join(f'CAST("{k}" AS {v}) AS "{k}"' for k, v in columns.items())
        day_files[table] = {}
        for (day,) in con.execute(f"SELECT DISTINCT day FROM {src} ORDER BY day").fetchall():
            name = ix.new_name(table, 1, day.isoformat())
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            con.execute(f"COPY (SELECT {names_sql} FROM {src} WHERE day = DATE '{day.isoformat()}' ORDER BY ts) "
                        f"TO '{root / name}' (FORMAT PARQUET)")
            day_files[table][day.isoformat()] = name
    scols = ", ".join(f'CAST({expr} AS {SESSION_COLUMNS[k]}) AS "{k}"' for k, expr in (
        ("agent", "any_value(agent)"), ("project", "any_value(project)"), ("session_id", "any_value(session_id)"),
        ("file_id", "file_id"), ("path", "'/home/dev/.claude/projects/x/' || any_value(session_id) || '.jsonl'"),
        ("title", "'session ' || any_value(session_id)"), ("model", "any_value(model)"),
        ("started", "strftime(min(ts), '%Y-%m-%dT%H:%M:%SZ')"),
        ("last_activity", "strftime(max(ts), '%Y-%m-%dT%H:%M:%SZ')"), ("calls", "count(*)"),
        ("compactions", "count(*) FILTER (WHERE kind = 'compaction')"), ("window", "200000"),
        ("peak_prompt_tokens", "max(prompt_tokens)"), ("peak_fullness", "max(prompt_tokens) / 200000"),
        ("agent_cost_usd", "CASE WHEN any_value(agent) = 'claude-code' THEN sum(cost_usd) * 1.01 END")))
    sessions_file = ix.new_name("sessions", 1)
    con.execute(f"COPY (SELECT {scols} FROM calls_all GROUP BY file_id) TO '{root / sessions_file}' "
                "(FORMAT PARQUET)")
    ix.adopt(day_files, sessions_file, prices="synthetic")  # the manifest naming them, and the rollups built
    n_calls, n_sessions = con.execute("SELECT count(*), count(DISTINCT file_id) FROM calls_all").fetchone()
    n_tools = con.execute("SELECT count(*) FROM tools_all").fetchone()[0]
    con.close()
    done.write_text(json.dumps({"calls": n_calls, "sessions": n_sessions, "tool_results": n_tools}))
    return root


def _queries_child() -> dict[str, Any]:
    from engine.usage import report as report_mod
    from engine.usage import storage
    from engine.usage.index import UsageIndex
    from engine.usage.queries import GROUPS, summarize
    from engine.usage.report import usage_report

    root = make_big_index()
    ix = UsageIndex(root)
    meta = json.loads(next(root.glob(".done-*")).read_text())
    out: dict[str, Any] = {"meta": meta}

    def best(fn: Any) -> float:
        fn()  # warm (page cache, first import)
        times = []
        for _ in range(Q_ROUNDS):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    def cold(fn: Any) -> Any:  # as the first query of a process: no database kept for the index yet
        def run() -> Any:
            storage.forget_databases()
            return fn()
        return run

    for by in GROUPS:
        if by == "agent":
            continue
        out[f"cli --by {by}"] = best(lambda by=by: (ix.query(by), ix.totals()))
    out["cli --by day, first query of the process"] = best(cold(lambda: (ix.query("day"), ix.totals())))
    out["cli --by session, first query of the process"] = best(cold(lambda: (ix.query("session"), ix.totals())))
    last = date(2026, 11, 20)
    out["report: whole range"] = best(lambda: usage_report(ix))
    out["report: last 30 days"] = best(lambda: usage_report(ix, last - timedelta(days=29), last))
    # each query of the report on its own (one connection, as usage_report holds one)
    sql = _report_queries(report_mod)
    con = ix.connect()
    try:
        for name, query in sql.items():
            out[f"report query: {name}"] = best(lambda q=query: con.execute(q).fetchall())
        out["connect (the process's database kept: a cursor)"] = best(lambda: ix.connect().close())
        out["connect, first of the process (database + views)"] = best(cold(lambda: ix.connect().close()))
        out["summarize(day) on an open connection"] = best(lambda: summarize(con, "day"))
    finally:
        con.close()
    return out


def _view_child() -> dict[str, Any]:
    """The window's path at 10,000 sessions: ``usage_report`` (whole range) handed to the Usage dock's view as
    the wiring hands it (its fields, not copied) and painted (``processEvents``), offscreen; the first time in
    the process and then best of :data:`Q_ROUNDS` (each a refresh of a view already filled)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtWidgets import QApplication

    from engine.usage.index import UsageIndex
    from engine.usage.report import usage_report
    from widgets.usage_view import UsageView

    app = QApplication.instance() or QApplication([])
    ix = UsageIndex(make_big_index())
    usage_report(ix)  # the process's database and page cache warm, as in a window that showed the dock before
    view = UsageView()
    view.resize(1200, 800)
    view.show()
    app.processEvents()

    def once() -> tuple[float, float]:
        t0 = time.perf_counter()
        report = usage_report(ix)
        t1 = time.perf_counter()
        view.set_report(report)
        app.processEvents()
        return t1 - t0, time.perf_counter() - t1

    first = once()
    rounds = [once() for _ in range(Q_ROUNDS)]
    best = min(rounds, key=sum)
    return {"sessions": view.sessions.row_count(), "first": list(first), "best": list(best)}


def _report_queries(report_mod: Any) -> dict[str, str]:
    """The SQL of each query :func:`usage_report` runs (whole range), captured from a recording connection."""
    captured: list[str] = []

    class Rec:
        def __init__(self, con: Any) -> None:
            self.con = con

        def execute(self, q: str) -> Any:
            captured.append(q)
            return self.con.execute(q)

        def close(self) -> None:
            self.con.close()

    class Ix:
        def __init__(self) -> None:
            self.notices: list[str] = []

        def read(self, fn: Any) -> Any:
            from engine.usage.index import UsageIndex

            con = Rec(UsageIndex(BIG_INDEX).connect())
            try:
                return fn(con)
            finally:
                con.close()

    report_mod.usage_report(Ix())  # type: ignore[arg-type]
    labels = ("by day and model", "sessions", "projects", "models", "tools", "total")
    return dict(zip(labels, captured, strict=False))


# ---------------------------------------------------------------------------------------------- figures


def bench_usage() -> list[Figure]:
    figs: list[Figure] = []
    make_folder()
    size, n_claude, n_codex = folder_size()
    figs.append(Figure(f"usage: the folder ({n_claude} Claude Code + {n_codex} Codex files)", size / MB, "MiB",
                       "≈ 1 GiB", None))
    data_dir = DATA / "data"
    ours = first_index(data_dir)
    _, prompt = claude_prompt_of_index(data_dir)
    theirs = ccusage_run() if CCUSAGE.exists() else None
    figs.append(Figure("usage: first index of 1 GiB, `ctxbench usage` process", ours["s"], "s",
                       "< ccusage" if theirs else "report", ours["s"] < theirs["s"] if theirs else None))
    figs.append(Figure("usage: … peak RSS", ours["rss"] / MB, "MB", "< 500 MB", ours["rss"] < 500 * MB))
    figs.append(Figure("usage: … calls indexed (all files)", ours["calls"], "calls", "report", None))
    if theirs:
        figs.append(Figure("usage: ccusage session --json --offline, same folder", theirs["s"], "s", "report", None))
        figs.append(Figure("usage: … ccusage peak RSS", theirs["rss"] / MB, "MB", "report", None))
        figs.append(Figure("usage: … ccusage time / ours", theirs["s"] / ours["s"], "×", "> 1",
                           theirs["s"] > ours["s"]))
        figs.append(Figure("usage: Claude Code prompt tokens, ccusage / ours", theirs["prompt"] / max(prompt, 1), "×",
                           "= 1.000 (same calls read)", abs(theirs["prompt"] / max(prompt, 1) - 1) < 1e-3))
    grow = _child(["regrow", str(data_dir)])
    figs.append(Figure("usage: re-index, nothing changed", grow["nothing"] * 1000, "ms", "report", None))
    med = statistics.median(grow["grow"])
    figs.append(Figure(f"usage: re-index after one session grew ({grow['file_mb']:.1f} MB file), median",
                       med * 1000, "ms", "< 100 ms", med < 0.1))
    figs.append(Figure("usage: … worst of 7", max(grow["grow"]) * 1000, "ms", "report", None))
    v = _child(["view"])
    figs.append(Figure(f"usage: window, report → painted view ({v['sessions']:,} sessions), first",
                       sum(v["first"]) * 1000, "ms", "report", None))
    figs.append(Figure("usage: … a refresh of the view (query + paint), best", sum(v["best"]) * 1000, "ms", "report",
                       None))
    figs.append(Figure("usage: … of which the paint (set_report + processEvents)", v["best"][1] * 1000, "ms",
                       "< 100 ms", v["best"][1] < 0.1))
    q = _child(["queries"])
    meta = q.pop("meta")
    figs.append(Figure(f"usage: query index ({meta['sessions']:,} sessions)", meta["calls"] / 1e6, "M calls",
                       "10,000 / 2 M", None))
    for name, value in q.items():
        target = "report" if name.startswith(("report query", "connect", "summarize")) else "< 100 ms"
        figs.append(Figure(f"usage: {name}", value * 1000, "ms", target, value < 0.1 if target != "report" else None))
    return figs


# ---------------------------------------------------------------------------------------------- ccusage 20


CC20_BYTES = 600 * MB  # issue 28: a first index of ≥ 500 MB of Claude Code sessions (fresh ids)
CC20_ROUNDS = 2  # rounds of each command, ours and ccusage's alternated
CC20_VERSION = "20.0.24"


LAUNCHER = Path("/tmp/ccusage/node_modules/.bin/ccusage")
PINNED = REPO / "tests" / "agents" / "node_modules" / "@ccusage" / "ccusage-linux-x64" / "bin" / "ccusage"


def ccusage20() -> tuple[Path | None, str]:
    """ccusage 20 (a native program: ``ccusage`` + ``@ccusage/ccusage-linux-x64`` from npm) and, when it is not
    there, why. Found at ``$CCUSAGE20`` (the launcher's path), else at :data:`LAUNCHER` (``npm install --prefix
    /tmp/ccusage ccusage@20.0.24 @ccusage/ccusage-linux-x64@20.0.24``: the launcher, as people run it), else the
    binary pinned in tests/agents (installed by ``make test``; npm leaves it without its exec bit, so a copy with
    the bit set is run: the native program without the launcher's Node start, a little faster)."""
    path = Path(os.environ.get("CCUSAGE20") or LAUNCHER)
    if not path.exists() and not os.environ.get("CCUSAGE20") and PINNED.is_file():
        path = DATA / "ccusage20" / "ccusage"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PINNED, path)
        path.chmod(0o755)
    if not path.exists():
        return None, (f"ccusage 20 not found at {path} (npm install --prefix /tmp/ccusage ccusage@{CC20_VERSION} "
                      f"@ccusage/ccusage-linux-x64@{CC20_VERSION}, `make test`, or set CCUSAGE20)")
    try:
        version = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"ccusage at {path} does not run: {exc}"
    if not version.split()[-1:] or not version.split()[-1].startswith("20."):
        return None, f"ccusage at {path} is not version 20 ({version.strip()[:40]!r})"
    return path, ""


def decode_only(name: str) -> int:
    """The least a pass can do with one file: every line decoded by the decoder the readers use
    (:func:`engine.store.fsutil.fast_json`), nothing kept; the lines decoded."""
    from engine.store.fsutil import fast_json

    with open(name, "rb") as fh:
        data = fh.read()
    return sum(1 for line in data.split(b"\n") if line and fast_json(line)[0])


def _floor_child() -> int:
    """The decode floor of a first index (issue 28): every line of the HOME's Claude Code files decoded, nothing
    else, the files spread over the machine's cores as a first index spreads them
    (:func:`engine.sources.spread.spread`). Run as a whole process beside ccusage: no exact one-pass reader in
    Python does less."""
    from engine.sources.spread import spread

    files = sorted(str(p) for p in (Path.home() / ".claude" / "projects").glob("*/*.jsonl"))
    return sum(f.result() for f in spread(decode_only, files, [os.path.getsize(f) for f in files]))


def _cc20_day_tokens(out: str) -> dict[str, tuple[int, int]]:
    """{day: (prompt tokens, output tokens)} of ``ccusage claude daily --json``."""
    rows = json.loads(out).get("daily") or []
    return {str(r["date"])[:10]: (int(r.get("inputTokens") or 0) + int(r.get("cacheCreationTokens") or 0)
                                  + int(r.get("cacheReadTokens") or 0), int(r.get("outputTokens") or 0))
            for r in rows}


def _our_day_tokens(data_dir: Path) -> dict[str, tuple[int, int]]:
    """{day: (prompt tokens, output tokens)} of the Claude Code calls of the index in ``data_dir``."""
    from engine.usage.index import UsageIndex

    con = UsageIndex(data_dir / "usage").connect()
    try:
        rows = con.execute("SELECT CAST(day AS VARCHAR), sum(prompt_tokens), sum(output_tokens) FROM calls "
                           "WHERE agent = 'claude-code' GROUP BY day").fetchall()
    finally:
        con.close()
    return {str(d): (int(p or 0), int(o or 0)) for d, p, o in rows}


def bench_ccusage20(repo: Path = REPO, rounds: int = CC20_ROUNDS) -> list[Figure]:
    """Issue 28's targets beside ccusage 20, whole processes alternated, on the Claude Code sessions of :data:`HOME`
    made at :data:`CC20_BYTES` (its Codex rollouts out of our sight by an empty ``CODEX_HOME``, as ``ccusage claude``
    reads none; then both again with them: ``ctxbench usage`` and ``ccusage daily``, every agent): first index
    (``ctxbench usage --by day --json``, a fresh data dir) against ``ccusage claude daily --offline --json -z UTC``;
    the index up to date (the same command again) against the same; ``ctxbench sources --json --refresh`` against
    ``ccusage claude session --offline --json``. Wall time and peak RSS, the best of ``rounds``; tokens per day
    compared. ``repo``: the tree whose ``app.cli`` runs (a worktree of another commit gives the figures before a
    change)."""
    tool, why = ccusage20()
    if tool is None:
        print(f"usage-ccusage20: skipped: {why}", flush=True)
        return [Figure(f"usage vs ccusage 20: SKIPPED ({why[:70]})", float("nan"), "", "", None)]
    make_folder(CC20_BYTES)
    _, n_claude, n_codex = folder_size()
    size = sum(p.stat().st_size for p in (HOME / ".claude" / "projects").glob("*/*.jsonl"))
    data_dir = DATA / "data-cc20"
    no_codex = DATA / "cc20-no-codex"  # the folder's Codex rollouts out of our sight: ccusage's `claude` reads none
    no_codex.mkdir(parents=True, exist_ok=True)
    all_env = _clean_env(HOME=str(HOME), CTXBENCH_DATA_DIR=str(data_dir), CTXBENCH_CONFIG_DIR=str(data_dir / "config"))
    ours_env = {**all_env, "CODEX_HOME": str(no_codex)}
    cc_env = _clean_env(HOME=str(HOME), CLAUDE_CONFIG_DIR=str(HOME / ".claude"))
    usage = [sys.executable, "-m", "app.cli", "usage", "--by", "day", "--json"]
    sources = [sys.executable, "-m", "app.cli", "sources", "--json", "--refresh"]
    daily = [str(tool), "claude", "daily", "--offline", "--json", "-z", "UTC"]
    daily_all = [str(tool), "daily", "--offline", "--json", "-z", "UTC"]
    session = [str(tool), "claude", "session", "--offline", "--json"]
    floor = [sys.executable, "-m", "benchmarks.usage_bench", "floor"]
    runs: dict[str, list[tuple[float, int]]] = {k: [] for k in ("first", "again", "daily", "sources", "session",
                                                                "first_all", "daily_all", "floor")}
    cc_out = ""

    cpu: dict[str, list[float]] = {k: [] for k in runs}

    def timed(cmd: list[str], env: dict[str, str], name: str) -> tuple[float, int, str]:
        """(wall s, peak RSS, stdout) of one process; its CPU seconds (user + system, its workers included: they
        are waited for) go to ``cpu[name]`` — the work done, which the load of a shared machine does not change."""
        with tempfile.TemporaryFile() as out:  # as _run, but from ``repo``
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL, cwd=repo)
            _, status, rusage = os.wait4(proc.pid, 0)
            took = time.perf_counter() - t0
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"{cmd[:4]} exited {os.waitstatus_to_exitcode(status)}")
            out.seek(0)
            cpu[name].append(rusage.ru_utime + rusage.ru_stime)
            return took, rusage.ru_maxrss * 1024, out.read().decode()

    for _ in range(rounds):  # whole processes, alternated
        shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.mkdir(parents=True)
        runs["first"].append(timed(usage, ours_env, "first")[:2])
        took, rss, cc_out = timed(daily, cc_env, "daily")
        runs["daily"].append((took, rss))
        runs["floor"].append(timed(floor, ours_env, "floor")[:2])
        runs["again"].append(timed(usage, ours_env, "again")[:2])
        runs["sources"].append(timed(sources, ours_env, "sources")[:2])
        runs["session"].append(timed(session, cc_env, "session")[:2])
        shutil.rmtree(data_dir, ignore_errors=True)  # the same with the folder's Codex rollouts, both sides
        data_dir.mkdir(parents=True)
        runs["first_all"].append(timed(usage, all_env, "first_all")[:2])
        runs["daily_all"].append(timed(daily_all, cc_env, "daily_all")[:2])
    theirs, mine = _cc20_day_tokens(cc_out), _our_day_tokens(data_dir)  # (the last index: all agents; Claude's rows)
    return _cc20_figures(runs, cpu, theirs, mine, size, n_claude, n_codex)


def _cc20_figures(runs: dict[str, list[tuple[float, int]]], cpu: dict[str, list[float]],
                  theirs: dict[str, tuple[int, int]], mine: dict[str, tuple[int, int]], size: int, n_claude: int,
                  n_codex: int) -> list[Figure]:
    """:func:`bench_ccusage20`'s figures from its runs ((wall s, peak RSS) by name), their CPU seconds and the tokens
    per day of each side."""
    best = {k: min(v) for k, v in runs.items()}
    rss = {k: max(r for _, r in v) for k, v in runs.items()}
    prompt_same = sum(1 for d in theirs if mine.get(d, (None,))[0] == theirs[d][0])
    out_same = sum(1 for d in theirs if mine.get(d, (None, None))[1] == theirs[d][1])
    f, d = best["first"][0], best["daily"][0]
    return [
        Figure(f"cc20: the folder ({n_claude} Claude Code files)", size / MB, "MiB", "≥ 500 MiB", size >= 500 * MB),
        Figure("cc20: first index, `usage --by day --json`", f, "s", "report", None),
        Figure("cc20: ccusage claude daily --offline --json", d, "s", "report", None),
        Figure("cc20: first index / ccusage daily", f / d, "×", "≤ 1.0", f / d <= 1.0),
        Figure("cc20: … CPU s (user + sys, workers included), ours / ccusage's",
               min(cpu["first"]), f"/ {min(cpu['daily']):.2f}", "report", None),
        Figure("cc20: decode floor (every line decoded, nothing else, spread as ours) / ccusage daily",
               best["floor"][0] / d, "×", "report", None),
        Figure("cc20: … CPU s, floor / ccusage's", min(cpu["floor"]), f"/ {min(cpu['daily']):.2f}", "report", None),
        Figure("cc20: first index, peak RSS", rss["first"] / MB, "MB", "≤ 300 MB", rss["first"] <= 300 * MB),
        Figure("cc20: ccusage daily, peak RSS", rss["daily"] / MB, "MB", "report", None),
        Figure(f"cc20: days with ccusage's prompt tokens ({len(theirs)} days)", prompt_same, "days",
               f"= {len(theirs)}", prompt_same == len(theirs) and len(mine) == len(theirs)),
        Figure("cc20: days with ccusage's output tokens", out_same, "days", "report", None),
        Figure("cc20: index up to date, `usage --by day --json`", best["again"][0], "s", "report", None),
        Figure("cc20: index up to date / ccusage daily", best["again"][0] / d, "×", "≤ 0.25",
               best["again"][0] / d <= 0.25),
        Figure("cc20: … CPU s, ours / ccusage's", min(cpu["again"]), f"/ {min(cpu['daily']):.2f}", "report", None),
        Figure("cc20: index up to date, peak RSS", rss["again"] / MB, "MB", "report", None),
        Figure("cc20: `sources --json --refresh`", best["sources"][0], "s", "report", None),
        Figure("cc20: ccusage claude session --offline --json", best["session"][0], "s", "report", None),
        Figure("cc20: sources --refresh / ccusage session", best["sources"][0] / best["session"][0], "×", "≤ 1.0",
               best["sources"][0] <= best["session"][0]),
        Figure("cc20: … CPU s, ours / ccusage's", min(cpu["sources"]), f"/ {min(cpu['session']):.2f}", "report",
               None),
        Figure("cc20: sources --refresh, peak RSS", rss["sources"] / MB, "MB", "report", None),
        Figure("cc20: ccusage session, peak RSS", rss["session"] / MB, "MB", "report", None),
        Figure(f"cc20: with the folder's {n_codex} Codex rollouts too: first index / `ccusage daily` (all agents)",
               best["first_all"][0] / best["daily_all"][0], "×", "report", None),
        Figure("cc20: … CPU s, ours / ccusage's", min(cpu["first_all"]), f"/ {min(cpu['daily_all']):.2f}", "report",
               None),
    ]


ALL = {"usage": bench_usage, "usage-ccusage20": bench_ccusage20}


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "make":
        make_folder()
        print(folder_size())
        make_big_index()
    elif cmd == "regrow":
        print(json.dumps(_regrow_child(sys.argv[2])))
    elif cmd == "queries":
        print(json.dumps(_queries_child()))
    elif cmd == "view":
        print(json.dumps(_view_child()))
    elif cmd == "floor":
        print(_floor_child())
    elif cmd == "ccusage20":  # [REPO]: the tree to measure (a worktree of another commit: the figures before)
        tree = Path(sys.argv[2]) if len(sys.argv) > 2 else REPO
        compiled(tree)  # (as python -m benchmarks does: the bytecode an install has)
        for fig in bench_ccusage20(tree):
            print(fig.line(), flush=True)
    else:
        for fig in bench_usage():
            print(fig.line(), flush=True)
