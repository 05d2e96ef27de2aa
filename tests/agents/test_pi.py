"""The real Pi 0.73.1 (``@mariozechner/pi-coding-agent``, pinned in ``tests/agents/package.json``), run headless
(``pi -p --mode json``) and offline (``PI_OFFLINE=1``) against the scripted Chat Completions server of
:mod:`tests.agents.scripted_chat` through a custom ``openai-completions`` provider in ``models.json``; its session
file is read by :mod:`engine.sources.pi` (whole, and in random byte chunks as a follower would feed it), imported,
listed by Sources, and checked against what the server logged as sent and answered: the ground truth.

What the pinned version does, as these tests pin it down:

- the session file is written only once the first response arrived (the header, ``model_change``,
  ``thinking_level_change`` and the prompt then at once), then one entry a line, each the child of the last;
- one assistant message per provider call, with ``responseId`` and ``usage.input`` = the prompt less its cached
  part (``cacheRead``), ``cacheWrite`` 0 (the provider reports none);
- ``pi -c`` appends to the same file;
- an auto compaction (the context above ``contextWindow - compaction.reserveTokens`` at the end of a turn) sends
  one tool-less summarisation request, recorded nowhere, then writes a ``compaction`` entry
  (``tokensBefore`` = the last call's prompt + output; a cut inside the turn is a "split turn", whose summary
  Pi heads with its own text); the next request starts with the summary as a user message, then the kept
  messages (``firstKeptEntryId`` on);
- ``/compact`` in ``-p`` mode is sent to the model as a prompt: a manual compaction goes through RPC mode
  (``--mode rpc``, a ``compact`` command), and is written exactly as an automatic one (no trigger recorded).
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.sources.discovery import scan_sources
from engine.sources.model import SourceSession
from engine.sources.pi import IGNORED_ENTRIES, KNOWN_ENTRIES, READ_ROLES, PiReader, read_pi, record_kind, summary_text
from tests import ccusage20
from tests.agents.conftest import AgentHome, Run, agent_bin, pinned_version, raw_lines
from tests.agents.scripted import Logged, Reply, ToolCall
from tests.agents.scripted_chat import ChatServer

MODEL = "fake-model"
PROVIDER = "fake"
SUMMARY = "## Goal\nPrint lines.\n\n## Progress\nThe commands ran.\n\n## Next Steps\nNone."
WIDE = "head -c 1600 /dev/zero | tr '\\0' x; echo"  # 1,600 characters of output: more than keepRecentTokens


def pinned() -> str:
    return pinned_version("pi")


def configure(home: AgentHome, server: ChatServer, *, window: int = 128_000, reserve: int | None = None) -> None:
    folder = home.home / ".pi" / "agent"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.json").write_text(json.dumps({"providers": {PROVIDER: {
        "baseUrl": f"{server.base_url}/v1", "api": "openai-completions", "apiKey": "sk-test",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": MODEL, "contextWindow": window, "maxTokens": 1000}]}}}), encoding="utf-8")
    if reserve is not None:
        (folder / "settings.json").write_text(json.dumps({"compaction": {"reserveTokens": reserve,
                                                                         "keepRecentTokens": 300}}))


def run_pi(home: AgentHome, prompt: str, *, resume: bool = False) -> Run:
    env = home.base_env() | {"PI_OFFLINE": "1"}
    args = [*(["-c"] if resume else []), "-p", "--mode", "json", "--provider", PROVIDER, "--model", MODEL, prompt]
    return home.run(agent_bin("pi"), args, env, timeout=120).check()


def session_files(home: AgentHome) -> list[Path]:
    return sorted((home.home / ".pi" / "agent" / "sessions").glob("*/*.jsonl"))


def the_session(home: AgentHome) -> Path:
    (path,) = session_files(home)
    return path


def shell_script(commands: int, command: str = "echo step{n}", big_at: int = -1,
                 big: int = 0) -> Callable[[dict[str, Any]], Reply]:
    """Each prompt gets ``commands`` bash calls, then a closing text; a tool-less request (the compaction's) is
    answered with :data:`SUMMARY`. The answer to main request ``big_at`` (0-based) claims ``big`` more prompt
    tokens (read from the cache)."""
    state = {"requests": 0}

    def script(body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            return Reply(text=SUMMARY)
        extra = big if state["requests"] == big_at else 0
        state["requests"] += 1
        msgs = body["messages"]
        done = next((i for i, m in enumerate(reversed(msgs)) if m.get("role") == "user"), len(msgs))
        results = sum(1 for m in msgs[len(msgs) - done:] if m.get("role") == "tool")
        if results < commands:
            return Reply(tool_calls=[ToolCall("bash", {"command": command.format(n=results)})],
                         extra_prompt_tokens=extra)
        return Reply(text=f"Done: {results} commands ran.", extra_prompt_tokens=extra)

    return script


# --------------------------------------------------------------------------- checks


def assert_every_kind_known(path: Path, src: SourceSession) -> None:
    """Every line of the file is the header or an entry of a type (and a message of a role) the reader reads or
    leaves out on purpose; the ignored counts are the file's own."""
    ignored: Counter[str] = Counter()
    for obj in raw_lines(path):
        kind = record_kind(obj)
        assert kind == "session" or kind in KNOWN_ENTRIES, f"a line of Pi {pinned()} of no known kind: {str(obj)[:200]}"
        if kind == "message":
            assert obj["message"]["role"] in READ_ROLES, f"message role {obj['message']['role']!r} of Pi {pinned()}"
        ignored.update([f"entry/{kind}"] if kind in IGNORED_ENTRIES else [])
    assert src.skipped == []
    assert src.ignored == dict(ignored)


def assert_calls_are_the_servers(src: SourceSession, answered: list[Logged]) -> None:
    assert len(src.calls) == len(answered)
    for call, entry in zip(src.calls, answered, strict=True):
        usage = entry.usage
        assert call.prompt_tokens == usage["prompt_tokens"]  # input + cacheRead: the whole prompt
        assert call.cache_read_tokens == usage["prompt_tokens_details"]["cached_tokens"]
        assert call.cache_write_tokens == 0  # the file's figure (the provider reports none)
        assert call.completion_tokens == usage["completion_tokens"]
        assert call.model == entry.body["model"] == MODEL
        assert call.max_tokens == entry.body["max_completion_tokens"] == 1000  # models.json's maxTokens
    ids = [c.request_id for c in src.calls]
    assert all(i.startswith("chatcmpl-") for i in ids) and len(set(ids)) == len(ids)


def sent_text(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if p.get("type") == "text")
    return content or ""


def calls_of(msg: dict[str, Any]) -> list[tuple[str, str, Any]]:
    calls = msg.get("tool_calls") or []
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


def assert_messages_are_the_sent_ones(src: SourceSession, answered: list[Logged]) -> None:
    """The last request carried the messages the reader puts after ``live_start`` (the model's last answer
    comes after them)."""
    last = answered[-1].body["messages"][1:]  # without the system prompt
    live = src.messages[src.live_start:]
    assert [m["role"] for m in last] == [m["role"] for m in live[:len(last)]]
    for sent, read in zip(last, live, strict=False):
        assert sent_text(sent) == (read.get("content") or "")
        assert calls_of(sent) == calls_of(read)
        assert sent.get("tool_call_id") == read.get("tool_call_id")


def assert_read_in_chunks_is_read_whole(path: Path, src: SourceSession, seed: int) -> None:
    data = path.read_bytes()
    reader = PiReader(path)
    rng = random.Random(seed)
    at = 0
    while at < len(data):
        step = rng.randint(1, 400)
        reader.feed(data[at:at + step])
        at += step
    chunked = reader.finish()
    strip = [{k: v for k, v in m.items() if k != "id"} for m in chunked.messages]
    assert strip == [{k: v for k, v in m.items() if k != "id"} for m in src.messages]
    assert chunked.calls == src.calls and chunked.compactions == src.compactions
    assert chunked.live_start == src.live_start


def import_it(path: Path, tmp_path: Path) -> Any:
    from engine.ingest import import_source

    report = import_source(path, session_dir=tmp_path / "imported")
    assert report.format == "pi" and report.skipped == []
    return report


# --------------------------------------------------------------------------- scenarios


def test_tool_calls_and_a_continued_session(agent_home: AgentHome, tmp_path: Path) -> None:
    with ChatServer(shell_script(2)) as server:
        configure(agent_home, server)
        run_pi(agent_home, "Run two commands")
        run_pi(agent_home, "Run them again", resume=True)
    answered = server.calls()
    assert [e.kind for e in answered] == ["main"] * 6  # no title or side request
    path = the_session(agent_home)  # -c appended to the same file
    src = read_pi(path)
    assert_every_kind_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered)
    assert_read_in_chunks_is_read_whole(path, src, seed=1)
    assert [m["content"] for m in src.messages if m["role"] == "tool"] == ["step0\n", "step1\n"] * 2
    assert [m["content"] for m in src.messages if m["role"] == "user"] == ["Run two commands", "Run them again"]
    assert not src.compactions and src.live_start == 0 and src.off_chain == 0
    assert src.cwd == str(agent_home.work) and src.project == agent_home.work.name
    assert src.model == MODEL and (src.window, src.window_source) == (128_000, "models.json")
    assert path.stem.endswith(src.session_id)
    report = import_it(path, tmp_path)
    assert report.calls == report.reported_calls == 6 and report.inferred_prefix_label
    entries = scan_sources(env={"HOME": str(agent_home.home)}, home=agent_home.home, index=tmp_path / "idx.json")
    (entry,) = entries
    assert (entry.agent, entry.session_id, entry.calls, entry.model, entry.title) == (
        "pi", src.session_id, 6, MODEL, "Run two commands")
    assert entry.last_prompt_tokens == answered[-1].usage["prompt_tokens"] and entry.window == 128_000
    assert entry.project == agent_home.work.name and entry.path == str(path)
    # ccusage 20 reads the same files to the same tokens, day by day
    ccusage20.assert_same_tokens(agent_home.home, tmp_path / "usage", "pi")


