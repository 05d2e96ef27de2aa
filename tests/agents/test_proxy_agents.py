"""The real agents run through ``ctxbench record`` (the recording proxy, :mod:`engine.capture`) to the scripted
servers: every request in the capture is, byte for byte, what the server received; what the agent received is,
byte for byte, what the server sent; the capture imported as a session has every call's system prompt and tool
definitions exact (``prefix_source`` *file*), equal to the request's; and the planted API key is in no file
the workbench wrote."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from engine.context.tokens import HeuristicEstimator
from engine.ingest import import_source, tool_definitions_tokens
from engine.sources.capture import read_capture
from engine.sources.detect import detect_format
from tests.agents.conftest import HERE, AgentHome, Run, agent_bin
from tests.agents.scripted import AnthropicServer, ResponsesServer, ScriptedServer, _handler
from tests.agents.scripted_chat import ChatServer, chat_text, split_chat
from tests.agents.scripted_gemini import SUMMARY_TEXT, GeminiServer
from tests.agents.test_claude_code import MODEL as CLAUDE_MODEL
from tests.agents.test_claude_code import prompt_of
from tests.agents.test_claude_code import script as claude_script
from tests.agents.test_codex import MODEL as CODEX_MODEL
from tests.agents.test_codex import shell_script as codex_shell_script
from tests.agents.test_gemini_cli import CLOCK, shell_script
from tests.agents.test_gemini_cli import MODEL as GEMINI_MODEL
from tests.agents.test_opencode import args_of as opencode_args
from tests.agents.test_opencode import configure as opencode_configure
from tests.agents.test_opencode import env_of as opencode_env
from tests.agents.test_opencode import shell_script as opencode_shell_script

REPO = HERE.parent.parent
ANTHROPIC_KEY = "sk-ant-api03-PLANTED-claude-5f1e2d3c4b5a"
GEMINI_KEY = "AIzaPLANTED-gemini-9a8b7c6d5e4f3a2b1c0d"
CODEX_KEY = "sk-proj-PLANTED-codex-0f1e2d3c4b5a69788"
OPENCODE_KEY = "sk-PLANTED-opencode-77aa66bb55cc44dd"


class _Tee(io.BufferedIOBase):
    """The handler's output, passed on and kept."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.data = bytearray()

    def write(self, b: Any) -> int:
        self.data += bytes(b)
        return int(self.inner.write(b))

    def flush(self) -> None:
        self.inner.flush()


Wire = list[tuple[bytes, bytes, dict[str, str]]]


def wire_logged(server: ScriptedServer) -> Wire:
    """Start ``server`` with a handler that also keeps each POST's raw body, the raw bytes of its answer (status
    line, headers and body, as written to the socket) and the request's headers."""
    wire: Wire = []
    base = _handler(server)

    class Handler(base):  # type: ignore[valid-type,misc]
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            rfile, wfile = self.rfile, self.wfile
            self.rfile, self.wfile = io.BytesIO(raw), _Tee(wfile)  # type: ignore[assignment]
            try:
                super().do_POST()
            finally:
                tee = self.wfile
                self.rfile, self.wfile = rfile, wfile
            wire.append((raw, bytes(tee.data), dict(self.headers.items())))  # type: ignore[attr-defined]

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server._httpd = httpd
    server._thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    server._thread.start()
    return wire


def body_of(response: bytes) -> bytes:
    return response.split(b"\r\n\r\n", 1)[1]


def record(home: AgentHome, capture: Path, agent: list[str], env: dict[str, str], timeout: float = 180,
           extra: list[str] | None = None) -> Run:
    env = env | {"PYTHONPATH": str(REPO), "CTXBENCH_DATA_DIR": str(home.home / "ctxbench-data"),
                 "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return home.run(Path(sys.executable), ["-m", "app.cli", "record", "--capture", str(capture), *(extra or []),
                                           "--", *agent], env, timeout=timeout).check()


def exchanges(capture: Path) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in capture.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "capture"
    return [x for x in lines[1:] if x["type"] == "exchange"]


