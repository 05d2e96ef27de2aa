"""The headless ``ctxbench`` CLI, run as a subprocess (``python -m app.cli``, and the console script).

Runs in the GUI pytest process (``-p no:asyncio``): no asyncio markers here. The fake
OpenAI-compatible server (tests/fakeserver.py) runs in a thread of this process on 127.0.0.1; the
CLI reaches it through the real litellm HTTP path. One test runs the real offline model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from app import cli
from engine.context.conversation import Session
from engine.model import messages as m
from tests import fakeserver as fs
from tests.conftest import REPO, SUMMARY, TRAJECTORIES

REGION_KEYS = ["system", "summary", "history", "tools", "reserve", "free"]
def ctxbench(
    *args: str, env: dict[str, str] | None = None, stdin: str = "", timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.update(
        OPENAI_API_KEY="sk-test",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=REPO,
        env=full_env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def events(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    out = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert all(isinstance(e, dict) and isinstance(e.get("type"), str) for e in out)
    return out


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("ctxbench: error: ") and "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0]


def assert_context_event(event: dict[str, Any]) -> None:
    assert isinstance(event["window"], int) and event["window"] > 0
    assert list(event["regions"]) == REGION_KEYS
    assert all(isinstance(v, int) and v >= 0 for v in event["regions"].values())


def fake(server: fs.FakeLLMServer) -> list[str]:
    return ["--model", "openai/fake-model", "--api-base", server.base_url]


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# --------------------------------------------------------------------------- usage and runtime errors


@pytest.mark.parametrize(
    "args",
    [
        ["run", "hello"],  # no --session
        ["run", "--session", "x"],  # no prompt
        ["run", "--session", "x", "--max-tokens", "0", "hi"],
        ["run", "--session", "x", "--context-window", "lots", "hi"],
        ["compact", "--session", "x"],  # neither --preview nor --apply
        ["compact", "--session", "x", "--preview", "--apply"],
        ["import", "--session", "x"],  # no file
        ["inspect"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    proc = ctxbench(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "usage: ctxbench" in proc.stderr and proc.stdout == ""


def test_runtime_errors_exit_1_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert_one_line_error(ctxbench("inspect", "--session", str(missing)), "no session folder", str(missing))

    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}', encoding="utf-8")
    proc = ctxbench("import", str(bad), "--session", str(tmp_path / "s1"), "--no-model-info")
    assert_one_line_error(proc, "bad.json", "not valid JSON")
    assert not (tmp_path / "s1").exists()

    wrong_role = tmp_path / "roles.json"
    wrong_role.write_text(json.dumps([{"role": "wizard", "content": "x"}]), encoding="utf-8")
    proc = ctxbench("import", str(wrong_role), "--session", str(tmp_path / "s2"), "--no-model-info")
    assert_one_line_error(proc, "roles.json", "no user, assistant or tool message")

    not_a_session = tmp_path / "plain"
    not_a_session.mkdir()
    (not_a_session / "notes.txt").write_text("keep me", encoding="utf-8")
    assert_one_line_error(ctxbench("inspect", "--session", str(not_a_session)), "not a session folder")
    proc = ctxbench("run", "--session", str(not_a_session), "hello")
    assert_one_line_error(proc, "not a session folder")
    assert sorted(p.name for p in not_a_session.iterdir()) == ["notes.txt"]  # nothing written into it

    proc = ctxbench("run", "--session", str(tmp_path / "s3"), "--workspace", str(tmp_path / "no-ws"), "hi")
    assert_one_line_error(proc, "workspace folder does not exist")


def test_settings_problems_are_warnings(tmp_path: Path) -> None:
    cfg = Path(os.environ["CTXBENCH_CONFIG_DIR"])
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "settings.toml").write_text('max_tokens = "many"\n', encoding="utf-8")
    proc = ctxbench("inspect", "--session", str(tmp_path / "none"))
    assert proc.returncode == 1
    warning, error = proc.stderr.strip().splitlines()
    assert warning.startswith("ctxbench: warning: ") and "max_tokens" in warning
    assert error.startswith("ctxbench: error: ")


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "ctxbench"
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for command in ("run", "inspect", "compact", "import"):
        assert command in proc.stdout


# --------------------------------------------------------------------------- no subcommand → the GUI


def test_no_command_starts_the_gui(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    fake_main = types.SimpleNamespace(run_gui=lambda argv: seen.append(argv) or 7)
    monkeypatch.setitem(sys.modules, "app.main", fake_main)
    assert cli.main([]) == 7
    assert cli.main(["gui", "--flag"]) == 7
    assert cli.main(["-style", "fusion"]) == 7
    assert seen == [[], ["--flag"], ["-style", "fusion"]]


def test_missing_gui_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "app.main", None)  # import fails as if the module were missing
    assert cli.main([]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("ctxbench: error: the desktop app cannot start") and "run, inspect" in err


# --------------------------------------------------------------------------- import → inspect → compact


@pytest.mark.slow
def test_import_inspect_then_compact_preview_and_apply(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    source = TRAJECTORIES / "astropy__astropy-12907.traj.json"
    session = tmp_path / "imported"
    proc = ctxbench("import", str(source), "--session", str(session))
    assert proc.returncode == 0, proc.stderr
    (report,) = events(proc)
    assert report["type"] == "import" and report["messages"] > 50 and report["snapshots"] > 10
    assert report["window"] > 0 and report["path"] == str(session)
    assert_one_line_error(ctxbench("import", str(source), "--session", str(session)), "already exists")

    proc = ctxbench("inspect", "--session", str(session))
    assert proc.returncode == 0, proc.stderr
    (snap,) = events(proc)
    assert snap["type"] == "context" and snap["window"] == report["window"]
    assert_context_event(snap)
    assert snap["messages"] == report["messages"] and snap["calls_recorded"] == report["snapshots"]
    assert snap["regions"]["history"] > 1000 and snap["regions"]["summary"] == 0
    assert snap["model"] == report["model"]

    # preview: the plan and the summary, and not one byte changes on disk
    before = tree_bytes(session)
    server.default = fs.text_reply(SUMMARY, when={"tools": False})
    proc = ctxbench("compact", "--session", str(session), "--preview", *fake(server))
    assert proc.returncode == 0, proc.stderr
    (preview,) = events(proc)
    assert preview["type"] == "compaction_preview" and preview["needed"] and not preview["applied"]
    assert preview["summary_valid"] and preview["summary"].startswith("## Goal")
    assert preview["messages_compacted"] + preview["messages_kept"] == report["messages"]
    assert preview["tokens_after"] < preview["tokens_before"]
    assert_context_event(preview["before"])
    assert_context_event(preview["after"])
    assert tree_bytes(session) == before
    summary_request = server.requests[-1].body
    assert summary_request is not None and "tools" not in summary_request
    assert "separability" in json.dumps(summary_request["messages"]).lower()

    # apply: archived, replaced, recorded
    proc = ctxbench(
        "compact", "--session", str(session), "--apply", "--instruction", "keep file names", *fake(server)
    )
    assert proc.returncode == 0, proc.stderr
    preview2, done = events(proc)
    assert preview2["type"] == "compaction_preview"
    assert done["type"] == "compaction" and done["trigger"] == "manual" and done["result"] == "summarized"
    assert done["messages_compacted"] == preview2["messages_compacted"] > 0
    assert isinstance(done["tokens_before"], int) and done["tokens_after"] < done["tokens_before"]
    assert "keep file names" in json.dumps(server.requests[-1].body)
    assert (session / "dialog").is_dir()
    after = Session.load(session)
    assert len(after.messages) == done["messages_kept"] and after.summary.startswith("## Goal")

    proc = ctxbench("inspect", "--session", str(session))
    (snap2,) = events(proc)
    assert snap2["regions"]["summary"] > 0 and snap2["regions"]["history"] < snap["regions"]["history"]
    assert snap2["compactions"] == 1


# --------------------------------------------------------------------------- run, over HTTP


@pytest.mark.slow
def test_run_streams_tool_calls_and_prints_json_events(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "todo.txt").write_text("1. write the CLI\n2. test it\n", encoding="utf-8")
    server.queue(
        fs.tool_call_reply("read_file", {"path": "todo.txt"}, call_id="call_todo"),
        fs.text_reply("Two items: write the CLI, test it.", reasoning_text="Let me summarise."),
    )
    session = tmp_path / "session"
    proc = ctxbench("run", "--session", str(session), "--workspace", str(workspace), "--max-tokens", "300",
                    "--context-window", "32000", *fake(server), "What is on my list?")
    assert proc.returncode == 0, proc.stderr
    evs = events(proc)
    types_seen = [e["type"] for e in evs]
    assert types_seen[0] == "message" and types_seen[-1] == "turn_finished"
    assert {"text_delta", "state", "tool_call_started", "tool_call_finished"} <= set(types_seen)
    contexts = [e for e in evs if e["type"] == "context"]
    assert len(contexts) == 2
    for ctx in contexts:
        assert_context_event(ctx)
        assert ctx["window"] == 32000 and ctx["regions"]["reserve"] == 300
        assert isinstance(ctx["provider_prompt_tokens"], int)
    assert any(e["type"] == "text_delta" and e["reasoning"] for e in evs)
    finished = next(e for e in evs if e["type"] == "tool_call_finished")
    assert finished["ok"] and finished["name"] == "read_file"
    assert "write the CLI" in finished["result_preview"]
    assert evs[-1]["ok"] and evs[-1]["final_text"] == "Two items: write the CLI, test it."
    # the second request carried the tool result; every request streamed with tools
    bodies = [r.body for r in server.requests]
    assert len(bodies) == 2 and all(b["stream"] and b["tools"] for b in bodies)
    assert "1. write the CLI" in json.dumps(bodies[1]["messages"])
    roles = [x["role"] for x in Session.load(session).messages]
    assert roles == ["user", "assistant", "tool", "assistant"]

    proc = ctxbench("run", "--session", str(session), "--workspace", str(workspace), "--no-text-deltas",
                    *fake(server), "-", stdin="  \n")  # the prompt from stdin is empty: usage error
    assert proc.returncode == 2


@pytest.mark.slow
def test_run_context_length_exceeded_leads_to_reactive_compaction(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    session_dir = tmp_path / "session"
    session = Session.create(session_dir, "earlier work")
    for i in range(3):
        session.extend([m.user(f"question {i} " + "q" * 400), m.assistant(f"answer {i} " + "a" * 400)])
    session.close()
    server.queue(fs.context_length_exceeded(), fs.text_reply("Done after compaction."))
    proc = ctxbench("run", "--session", str(session_dir), "--workspace", str(tmp_path), "--no-text-deltas",
                    *fake(server), "Carry on")
    assert proc.returncode == 0, proc.stderr
    evs = events(proc)
    comp = [e for e in evs if e["type"] == "compaction"]
    assert len(comp) == 1
    event = comp[0]
    assert event["trigger"] == "reactive" and event["result"] == "dropped"
    assert isinstance(event["tokens_before"], int) and isinstance(event["tokens_after"], int)
    assert event["tokens_after"] < event["tokens_before"] and event["messages_compacted"] >= 2
    kinds = [e["type"] for e in evs]
    assert kinds.index("compaction_started") < kinds.index("compaction") < kinds.index("context")
    assert evs[-1]["type"] == "turn_finished" and evs[-1]["ok"]
    assert len(server.requests) == 2
    assert len(server.requests[1].body["messages"]) < len(server.requests[0].body["messages"])
    stored = [e for e in Session.load(session_dir).read_events() if e["type"] == "compaction"]
    assert stored[0]["trigger"] == "reactive"


@pytest.mark.slow
def test_run_auth_error_is_exit_1_with_the_reason(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    server.queue(fs.unauthorized())
    proc = ctxbench(
        "run", "--session", str(tmp_path / "s"), "--workspace", str(tmp_path), *fake(server), "hi"
    )
    assert_one_line_error(proc, "authentication failed")
    assert "sk-test" not in proc.stderr + proc.stdout
    evs = events(proc)
    assert [e["kind"] for e in evs if e["type"] == "error"] == ["auth"]
    assert evs[-1]["type"] == "turn_finished" and not evs[-1]["ok"]
    assert len(server.requests) == 1


@pytest.mark.slow
def test_run_yes_flag_approves_writes_and_without_it_they_are_refused(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session = tmp_path / "session"
    args = ["run", "--session", str(session), "--workspace", str(workspace), "--allow-write"]
    args.append("--no-text-deltas")
    server.queue(
        fs.tool_call_reply("write_file", {"path": "a.txt", "content": "first"}, call_id="w1"),
        fs.text_reply("Tried."),
    )
    proc = ctxbench(*args, *fake(server), "Write a.txt")  # stdin is not a terminal: nobody to ask
    assert proc.returncode == 0, proc.stderr
    assert not (workspace / "a.txt").exists()
    assert "write_file was not approved (pass --yes" in proc.stderr
    finished = next(e for e in events(proc) if e["type"] == "tool_call_finished")
    assert not finished["ok"]

    server.queue(
        fs.tool_call_reply("write_file", {"path": "a.txt", "content": "second"}, call_id="w2"),
        fs.text_reply("Written."),
    )
    proc = ctxbench(*args, "--yes", *fake(server), "Write a.txt, approved")
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "a.txt").read_text(encoding="utf-8") == "second"


@pytest.mark.slow
def test_sigterm_mid_stream_stops_the_turn_and_keeps_the_partial_text(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    server.queue(fs.stream(fs.text("Half of "), fs.text("an answer"), hang_after=2))
    session = tmp_path / "session"
    env = dict(os.environ, OPENAI_API_KEY="sk-test", PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "run", "--session", str(session), "--workspace", str(tmp_path),
         *fake(server), "Talk"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    try:
        seen: list[dict[str, Any]] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(json.loads(line))
            if "an answer" in "".join(e.get("text", "") for e in seen if e["type"] == "text_delta"):
                break
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
    seen += [json.loads(line) for line in rest.splitlines() if line.strip()]
    assert proc.returncode == 143, err
    assert err.strip() == "ctxbench: stopped"
    assert seen[-1]["type"] == "turn_finished" and seen[-1]["interrupted"]
    assert server.client_disconnected.wait(5)
    kept = Session.load(session).messages
    assert [x["role"] for x in kept] == ["user", "assistant"]
    assert kept[1]["content"] == "Half of an answer" and kept[1]["interrupted"] is True


# --------------------------------------------------------------------------- the real offline model


@pytest.mark.slow
def test_offline_model_runs_turns_and_overflow_leads_to_compaction(tmp_path: Path) -> None:
    """The default model (SmolLM2 in-process), no server. The planning window is 4096 but the model
    is loaded with n_ctx=1024, so the second turn really overflows llama.cpp's window: its error must
    take the reactive path (drop the oldest turn, archived) and the retry must complete."""
    env = {"CTXBENCH_CONTEXT_WINDOW": "4096", "CTXBENCH_LOCAL_N_CTX": "1024", "CTXBENCH_MAX_TOKENS": "32"}
    session = tmp_path / "offline"
    first = " ".join(["The quick brown fox jumps over the lazy dog near the river bank."] * 18)
    proc = ctxbench("run", "--session", str(session), "--workspace", str(tmp_path), "--no-text-deltas",
                    first + " What animal is this about?", env=env)
    assert proc.returncode == 0, proc.stderr
    evs = events(proc)
    (ctx,) = [e for e in evs if e["type"] == "context"]
    assert_context_event(ctx)
    assert ctx["model"] == "local/smollm2-135m-instruct" and ctx["provider_prompt_tokens"] > 500
    assert evs[-1]["type"] == "turn_finished" and evs[-1]["ok"]
    assert not [e for e in evs if e["type"] == "compaction"]

    second = " ".join(["A long paragraph about rivers, mountains and the sea."] * 16)
    proc = ctxbench("run", "--session", str(session), "--workspace", str(tmp_path), "--no-text-deltas",
                    second + " What is it about?", env=env)
    assert proc.returncode == 0, proc.stderr
    evs = events(proc)
    comp = [e for e in evs if e["type"] == "compaction"]
    assert [(c["trigger"], c["result"]) for c in comp] == [("reactive", "dropped")]
    assert comp[0]["messages_compacted"] == 2
    ctx2 = [e for e in evs if e["type"] == "context"]
    assert len(ctx2) == 1 and ctx2[0]["provider_prompt_tokens"] < 1024
    assert evs[-1]["type"] == "turn_finished" and evs[-1]["ok"]
    stored = Session.load(session)
    assert [x["role"] for x in stored.messages] == ["user", "assistant"]
    assert stored.archive_days()  # the first turn is in dialog/, not lost


def test_run_refuses_a_session_another_process_holds(tmp_path: Path) -> None:
    from engine.context.conversation import Session

    held = Session.create(tmp_path / "s", "held by the app")
    held.lock()  # as the desktop app does for the session it shows
    try:
        proc = ctxbench("run", "--session", str(held.path), "--model", "openai/fake",
                        "--api-base", "http://127.0.0.1:9/v1", "hello")
        assert proc.returncode == 1
        assert "open in another ctxbench process" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert held.messages == [] and (held.path / "history.jsonl").read_bytes() == b""  # nothing written
        assert ctxbench("inspect", "--session", str(held.path)).returncode == 0  # readers need no lock
    finally:
        held.close()


def test_compact_digest_mode_needs_no_model(tmp_path: Path) -> None:
    """``--summary-mode digest``: the summary comes from the messages, no model is loaded or asked
    (the api base points nowhere), and the JSON says what each part cost."""
    session = tmp_path / "imported"
    proc = ctxbench("import", str(TRAJECTORIES / "astropy__astropy-12907.traj.json"), "--session", str(session),
                    "--no-model-info")
    assert proc.returncode == 0, proc.stderr
    proc = ctxbench("compact", "--session", str(session), "--apply", "--summary-mode", "digest",
                    "--model", "openai/nowhere", "--api-base", "http://127.0.0.1:9/v1")
    assert proc.returncode == 0, proc.stderr
    preview = next(e for e in events(proc) if e["type"] == "compaction_preview")
    assert preview["summary_valid"] and preview["summary_mode"] == "digest" and preview["model_ms"] == 0
    assert preview["digest_tokens"] > 0 and preview["summary"].startswith("## Goal")
    assert "separability_matrix" in preview["summary"]  # the user's request, word for word
    assert Session.load(session).summary == preview["summary"]
    bad = ctxbench("compact", "--session", str(session), "--preview", "--summary-mode", "fast")
    assert bad.returncode == 2 and "summary-mode" in bad.stderr


def test_inspect_of_an_imported_claude_code_session_is_the_windows_bar(tmp_path: Path) -> None:
    """`ctxbench inspect` on an imported session draws what the window's bar draws: the model that
    made it, its inferred system prompt + tools, calibrated on the last call's provider figure."""
    from tests.conftest import SHARED

    source = SHARED / "data" / "sessions" / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    folder = tmp_path / "imported"
    proc = ctxbench("import", "--no-model-info", "--session", str(folder), str(source))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    proc = ctxbench("inspect", "--session", str(folder))
    assert proc.returncode == 0, proc.stderr
    snap = events(proc)[-1]
    assert snap["model"] == "claude-opus-4-6" and snap["window"] == 200_000
    assert snap["system"] == report["inferred_prefix_tokens"] and snap["tools"] == 0
    assert snap["accuracy"] == "calibrated"
    reported = [json.loads(line).get("provider_prompt_tokens") for line in (folder / "events.jsonl").open()]
    last = [r for r in reported if isinstance(r, int)][-1]
    prompt = sum(snap[k] for k in ("system", "summary", "history_user", "history_assistant", "history_tool", "tools"))
    assert last <= prompt <= last + 2_000  # the provider's figure + the last answer