def compact_by_rpc(home: AgentHome) -> None:
    """``/compact`` of the last session through RPC mode (``-p`` would send it to the model as a prompt): stdin
    stays open until Pi answers the command (closing it earlier aborts the compaction)."""
    env = home.base_env() | {"PI_OFFLINE": "1"}
    proc = subprocess.Popen([str(agent_bin("pi")), "--mode", "rpc", "-c", "--provider", PROVIDER, "--model", MODEL],
                            cwd=home.work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    answer: dict[str, Any] = {}
    try:
        proc.stdin.write(json.dumps({"id": "c1", "type": "compact"}) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:
            event = json.loads(line)
            if event.get("type") == "response" and event.get("command") == "compact":
                answer = event
                break
    finally:
        proc.stdin.close()
        proc.stdout.read()
        err = proc.stderr.read() if proc.stderr is not None else ""
        proc.wait(timeout=60)
    assert proc.returncode == 0 and answer.get("success") is True, (answer, err[-2000:])


def assert_the_compaction(path: Path, src: SourceSession, answered: list[Logged], summarise: Logged) -> None:
    """One compaction after the third main call; the summarisation request (tool-less, the conversation as
    text) is recorded nowhere: not a call, no cost; the next request starts with the summary, then the kept
    messages."""
    assert not summarise.body.get("tools") and "<conversation>" in sent_text(summarise.body["messages"][-1])
    (comp,) = src.compactions
    assert comp.calls_before == 3 and comp.cost is None
    assert comp.trigger == "unknown"  # the file does not say whether it was auto or /compact
    last = answered[2].usage
    assert comp.tokens_before == last["prompt_tokens"] + last["completion_tokens"]  # Pi's tokensBefore
    assert comp.tokens_after == answered[3].usage["prompt_tokens"]
    # a "split turn" (the cut inside the turn): Pi writes its own heading before the model's summary
    assert comp.summary.endswith("**Turn Context (split turn):**\n\n" + SUMMARY)
    assert src.live_start == comp.message_index
    assert src.messages[comp.message_index]["content"] == summary_text(comp.summary)
    assert sent_text(answered[3].body["messages"][1]) == summary_text(comp.summary)
    kept = answered[3].body["messages"][2:]  # what Pi kept after the summary, up to the new prompt
    assert comp.messages_after == 1 + next(i for i, m in enumerate(kept) if sent_text(m) == "Print them again")
    (line,) = [o for o in raw_lines(path) if o["type"] == "compaction"]
    assert (comp.summary, comp.tokens_before) == (line["summary"], line["tokensBefore"])


def test_an_auto_compaction_then_a_continued_session(agent_home: AgentHome, tmp_path: Path) -> None:
    """The third answer claims 3,000 more prompt tokens: above 5,000 - 1,000 Pi compacts when the turn ends."""
    with ChatServer(shell_script(2, command=WIDE, big_at=2, big=3000)) as server:
        configure(agent_home, server, window=5000, reserve=1000)
        run_pi(agent_home, "Print two wide lines")
        run_pi(agent_home, "Print them again", resume=True)
    kinds = [e.kind for e in server.calls()]
    assert kinds == ["main"] * 3 + ["side"] + ["main"] * 3, kinds
    answered = server.calls("main")
    (summarise,) = server.calls("side")
    path = the_session(agent_home)
    src = read_pi(path)
    assert_every_kind_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered)
    assert_read_in_chunks_is_read_whole(path, src, seed=2)
    assert_the_compaction(path, src, answered, summarise)
    report = import_it(path, tmp_path)
    assert len(report.compactions) == 1 and report.calls == 6


def test_a_manual_compaction_through_rpc(agent_home: AgentHome, tmp_path: Path) -> None:
    with ChatServer(shell_script(2, command=WIDE)) as server:
        configure(agent_home, server, reserve=1000)  # far below the window: only the command compacts
        run_pi(agent_home, "Print two wide lines")
        compact_by_rpc(agent_home)
        run_pi(agent_home, "Print them again", resume=True)
    assert [e.kind for e in server.calls()] == ["main"] * 3 + ["side"] + ["main"] * 3
    answered = server.calls("main")
    (summarise,) = server.calls("side")
    path = the_session(agent_home)
    src = read_pi(path)
    assert_every_kind_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered)
    assert_read_in_chunks_is_read_whole(path, src, seed=3)
    assert_the_compaction(path, src, answered, summarise)
    assert len(import_it(path, tmp_path).compactions) == 1