def assert_wire_equal(capture: Path, wire: Wire, key: str) -> list[dict[str, Any]]:
    """Each POST the server received is one exchange of the capture with exactly those bytes, and the client was
    passed exactly the bytes the server sent (the same hash and size); the key did reach the server, in a
    credential header (so that "in no file" means something)."""
    assert any(key in value for _, _, headers in wire for value in headers.values())
    posts = [x for x in exchanges(capture) if x["method"] == "POST"]
    assert len(posts) == len(wire) > 0
    by_hash = {x["request"]["sha256"]: x for x in posts}
    for raw, response, _ in wire:
        ex = by_hash[hashlib.sha256(raw).hexdigest()]
        if key.encode() not in raw:  # (a body echoing the key is written without it)
            assert ex["request"]["body"].encode("utf-8") == raw
        sent = body_of(response)
        assert ex["outcome"] == "complete"
        assert ex["response"]["bytes"] == len(sent) and ex["response"]["sha256"] == hashlib.sha256(sent).hexdigest()
        status = int(response.split(b" ", 2)[1])
        assert ex["response"]["status"] == status
    return posts


def assert_key_in_no_file(root: Path, key: str) -> int:
    """The key is in no file under ``root`` the workbench wrote (the capture, the imported session); how many
    files were looked at."""
    files = [p for p in root.rglob("*") if p.is_file()]
    for path in files:
        assert key.encode() not in path.read_bytes(), path
    return len(files)


def test_claude_code_recorded_exactly(agent_home: AgentHome, tmp_path: Path) -> None:
    server = AnthropicServer(claude_script)
    wire = wire_logged(server)
    capture = agent_home.home / "ctxbench-data" / "captures" / "claude.jsonl"
    env = {**agent_home.base_env(), "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
           "IS_SANDBOX": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}
    try:
        run = record(agent_home, capture, [str(agent_bin("claude")), "-p", "TOOLS2 run two commands", "--model",
                                           CLAUDE_MODEL, "--dangerously-skip-permissions", "--output-format", "json"],
                     env)
    finally:
        server.stop()
    result = json.loads(run.stdout)
    assert result["result"] == "All done."  # the agent got the server's answers and finished its task
    assert "exchange(s) recorded in" in run.stderr
    posts = assert_wire_equal(capture, wire, ANTHROPIC_KEY)
    for ex in posts:
        headers = dict((k.lower(), v) for k, v in ex["request"]["headers"])
        assert headers.get("x-api-key", "[redacted]") == "[redacted]"
    main = server.calls("main")
    assert len(main) == 3

    src = read_capture(capture)
    assert detect_format(capture) == "proxy-capture" and src.skipped == []
    generation = [e for e in server.log if not e.path.endswith("/count_tokens")]
    assert len(src.calls) == len(generation)
    calls = [c for c in src.calls if src.prefixes[c.prefix_key].tools]
    assert len(calls) == len(main)
    for call, entry in zip(calls, main, strict=True):
        assert call.prompt_tokens == prompt_of(entry.usage)
        assert call.cache_read_tokens == entry.usage["cache_read_input_tokens"]
        assert call.completion_tokens == entry.usage["output_tokens"]
        assert call.max_tokens == entry.body["max_tokens"] and call.model == entry.body["model"]
        prefix = src.prefixes[call.prefix_key]
        assert prefix.system == "\n\n".join(b["text"] for b in entry.body["system"])
        assert prefix.tools == [{k: v for k, v in t.items() if k != "cache_control"} for t in entry.body["tools"]]
        assert len(call.input_messages or []) >= len(entry.body["messages"])
    assert [m["content"] for m in src.messages if m["role"] == "tool"] == ["step0", "step1"]
    assert src.compactions == []

    report = import_source(capture, session_dir=tmp_path / "imported").to_json()
    est = HeuristicEstimator()
    last = main[-1].body
    assert report["format"] == "proxy-capture" and report["prefix_source"] == "file"
    assert report["inferred_prefix_tokens"] is None
    assert report["system_prompt_tokens"] == est.text("\n\n".join(b["text"] for b in last["system"]))
    assert sum(t["tokens"] for t in report["tool_definitions"]) == tool_definitions_tokens(
        [{k: v for k, v in t.items() if k != "cache_control"} for t in last["tools"]], est)
    events = [json.loads(x) for x in (tmp_path / "imported" / "events.jsonl").read_text().splitlines()]
    contexts = [e for e in events if e["type"] == "context"]
    assert {e["prefix_source"] for e in contexts} == {"file"}
    assert [e["provider_prompt_tokens"] for e in contexts if e["tools"]] == [prompt_of(e.usage) for e in main]
    assert assert_key_in_no_file(agent_home.home / "ctxbench-data", ANTHROPIC_KEY) >= 1
    assert assert_key_in_no_file(tmp_path / "imported", ANTHROPIC_KEY) >= 3