ATIF = REPO / "tests" / "engine" / "sources" / "data" / "atif"


def test_import_of_an_atif_trajectory_has_the_files_step_metrics_call_by_call(tmp_path: Path) -> None:
    """A real ATIF file (Harbor's Terminus-2 with a context summarization run by three subagents): `import`, then
    `export --format json` and `inspect` give each agent step's metrics as its call's figures, the agent's cost
    per call, and the subagents' calls; main + subagents add up to the file's final_metrics."""
    source = ATIF / "terminus-2-summarization" / "trajectory.json"
    doc = json.loads(source.read_text())
    steps = [s for s in doc["steps"] if s["source"] == "agent"]
    folder = tmp_path / "imported"
    proc = ctxbench("import", "--no-model-info", "--session", str(folder), str(source))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["format"] == "atif" and report["calls"] == report["reported_calls"] == len(steps) == 7
    assert report["model"] == "openai/gpt-4o" and report["skipped"] == [] and report["notes"] == []
    assert [s["prompt_tokens"] for s in report["subagents"]] == [[500], [100], [700]]
    assert report["agent_cost_usd"] == pytest.approx(sum(s["metrics"]["cost_usd"] for s in steps))
    assert report["aggregate"]["total_prompt_tokens"] == doc["final_metrics"]["total_prompt_tokens"] == 7802
    proc = ctxbench("export", "--session", str(folder), "--format", "json", "-o", "-")
    assert proc.returncode == 0, proc.stderr
    calls = json.loads(proc.stdout)["calls"]
    assert [c["provider_prompt_tokens"] for c in calls] == [s["metrics"]["prompt_tokens"] for s in steps]
    assert [c["completion_tokens"] for c in calls] == [s["metrics"]["completion_tokens"] for s in steps]
    assert [c["request_id"] for c in calls] == [f"step-{s['step_id']}" for s in steps]
    assert {c["model"] for c in calls} == {"openai/gpt-4o"} and all(c["cache_read_tokens"] is None for c in calls)
    records = [json.loads(line) for line in (folder / "events.jsonl").open() if '"context"' in line]
    assert [r["agent_cost_usd"] for r in records] == [s["metrics"]["cost_usd"] for s in steps]
    sub_prompts = [json.loads(line)["provider_prompt_tokens"] for sub in sorted((folder / "subagents").iterdir())
                   for line in (sub / "events.jsonl").open()]
    assert sum(c["provider_prompt_tokens"] for c in calls) + sum(sub_prompts) == 7802
    proc = ctxbench("inspect", "--session", str(folder))
    assert proc.returncode == 0, proc.stderr
    snap = events(proc)[-1]
    assert snap["model"] == "openai/gpt-4o" and snap["calls_recorded"] == 7 and snap["accuracy"] == "calibrated"


