"""The real Cline CLI 3.0.65 (``@cline/cli-linux-x64``, pinned in ``tests/agents/package.json``), run headless
(``cline --json -y PROMPT``) and offline (``IS_TEST=true``: no feature-flag poll; ``telemetryOptOut``: no OTLP)
against the scripted Chat Completions server of :mod:`tests.agents.scripted_chat` through its ``openai-compatible``
provider (``cline auth --provider openai … --baseurl``); its session is read by :mod:`engine.sources.cline`
(whole, and followed while Cline rewrites it), listed by Sources, and checked against what the server logged as
sent and answered: the ground truth.

What the pinned version does, as these tests pin it down:

- ``<data>/sessions/<id>/<id>.messages.json`` is one JSON document rewritten in place (the same inode) after each
  message; ``<id>.json`` beside it is the meta (title, cwd, model, the usage totals);
- the first user message is stored wrapped (``<user_input mode="yolo">…</user_input>``) but sent bare; the
  ``[SYSTEM]`` nudge to call ``submit_and_exit`` is stored and sent;
- one assistant message per provider call, with ``metrics``: ``inputTokens`` = the whole prompt (cached
  included), ``cacheReadTokens`` = the cached part; no response id (calls matched by order);
- ``system_prompt`` is what was sent; the tool definitions sent (``read_files``, ``run_commands``, ``editor``,
  ``submit_and_exit``) are not in the file;
- ``-y`` stops only on ``submit_and_exit``.

- a session is continued only in the TUI (``cline --id <session>``; ``--json`` refuses ``--id``), driven here in
  tmux: the same document grows (the new prompt stored as ``<user_input mode="act">``), the meta's usage totals
  count both runs, and ``system_prompt`` becomes the TUI's (another text, with another set of tools, no
  ``submit_and_exit``): the headless run's calls are marked as sent with a system prompt the file lacks.

Not exercised: a compaction (the window of an ``openai-compatible`` model is 128,000 and cannot be set smaller
from the provider settings).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.sources.cline import input_mode, read_cline
from engine.sources.discovery import scan_sources
from engine.sources.follow import Follower, FollowEvent
from engine.sources.model import SourceSession
from tests.agents.conftest import AgentHome, Run, agent_bin, pinned_version
from tests.agents.scripted import Logged, Reply, ToolCall
from tests.agents.scripted_chat import ChatServer

MODEL = "fake-model"
PROMPT = "Run echo step0 and echo step1, then finish."
TOOLS = ["read_files", "run_commands", "editor", "submit_and_exit"]


def pinned() -> str:
    return pinned_version("cline")


def env_of(home: AgentHome) -> dict[str, str]:
    return home.base_env() | {"IS_TEST": "true"}


def configure(home: AgentHome, server: ChatServer) -> None:
    home.run(agent_bin("cline"), ["auth", "--provider", "openai", "--apikey", "sk-test", "--modelid", MODEL,
                                  "--baseurl", f"{server.base_url}/v1"], env_of(home), timeout=60).check()
    settings = home.home / ".cline" / "data" / "settings" / "global-settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"telemetryOptOut": True, "autoUpdateEnabled": False}))


def run_cline(home: AgentHome, prompt: str) -> Run:
    return home.run(agent_bin("cline"), ["--json", "-y", prompt], env_of(home), timeout=120).check()


def shell_script(commands: int) -> Any:
    """Each request gets a ``run_commands`` call (two commands, one with a tab and backslashes in its output) until
    ``commands`` results came back, then ``submit_and_exit``."""

    def script(body: dict[str, Any]) -> Reply:
        results = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if results < commands:
            return Reply(text=f"Step {results}.", tool_calls=[ToolCall(
                "run_commands", {"commands": [f"echo step{results}", "printf 'a\\\\tb\\tc'"]})])
        return Reply(tool_calls=[ToolCall("submit_and_exit", {"summary": f"Done: {results} steps ran.",
                                                              "verified": True})])

    return script


def the_session(home: AgentHome) -> Path:
    (path,) = sorted((home.home / ".cline" / "data" / "sessions").glob("*/*.messages.json"))
    return path


def as_sent(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as compared: no ids or times; an assistant's empty text as the absent content it was sent as."""
    out = []
    for m in msgs:
        m = {k: v for k, v in m.items() if k not in ("id", "ts")}
        if m["role"] == "assistant" and not m.get("content"):
            m["content"] = None
        out.append(m)
    return out


