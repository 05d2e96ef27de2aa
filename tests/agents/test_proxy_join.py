"""A real Gemini CLI and OpenCode session joined with the capture ``ctxbench record`` wrote of it
(:mod:`engine.sources.join`): opened from the agent's own file (which keeps neither the system prompt nor the tool
definitions: inferred), the calls are found in the capture by their usage and time, and the view's system prompt
and tool tokens are the request's — exact, not inferred. Gemini CLI runs on a shifted clock (the test's), so its
times are months from the proxy's: the pairs still agree with each other, which is what is checked."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from engine.capture.files import captures_dir
from engine.context.tokens import HeuristicEstimator
from engine.ingest import import_source, tool_definitions_tokens
from engine.sources.gemini_cli import read_gemini_cli
from engine.sources.join import PREFIX, CaptureJoin, join_captures
from engine.sources.opencode import read_opencode
from engine.store.config import Settings
from engine.workbench.source_views import LiveSource, new_prefix
from tests.agents.conftest import HERE, AgentHome, agent_bin
from tests.agents.scripted_chat import ChatServer, chat_text, split_chat
from tests.agents.scripted_gemini import GeminiServer
from tests.agents.test_gemini_cli import CLOCK, shell_script
from tests.agents.test_gemini_cli import MODEL as GEMINI_MODEL
from tests.agents.test_opencode import args_of as opencode_args
from tests.agents.test_opencode import configure as opencode_configure
from tests.agents.test_opencode import env_of as opencode_env
from tests.agents.test_opencode import the_db
from tests.agents.test_proxy_agents import GEMINI_KEY, record, wire_logged


def test_a_recorded_gemini_cli_session_opens_with_its_prefix_exact(agent_home: AgentHome, tmp_path: Path) -> None:
    server = GeminiServer(shell_script(2))
    wire_logged(server)  # started
    capture = captures_dir() / "capture-20260105T100000Z-gemini01.jsonl"
    gemini_dir = agent_home.home / ".gemini"
    gemini_dir.mkdir()
    (gemini_dir / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    (gemini_dir / "trustedFolders.json").write_text(json.dumps({str(agent_home.work): "TRUST_FOLDER"}))
    env = agent_home.base_env() | {"GEMINI_API_KEY": GEMINI_KEY, "GOOGLE_GEMINI_BASE_URL": server.base_url,
                                   "NODE_OPTIONS": f"--import={(HERE / 'shifted_clock.mjs').as_uri()}",
                                   "CTXBENCH_TEST_CLOCK": str(CLOCK)}
    try:
        record(agent_home, capture, [str(agent_bin("gemini")), "-p", "run two commands", "--approval-mode", "yolo",
                                     "-m", GEMINI_MODEL], env, timeout=90)
    finally:
        server.stop()
    main = server.calls("main")
    assert len(main) == 3
    (own,) = sorted((agent_home.home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))
    last = main[-1].body
    system = "\n".join(p["text"] for p in last["systemInstruction"]["parts"])
    tools = [d for g in last["tools"] for d in g["functionDeclarations"]]

    alone = read_gemini_cli(own)
    assert alone.prefixes == {} and alone.prefix_label  # its own file: the prefix is inferred
    assert join_captures(alone, tmp_path / "no-captures").matched == 0 and alone.prefixes == {}

    src = read_gemini_cli(own)
    result = join_captures(src)
    assert result.capture == capture and result.matched == result.reported == 3
    assert all(c.prefix_key.startswith(PREFIX) for c in src.calls)
    prefix = src.prefixes[src.calls[-1].prefix_key]
    assert prefix.system == system and prefix.tools == tools
    assert src.calls[-1].max_tokens == (last.get("generationConfig") or {}).get("maxOutputTokens")

    # opened in the window (a followed view): the regions are the request's, not inferred
    live = LiveSource(own, "gemini-cli", new_prefix(), Settings(), None)
    live.open(tmp_path / "view")
    report = live.importer.report.to_json()
    est = HeuristicEstimator()
    assert report["prefix_source"] == "file" and report["inferred_prefix_tokens"] is None
    assert report["system_prompt_tokens"] == est.text(system)
    assert sum(t["tokens"] for t in report["tool_definitions"]) == tool_definitions_tokens(tools, est)
    assert any("exact from the capture" in n for n in report["notes"])
    imported = import_source(own, session_dir=tmp_path / "imported").to_json()  # ctxbench import joins as well
    assert imported["prefix_source"] == "file" and imported["system_prompt_tokens"] == est.text(system)

    # followed while it grows: the calls that come are joined as they come
    lines = own.read_bytes().splitlines(keepends=True)
    first_call = next(i for i, line in enumerate(lines) if b'"tokens"' in line and b'"gemini"' in line)
    growing = tmp_path / "growing" / own.name
    growing.parent.mkdir()
    growing.write_bytes(b"".join(lines[:first_call + 1]))
    followed = LiveSource(growing, "gemini-cli", new_prefix(), Settings(), None)
    followed.open(tmp_path / "view2")
    assert len(followed.session.calls) == 1 and followed.session.calls[0].prefix_key.startswith(PREFIX)
    with growing.open("ab") as fh:
        fh.write(b"".join(lines[first_call + 1:]))
    assert followed.poll() is not None
    assert len(followed.session.calls) == 3 and all(c.prefix_key.startswith(PREFIX) for c in followed.session.calls)


def test_a_recorded_opencode_session_is_joined_with_its_capture(agent_home: AgentHome, tmp_path: Path) -> None:
    from tests.agents.test_opencode import shell_script as opencode_shell_script
    from tests.agents.test_proxy_agents import OPENCODE_KEY

    server = ChatServer(opencode_shell_script(2))
    wire_logged(server)  # started
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class Proxied:  # what opencode_configure needs of a server: its base URL (the proxy's)
        base_url = f"http://127.0.0.1:{port}"

    opencode_configure(agent_home, Proxied)  # type: ignore[arg-type]
    config = agent_home.home / ".config" / "opencode" / "opencode.json"
    config.write_text(config.read_text().replace('"sk-test"', json.dumps(OPENCODE_KEY)))
    folder = tmp_path / "captures"
    capture = folder / "capture-20260105T100000Z-opencode.jsonl"
    try:
        record(agent_home, capture, [str(agent_bin("opencode")), *opencode_args("run two commands", False)],
               opencode_env(agent_home), timeout=150, extra=["--port", str(port), "--upstream", server.base_url])
    finally:
        server.stop()
    main = server.calls("main")
    src = read_opencode(the_db(agent_home))
    assert src.prefixes == {}
    result = CaptureJoin(folder).apply(src)
    assert result.capture == capture and result.matched == result.reported == len(main) == 3
    prefix = src.prefixes[src.calls[-1].prefix_key]
    assert prefix.tools == main[-1].body["tools"]
    assert prefix.system == "\n\n".join(chat_text(m["content"]) for m in split_chat(main[-1].body)[0])
