"""Kill at any moment (issue 7, item 1): a real ``ctxbench run`` is SIGKILLed at many points, then the
session is reloaded and checked.

The run (the installed ``ctxbench`` console script, in a subprocess) works against the scripted fake
server in this process on a session that already holds a few turns: the model calls ``run_shell``
(output big enough to be offloaded), answers, and the background compaction summarizes (archive →
undo point → pending record → history rewrite → summary), so one run passes through every durable
step the app has.

Kill points:

- **every durable step**: a ``sitecustomize`` hook in the child (on ``PYTHONPATH``, active only with
  ``CTXBENCH_KILL_AT``) counts ``os.fsync`` calls — every append, atomic replace and directory sync
  of the engine goes through one — and SIGKILLs the process right after the N-th. A first traced
  run lists them with the engine function that made each (appends, offload ``.part`` write,
  offload index, snapshots, meta, archive, undo point, pending record, rewrite, ...); then one run
  per step. (SIGKILL is not a power cut: what was written before an fsync is on disk anyway, so
  "after the N-th fsync" covers every distinct state a kill can leave.)
- **by timing**: mid-stream (the server stops mid-answer), mid-tool (a shell command is running),
  mid-summary (the compaction's LLM call is streaming), and mid-retry (waiting out a Retry-After).

After each kill: ``Session.load`` succeeds; every message the run acknowledged (printed as a
``message`` event, which happens only after its line is fsync'd) and every message the session
held before is there with the content it was acknowledged with, once across the history and the
dialog archive taken together (see :func:`check_kept_once`); no compaction is left half-done; every
offloaded file the history points to exists whole; ``ctxbench inspect`` reads the session. For one
point in three the session is then resumed with another ``ctxbench run``, which must succeed and
leave every tool call answered.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from engine.agent import unanswered_calls
from engine.context.conversation import Session
from engine.model.messages import assistant, user
from engine.store import archive
from tests import fakeserver as fs
from tests.conftest import REPO, SUMMARY

pytestmark = pytest.mark.slow

CTXBENCH = REPO / ".venv" / "bin" / "ctxbench"
KEY = "sk-kill-harness-000000"
HOOK = '''"""Kill hook of tests/test_kill_harness.py: SIGKILL right after the N-th os.fsync
(CTXBENCH_KILL_AT=N); CTXBENCH_KILL_TRACE=<file> lists every fsync with the engine functions that made it."""
import os
import signal
import sys
import threading

_AT = int(os.environ.get("CTXBENCH_KILL_AT") or 0)
_TRACE = os.environ.get("CTXBENCH_KILL_TRACE", "")
if _AT or _TRACE:
    _real_fsync = os.fsync
    _lock = threading.Lock()
    _count = [0]

    def _label():
        frame, names = sys._getframe(2), []
        while frame is not None and len(names) < 3:
            name = frame.f_code.co_filename
            if "/engine/" in name and not name.endswith("fsutil.py"):
                names.append(os.path.basename(name)[:-3] + "." + frame.f_code.co_name)
            frame = frame.f_back
        return " < ".join(names) or "(a worker thread)"

    def _what(fd):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return "?"
        name = os.path.basename(path)
        if os.path.isdir(path):
            return name + "/"
        if name.startswith(".") and name.endswith(".tmp"):
            name = name[1:].rsplit(".", 2)[0] + " (temp)"
        if len(name) > 40 and name[:32].isalnum():
            name = "<hex>" + name[32:]
        parent = os.path.basename(os.path.dirname(path))
        return f"{parent}/{name}" if parent in ("tool_results", "dialog", "undo") else name

    def fsync(fd):
        with _lock:
            _count[0] += 1
            n = _count[0]
        if _TRACE:
            with open(_TRACE, "a") as fh:
                fh.write(f"{n}\\t{_what(fd)}: {_label()}\\n")
        _real_fsync(fd)
        if n == _AT:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    os.fsync = fsync
'''


# --------------------------------------------------------------------------- the report


class KillReport:
    """Collects what was tried; printed in the terminal summary."""

    def __init__(self) -> None:
        self.points: list[str] = []
        self.resumed = 0
        self.steps: list[str] = []

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.points:
            return
        terminalreporter.write_sep("=", "kill harness")
        terminalreporter.write_line(f"kill points tried: {len(self.points)} "
                                    f"({sum(p.startswith('fsync') for p in self.points)} durable steps + "
                                    f"{sum(not p.startswith('fsync') for p in self.points)} timed); "
                                    f"sessions resumed afterwards: {self.resumed}")
        for line in self.steps:
            terminalreporter.write_line("  " + line)


@pytest.fixture(scope="module")
def report(request: pytest.FixtureRequest) -> KillReport:
    plugin = request.config.pluginmanager.get_plugin("kill-harness-report")
    if plugin is None:
        plugin = KillReport()
        request.config.pluginmanager.register(plugin, "kill-harness-report")
    return plugin


# --------------------------------------------------------------------------- running the CLI


@dataclass
class Outcome:
    returncode: int
    lines: list[dict[str, Any]]
    stderr: str
    killed_by_us: bool = False

    def acked(self) -> list[dict[str, Any]]:
        """The messages the run acknowledged (a ``message`` event comes only after the fsync)."""
        return [e["message"] for e in self.lines if e.get("type") == "message"]


@dataclass
class Rig:
    root: Path
    hook_dir: Path
    base_session: Path
    base_messages: list[dict[str, Any]]
    workspace: Path
    servers: list[fs.FakeLLMServer] = field(default_factory=list)

    def env(self, folder: Path, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBENCH_")}
        env.update(
            PYTHONPATH=f"{self.hook_dir}{os.pathsep}{REPO}",
            OPENAI_API_KEY=KEY,
            CTXBENCH_DATA_DIR=str(folder / "data"),
            CTXBENCH_CONFIG_DIR=str(folder / "config"),
            CTXBENCH_COMPACT_THRESHOLD_RATIO="0.5",
            CTXBENCH_OFFLOAD_RECENT_BYTES="2000",
            CTXBENCH_MAX_RETRIES="2",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
        )
        env.update(extra)
        return env

    def copy_session(self, name: str) -> Path:
        folder = self.root / name
        shutil.copytree(self.base_session, folder / "session", symlinks=True)
        return folder

    def command(self, session: Path, server: fs.FakeLLMServer, prompt: str) -> list[str]:
        return [*ctxbench(), "run", "--session", str(session), "--model", "openai/fake",
                "--api-base", server.base_url, "--context-window", "8000", "--max-tokens", "256",
                "--workspace", str(self.workspace), "--allow-shell", "--yes", prompt]


def ctxbench() -> list[str]:
    """The installed console script (what a user runs), else the module."""
    return [str(CTXBENCH)] if CTXBENCH.exists() else [sys.executable, "-m", "app.cli"]


def server_for(responses: list[dict[str, Any]], default: dict[str, Any] | None) -> fs.FakeLLMServer:
    return fs.FakeLLMServer(responses, default=default).start()


def normal_script() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return (
        [fs.tool_call_reply("run_shell", {"command": "seq 1 4000"}, call_id="sh1", when={"tools": True}),
         fs.text_reply("The numbers are listed.", when={"tools": True})],
        fs.text_reply(SUMMARY),  # the summary calls (no tools), and anything else
    )


def run_cli(
    cmd: list[str],
    env: dict[str, str],
    *,
    kill_when: Callable[[list[dict[str, Any]]], bool] | None = None,
    timeout: float = 120.0,
) -> Outcome:
    """Run the CLI; with ``kill_when``, SIGKILL it as soon as the predicate holds (checked on the output)."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[dict[str, Any]] = []
    err: list[str] = []

    def read_out() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                lines.append(json.loads(raw))
            except ValueError:
                lines.append({"type": "unparsed", "raw": raw})

    def read_err() -> None:
        assert proc.stderr is not None
        err.append(proc.stderr.read())

    threads = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for t in threads:
        t.start()
    killed = False
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None:
            if kill_when is not None and kill_when(lines):
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"ctxbench did not finish in {timeout} s: {cmd}")
            time.sleep(0.02)
        proc.wait(timeout=30)
    finally:
        for t in threads:
            t.join(timeout=10)
    return Outcome(proc.returncode, list(lines), "".join(err), killed)


