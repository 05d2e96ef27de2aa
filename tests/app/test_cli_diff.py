"""``ctxbench diff`` as a subprocess: a Claude Code file read in place, the session folder its import
wrote, an OpenAI-format log, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app.test_cli import assert_one_line_error, ctxbench, events
from tests.conftest import TRAJECTORIES
from tests.engine.context.test_diff import _claude_raw_figures
from tests.engine.sources.conftest import PERSISTED_CLAUDE

pytestmark = pytest.mark.skipif(not PERSISTED_CLAUDE.exists(), reason="the shared sessions are not on this machine")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli-diff") / "cc"
    proc = ctxbench("import", str(PERSISTED_CLAUDE), "--session", str(folder), "--no-model-info")
    assert proc.returncode == 0, proc.stderr
    return folder


def test_diff_across_the_compaction_as_json_and_text() -> None:
    raw = _claude_raw_figures(PERSISTED_CLAUDE)
    a = raw["before"]
    before, after = raw["calls"][a - 1]["prompt"], raw["calls"][a]["prompt"]
    proc = ctxbench("diff", str(PERSISTED_CLAUDE), str(a), str(a + 1), "--json")
    assert proc.returncode == 0, proc.stderr
    [doc] = events(proc)
    assert doc["type"] == "diff" and (doc["a"], doc["b"], doc["compactions"]) == (a, a + 1, [0])
    assert (doc["provider_prompt_tokens_a"], doc["provider_prompt_tokens_b"]) == (before, after)
    assert doc["provider_prompt_delta"] == after - before
    assert [e["kind"] for e in doc["entered"]] == ["summary"]
    assert doc["entered_tokens"] == len(raw["summary"]) * 2 // 5
    assert doc["left_tokens"] == sum(e["tokens"] for e in doc["left"]) and len(doc["left"]) == doc["messages_a"]
    assert doc["net_tokens"] == doc["entered_tokens"] - doc["left_tokens"]
    assert doc["session"] == PERSISTED_CLAUDE.name and doc["path"] == str(PERSISTED_CLAUDE)

    text = ctxbench("diff", str(PERSISTED_CLAUDE), str(a), str(a + 1))
    assert text.returncode == 0, text.stderr
    head = text.stdout.splitlines()
    assert head[0] == f"{PERSISTED_CLAUDE.name}: call {a} → call {a + 1} (1 compaction between them)"
    assert f"provider prompt tokens: {before:,} → {after:,} (−{before - after:,})" in head
    assert "ENTERED:" in head and "LEFT:" in head and len(head) == 6 + 1 + len(doc["left"])


def test_the_imported_folder_gives_the_same_figures(imported: Path) -> None:
    for a, b in (("1", "2"), ("71", "72"), ("5", "140")):
        from_file = events(ctxbench("diff", str(PERSISTED_CLAUDE), a, b, "--json"))[0]
        from_folder = events(ctxbench("diff", str(imported), a, b, "--json"))[0]
        for key in ("entered_tokens", "left_tokens", "net_tokens", "provider_prompt_delta", "messages_a",
                    "messages_b", "compactions"):
            assert from_file[key] == from_folder[key], key
    lines = [json.loads(x) for x in (imported / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    doc = events(ctxbench("diff", str(imported), "140", "143", "--json"))[0]
    live = {m["id"] for m in lines}
    assert doc["entered"] and all(e["message_id"] in live for e in doc["entered"])  # links to the messages


@pytest.mark.skipif(not (TRAJECTORIES / "astropy__astropy-12907.traj.json").exists(), reason="no trajectories")
def test_an_openai_format_log_is_read_through_a_temporary_import() -> None:
    proc = ctxbench("diff", str(TRAJECTORIES / "astropy__astropy-12907.traj.json"), "1", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    [doc] = events(proc)
    assert doc["messages_b"] > doc["messages_a"] and doc["entered_tokens"] > 0 and doc["left"] == []


def test_errors(tmp_path: Path) -> None:
    proc = ctxbench("diff", str(PERSISTED_CLAUDE), "0", "2")
    assert_one_line_error(proc, "call 0 is out of range", "calls 1 to 143")
    proc = ctxbench("diff", str(PERSISTED_CLAUDE), "1", "144")
    assert_one_line_error(proc, "call 144 is out of range", "calls 1 to 143")
    assert_one_line_error(ctxbench("diff", str(tmp_path / "nope"), "1", "2"), "no session folder or file at")
    assert_one_line_error(ctxbench("diff", str(tmp_path), "1", "2"), "is not a session folder")
    (tmp_path / "x.txt").write_text("hello\n", encoding="utf-8")
    assert_one_line_error(ctxbench("diff", str(tmp_path / "x.txt"), "1", "2"), "not a session file of any known format")
    proc = ctxbench("diff", str(PERSISTED_CLAUDE), "one", "2")
    assert proc.returncode == 2 and "invalid int value" in proc.stderr
