"""The usage index side by side with ccusage 16 on the shared Claude Code sessions.

ccusage is installed from npm into a temp folder (skipped when npm or the registry is not there). Its
price table is litellm's, fetched from GitHub: the fetch is answered by a preload script with the table
bundled in the installed litellm, so both sides price with the same table (ccusage's own ``--offline``
table predates the models of these sessions and prices them at $0).

Known differences, checked rather than hidden:

- output tokens: a response is split over several lines repeating ``usage``; ccusage keeps the first line
  (a streaming placeholder for ``output_tokens``), the index the largest figure (the final count);
- one-hour cache writes: ccusage prices every cache write at the 5-minute price.

So: uncached input, cache read and cache write are equal per session and per day; ccusage's output equals
the first line's figure; and the cost is within 1 % once priced on ccusage's terms (first-line output, all
writes at the 5-minute price). ccusage 16 names a session after the folder of its file, so each session
is laid out in its own project folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from engine.usage.index import UsageIndex
from engine.usage.prices import load_table, price_table_path
from tests.conftest import SHARED

CLAUDE = SHARED / "data" / "sessions" / "claude-code"
STUB = """import { readFileSync } from "node:fs";
globalThis.fetch = async (url) => {
  if (String(url).includes("model_prices_and_context_window")) {
    return new Response(readFileSync(process.env.CTXBENCH_PRICE_TABLE), { status: 200 });
  }
  throw new Error(`no network in this test: ${url}`);
};
"""

AGENTS = Path(__file__).resolve().parents[2] / "agents"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ccusage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ccusage 16 as pinned in tests/agents/package.json (installed by ``make test`` with the agents)."""
    installed = AGENTS / "node_modules" / "ccusage"
    if not (installed / "dist" / "index.js").is_file():
        pytest.fail("ccusage is not installed: `make test` installs it with `npm ci --prefix tests/agents` "
                    "(it needs Node >= 20 and npm)", pytrace=False)
    folder = tmp_path_factory.mktemp("ccusage")
    (folder / "node_modules").mkdir()
    (folder / "node_modules" / "ccusage").symlink_to(installed)
    (folder / "stub.mjs").write_text(STUB)
    return folder


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CLAUDE.is_dir():
        pytest.skip("the shared sessions are not on this machine")
    home = tmp_path_factory.mktemp("home")
    projects = home / ".claude" / "projects"
    for main in sorted(CLAUDE.glob("*.jsonl")):
        folder = projects / f"p-{main.stem}"
        folder.mkdir(parents=True)
        shutil.copyfile(main, folder / main.name)
        if (CLAUDE / main.stem).is_dir():
            shutil.copytree(CLAUDE / main.stem, folder / main.stem, copy_function=shutil.copyfile)
    for root, dirs, _ in os.walk(home):
        for name in dirs:
            os.chmod(Path(root) / name, 0o755)
    return home


def run_ccusage(folder: Path, home: Path, command: str) -> dict[str, Any]:
    env = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"), "TZ": "UTC",
           "CTXBENCH_PRICE_TABLE": str(price_table_path()), "NO_COLOR": "1"}
    done = subprocess.run(["node", "--import", str(folder / "stub.mjs"),
                           str(folder / "node_modules" / "ccusage" / "dist" / "index.js"), command, "--json"],
                          capture_output=True, text=True, env=env, timeout=300, check=True)
    return json.loads(done.stdout)


def first_line_outputs(home: Path) -> dict[str, int]:
    """{requestId: output_tokens of the request's first line} (what ccusage keeps)."""
    first: dict[str, int] = {}
    for path in sorted(home.rglob("*.jsonl")):
        for raw in path.read_text().splitlines():
            obj = json.loads(raw)
            msg = obj.get("message")
            if obj.get("type") == "assistant" and isinstance(msg, dict) and isinstance(msg.get("usage"), dict):
                first.setdefault(str(obj.get("requestId")), int(msg["usage"].get("output_tokens") or 0))
    return first


