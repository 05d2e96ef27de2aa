"""The recording proxy run for the window (:mod:`engine.workbench.recording`): on a thread of its own (the caller's loop
never runs it), each exchange told as a row, what to set shown, stopped with its capture closed; a port that is
taken or an upstream that is no address said."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.capture.agents import setup_lines
from engine.capture.proxy import ProxyError
from engine.sources.capture import read_capture
from engine.workbench.recording import ProxyService
from tests.engine.capture.test_proxy import Upstream


@pytest.mark.asyncio
async def test_the_proxy_runs_on_its_own_thread_and_tells_each_exchange(tmp_path: Path) -> None:
    upstream = await Upstream().start()
    rows: list[tuple[dict[str, Any], str]] = []
    service = ProxyService(on_exchange=lambda row: rows.append((row, threading.current_thread().name)))
    capture = tmp_path / "captures" / "capture-x.jsonl"
    try:
        started = await asyncio.to_thread(service.start, 0, upstream.url, capture=capture)
        assert service.running and started.capture == capture
        assert started.url.startswith("http://127.0.0.1:") and started.upstreams == {"all": upstream.url}
        assert f"export ANTHROPIC_BASE_URL={started.url}" in started.setup
        body = {"model": "claude-x", "max_tokens": 64, "stream": True, "system": "s", "tools": [{"name": "Bash"}],
                "messages": [{"role": "user", "content": "hi"}]}
        async with aiohttp.ClientSession() as client, client.post(
                started.url + "/v1/messages", data=json.dumps(body),
                headers={"x-api-key": "sk-planted-0001", "content-type": "application/json"}) as resp:
            assert resp.status == 200
            await resp.read()
        for _ in range(100):
            if rows:
                break
            await asyncio.sleep(0.02)
    finally:
        stopped = await asyncio.to_thread(service.stop)
        await upstream.stop()
    assert not service.running
    assert stopped is not None and stopped.exchanges == 1 and stopped.capture == capture
    ((row, thread),) = rows
    assert thread != threading.current_thread().name  # told from the proxy's thread, not the caller's
    assert (row["seq"], row["method"], row["path"], row["status"], row["outcome"]) == (
        1, "POST", "/v1/messages", 200, "complete")
    assert row["usage"]["input_tokens"] == 10 and (row["prompt"], row["completion"]) == (100, 7)
    session = read_capture(capture)
    assert [c.request_id for c in session.calls] == ["msg_1"]
    assert "sk-planted-0001" not in capture.read_text()
    assert service.stop() is None  # stopped already


def test_a_port_taken_and_a_bad_upstream_are_said(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        service = ProxyService()
        with pytest.raises(ProxyError, match=f"cannot listen on 127.0.0.1:{port}"):
            service.start(port, capture=tmp_path / "c.jsonl")
        assert not service.running
    with pytest.raises(ProxyError, match="http:// or https://"):
        ProxyService().start(0, "localhost:9", capture=tmp_path / "d.jsonl")


def test_the_setup_lines_cover_every_api_and_the_file_configured_agents() -> None:
    lines = setup_lines("http://127.0.0.1:8788")
    assert "export OPENAI_BASE_URL=http://127.0.0.1:8788/v1" in lines
    assert "export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8788" in lines
    assert any(line.startswith("# Codex:") and 'base_url = "http://127.0.0.1:8788/v1"' in line for line in lines)
    assert any(line.startswith("# OpenCode:") and '"baseURL": "http://127.0.0.1:8788/v1"' in line for line in lines)