# --------------------------------------------------------------------------- the checks


def archived_ids(folder: Path) -> list[str]:
    return [str(m.get("id")) for d in archive.list_days(folder) for m in archive.read_day(folder, d)]


SAME = ("role", "content", "tool_calls", "tool_call_id")  # what must come back as it was acknowledged


def check_kept_once(s: Session, folder: Path, must_have: list[dict[str, Any]]) -> None:
    """Each message is held once, in the history and the archive taken together, with the content it
    was acknowledged with.

    Once: never twice in the history, never twice in the archive, and after a committed compaction
    (the session has a summary) never in both. Before the commit, a compaction archives what will
    leave first (nothing leaves the context unarchived); a kill there leaves those messages live with
    a copy in the archive, which must then be the same message.
    """
    live = s.messages
    arch = [m for d in archive.list_days(folder) for m in archive.read_day(folder, d)]
    for where, held in (("history", live), ("archive", arch)):
        counts = Counter(str(m.get("id")) for m in held)
        twice = sorted(i for i, n in counts.items() if n > 1)
        assert not twice, f"held twice in the {where}: {twice}"
    live_by = {str(m.get("id")): m for m in live}
    arch_by = {str(m.get("id")): m for m in arch}
    both = sorted(set(live_by) & set(arch_by))
    assert not (s.summary and both), f"in the history and the archive after a committed compaction: {both}"
    for i in both:
        changed = [k for k in SAME if live_by[i].get(k) != arch_by[i].get(k)]
        assert not changed, f"message {i}: the archive's copy differs from the history's ({', '.join(changed)})"
    by_id = {**arch_by, **live_by}
    missing = [str(m["id"]) for m in must_have if str(m["id"]) not in by_id]
    assert not missing, f"acknowledged messages lost: {missing}\n{s.load_report.describe()}"
    for want in must_have:
        got = by_id[str(want["id"])]
        changed = [k for k in SAME if got.get(k) != want.get(k)]
        assert not changed, f"message {want['id']} came back changed ({', '.join(changed)}): {got} != {want}"