def test_import_of_a_continued_atif_trajectory_is_one_session_with_the_hand_over_as_a_compaction(
        tmp_path: Path) -> None:
    """Harbor's Terminus-2 linear history: trajectory.json continues in trajectory.cont-1.json. `import` of the first
    makes one session of both: every call of both files in order, the context since the hand-over live (its copied
    steps, then the new ones), the first file's messages archived by one compaction; `export` has every call."""
    source = ATIF / "terminus-2-linear" / "trajectory.json"
    files = [json.loads(source.read_text()), json.loads((source.parent / "trajectory.cont-1.json").read_text())]
    steps = [s for doc in files for s in doc["steps"] if s["source"] == "agent" and not s.get("is_copied_context")]
    folder = tmp_path / "imported"
    proc = ctxbench("import", "--no-model-info", "--session", str(folder), str(source))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["calls"] == report["reported_calls"] == len(steps) == 7
    [comp] = report["compactions"]
    assert comp["trigger_source"] == "continued_trajectory_ref" and comp["calls_before"] == 3
    assert (comp["tokens_before"], comp["tokens_after"]) == (820, 1700)
    assert report["archived_messages"] == comp["messages_compacted"] and report["live_messages"] == 12
    assert comp["messages_kept"] == sum(1 for s in files[1]["steps"] if s.get("is_copied_context"))
    proc = ctxbench("export", "--session", str(folder), "--format", "json", "-o", "-")
    assert proc.returncode == 0, proc.stderr
    calls = json.loads(proc.stdout)["calls"]
    assert [c["provider_prompt_tokens"] for c in calls] == [s["metrics"]["prompt_tokens"] for s in steps]