def test_gemini_cli_recorded_exactly(agent_home: AgentHome, tmp_path: Path) -> None:
    server = GeminiServer(shell_script(2))
    wire = wire_logged(server)
    capture = agent_home.home / "ctxbench-data" / "captures" / "gemini.jsonl"
    gemini_dir = agent_home.home / ".gemini"
    gemini_dir.mkdir()
    (gemini_dir / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    (gemini_dir / "trustedFolders.json").write_text(json.dumps({str(agent_home.work): "TRUST_FOLDER"}))
    env = agent_home.base_env() | {"GEMINI_API_KEY": GEMINI_KEY, "GOOGLE_GEMINI_BASE_URL": server.base_url,
                                   "NODE_OPTIONS": f"--import={(HERE / 'shifted_clock.mjs').as_uri()}",
                                   "CTXBENCH_TEST_CLOCK": str(CLOCK)}
    try:
        run = record(agent_home, capture, [str(agent_bin("gemini")), "-p", "run two commands", "--approval-mode",
                                           "yolo", "-m", GEMINI_MODEL], env, timeout=90)
    finally:
        server.stop()
    assert "Done: 2 commands ran." in run.stdout
    assert_wire_equal(capture, wire, GEMINI_KEY)
    main = server.calls("main")
    assert len(main) == 3

    src = read_capture(capture)
    assert src.skipped == []
    calls = [c for c in src.calls if src.prefixes[c.prefix_key].tools]
    assert len(calls) == len(main)
    for call, entry in zip(calls, main, strict=True):
        assert call.prompt_tokens == entry.usage["promptTokenCount"]
        assert call.cache_read_tokens == entry.usage["cachedContentTokenCount"]
        assert call.completion_tokens == entry.usage["candidatesTokenCount"]
        assert call.model == GEMINI_MODEL
        prefix = src.prefixes[call.prefix_key]
        assert prefix.system == "\n".join(p["text"] for p in entry.body["systemInstruction"]["parts"])
        assert prefix.tools == [d for g in entry.body["tools"] for d in g["functionDeclarations"]]
    assert len([m for m in src.messages if m["role"] == "tool"]) == 2

    report = import_source(capture, session_dir=tmp_path / "imported").to_json()
    est = HeuristicEstimator()
    last = main[-1].body
    # Gemini CLI's own file has no system prompt or tools (inferred); recorded, they are exact
    assert report["prefix_source"] == "file" and report["inferred_prefix_tokens"] is None
    assert report["system_prompt_tokens"] == est.text(
        "\n".join(p["text"] for p in last["systemInstruction"]["parts"]))
    assert sum(t["tokens"] for t in report["tool_definitions"]) == tool_definitions_tokens(
        [d for g in last["tools"] for d in g["functionDeclarations"]], est)
    assert assert_key_in_no_file(agent_home.home / "ctxbench-data", GEMINI_KEY) >= 1
    assert assert_key_in_no_file(tmp_path / "imported", GEMINI_KEY) >= 3


def test_codex_recorded_exactly_when_its_provider_file_points_at_the_proxy(agent_home: AgentHome,
                                                                           tmp_path: Path) -> None:
    """Codex is configured by a file (``model_providers.<id>.base_url``): ``record --port`` gives the address to
    put there; the requests (Responses API) are recorded as for the agents configured by environment."""
    server = ResponsesServer(codex_shell_script(2))
    wire = wire_logged(server)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    codex_home = agent_home.home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        f'model = "{CODEX_MODEL}"\nmodel_provider = "local"\n[model_providers.local]\nname = "local"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "LOCAL_API_KEY"\n')
    capture = agent_home.home / "ctxbench-data" / "captures" / "codex.jsonl"
    env = agent_home.base_env() | {"CODEX_HOME": str(codex_home), "LOCAL_API_KEY": CODEX_KEY}
    try:
        run = record(agent_home, capture, [str(agent_bin("codex")), "exec", "--skip-git-repo-check",
                                           "--dangerously-bypass-approvals-and-sandbox", "run two commands"],
                     env, timeout=90, extra=["--port", str(port), "--upstream", server.base_url])
    finally:
        server.stop()
    assert "Done: 2 commands ran." in run.stdout + run.stderr
    assert_wire_equal(capture, wire, CODEX_KEY)
    main = server.calls("main")
    assert len(main) == 3
    src = read_capture(capture)
    assert src.skipped == []
    calls = [c for c in src.calls if src.prefixes[c.prefix_key].tools]
    assert len(calls) == len(main)
    for call, entry in zip(calls, main, strict=True):
        assert call.prompt_tokens == entry.usage["input_tokens"]
        assert call.cache_read_tokens == entry.usage["input_tokens_details"]["cached_tokens"]
        assert call.completion_tokens == entry.usage["output_tokens"] and call.model == CODEX_MODEL
        prefix = src.prefixes[call.prefix_key]
        assert prefix.tools == entry.body["tools"]
        first = entry.body["input"][0]
        assert first["role"] == "developer" and prefix.system.startswith(
            "\n".join(p["text"] for p in first["content"]))
    report = import_source(capture, session_dir=tmp_path / "imported").to_json()
    assert report["prefix_source"] == "file" and report["inferred_prefix_tokens"] is None
    assert assert_key_in_no_file(agent_home.home / "ctxbench-data", CODEX_KEY) >= 1


