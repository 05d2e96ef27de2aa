"""Secrets (issue 7, item 5): the API key never reaches a file the app writes, an event, the CLI's
output, or the model.

The key comes from the environment or the OS keyring (an in-memory keyring backend here); runs are
real: the agent (and the ``ctxbench`` CLI in a subprocess) against ``tests/fakeserver.py``, with a
tool call, an offloaded tool output, a background compaction, and providers that echo the request's
headers and the key back in errors (401, 400, 500, 429, a malformed stream, a context-window error
that triggers the emergency compaction). Afterwards every file under the data, config, session and
workspace folders, every emitted event, and the CLI's stdout and stderr are searched for the key.

Every test also checks that the key really was sent (the server saw ``Authorization: Bearer <key>``):
a run that never used the key would prove nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.agent import Agent
from engine.context.conversation import Session
from engine.importer import import_transcript
from engine.llm import client as llm
from engine.model.events import ErrorEvent, Event, event_to_json
from engine.model.messages import assistant, user
from engine.store import secrets
from engine.store.config import Settings, config_dir, data_dir, save_settings
from engine.tools.registry import ToolBox
from tests import fakeserver as fs
from tests.conftest import REPO, SUMMARY
from tests.memkeyring import MemoryKeyring

pytestmark = pytest.mark.filterwarnings("ignore:Accessing the .model_:DeprecationWarning")

KEY = "sk-proj-LEAKCHECK0123456789abcdefXYZ"
PLAIN_KEY = "plainKeyWithoutAnyKnownPrefix0987654321"  # no sk- prefix: only remembering it can scrub it


def echoes(key: str) -> list[dict[str, Any]]:
    """Provider errors that echo the key and the request headers, the ways real ones do."""
    headers = f"{{'Authorization': 'Bearer {key}', 'Content-Type': 'application/json', 'api-key': '{key}'}}"
    return [
        fs.error(500, f"internal error while handling request with headers {headers}", type="server_error"),
        fs.error(429, f"rate limit for key {key}", code="rate_limit_exceeded", headers={"Retry-After": "0"}),
        fs.error(400, f"Invalid request. authorization: Bearer {key} x-api-key: {key} url: /v1?key={key}",
                 code="invalid_value"),
    ]


@pytest.fixture(autouse=True)
def clean_state(monkeypatch: pytest.MonkeyPatch, fast_retries: None) -> Iterator[None]:
    for name in ("OPENAI_API_KEY", "MY_PROVIDER_TOKEN_VAR"):
        monkeypatch.delenv(name, raising=False)
    secrets.forget_secrets()
    yield
    secrets.forget_secrets()


def files_containing(key: str, *roots: Path) -> list[str]:
    """Every file under ``roots`` whose bytes contain ``key`` (also as JSON-escaped or UTF-16)."""
    needles = [key.encode(), json.dumps(key).encode()[1:-1], key.encode("utf-16-le")]
    hits = []
    for root in roots:
        if not root.exists():
            continue
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                p = Path(dirpath) / name
                if p.is_file() and not p.is_symlink():
                    data = p.read_bytes()
                    if any(n in data for n in needles):
                        hits.append(str(p))
    return hits


def assert_sent(server: fs.FakeLLMServer, key: str) -> None:
    auth = [r.headers.get("authorization", "") for r in server.requests]
    assert auth and all(a == f"Bearer {key}" for a in auth), auth


class AgentRun:
    def __init__(self, root: Path, server: fs.FakeLLMServer, **settings: Any) -> None:
        settings.setdefault("context_window", 12_000)
        settings.setdefault("max_tokens", 256)
        settings.setdefault("compact_threshold_ratio", 0.5)
        settings.setdefault("offload_recent_bytes", 2_000)
        settings.setdefault("max_retries", 3)
        self.settings = Settings(model="openai/fake", api_base=server.base_url).replace(**settings)
        save_settings(self.settings)  # the settings file the app writes
        self.workspace = root / "ws"
        self.workspace.mkdir(exist_ok=True)
        (self.workspace / "big.txt").write_text("".join(f"line {i} of the big file\n" for i in range(3_000)))
        self.session = Session.create(data_dir() / "sessions" / "leak", "leak")
        self.events: list[Event] = []
        self.config = llm.config_from_settings(self.settings)  # the key: environment or keyring
        self.toolbox = ToolBox(self.workspace, self.session.path)
        self.agent = Agent(self.session, self.settings, llm_config=self.config, toolbox=self.toolbox,
                           emit=self.events.append)

    async def turn(self, text: str) -> Any:
        done = await self.agent.run_turn(text)
        if self.agent.auto_task is not None:
            await self.agent.auto_task
        return done

    def leaks(self, key: str) -> list[str]:
        found = files_containing(key, data_dir(), config_dir(), self.session.path, self.workspace)
        for e in self.events:
            if key in json.dumps(event_to_json(e), default=str):
                found.append(f"event {e.type}")
        return found


async def scenario(run: AgentRun, server: fs.FakeLLMServer, key: str) -> None:
    """Tool call + offload, echoing errors (retried and final), a malformed stream, compaction paths."""
    for i in range(4):  # enough history for the background compaction to run
        run.session.extend([user(f"earlier question {i} " + "q" * 1_500), assistant("a" * 1_500)])
    server.queue(
        *echoes(key)[:2],  # 500 then 429: retried (the retry events carry the scrubbed text)
        fs.tool_call_reply("read_file", {"path": "big.txt"}, call_id="c1", when={"tools": True}),
        fs.text_reply("The file is long.", when={"tools": True}),
        fs.text_reply(SUMMARY, when={"tools": False}),
    )
    assert (await run.turn("read big.txt")).ok
    assert any(m.get("offload") for m in run.session.messages)  # the output was offloaded
    # a final error that echoes everything
    server.queue(echoes(key)[2])
    assert not (await run.turn("again")).ok
    # a 401 that prints the key, then a stream that breaks with the key in it
    server.queue(fs.error(401, f"Incorrect API key provided: {key}", code="invalid_api_key"))
    assert not (await run.turn("and again")).ok
    server.queue(fs.stream(fs.text("partial "), fs.raw(f"data: {{broken {key}\n\n")))
    assert not (await run.turn("once more")).ok
    # a context-window error that echoes the key: the emergency compaction runs, then the retry works
    server.queue(
        fs.error(400, f"maximum context length is 100 tokens (key {key})", code="context_length_exceeded"),
        fs.text_reply("Fits now.", when={"tools": True}),
        fs.text_reply(SUMMARY, when={"tools": False}),
        fs.text_reply(SUMMARY, when={"tools": False}),
    )
    server.default = fs.text_reply("Fallback answer.")
    await run.turn("last one")
    server.default = None
    errors = [e for e in run.events if isinstance(e, ErrorEvent)]
    assert len(errors) >= 5 and any("[redacted]" in e.message for e in errors)


@pytest.mark.asyncio
async def test_key_from_the_environment_never_reaches_a_file_or_an_event(
    server: fs.FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run = AgentRun(tmp_path, server)
    assert run.config.api_key == KEY and KEY not in repr(run.config)
    await scenario(run, server, KEY)
    assert_sent(server, KEY)
    run.session.close()
    assert run.leaks(KEY) == []
    # an export: the stored history imported again as a transcript, into a new session
    report = import_transcript(run.session.history_path, session_dir=tmp_path / "reimported", window=12_000)
    assert report.messages > 0 and files_containing(KEY, tmp_path / "reimported") == []


@pytest.mark.asyncio
async def test_key_from_the_keyring_without_a_known_prefix(
    server: fs.FakeLLMServer, tmp_path: Path, memory_keyring: MemoryKeyring
) -> None:
    """A key with no recognisable shape is only scrubbed because the app remembers the keys it loads."""
    secrets.store_api_key("openai", PLAIN_KEY)
    secrets.forget_secrets()  # as in a fresh process: only the keyring knows it
    run = AgentRun(tmp_path, server)
    assert run.config.api_key == PLAIN_KEY
    await scenario(run, server, PLAIN_KEY)
    assert_sent(server, PLAIN_KEY)
    run.session.close()
    assert run.leaks(PLAIN_KEY) == []


@pytest.mark.asyncio
async def test_key_in_a_custom_variable_named_by_api_key_env(
    server: fs.FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_PROVIDER_TOKEN_VAR", PLAIN_KEY)  # a name scrub() does not guess
    run = AgentRun(tmp_path, server, api_key_env="MY_PROVIDER_TOKEN_VAR")
    assert run.config.api_key == PLAIN_KEY
    server.queue(fs.error(401, f"bad key {PLAIN_KEY}", code="invalid_api_key"))
    assert not (await run.turn("hi")).ok
    assert_sent(server, PLAIN_KEY)
    # the settings file holds the variable's name, not the key
    assert "MY_PROVIDER_TOKEN_VAR" in config_dir().joinpath("settings.toml").read_text()
    run.session.close()
    assert run.leaks(PLAIN_KEY) == []


@pytest.mark.asyncio
async def test_tool_outputs_that_contain_the_key_are_scrubbed(
    server: fs.FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that reads a .env file or runs ``env`` must not get the key, nor store it in the session."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run = AgentRun(tmp_path, server)
    (run.workspace / ".env").write_text(f"OPENAI_API_KEY={KEY}\nOTHER=1\n")

    async def approve(name: str, args: dict[str, Any]) -> bool:
        return True

    run.toolbox.allow_shell = True
    run.toolbox.approve = approve
    run.agent.tools = run.toolbox.specs()
    server.queue(
        fs.tool_call_reply("read_file", {"path": ".env"}, call_id="r1"),
        fs.tool_call_reply("search_text", {"pattern": "API_KEY"}, call_id="r2"),
        fs.tool_call_reply("run_shell", {"command": "env; echo $OPENAI_API_KEY"}, call_id="r3"),
        fs.text_reply("I saw no key."),
    )
    assert (await run.turn("look around")).ok
    results = [m for m in run.session.messages if m["role"] == "tool"]
    assert len(results) == 3 and all("[redacted]" in r["content"] for r in results), results
    assert "OTHER=1" in results[0]["content"]  # the rest of the file is still there
    sent = json.dumps([r.body for r in server.requests])
    assert KEY not in sent  # the model never saw it
    run.session.close()
    (run.workspace / ".env").unlink()  # the user's own file, not one the app wrote
    assert run.leaks(KEY) == []


# --------------------------------------------------------------------------- the CLI, in a subprocess


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_cli_run_inspect_and_import_never_print_or_store_the_key(tmp_path: Path) -> None:
    script = {
        "responses": [
            *echoes(KEY)[:2],
            fs.tool_call_reply("list_dir", {}, call_id="c1"),
            fs.text_reply("Done."),
            echoes(KEY)[2],
            fs.error(401, f"Incorrect API key provided: {KEY}", code="invalid_api_key"),
        ]
    }
    (tmp_path / "script.json").write_text(json.dumps(script))
    (tmp_path / "ws").mkdir()
    log = tmp_path / "requests.jsonl"
    port_file = tmp_path / "port"
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENAI_API_KEY=KEY, CTXBENCH_DATA_DIR=str(tmp_path / "data"),
               CTXBENCH_CONFIG_DIR=str(tmp_path / "config"), CTXBENCH_MAX_RETRIES="2", CTXBENCH_DEBUG="1")
    srv = subprocess.Popen(
        [sys.executable, "-m", "tests.fakeserver", "--port-file", str(port_file),
         "--script", str(tmp_path / "script.json"), "--log", str(log)],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            if port_file.exists():
                break
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port_file.read_text()}/v1"
        common = ["--model", "openai/fake", "--api-base", base, "--context-window", "16000",
                  "--max-tokens", "256"]
        session = tmp_path / "session"
        outs = [
            _cli(["run", "--session", str(session), *common, "--workspace", str(tmp_path / "ws"), "list it"],
                 env, tmp_path),
            _cli(["run", "--session", str(session), *common, "again"], env, tmp_path),
            _cli(["run", "--session", str(session), *common, "and again"], env, tmp_path),
            _cli(["inspect", "--session", str(session)], env, tmp_path),
            _cli(["import", str(session / "history.jsonl"), "--session", str(tmp_path / "copy"),
                  "--no-model-info"], env, tmp_path),
        ]
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    assert [o.returncode for o in outs] == [0, 1, 1, 0, 0], [o.stderr[-500:] for o in outs]
    assert "[redacted]" in outs[1].stderr and "[redacted]" in outs[2].stderr
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(sent) == 6 and all(r["headers"].get("authorization") == f"Bearer {KEY}" for r in sent)
    for o in outs:
        assert KEY not in o.stdout and KEY not in o.stderr
    assert files_containing(KEY, tmp_path / "data", tmp_path / "config", session, tmp_path / "copy",
                            tmp_path / "ws") == []


def test_scrub_known_removes_only_the_keys_themselves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    secrets.remember_secret(PLAIN_KEY)
    code = (
        'client = OpenAI(api_key=os.environ["OPENAI_API_KEY"])\n'
        'headers = {"Authorization": f"Bearer {tok}"}\n'
    )
    assert secrets.scrub_known(code) == code  # code that merely mentions keys reaches the model intact
    assert secrets.scrub_known(f"A={KEY}\nB={PLAIN_KEY}\n") == "A=[redacted]\nB=[redacted]\n"
    assert secrets.scrub_known("") == ""
