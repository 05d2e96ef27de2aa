"""``ctxbench usage``: the usage index's figures as a table or JSON (in process, on a fake home)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.cli_usage import ProgressLine
from engine.usage import index as index_mod
from engine.usage.index import IndexProgress
from tests.engine.usage.test_usage_index import _call, _result, _user


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    folder = home / ".claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    (folder / "s1.jsonl").write_text(
        _user(1, "2026-03-01T10:00:00.000Z") + _call(2, "2026-03-01T10:00:05.000Z", tool="Bash")
        + _result(3, "2026-03-01T10:00:06.000Z", "tu2") + _call(4, "2026-03-02T10:00:09.000Z"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CTXBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


def test_usage_json_by_day(fake_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["type"] == "usage" and data["by"] == "day"
    assert [g["day"] for g in data["groups"]] == ["2026-03-01", "2026-03-02"]
    assert data["total"]["calls"] == 2 and data["total"]["cost_usd"] > 0
    assert data["index"]["read"] == 1
    assert main(["usage", "--json", "--since", "2026-03-02"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["index"]["read"] == 0 and [g["day"] for g in again["groups"]] == ["2026-03-02"]


def test_usage_by_session_has_peak_and_agent_cost(fake_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--by", "session", "--json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    for key in ("peak_fullness", "compactions", "cache_hit_rate", "agent_cost_usd", "difference_usd"):
        assert key in group
    assert group["compactions"] == 0 and group["calls"] == 2


@pytest.mark.parametrize("by", ["day", "project", "model", "session", "tool", "agent"])
def test_usage_table(fake_home: Path, capsys: pytest.CaptureFixture[str], by: str) -> None:
    assert main(["usage", "--by", by]) == 0
    text = capsys.readouterr().out
    assert ("Bash" if by == "tool" else "$") in text


def test_usage_empty_and_bad_date(fake_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--no-update"]) == 0
    assert "No agent calls" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["usage", "--since", "March"])
    assert exc.value.code == 2


def test_no_update_over_an_index_of_another_version_says_so(fake_home: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """An index an older ctxbench wrote is not read as empty in silence: --no-update says why it shows nothing."""
    from engine.usage.index import index_dir

    index_dir().mkdir(parents=True, exist_ok=True)
    (index_dir() / "files.json").write_text('{"version": 1, "prices": "x", "files": {}}')
    assert main(["usage", "--no-update"]) == 0
    err = capsys.readouterr().err
    assert "written by another version" in err and "without --no-update" in err
    assert main(["usage"]) == 0  # built again by an update (which says what it replaced)
    capsys.readouterr()
    assert main(["usage", "--no-update", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["total"]["calls"] == 2 and not captured.err


def test_lines_that_cannot_be_read_are_counted_and_said_on_every_run(fake_home: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Flipped bytes in a line of a session file: its other calls are counted, and every run names the file, how
    many lines could not be read and the first (stderr and --json), not only the run that read it."""
    session = fake_home / ".claude" / "projects" / "-home-u-proj" / "s1.jsonl"
    lines = session.read_bytes().splitlines(keepends=True)
    lines.insert(1, b'{"type": "user", "mess\xff\x00age": {bad\n')
    session.write_bytes(b"".join(lines))
    for _ in range(2):
        assert main(["usage", "--json"]) == 0
        captured = capsys.readouterr()
        data = json.loads(captured.out)
        assert data["total"]["calls"] == 2
        (damaged,) = data["index"]["damaged"]
        assert damaged["path"] == str(session) and damaged["lines"] == 1 and damaged["first"].startswith("line 2: not")
        assert f"{session}: 1 line(s) could not be read (line 2: not" in captured.err


def test_the_lock_wait_default_is_the_index_s() -> None:
    from app.cli import build_parser
    from engine.usage.storage import LOCK_WAIT

    assert build_parser().parse_args(["usage"]).lock_wait == LOCK_WAIT