def test_read_while_pi_writes(agent_home: AgentHome) -> None:
    """The file is fed to an incremental reader as Pi appends to it (what a follower does): it ends as the file
    read whole, and reading never disturbs Pi."""
    with ChatServer(shell_script(3)) as server:
        configure(agent_home, server)
        env = agent_home.base_env() | {"PI_OFFLINE": "1"}
        proc = subprocess.Popen([str(agent_bin("pi")), "-p", "--mode", "json", "--provider", PROVIDER, "--model",
                                 MODEL, "Run three commands"], cwd=agent_home.work, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        reader: PiReader | None = None
        offset, feeds = 0, 0
        start = time.monotonic()
        while True:
            done = proc.poll() is not None
            files = session_files(agent_home)
            if files:
                reader = reader or PiReader(files[0])
                data = files[0].read_bytes()[offset:]
                if data:
                    reader.feed(data)
                    offset += len(data)
                    feeds += 1
            if done or time.monotonic() - start > 120:
                break
            time.sleep(0.01)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-2000:]
    assert reader is not None and feeds >= 1
    path = the_session(agent_home)
    src = read_pi(path)
    got = reader.finish()
    assert [{k: v for k, v in m.items() if k != "id"} for m in got.messages] == [
        {k: v for k, v in m.items() if k != "id"} for m in src.messages]
    assert got.calls == src.calls and len(src.calls) == 4
    assert_calls_are_the_servers(src, server.calls())


def test_nothing_of_the_user_is_touched(agent_home: AgentHome) -> None:
    """Every file Pi writes is under the test's home."""
    real = Path.home() / ".pi"
    before = sorted(real.rglob("*")) if real.is_dir() else []
    with ChatServer(shell_script(0)) as server:
        configure(agent_home, server)
        run_pi(agent_home, "Say done")
    assert the_session(agent_home).is_file()
    assert (sorted(real.rglob("*")) if real.is_dir() else []) == before