def test_opencode_recorded_exactly_when_its_config_points_at_the_proxy(agent_home: AgentHome,
                                                                       tmp_path: Path) -> None:
    """OpenCode is configured by ``opencode.json`` (``provider.<id>.options.baseURL``): Chat Completions recorded
    exactly, its system prompt and tools exact (its own database has neither: inferred)."""
    server = ChatServer(opencode_shell_script(2))
    wire = wire_logged(server)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class Proxied:  # what opencode_configure needs of a server: its base URL (the proxy's)
        base_url = f"http://127.0.0.1:{port}"

    opencode_configure(agent_home, Proxied)  # type: ignore[arg-type]
    config = agent_home.home / ".config" / "opencode" / "opencode.json"
    config.write_text(config.read_text().replace('"sk-test"', json.dumps(OPENCODE_KEY)))
    capture = agent_home.home / "ctxbench-data" / "captures" / "opencode.jsonl"
    try:
        run = record(agent_home, capture, [str(agent_bin("opencode")), *opencode_args("run two commands", False)],
                     opencode_env(agent_home), timeout=150, extra=["--port", str(port), "--upstream", server.base_url])
    finally:
        server.stop()
    assert "exchange(s) recorded" in run.stderr
    assert_wire_equal(capture, wire, OPENCODE_KEY)
    main = server.calls("main")
    assert len(main) == 3
    src = read_capture(capture)
    assert src.skipped == []
    calls = [c for c in src.calls if src.prefixes[c.prefix_key].tools]
    assert len(calls) == len(main)
    for call, entry in zip(calls, main, strict=True):
        assert call.prompt_tokens == entry.usage["prompt_tokens"]
        assert call.cache_read_tokens == entry.usage["prompt_tokens_details"]["cached_tokens"]
        assert call.completion_tokens == entry.usage["completion_tokens"]
        prefix = src.prefixes[call.prefix_key]
        assert prefix.tools == entry.body["tools"]
        assert prefix.system == "\n\n".join(chat_text(m["content"]) for m in split_chat(entry.body)[0])
    report = import_source(capture, session_dir=tmp_path / "imported").to_json()
    est = HeuristicEstimator()
    assert report["prefix_source"] == "file" and report["inferred_prefix_tokens"] is None
    assert sum(t["tokens"] for t in report["tool_definitions"]) == tool_definitions_tokens(main[-1].body["tools"], est)
    assert assert_key_in_no_file(agent_home.home / "ctxbench-data", OPENCODE_KEY) >= 1