def check_session(folder: Path, must_have: list[dict[str, Any]], rig: Rig) -> Session:
    s = Session.load(folder)  # must not raise
    live = [str(m["id"]) for m in s.messages]
    check_kept_once(s, folder, must_have)
    assert s.meta.get("pending") is None, "a compaction was left half-done"
    for m in s.messages:
        info = m.get("offload")
        if isinstance(info, dict) and info.get("path"):
            path = folder / info["path"]
            assert path.is_file(), f"{info['path']} is referred to but missing"
            assert path.stat().st_size == info["bytes"], f"{info['path']} is not whole"
    problems: list[str] = []
    s.read_events(problems)
    assert len(problems) <= 1, problems  # at most a torn last line
    s.close()
    # the CLI reads it too
    cmd = [*ctxbench(), "inspect", "--session", str(folder), "--context-window", "8000",
           "--max-tokens", "256"]
    out = subprocess.run(cmd, cwd=REPO, env=rig.env(folder.parent), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.splitlines()[-1])
    assert data["messages"] == len(live) and data["type"] == "context"
    return s


def resume(folder: Path, rig: Rig, must_have: list[dict[str, Any]]) -> None:
    """Another run on the killed session: it works, and leaves the history whole and valid."""
    server = server_for([], fs.text_reply("Resumed fine."))
    try:
        out = run_cli(rig.command(folder, server, "continue please"), rig.env(folder.parent))
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr[-2000:]
    s = Session.load(folder)
    check_kept_once(s, folder, must_have + out.acked())
    assert unanswered_calls(s.messages) == []
    assert s.messages[-1]["content"] == "Resumed fine."
    s.close()