def assert_calls_are_the_servers(src: SourceSession, answered: list[Logged], earlier: int = 0) -> None:
    """Every call's figures are the server's answer, by order; its messages and (but for the ``earlier`` calls of a
    run before a continuation) its system prompt what was sent."""
    assert len(src.calls) == len(answered)
    for call, entry in zip(src.calls, answered, strict=True):
        if call.index < earlier:  # the file has the last run's system prompt only, and says so
            assert call.prompt_unlike_file and entry.body["messages"][0]["content"] != src.system_prompt
            entry = replace(entry, body=entry.body | {"messages": [{"role": "system", "content": src.system_prompt},
                                                                   *entry.body["messages"][1:]]})
        else:
            assert call.prompt_unlike_file == ""
        usage = entry.usage
        assert (call.prompt_tokens, call.completion_tokens, call.cache_read_tokens, call.cache_write_tokens) == (
            usage["prompt_tokens"], usage["completion_tokens"], usage["prompt_tokens_details"]["cached_tokens"], 0)
        assert call.model == MODEL and call.request_id == ""  # no response id: matched by order
        system, *rest = entry.body["messages"]
        assert system == {"role": "system", "content": src.system_prompt}, "the system prompt is what was sent"
        assert as_sent(src.messages[:call.message_index]) == as_sent(rest), f"call {call.index}: not what was sent"
        names = [t["function"]["name"] for t in entry.body["tools"]]  # sent, not in the file: src.tools stays []
        headless = not earlier or call.index < earlier
        assert names == TOOLS if headless else ("submit_and_exit" not in names and "run_commands" in names), names


class Watch:
    """A Follower polled in a thread while the agent runs (as ``ctxbench follow`` does, faster)."""

    def __init__(self, path: Path) -> None:
        self.follower = Follower(path, "cline")
        self.events: list[FollowEvent] = []
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.events += self.follower.poll()
            self.polls += 1
            self._stop.wait(0.002)

    def stop(self) -> list[FollowEvent]:
        self._stop.set()
        self._thread.join(10)
        return self.events + self.follower.poll()


def test_a_headless_run_is_read_as_the_server_saw_it(agent_home: AgentHome) -> None:
    with ChatServer(shell_script(3)) as server:
        configure(agent_home, server)
        folder = agent_home.home / ".cline" / "data" / "sessions"
        watch: Watch | None = None
        # the session's name is known only once Cline makes its folder: a thread starts the follower then
        found = threading.Event()

        def look() -> None:
            nonlocal watch
            while not found.is_set():
                paths = list(folder.glob("*/*.messages.json")) if folder.is_dir() else []
                if paths:
                    watch = Watch(paths[0])
                    found.set()
                    return
                found.wait(0.001)

        looker = threading.Thread(target=look, daemon=True)
        looker.start()
        run = run_cline(agent_home, PROMPT)
        found.set()
        looker.join(5)
        answered = server.calls("main")
    assert len(answered) == 4 and not server.calls("title") and not server.calls("side"), run.stdout[-2000:]
    path = the_session(agent_home)
    src = read_cline(path)
    assert_calls_are_the_servers(src, answered)
    assert src.messages[0]["content"] == PROMPT and src.messages[1]["content"].startswith("[SYSTEM] ")
    assert src.tools == [] and src.prefix_label == "tool definitions"  # the definitions sent are not in the file
    assert src.skipped == [] and src.ignored == {} and src.notes == []  # the meta's totals agree with the calls
    meta = json.loads(path.with_name(path.name.replace(".messages.json", ".json")).read_text())
    assert meta["metadata"]["usage"]["inputTokens"] == sum(e.usage["prompt_tokens"] for e in answered)
    assert meta["metadata"]["usage"]["cacheReadTokens"] == sum(
        e.usage["prompt_tokens_details"]["cached_tokens"] for e in answered)
    assert src.agent_cost_usd is None  # Cline says 0 for a model it has no price for
    raw = json.loads(path.read_text())["messages"]
    assert raw[0]["content"][0]["text"] == f'<user_input mode="yolo">{PROMPT}</user_input>', f"Cline {pinned()}"
    assert set(raw[3]["content"][0]) == {"type", "tool_use_id", "name", "content"}  # a structured result
    # followed while Cline rewrote it: every call once, with the server's figures, no problem said
    assert watch is not None
    events = watch.stop()
    calls = [e.call for e in events if e.kind == "call" and e.call is not None]
    assert [e.kind for e in events if e.kind not in ("call", "reset")] == []
    assert [(c.index, c.prompt_tokens, c.cache_read_tokens) for c in calls[-4:]] == [
        (i, e.usage["prompt_tokens"], e.usage["prompt_tokens_details"]["cached_tokens"]) for i, e in
        enumerate(answered)]
    assert [e.kind for e in events].count("reset") == 0, "each rewrite only added messages"
    (entry,) = scan_sources(env={}, home=agent_home.home, index=agent_home.home / "idx.json", refresh=True)
    assert (entry.agent, entry.title, entry.project, entry.calls) == ("cline", PROMPT, agent_home.work.name, 4)
    assert entry.last_prompt_tokens == answered[-1].usage["prompt_tokens"]