def test_import_of_harbors_atif_of_a_real_claude_code_session_keeps_its_cache_figures(tmp_path: Path) -> None:
    """Harbor 0.25.0's converter run on a real Claude Code session (shared data): each call's prompt, cache read,
    cache write and output as the file's step metrics give them, and Harbor's cost per step."""
    source = ATIF / "harbor-0.25.0" / "claude-code-tool_heavy.trajectory.json"
    metrics = [s["metrics"] for s in json.loads(source.read_text())["steps"] if s["source"] == "agent"]
    folder = tmp_path / "imported"
    proc = ctxbench("import", "--no-model-info", "--session", str(folder), str(source))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["format"] == "atif" and report["reported_calls"] == len(metrics) == 4 and report["notes"] == []
    proc = ctxbench("export", "--session", str(folder), "--format", "json", "-o", "-")
    assert proc.returncode == 0, proc.stderr
    calls = json.loads(proc.stdout)["calls"]
    assert [(c["provider_prompt_tokens"], c["cache_read_tokens"], c["cache_write_tokens"], c["completion_tokens"])
            for c in calls] == [(m["prompt_tokens"], m["cached_tokens"], m["extra"]["cache_creation_input_tokens"],
                                 m["completion_tokens"]) for m in metrics]
    assert [c["uncached_input_tokens"] for c in calls] == [
        m["prompt_tokens"] - m["cached_tokens"] - m["extra"]["cache_creation_input_tokens"] for m in metrics]
    records = [json.loads(line) for line in (folder / "events.jsonl").open() if '"context"' in line]
    assert [r["agent_cost_usd"] for r in records] == [m["cost_usd"] for m in metrics]
    assert {c["model"] for c in calls} == {"claude-opus-4-6"}


