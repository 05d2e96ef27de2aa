"""The import contract: ``ctxbench import PATH --session DIR [--format NAME]`` prints one JSON object
and writes events.jsonl with one context record per provider call and one record per compaction —
each figure checked against the raw files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app import cli
from engine.context.conversation import Session
from engine.context.tokens import estimate_message_tokens
from engine.store import archive
from tests.conftest import REPO, TRAJECTORIES
from tests.engine.sources.conftest import (
    BIG_CLAUDE,
    BIG_CODEX,
    CLAUDE,
    CODEX,
    OPENHANDS,
    PERSISTED_CLAUDE,
    SWE,
    claude_files,
    codex_files,
    lines,
    raw_claude_calls,
    raw_codex_calls,
)


def run_import(capsys: pytest.CaptureFixture[str], path: Path, session: Path, *extra: str) -> dict[str, Any]:
    code = cli.main(["import", str(path), "--session", str(session), "--no-model-info", *extra])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and len(out) == 1
    return json.loads(out[0])


def records(session: Path, kind: str) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in (session / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["type"] == kind]


@pytest.mark.parametrize("path", claude_files(), ids=lambda p: p.name)
def test_claude_code_import(capsys: pytest.CaptureFixture[str], tmp_path: Path, path: Path) -> None:
    raw = raw_claude_calls(path)
    report = run_import(capsys, path, tmp_path / "s")
    assert report["format"] == "claude-code" and report["reported_calls"] == len(raw) and report["messages"] > 0
    ctx = records(tmp_path / "s", "context")
    assert [r["provider_prompt_tokens"] for r in ctx] == [c["prompt"] for c in raw]
    assert [r["cache_read_tokens"] for r in ctx] == [c["read"] for c in raw]
    assert [r["cache_write_tokens"] for r in ctx] == [c["write"] for c in raw]
    assert [r["completion_tokens"] for r in ctx] == [c["output"] for c in raw]
    assert [r["model"] for r in ctx] == [c["model"] for c in raw]
    assert all(r["ts"] and r["window"] == 200_000 for r in ctx)
    assert [r["call_index"] for r in ctx] == list(range(len(raw)))


@pytest.mark.parametrize("path", codex_files(), ids=lambda p: p.name[:40])
def test_codex_import(capsys: pytest.CaptureFixture[str], tmp_path: Path, path: Path) -> None:
    raw = raw_codex_calls(path)
    report = run_import(capsys, path, tmp_path / "s")
    assert report["format"] == "codex" and report["reported_calls"] == len(raw) and report["subagents"] == []
    ctx = records(tmp_path / "s", "context")
    assert [r["provider_prompt_tokens"] for r in ctx] == [c["prompt"] for c in raw]
    assert [r["cache_read_tokens"] for r in ctx] == [c["read"] for c in raw]
    assert all("cache_write_tokens" in r and r["cache_write_tokens"] is None for r in ctx)
    assert [r["window"] for r in ctx] == [c["window"] for c in raw]


def test_compaction_records_in_call_order(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for path, before, after in ((BIG_CLAUDE, 167094, 33960), (BIG_CODEX, 209950, 48297)):
        session = tmp_path / path.stem[:12]
        report = run_import(capsys, path, session)
        (comp,) = report["compactions"]
        assert (comp["trigger"], comp["tokens_before"], comp["tokens_after"]) == ("auto", before, after)
        rows = [json.loads(x) for x in (session / "events.jsonl").read_text(encoding="utf-8").splitlines()]
        at = next(i for i, r in enumerate(rows) if r["type"] == "compaction")
        # Codex: before = the last call's prompt; Claude Code: preTokens, its own count at that point
        assert before - 1000 < rows[at - 1]["provider_prompt_tokens"] <= before
        assert rows[at + 1]["provider_prompt_tokens"] == after
        assert rows[at]["messages_compacted"] == report["archived_messages"] > 0
        assert rows[at + 1]["segment"] == 1 and rows[at - 1]["segment"] == 0
        archived = [m for day in archive.list_days(session) for m in archive.read_day(session, day)]
        assert len(archived) == report["archived_messages"]
        loaded = Session.load(session)
        try:
            assert loaded.load_report.clean and len(loaded.messages) == report["live_messages"]
            assert loaded.summary == comp["summary"] and len(loaded.snapshots()) == report["calls"]
        finally:
            loaded.close()
    claude = json.loads((tmp_path / BIG_CLAUDE.stem[:12] / "session.json").read_text(encoding="utf-8"))
    cost = claude["import"] and records(tmp_path / BIG_CLAUDE.stem[:12], "compaction")[0]["cost"]
    (acompact,) = raw_claude_calls(next((CLAUDE / BIG_CLAUDE.stem / "subagents").glob("agent-acompact-*.jsonl")))
    assert cost["prompt_tokens"] == acompact["prompt"] and cost["completion_tokens"] is None
    assert cost["completion_placeholder"] == acompact["output"]  # a streaming placeholder, no figure (issue 27)


def test_subagents_become_linked_child_sessions(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = run_import(capsys, BIG_CLAUDE, tmp_path / "s")
    (sub,) = report["subagents"]
    agent_file = CLAUDE / BIG_CLAUDE.stem / "subagents" / f"agent-{sub['id']}.jsonl"
    raw = raw_claude_calls(agent_file)
    assert sub["calls"] == len(raw) == 3 and Path(sub["path"]) == tmp_path / "s" / "subagents" / sub["id"]
    child = records(Path(sub["path"]), "context")
    assert [r["provider_prompt_tokens"] for r in child] == [c["prompt"] for c in raw]
    task = next(o["parentToolUseID"] for o in lines(BIG_CLAUDE) if o.get("type") == "progress"
                and o["data"].get("agentId") == sub["id"])
    assert sub["parent_tool_call_id"] == task
    history = [json.loads(x) for x in (tmp_path / "s" / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    dialog = [m for day in archive.list_days(tmp_path / "s") for m in archive.read_day(tmp_path / "s", day)]
    linked = [m for m in history + dialog if m.get("subagent")]
    assert linked == [m for m in linked if m["tool_call_id"] == task] and len(linked) == 1
    assert linked[0]["subagent"] == {"id": sub["id"], "session": f"subagents/{sub['id']}", "model": sub["model"],
                                     "calls": sub["calls"]}  # the Task link names the child's model and calls


def test_persisted_output_is_copied_and_linked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "agent" / PERSISTED_CLAUDE.name
    src.parent.mkdir()
    shutil.copyfile(PERSISTED_CLAUDE, src)
    tool_id = "toolu_019CpL49DWBenUxVVCWEXz3L"
    results = src.with_suffix("") / "tool-results"
    results.mkdir(parents=True)
    (results / f"{tool_id}.txt").write_bytes(b"line\n" * 30_000)
    report = run_import(capsys, src, tmp_path / "s")
    (off,) = report["offloaded"]
    assert off["found"] and off["tool_call_id"] == tool_id and off["bytes"] == 150_000
    assert (tmp_path / "s" / off["path"]).read_bytes() == b"line\n" * 30_000
    msgs = [json.loads(x) for x in (tmp_path / "s" / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    msgs += [m for day in archive.list_days(tmp_path / "s") for m in archive.read_day(tmp_path / "s", day)]
    (linked,) = [m for m in msgs if m.get("offload")]
    assert linked["tool_call_id"] == tool_id and linked["offload"]["path"] == off["path"]
    assert linked["offload"]["lines"] == 30_000


def test_the_inferred_prefix_region(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = CLAUDE / "short.jsonl"
    report = run_import(capsys, path, tmp_path / "s")
    (first,) = records(tmp_path / "s", "context")
    msgs = [json.loads(x) for x in (tmp_path / "s" / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    before = msgs[: first["message_count"]]
    expected = raw_claude_calls(path)[0]["prompt"] - sum(estimate_message_tokens(m) for m in before)
    assert report["inferred_prefix_tokens"] == expected > 20_000
    assert report["inferred_prefix_label"] == "system prompt and tool definitions"
    assert first["prefix_source"] == "inferred" and first["prefix_tokens"] == expected
    assert first["system"] == expected and first["tools"] == 0  # shown as one region
    assert first["raw_prompt_tokens"] == first["provider_prompt_tokens"]
    meta = json.loads((tmp_path / "s" / "session.json").read_text(encoding="utf-8"))
    assert meta["import"]["inferred_prefix"] == {"tokens": expected, "label": report["inferred_prefix_label"],
                                                 "source": "inferred", "region": "system"}


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def test_reading_never_writes_into_the_agents_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    project = tmp_path / "projects" / "-home-me-proj"
    project.mkdir(parents=True)
    shutil.copyfile(BIG_CLAUDE, project / BIG_CLAUDE.name)
    shutil.copytree(BIG_CLAUDE.with_suffix(""), project / BIG_CLAUDE.stem)
    codex = tmp_path / "sessions" / "2026" / "02" / "23"
    codex.mkdir(parents=True)
    shutil.copyfile(BIG_CODEX, codex / BIG_CODEX.name)
    before = _tree(tmp_path)
    run_import(capsys, project / BIG_CLAUDE.name, tmp_path / "out" / "a")
    run_import(capsys, codex / BIG_CODEX.name, tmp_path / "out" / "b")
    after = {k: v for k, v in _tree(tmp_path).items() if not k.startswith("out")}
    assert after == before


@pytest.mark.parametrize(
    ("path", "fmt"),
    [(OPENHANDS / "basic.json", "openhands"), (SWE / "marshmallow-1867.function_calling.traj", "swe-agent"),
     (sorted(TRAJECTORIES.glob("*.traj.json"))[0], "mini-swe-agent")],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_other_formats(capsys: pytest.CaptureFixture[str], tmp_path: Path, path: Path, fmt: str) -> None:
    report = run_import(capsys, path, tmp_path / "s")
    assert report["format"] == fmt and report["compactions"] == [] and report["subagents"] == []
    ctx = records(tmp_path / "s", "context")
    assert len(ctx) == report["calls"] > 0 and report["messages"] > 0
    if fmt == "swe-agent":
        assert report["reported_calls"] == 0 and report["aggregate"]["api_calls"] == 11
        assert all(r["provider_prompt_tokens"] is None for r in ctx)
    else:
        assert report["reported_calls"] == sum(1 for r in ctx if r["provider_prompt_tokens"])


def test_plain_openai_log_and_a_forced_format(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "chat.jsonl"
    log.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n', encoding="utf-8")
    report = run_import(capsys, log, tmp_path / "s")
    assert report["format"] == "openai" and report["layout"] == "jsonl" and report["messages"] == 2
    forced = run_import(capsys, CLAUDE / "short.jsonl", tmp_path / "f", "--format", "claude-code")
    assert forced["format"] == "claude-code"
    code = cli.main(["import", str(CLAUDE / "short.jsonl"), "--session", str(tmp_path / "g"), "--no-model-info",
                     "--format", "codex"])
    assert code == 1 and "no message or provider call" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()


def _ctxbench(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_command_line_contract(tmp_path: Path) -> None:
    proc = _ctxbench("import", str(BIG_CLAUDE), "--session", str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    report = json.loads(line)
    assert {"format", "messages", "reported_calls", "compactions", "subagents"} <= set(report)
    assert report["format"] == "claude-code" and report["reported_calls"] == 152
    assert [(s["id"], s["calls"]) for s in report["subagents"]] == [("a881341", 3)]
    mystery = tmp_path / "notes.txt"
    mystery.write_text("just some notes\n", encoding="utf-8")
    proc = _ctxbench("import", str(mystery), "--session", str(tmp_path / "t"))
    assert proc.returncode == 1 and proc.stdout == ""
    (err,) = proc.stderr.strip().splitlines()
    assert "notes.txt" in err and all(n in err for n in ("claude-code", "codex", "openhands", "swe-agent",
                                                         "mini-swe-agent", "openai"))
    proc = _ctxbench("import", str(BIG_CLAUDE), "--session", str(tmp_path / "u"), "--format", "gemini")
    assert proc.returncode == 2 and "unknown format" in proc.stderr


def test_offloaded_copies_go_where_the_app_looks() -> None:
    from engine import ingest
    from engine.context import offload

    assert ingest.RESULTS_DIR == offload.RESULTS_DIR


def test_the_apps_open_transcript_path_reads_other_agents(tmp_path: Path) -> None:
    from engine.context.conversation import SessionStore
    from engine.importer import import_transcript
    from engine.ingest import SourceImportReport

    store = SessionStore(tmp_path / "sessions")
    report = import_transcript(CODEX / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
                               store=store)
    assert isinstance(report, SourceImportReport) and report.format == "codex" and report.reported_calls == 6
    assert [info.id for info in store.list()] == [report.session_id]
    assert "6 provider calls" in report.describe()