# --------------------------------------------------------------------------- continued in the TUI (tmux)


class Tmux:
    """The TUI in a detached tmux session of its own (its own socket under the test's home)."""

    def __init__(self, home: AgentHome, args: list[str]) -> None:
        self.sock = str(home.home / "tmux.sock")
        self.work = home.work
        env = env_of(home) | {"TERM": "xterm-256color"}
        command = " ".join(["env", "-i", *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                            shlex.quote(str(agent_bin("cline"))), *map(shlex.quote, args)])
        self.tmux("new-session", "-d", "-x", "160", "-y", "50", "-c", str(home.work), command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True, timeout=30).stdout

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-l", text)
        time.sleep(0.3)
        self.tmux("send-keys", "Enter")

    def wait(self, done: Callable[[], bool], what: str, seconds: float = 60) -> None:
        end = time.monotonic() + seconds
        while not done():
            if time.monotonic() > end:
                screen = self.tmux("capture-pane", "-p")
                raise AssertionError(f"{what}: not within {seconds:.0f} s; the screen:\n{screen}")
            time.sleep(0.1)

    def close(self) -> None:
        self.tmux("kill-server")
        stop_hub_daemons(self.work)


def hub_daemons(work: Path) -> list[int]:
    """The processes of Cline's hub daemon for ``work`` (``cline --cline-hub-daemon --cwd <work>``): the TUI starts
    one, detached, and it outlives the TUI and its tmux server."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--cline-hub-daemon" in args and os.fsencode(str(work)) in args:
                found.append(int(proc.name))
    return found


def stop_hub_daemons(work: Path, seconds: float = 10) -> None:
    """Stop the hub daemons of ``work`` (TERM, then KILL after ``seconds``): a test leaves no process behind."""
    for pid in hub_daemons(work):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + seconds
    while hub_daemons(work) and time.monotonic() < end:
        time.sleep(0.1)
    for pid in hub_daemons(work):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def tui_script(first: int) -> Any:
    """The headless run as :func:`shell_script` (``first`` commands), then in the TUI (no ``submit_and_exit`` there):
    one ``run_commands`` call, then a closing text."""
    headless = shell_script(first)

    def script(body: dict[str, Any]) -> Reply:
        names = [t["function"]["name"] for t in body.get("tools") or []]
        if "submit_and_exit" in names:
            return headless(body)
        results = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if results < first + 2:
            return Reply(text="Once more.", tool_calls=[ToolCall("run_commands", {"commands": ["echo again"]})])
        return Reply(text="Continued: done.")

    return script


def test_a_session_continued_in_the_tui_is_read_whole(agent_home: AgentHome) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the TUI (the only way to continue a Cline session) cannot be driven")
    with ChatServer(tui_script(1)) as server:
        configure(agent_home, server)
        run_cline(agent_home, PROMPT)
        path = the_session(agent_home)
        headless = server.calls("main")
        before = read_cline(path)
        assert len(headless) == len(before.calls) == 2
        tui = Tmux(agent_home, ["--id", path.parent.name])
        try:
            tui.wait(lambda: "Ask anything" in tui.tmux("capture-pane", "-p"), "the TUI's prompt")
            tui.type("Now echo again.")
            tui.wait(lambda: len(server.calls("main")) >= 4 and "Continued: done." in path.read_text(), "the reply")
        finally:
            tui.close()
        answered = server.calls("main")
    assert not hub_daemons(agent_home.work)  # (the TUI's hub daemon stopped with it: nothing left running)
    assert len(answered) == 4
    src = read_cline(path)
    assert_calls_are_the_servers(src, answered, earlier=2)
    assert [m["content"] for m in src.messages if m["role"] == "user"][-1] == "Now echo again."  # sent bare
    raw = json.loads(path.read_text())["messages"]
    assert [input_mode(m) for m in raw if input_mode(m)] == ["yolo", "act"], f"Cline {pinned()}"
    (note,) = src.notes  # the meta's totals count the continuation too: no note of theirs
    assert "the system prompt is the last run's" in note
    sent = [e.body["messages"][0]["content"] for e in answered]
    assert src.system_prompt == sent[-1] == sent[2] != sent[0] == sent[1]
    (entry,) = scan_sources(env={}, home=agent_home.home, index=agent_home.home / "idx.json", refresh=True)
    assert (entry.title, entry.calls, entry.last_prompt_tokens) == (PROMPT, 4, answered[-1].usage["prompt_tokens"])


# --------------------------------------------------------------------------- a compaction (headless, basic)


def compaction_script(inflate_at: int, steps: int) -> Any:
    """Step 0 prints twenty 7,000-character lines (run_commands cuts each command's output near 8,000): about 48k
    tokens by Cline's own estimate; the answer to main request ``inflate_at`` (1-based) claims 150,000 more prompt
    tokens, which makes Cline scale its estimate up (by at most 4): its next request is above 90 % of 128,000 / 4 and
    is compacted. ``submit_and_exit`` after ``steps`` results."""
    state = {"requests": 0}

    def script(body: dict[str, Any]) -> Reply:
        state["requests"] += 1
        results = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if results >= steps:
            done = {"summary": "Done: all steps ran.", "verified": True}
            return Reply(tool_calls=[ToolCall("submit_and_exit", done)])
        commands = ([f"head -c 7000 /dev/zero | tr '\\0' {c}; echo" for c in "abcdefghijklmnopqrst"]
                    if state["requests"] == 1 else [f"echo step{state['requests']}"])
        return Reply(text=f"Step {state['requests']}.", tool_calls=[ToolCall("run_commands", {"commands": commands})],
                     extra_prompt_tokens=150_000 if state["requests"] == inflate_at else 0)

    return script


def test_a_basic_compaction_is_not_in_the_file_and_is_said(agent_home: AgentHome) -> None:
    with ChatServer(compaction_script(inflate_at=4, steps=5)) as server:
        configure(agent_home, server)
        agent_home.run(agent_bin("cline"), ["--json", "-y", "--compaction", "basic", PROMPT], env_of(agent_home),
                       timeout=120).check()
        answered = server.calls("main")
    assert not server.calls("side") and not server.calls("summary")  # basic: no summarisation request
    src = read_cline(the_session(agent_home))
    sent = [len(e.body["messages"]) for e in answered]
    compacted = next(i for i in range(1, len(sent)) if sent[i] < sent[i - 1])  # the request that held fewer messages
    assert compacted == 4, sent
    assert len(src.calls) == len(answered)
    for call, entry in zip(src.calls, answered, strict=True):  # every figure the server's, by order
        assert (call.prompt_tokens, call.completion_tokens, call.cache_read_tokens) == (
            entry.usage["prompt_tokens"], entry.usage["completion_tokens"],
            entry.usage["prompt_tokens_details"]["cached_tokens"])
        assert bool(call.prompt_unlike_file) == (call.index >= compacted), call.index  # inferred from the drop
    before = [as_sent(src.messages[:c.message_index]) == as_sent(e.body["messages"][1:])
              for c, e in zip(src.calls, answered, strict=True)]
    assert before == [i < compacted for i in range(len(answered))]  # the file keeps every message: not what was sent
    raw = json.loads(the_session(agent_home).read_text())["messages"]
    assert len(raw) == 2 + 2 * len(answered), f"Cline {pinned()} keeps every message after a compaction"
    assert any("compaction Cline does not record" in n for n in src.notes)
