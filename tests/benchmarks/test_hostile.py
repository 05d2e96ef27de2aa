"""The hostile-input harness (benchmarks/hostile.py): its verdicts on a stand-in ``ctxbench`` that hangs, crashes
or drops a session, and the quick cases on this tree (each holds: their fixes are in)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import hostile
from tests.conftest import REPO

# a stand-in for app/cli.py: lists the Claude Code files as sessions, one call each; what it does wrong is chosen
# by the name of a planted file (hostile-hang, hostile-crash, hostile-drop, hostile-raw)
FAKE_CLI = '''
import json, os, sys, time
from pathlib import Path

projects = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "projects"
files = sorted(projects.rglob("*.jsonl"))
names = {f.stem for f in files}
if "hostile-hang" in names:
    time.sleep(600)
if "hostile-crash" in names:
    sys.exit("ctxbench: error: ValueError: cannot convert float NaN to integer")
if "hostile-drop" in names:  # one bad file takes a good one with it
    files = [f for f in files if f.name != "short.jsonl"]
if "hostile-warn" in names:
    print(f"ctxbench: warning: {projects}/hostile-warn.jsonl: cannot be read", file=sys.stderr)
    files = [f for f in files if f.stem != "hostile-warn"]
args = sys.argv[1:]
if args[0] == "sources" and "--json" in args:
    for f in files:
        print(json.dumps({"type": "source", "path": str(f)}))
elif args[0] == "sources":
    print("\\x1b]0;title\\x07" if "hostile-raw" in names else "agent  project")
elif args[0] == "usage":
    groups = [{"agent": "claude-code", "session_id": f.stem, "calls": 1} for f in files]
    print(json.dumps({"type": "usage", "groups": groups, "total": {"calls": len(groups)}, "index": None}))
'''


@pytest.fixture
def fake_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tree = tmp_path / "tree"
    (tree / "app").mkdir(parents=True)
    (tree / "app" / "__init__.py").write_text("")
    (tree / "app" / "cli.py").write_text(FAKE_CLI)
    monkeypatch.setattr(hostile, "TIMEOUT", 3.0)
    return tree


def _planted(name: str) -> hostile.Case:
    def plant(home: hostile.Home) -> hostile.Planted:
        hostile.write_lines(home.claude / f"{name}.jsonl", hostile.claude_session(f"{name}-id", tag=name))
        return hostile.Planted(name)

    hostile.planted_case("test", name, plant)
    return hostile.CASES.pop()


@pytest.mark.parametrize(("name", "verdict"), [("hostile-fine", "held"), ("hostile-hang", "hang"),
                                               ("hostile-crash", "crash"), ("hostile-drop", "silent loss"),
                                               ("hostile-warn", "held")])
def test_the_scan_verdicts(fake_tree: Path, name: str, verdict: str) -> None:
    [outcome] = hostile.run_cases(fake_tree, [_planted(name)])
    assert (outcome.verdict, outcome.group) == (verdict, "test"), outcome.detail
    if verdict == "hang":
        assert 3.0 <= outcome.seconds < 10
    if verdict == "silent loss":
        assert "short.jsonl" in outcome.detail


def test_the_terminal_verdict(fake_tree: Path) -> None:
    def raw(home: hostile.Home, base: hostile.Baseline) -> hostile.Verdict:
        hostile.write_lines(home.claude / "hostile-raw.jsonl", [])
        return hostile.terminal_verdict(hostile.ctxbench(home, "sources"), "sources", shown=False)

    def clean(home: hostile.Home, base: hostile.Baseline) -> hostile.Verdict:
        return hostile.terminal_verdict(hostile.ctxbench(home, "sources"), "sources", shown=False)

    outcomes = hostile.run_cases(fake_tree, [hostile.Case("t", "raw", raw), hostile.Case("t", "clean", clean)])
    assert [o.verdict for o in outcomes] == ["unescaped", "held"]
    assert "\\x1b" in outcomes[0].detail
    rows = hostile.table(outcomes)
    assert rows["total"] == {"cases": 2, "crash": 0, "hang": 0, "silent loss": 0, "unescaped": 1, "held": 1}
    assert hostile.format_table(rows).splitlines()[-1].split() == ["total", "2", "0", "0", "0", "1", "1"]


def test_the_quick_cases_hold_on_this_tree() -> None:
    quick = [c for c in hostile.CASES if c.quick]
    assert len(quick) >= 20 and {c.group for c in quick} >= {"Claude Code", "Codex", "Gemini CLI", "OpenCode",
                                                              "files", "terminal"}
    outcomes = hostile.run_cases(REPO, quick)
    assert [(o.group, o.name, o.detail) for o in outcomes if o.verdict != "held"] == []