def test_a_bad_atif_file_is_one_error_naming_what_is_wrong_and_writes_nothing(tmp_path: Path) -> None:
    doc = json.loads((ATIF / "openhands-hello-world.trajectory.json").read_text())
    del doc["steps"][4]["tool_calls"][0]["function_name"]
    bad = tmp_path / "trajectory.json"
    bad.write_text(json.dumps(doc))
    folder = tmp_path / "imported"
    proc = ctxbench("import", "--no-model-info", "--session", str(folder), str(bad))
    assert_one_line_error(proc, "trajectory.json: steps[4] (step_id 5): tool_calls[0] lacks tool_call_id or "
                                "function_name (required)")
    doc["schema_version"] = "ATIF-v2.0"
    bad.write_text(json.dumps(doc))
    proc = ctxbench("import", "--no-model-info", "--session", str(folder), str(bad))
    assert_one_line_error(proc, "ATIF-v2.0 is a major version this reader does not know")
    bad.write_text('{"schema_version": "ATIF-v1.5", "agent": ')
    proc = ctxbench("import", "--format", "atif", "--no-model-info", "--session", str(folder), str(bad))
    assert_one_line_error(proc, "trajectory.json: not valid JSON")
    assert not folder.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["trajectory.json"]


def _help(*args: str) -> str:
    """What ``ctxbench [args] --help`` prints, its words joined by single spaces (argparse wraps its lines)."""
    parser = cli.build_parser(args[0] if args else None)
    sub = next(a for a in parser._actions if isinstance(a, cli.argparse._SubParsersAction))
    text = (sub.choices[args[0]] if args else parser).format_help()
    return " ".join(text.split())