def test_a_sessions_cost_is_told_in_its_parts_as_every_view_tells_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27: ``usage --by session`` gives a session's cost as main + subagents + compaction calls, the same
    parts (and the same total) :class:`engine.usage.costs.SessionCost` gives the window's status bar and
    ``ctxbench tools`` for the file: a real Claude Code session with three Task subagents and a compaction."""
    import shutil

    from engine.usage.costs import session_cost
    from tests.conftest import SHARED

    shared = SHARED / "data" / "sessions" / "claude-code"
    name = "258c7280-ae70-4798-800f-63464d01a85d"
    if not (shared / f"{name}.jsonl").exists():
        pytest.skip("the shared sessions are not on this machine")
    home = tmp_path / "home"
    folder = home / ".claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    shutil.copy(shared / f"{name}.jsonl", folder / f"{name}.jsonl")
    shutil.copytree(shared / name, folder / name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CTXBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_DIR"):
        monkeypatch.delenv(var, raising=False)
    cost = session_cost(folder / f"{name}.jsonl")
    assert cost is not None and cost.subagents.calls == 3 and cost.compaction.calls == 1
    assert main(["usage", "--by", "session", "--json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert group["cost_usd"] == pytest.approx(cost.usd, rel=1e-9)
    for part, theirs in (("main", cost.main), ("subagents", cost.subagents), ("compaction", cost.compaction)):
        assert group[part]["calls"] == theirs.calls, part
        assert group[part]["unpriced_calls"] == theirs.unpriced, part
        assert group[part]["cost_usd"] == pytest.approx(theirs.usd, rel=1e-9), part
    assert group["cost_breakdown"].replace("+", "") == cost.breakdown().replace("+", "")
    assert main(["usage", "--by", "session", "--no-update"]) == 0
    head, row = capsys.readouterr().out.splitlines()[:2]
    assert head.split()[-8:-5] == ["main", "subagents", "compaction"]  # then peak, compactions, agent cost, …
    assert f"${cost.subagents.usd:,.2f}" in row and f"${cost.compaction.usd:,.2f}" in row


@pytest.mark.parametrize("by", ["day", "project", "model", "session", "tool", "agent"])
def test_an_index_that_did_not_change_answers_as_the_query_did(
        fake_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        by: str) -> None:
    """The second ``usage`` over an unchanged index answers from what the first kept (engine.usage.answers):
    the same JSON and the same table, the index's query not run; a session file that changed makes a new index
    and a new answer (never the old one)."""
    from engine.usage import answers
    from engine.usage.index import UsageIndex

    outputs = []
    for _ in range(2):
        assert main(["usage", "--by", by, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        del data["index"]
        outputs.append(data)
        assert main(["usage", "--by", by]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[2] and outputs[1] == outputs[3]
    assert (tmp_path / "data" / "usage" / answers.ANSWERS).is_file()

    def no_query(*_: object, **__: object) -> None:
        raise AssertionError("the index was queried")

    with monkeypatch.context() as patched:
        patched.setattr(UsageIndex, "query", no_query)
        assert main(["usage", "--by", by, "--json"]) == 0  # answered from what was kept
    capsys.readouterr()
    session = fake_home / ".claude" / "projects" / "-home-u-proj" / "s1.jsonl"
    with session.open("a") as fh:  # the session grew: a new index, asked again
        fh.write(_call(6, "2026-03-02T11:00:00.000Z"))
    assert main(["usage", "--by", by, "--json"]) == 0
    grown = json.loads(capsys.readouterr().out)
    assert grown["total"]["calls"] == outputs[0]["total"]["calls"] + 1 or by == "tool"
    assert grown["groups"] != outputs[0]["groups"]


def test_answers_that_cannot_be_read_are_asked_again(fake_home: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from engine.usage import answers

    assert main(["usage", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    kept = tmp_path / "data" / "usage" / answers.ANSWERS
    for bad in (b"", b"{not json", b"[1, 2]", json.dumps({"version": 99, "token": "x", "answers": {}}).encode(),
                b"\xff\xfe"):
        kept.write_bytes(bad)
        assert main(["usage", "--json"]) == 0
        again = json.loads(capsys.readouterr().out)
        assert again["groups"] == first["groups"] and again["total"] == first["total"]
    # an answer kept for another index (another token) is not taken
    data = json.loads(kept.read_bytes())
    key = next(iter(data["answers"]))
    answers.keep(kept.parent, "another-token", key, {"groups": [], "total": {"calls": 999}})
    assert main(["usage", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == first["total"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_update_shows_how_far_it_has_read_on_a_terminal_and_wipes_it(
        fake_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One line written over on stderr (a terminal): the engine's own sentence (IndexProgress.said), the last one
    every file read; wiped when the reading is done, before the answer. Nothing when stderr is no terminal."""
    folder = fake_home / ".claude" / "projects" / "-home-u-proj"
    for k in range(2, 6):  # 5 session files
        (folder / f"s{k}.jsonl").write_text((folder / "s1.jsonl").read_text().replace("s1", f"s{k}"))
    monkeypatch.setattr(ProgressLine, "SHOW_AFTER", 0.0)
    monkeypatch.setattr(index_mod, "PROGRESS_SECONDS", 0.0)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["usage", "--json"]) == 0
    out = terminal.getvalue()
    sizes = sum(p.stat().st_size for p in folder.glob("*.jsonl"))
    last = IndexProgress(5, 5, sizes, sizes).said()
    shown = [part.rstrip() for part in out.split("\r") if part.strip()]
    assert shown[-1] == f"ctxbench: {last}" and [s.split(":")[1] for s in shown] == [" reading session files"] * 5
    assert out.endswith("\r" + " " * len(f"ctxbench: {last}") + "\r")  # wiped
    assert json.loads(capsys.readouterr().out)["total"]["calls"] == 10

    line = ProgressLine(terminal)
    line.close()
    line(IndexProgress(1, 2, 3, 4))  # told after the wipe (a worker's last file, late): nothing written
    assert terminal.getvalue() == out
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # no terminal: not a word
    (folder / "s6.jsonl").write_text((folder / "s1.jsonl").read_text().replace("s1", "s6"))
    assert main(["usage", "--json"]) == 0
    assert sys.stderr.getvalue() == ""