def test_claude_code_subagent_and_compaction_recorded_over_three_runs(agent_home: AgentHome,
                                                                      tmp_path: Path) -> None:
    """Three runs recorded into one capture (each appends its own header): a Task subagent (another system prompt:
    a thread of its own, not a compaction), a manual /compact, and a turn after it (the conversation replaced:
    one compaction, found from the requests alone)."""
    server = AnthropicServer(claude_script)
    wire = wire_logged(server)
    capture = agent_home.home / "ctxbench-data" / "captures" / "runs.jsonl"
    env = {**agent_home.base_env(), "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
           "IS_SANDBOX": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}
    flags = ["--model", CLAUDE_MODEL, "--dangerously-skip-permissions", "--output-format", "json"]
    claude = str(agent_bin("claude"))
    try:
        for args in (["-p", "SUBAGENT please"], ["-p", "/compact", "--continue"], ["-p", "TOOLS1 again",
                                                                                  "--continue"]):
            record(agent_home, capture, [claude, *args, *flags], env)
    finally:
        server.stop()
    assert_wire_equal(capture, wire, ANTHROPIC_KEY)
    headers = [json.loads(x) for x in capture.read_text().splitlines() if json.loads(x)["type"] == "capture"]
    assert len(headers) == 3 and [h.get("appended", False) for h in headers] == [False, True, True]
    assert len(server.calls("summary")) == 1
    src = read_capture(capture)
    assert src.skipped == []
    generation = [e for e in server.log if not e.path.endswith("/count_tokens")]
    assert len(src.calls) == len(generation)
    by_request = {json.dumps(e.body, sort_keys=True): e for e in generation}
    sub_calls = 0
    for call in src.calls:  # every call's input, prefix and usage are its request's and its answer's
        assert call.input_messages is not None
        prefix = src.prefixes[call.prefix_key]
        entry = next(e for e in generation if prompt_of(e.usage) == call.prompt_tokens and
                     e.body.get("max_tokens") == call.max_tokens and
                     _anthropic_system_text(e.body) == prefix.system)
        assert call.completion_tokens == entry.usage["output_tokens"]
        sub_calls += "sub-task" in json.dumps(entry.body["messages"][-1:]) or any(
            "sub-task" in json.dumps(m) for m in entry.body["messages"][:1])
    assert sub_calls >= 2 and by_request
    (comp,) = src.compactions
    assert comp.summary.startswith("This session is being continued")
    assert any(m["role"] == "tool" and m["content"] == "step0" for m in src.messages[comp.message_index:])
    report = import_source(capture, session_dir=tmp_path / "imported").to_json()
    assert report["prefix_source"] == "file" and len(report["compactions"]) == 1


def _anthropic_system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, str):
        return system
    return "\n\n".join(b["text"] for b in system or [] if isinstance(b, dict) and "text" in b)


def test_gemini_cli_chat_compression_found_from_the_requests(agent_home: AgentHome, tmp_path: Path) -> None:
    """Two Gemini CLI runs (the second resumed) recorded into one capture; the second turn's prompt is reported
    above half the window, so Gemini CLI compresses the chat: two summarisation requests without tools (calls of
    their own), then the main thread goes on with a replaced history — one compaction, placed at the first
    request after it, with the provider's figures before and after."""
    server = GeminiServer(shell_script(2, big_at=4))
    wire = wire_logged(server)
    capture = agent_home.home / "ctxbench-data" / "captures" / "gemini.jsonl"
    gemini_dir = agent_home.home / ".gemini"
    gemini_dir.mkdir()
    (gemini_dir / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    (gemini_dir / "trustedFolders.json").write_text(json.dumps({str(agent_home.work): "TRUST_FOLDER"}))
    env = agent_home.base_env() | {"GEMINI_API_KEY": GEMINI_KEY, "GOOGLE_GEMINI_BASE_URL": server.base_url,
                                   "NODE_OPTIONS": f"--import={(HERE / 'shifted_clock.mjs').as_uri()}"}
    gemini = [str(agent_bin("gemini")), "--approval-mode", "yolo", "-m", GEMINI_MODEL]
    try:
        record(agent_home, capture, [*gemini, "-p", "Run two commands"], env | {"CTXBENCH_TEST_CLOCK": str(CLOCK)},
               timeout=90)
        record(agent_home, capture, [*gemini, "-p", "Run two more", "--resume", "latest"],
               env | {"CTXBENCH_TEST_CLOCK": str(CLOCK + 20_000)}, timeout=90)
    finally:
        server.stop()
    assert_wire_equal(capture, wire, GEMINI_KEY)
    main, summaries = server.calls("main"), server.calls("summary")
    assert len(summaries) == 2, [(e.kind, e.path) for e in server.calls()]
    src = read_capture(capture)
    assert src.skipped == []
    mains = [c for c in src.calls if src.prefixes[c.prefix_key].tools]
    assert [c.prompt_tokens for c in mains] == [e.usage["promptTokenCount"] for e in main]
    assert len(src.calls) == len(main) + len(summaries) + len(server.calls("side"))
    at = sum(1 for e in server.calls() if e.kind == "main" and e.ts < summaries[0].ts)
    (comp,) = src.compactions
    assert comp.tokens_before == main[at - 1].usage["promptTokenCount"]
    assert comp.tokens_after == main[at].usage["promptTokenCount"]
    assert SUMMARY_TEXT in comp.summary
    live = src.messages[src.live_start:]
    assert [m["content"] for m in live if m["role"] == "user" and m.get("content")][-1] == "Run two more"
    report = import_source(capture, session_dir=tmp_path / "imported").to_json()
    assert len(report["compactions"]) == 1 and report["prefix_source"] == "file"