# --------------------------------------------------------------------------- the rig


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    root = tmp_path_factory.mktemp("kill")
    hook_dir = root / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("numbers are fun\n")
    base = Session.create(root / "base" / "session", "kill harness")
    for i in range(4):  # enough for the background compaction after the turn
        base.extend([user(f"earlier question {i}: " + "q" * 1_000),
                     assistant(f"earlier answer {i}: " + "a" * 1_000)])
    messages = [dict(m) for m in base.messages]
    base.close()
    yield Rig(root, hook_dir, base.path, messages, workspace)


def test_traced_run_passes_through_every_durable_step(rig: Rig, report: KillReport) -> None:
    """The scenario (no kill) works, and its fsync trace covers append, offload, snapshot, archive,
    pending commit and rewrite; this trace is what the next test kills at."""
    folder = rig.copy_session("traced")
    trace = folder / "trace.tsv"
    responses, default = normal_script()
    server = server_for(responses, default)
    try:
        out = run_cli(rig.command(folder / "session", server, "list the numbers"),
                      rig.env(folder, CTXBENCH_KILL_TRACE=str(trace)))
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr[-2000:]
    types = [e.get("type") for e in out.lines]
    assert "tool_call_finished" in types and "compaction" in types, types
    compaction = next(e for e in out.lines if e.get("type") == "compaction")
    assert compaction["result"] == "summarized" and compaction["trigger"] == "auto"
    steps = [line.split("\t", 1)[1] for line in trace.read_text().splitlines()]
    joined = "\n".join(steps)
    for needed in ("history.jsonl: session.extend", "tool_results/<hex>.txt.part: offload._write_text_file",
                   "tool_results/index.jsonl", "events.jsonl: session.append_records < session.record_snapshot",
                   "dialog/", "undo/", "session.json (temp): session.save_meta < session.commit_compaction",
                   "history.jsonl (temp): session._write_history", "session._finish_pending"):
        assert needed in joined, f"{needed} never reached a durable write:\n{joined}"
    check_session(folder / "session", rig.base_messages + out.acked(), rig)
    # what the run said: the shell's output (cut, the rest offloaded), the answer, the new summary
    acked = out.acked()
    tool = next(m for m in acked if m["role"] == "tool")
    assert tool["tool_call_id"] == "sh1" and tool["content"].startswith("exit code 0\n1\n2\n3\n")
    assert tool["offload"]["bytes"] == len("exit code 0\n") + sum(len(f"{i}\n") for i in range(1, 4001))
    assert [m["content"] for m in acked if m["role"] == "assistant"][-1] == "The numbers are listed."
    done = Session.load(folder / "session")
    # summary mode "both": the model's sections, with the user's requests quoted from the messages
    assert "notes.txt mentions alpha and beta." in done.summary and "earlier question 0" in done.summary
    done.close()
    (rig.root / "steps.json").write_text(json.dumps(steps))
    report.steps = [f"{n:2d}. {s}" for n, s in enumerate(steps, start=1)]


def _kill_at_step(rig: Rig, n: int, steps: list[str]) -> tuple[bool, str]:
    """Kill after the n-th durable step, check, maybe resume; (resumed, failure or "")."""
    folder = rig.copy_session(f"fsync-{n:03d}")
    responses, default = normal_script()
    server = server_for(responses, default)
    try:
        out = run_cli(rig.command(folder / "session", server, "list the numbers"),
                      rig.env(folder, CTXBENCH_KILL_AT=str(n)))
    finally:
        server.stop()
    try:
        assert out.returncode == -signal.SIGKILL, f"not killed (rc {out.returncode}): {out.stderr[-1000:]}"
        check_session(folder / "session", rig.base_messages + out.acked(), rig)
        if n % 4 == 2:
            resume(folder / "session", rig, rig.base_messages + out.acked())
            return True, ""
    except AssertionError as exc:
        return False, f"after fsync {n} ({steps[n - 1]}): {exc}"
    return False, ""