def progress_only(home: Path) -> set[str]:
    """The requests of subagents' calls that only a parent file's ``progress`` records hold (no subagent file):
    ours counts them (engine.sources.claude_code), ccusage does not read progress records."""
    streamed: set[str] = set()
    held: set[str] = set()
    for path in sorted(home.rglob("*.jsonl")):
        for raw in path.read_text().splitlines():
            obj = json.loads(raw)
            if obj.get("type") == "assistant":
                held.add(str(obj.get("requestId")))
            elif obj.get("type") == "progress" and isinstance(inner := (obj.get("data") or {}).get("message"), dict):
                if inner.get("type") == "assistant" and inner.get("requestId"):
                    streamed.add(str(inner["requestId"]))
    return streamed - held


def ours(home: Path, tmp: Path) -> tuple[list[dict[str, Any]], dict[str, int]]:
    ix = UsageIndex(tmp)
    ix.update(home=home, env={})
    con = ix.connect()
    cur = con.execute("""SELECT c.request_id, c.model, c.day, c.prompt_tokens, c.input_tokens, c.cache_read_tokens,
                                c.cache_write_tokens, c.output_tokens, c.cost_usd, s.path
                         FROM calls c JOIN sessions s USING (file_id)""")
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    con.close()
    streamed = progress_only(home)
    assert len([r for r in rows if r["request_id"] in streamed]) == len(streamed)  # each counted, once
    return [r for r in rows if r["request_id"] not in streamed], first_line_outputs(home)


def compare(rows: list[dict[str, Any]], first: dict[str, int], theirs: dict[str, dict[str, Any]],
            key: str) -> list[dict[str, Any]]:
    table = load_table()
    mine: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        k = Path(r["path"]).stem if key == "session" else str(r["day"])
        m = mine[k]
        m["input"] += r["input_tokens"] or 0
        m["cache_read"] += r["cache_read_tokens"] or 0
        m["cache_write"] += r["cache_write_tokens"] or 0
        m["output"] += r["output_tokens"] or 0
        m["first_output"] += first.get(r["request_id"], 0)
        m["cost"] += r["cost_usd"] or 0.0
        m["cost_on_ccusage_terms"] += table.cost(
            r["model"], prompt=r["prompt_tokens"], completion=first.get(r["request_id"], 0),
            cache_read=r["cache_read_tokens"], cache_write=r["cache_write_tokens"]).usd or 0.0
    out = []
    for k, m in sorted(mine.items()):
        t = theirs[k]
        out.append({key: k, "input": (m["input"], t["inputTokens"]),
                    "cache_read": (m["cache_read"], t["cacheReadTokens"]),
                    "cache_write": (m["cache_write"], t["cacheCreationTokens"]),
                    "output": (m["output"], t["outputTokens"]), "first_output": m["first_output"],
                    "cost": (round(m["cost"], 4), round(t["totalCost"], 4)),
                    "cost_on_ccusage_terms": round(m["cost_on_ccusage_terms"], 4)})
    return out


def _check(figures: list[dict[str, Any]]) -> None:
    assert figures
    for f in figures:
        assert f["input"][0] == f["input"][1], f
        assert f["cache_read"][0] == f["cache_read"][1], f
        assert f["cache_write"][0] == f["cache_write"][1], f
        assert f["output"][1] == f["first_output"] and f["output"][0] >= f["output"][1], f
        theirs = f["cost"][1]
        assert abs(f["cost_on_ccusage_terms"] - theirs) <= 0.01 * max(theirs, 1e-9), f


def test_per_session(ccusage: Path, layout: Path, tmp_path: Path) -> None:
    rows, first = ours(layout, tmp_path / "usage")
    data = run_ccusage(ccusage, layout, "session")
    theirs: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(float))
    for s in data["sessions"]:  # the main file's folder, or "<folder>/<session>" for its subagents
        name = s["sessionId"] if s["sessionId"] != "subagents" else s["projectPath"].split("/")[0]
        for k in ("inputTokens", "cacheReadTokens", "cacheCreationTokens", "outputTokens", "totalCost"):
            theirs[name.removeprefix("p-")][k] += s[k]
    figures = compare(rows, first, theirs, "session")
    print("\n" + "\n".join(json.dumps(f) for f in figures))
    _check(figures)


def test_per_day(ccusage: Path, layout: Path, tmp_path: Path) -> None:
    rows, first = ours(layout, tmp_path / "usage")
    data = run_ccusage(ccusage, layout, "daily")
    theirs = {d["date"]: d for d in data["daily"]}
    figures = compare(rows, first, theirs, "day")
    print("\n" + "\n".join(json.dumps(f) for f in figures))
    _check(figures)