def test_the_help_names_every_agent_each_command_reads() -> None:
    """The lists of agents the help gives are the registry's (engine.sources.formats): an agent added there is
    named here, and none the command does not read is."""
    from engine.sources import formats

    top = _help()
    importable, listed = formats.spoken_list(formats.importable()), formats.spoken_list(formats.names(listed=True))
    assert f"import an agent's session file as a session ({importable})" in top
    assert f"list the agent sessions on this machine ({listed}), newest first" in top
    from engine.sources.follow import FOLLOWED

    followed = formats.spoken_list(FOLLOWED, "or")
    assert f"provider calls and compactions as JSON lines ({followed})" in top
    for name in ("Qwen Code", "Cline", "Kilo CLI", "Copilot CLI", "Pi", "OpenHands", "mini-swe-agent"):
        assert name in importable
    assert "OpenHands" not in listed and "OpenHands" not in followed  # (read when imported, not listed or followed)
    bare = "".join  # (argparse may break a name at its hyphen: the names compared without spaces)
    assert bare(", ".join(formats.importable()).split()) in bare(_help("import").split())
    follow_help = _help("follow")
    assert bare(", ".join(FOLLOWED).split()) in bare(follow_help.split())
    assert "(OpenCode or Kilo CLI): <db>#ses_…" in follow_help