def test_kill_after_every_durable_step(rig: Rig, report: KillReport) -> None:
    steps_file = rig.root / "steps.json"
    if not steps_file.exists():
        pytest.skip("the traced run failed")
    steps = json.loads(steps_file.read_text())
    with ThreadPoolExecutor(max_workers=2) as pool:  # two at a time: the machine has two cores
        results = list(pool.map(lambda n: _kill_at_step(rig, n, steps), range(1, len(steps) + 1)))
    report.points += [f"fsync {n}: {step}" for n, step in enumerate(steps, start=1)]
    report.resumed += sum(resumed for resumed, _ in results)
    failures = [failure for _, failure in results if failure]
    assert not failures, "\n\n".join(failures)


# --------------------------------------------------------------------------- timed kill points


def _timed(rig: Rig, name: str, responses: list[dict[str, Any]], default: dict[str, Any] | None,
           kill_when: Callable[[list[dict[str, Any]], fs.FakeLLMServer, Path], bool],
           report: KillReport, *, resume_after: bool = True) -> tuple[Outcome, Path]:
    folder = rig.copy_session(name)
    server = server_for(responses, default)
    try:
        out = run_cli(rig.command(folder / "session", server, "list the numbers"), rig.env(folder),
                      kill_when=lambda lines: kill_when(lines, server, folder))
    finally:
        server.stop()
    report.points.append(name)
    assert out.killed_by_us and out.returncode == -signal.SIGKILL, (out.returncode, out.stderr[-1000:])
    check_session(folder / "session", rig.base_messages + out.acked(), rig)
    if resume_after:
        resume(folder / "session", rig, rig.base_messages + out.acked())
        report.resumed += 1
    return out, folder


def _seen(lines: list[dict[str, Any]], kind: str, **fields: Any) -> bool:
    return any(e.get("type") == kind and all(e.get(k) == v for k, v in fields.items()) for e in list(lines))


def test_kill_mid_stream(rig: Rig, report: KillReport) -> None:
    responses = [
        fs.tool_call_reply("run_shell", {"command": "seq 1 4000"}, call_id="sh1", when={"tools": True}),
        fs.stream(fs.text("The numbers "), fs.text("go from"), fs.text(" never sent"), hang_after=2,
                  when={"tools": True}),
    ]
    out, _ = _timed(rig, "mid-stream", responses, fs.text_reply(SUMMARY),
                    lambda lines, srv, folder: _seen(lines, "text_delta", text="go from"), report)
    assert _seen(out.lines, "tool_call_finished")


def test_kill_mid_tool(rig: Rig, report: KillReport) -> None:
    marker = rig.root / "mid-tool.pid"
    command = f"echo $$ > {marker}; exec sleep 60"
    responses = [fs.tool_call_reply("run_shell", {"command": command}, call_id="slow", when={"tools": True})]
    try:
        _timed(rig, "mid-tool", responses, fs.text_reply("done"),
               lambda lines, srv, folder: marker.exists() and marker.read_text().strip().isdigit(), report)
    finally:
        if marker.exists():  # the shell runs in its own session: end it too
            try:
                os.kill(int(marker.read_text().strip()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def test_kill_mid_summary_call(rig: Rig, report: KillReport) -> None:
    responses, _ = normal_script()
    summary = fs.stream(fs.text("## Goal\nList"), fs.text(" numbers"), hang_after=1, when={"tools": False})

    def summarizing(lines: list[dict[str, Any]], srv: fs.FakeLLMServer, folder: Path) -> bool:
        return _seen(lines, "compaction_started") and any(
            r.body is not None and not r.body.get("tools") for r in list(srv.requests))

    out, folder = _timed(rig, "mid-summary", [*responses, summary], fs.text_reply(SUMMARY), summarizing,
                         report, resume_after=False)
    s = Session.load(folder / "session")
    assert s.summary == "" and archived_ids(folder / "session") == []  # nothing was committed
    s.close()
    resume(folder / "session", rig, rig.base_messages + out.acked())
    report.resumed += 1


def test_kill_while_waiting_to_retry(rig: Rig, report: KillReport) -> None:
    responses = [fs.rate_limited(retry_after=30)]
    _timed(rig, "mid-retry", responses, fs.text_reply("never"),
           lambda lines, srv, folder: _seen(lines, "error", retrying=True), report)
