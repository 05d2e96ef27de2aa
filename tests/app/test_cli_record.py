"""``ctxbench record -- COMMAND`` and ``ctxbench proxy`` as subprocesses (app/cli_record.py): the agent's base
URLs point at the proxy, its requests reach the upstream its own environment named, its exit status is
``record``'s, and the capture lands in the data folder, readable by the user only.

Runs in the GUI pytest process (``-p no:asyncio``): the upstream is a threaded http.server of this process."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from app.cli_record import child_env, upstreams_from
from tests.conftest import REPO

CHILD = r"""
import json, os, sys, urllib.request
def post(url, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())
a = post(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", {"model": "c", "max_tokens": 5, "tools": [{"name": "t"}],
         "messages": [{"role": "user", "content": "hi"}]}, {"x-api-key": "sk-ant-SECRET-SECRET"})
o = post(os.environ["OPENAI_BASE_URL"] + "/chat/completions", {"model": "g", "messages": [
         {"role": "user", "content": "hi"}]}, {"Authorization": "Bearer sk-SECRET-SECRET"})
print(json.dumps([a, o, os.environ["ANTHROPIC_BASE_URL"], os.environ["NO_PROXY"]]))
sys.exit(3)
"""


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[str, dict[str, str]]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append((self.path, dict(self.headers.items())))
        if self.path.endswith("/v1/messages"):
            body = {"id": "msg_1", "content": [{"type": "text", "text": "hello"}],
                    "usage": {"input_tokens": 11, "output_tokens": 1}}
        else:
            body = {"id": "c1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "yo"}}],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 1}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def upstream() -> Iterator[str]:
    Upstream.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def ctxbench(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=REPO, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_record_runs_the_agent_through_the_proxy(upstream: str, tmp_path: Path) -> None:
    env = {"ANTHROPIC_BASE_URL": upstream, "OPENAI_BASE_URL": upstream + "/v1", "NO_PROXY": "example.org"}
    proc = ctxbench("record", "--", sys.executable, "-c", CHILD, env=env)
    assert proc.returncode == 3, proc.stderr  # the agent's own status
    anthropic, openai, base, no_proxy = json.loads(proc.stdout)
    assert anthropic["content"][0]["text"] == "hello" and openai["choices"][0]["message"]["content"] == "yo"
    assert base.startswith("http://127.0.0.1:") and base != upstream
    assert no_proxy.split(",")[0] == "example.org" and "127.0.0.1" in no_proxy.split(",")
    assert [path for path, _ in Upstream.seen] == ["/v1/messages", "/v1/chat/completions"]
    assert {k.lower(): v for k, v in Upstream.seen[0][1].items()}["x-api-key"] == "sk-ant-SECRET-SECRET"  # as sent
    (capture,) = (Path(os.environ["CTXBENCH_DATA_DIR"]) / "captures").glob("capture-*.jsonl")
    assert stat.S_IMODE(capture.stat().st_mode) == 0o600
    assert f"2 exchange(s) recorded in {capture}" in proc.stderr
    text = capture.read_text()
    assert "SECRET" not in text
    header, *exchanges = [json.loads(x) for x in text.splitlines()]
    assert header["agent"] == Path(sys.executable).name and header["mode"] == "record"
    assert [x["response"]["usage"] for x in exchanges] == [{"input_tokens": 11, "output_tokens": 1},
                                                           {"prompt_tokens": 9, "completion_tokens": 1}]
    follow = subprocess.Popen([sys.executable, "-m", "app.cli", "follow", str(capture)], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:  # a capture is followed like an agent's file: its calls, then what the proxy appends
        assert follow.stdout is not None
        calls = [json.loads(follow.stdout.readline()) for _ in range(2)]
    finally:
        follow.send_signal(signal.SIGINT)
        follow.communicate(timeout=30)
    assert [(c["type"], c["provider_prompt_tokens"]) for c in calls] == [("call", 11), ("call", 9)]
    imported = ctxbench("import", str(capture), "--session", str(tmp_path / "s"), "--no-model-info", env={})
    assert imported.returncode == 0, imported.stderr
    report = json.loads(imported.stdout)
    assert report["format"] == "proxy-capture" and report["calls"] == 2 and report["prefix_source"] == "file"


def test_record_needs_a_command_and_says_when_it_cannot_run_it(tmp_path: Path) -> None:
    none = ctxbench("record", env={})
    assert none.returncode == 2 and "record needs the agent to run" in none.stderr
    missing = ctxbench("record", "--", str(tmp_path / "no-such-agent"), env={})
    assert missing.returncode == 1 and "cannot run" in missing.stderr and "no-such-agent" in missing.stderr


def test_proxy_serves_until_sigterm(upstream: str, tmp_path: Path) -> None:
    cap = tmp_path / "p.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "proxy", "--port", "0", "--upstream", upstream,
                             "--capture", str(cap)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        assert started["type"] == "proxy" and started["capture"] == str(cap)
        assert started["env"]["OPENAI_BASE_URL"] == started["url"] + "/v1"
        import urllib.request

        req = urllib.request.Request(started["url"] + "/v1/chat/completions", data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert json.loads(resp.read())["id"] == "c1"
        line = json.loads(proc.stdout.readline())
        assert line["type"] == "exchange" and line["status"] == 200 and line["family"] == "openai-chat"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    stopped = json.loads(out.splitlines()[-1])
    assert stopped == {"type": "stopped", "exchanges": 1, "capture": str(cap), "parts": [str(cap)], "problems": []}


def test_the_agent_env_points_at_the_proxy_and_its_own_urls_become_the_upstreams() -> None:
    env = child_env({"PATH": "/bin", "OPENAI_BASE_URL": "https://corp.example/v1"}, "http://127.0.0.1:9")
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9" and env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9"
    assert env["OPENAI_BASE_URL"] == env["OPENAI_API_BASE"] == "http://127.0.0.1:9/v1" and env["PATH"] == "/bin"
    ups = upstreams_from({"OPENAI_BASE_URL": "https://corp.example/v1"}, None)
    assert ups.url_for("openai-responses", "/v1/responses") == "https://corp.example/v1/responses"
    assert ups.url_for("anthropic", "/v1/messages") == "https://api.anthropic.com/v1/messages"
    assert upstreams_from({}, "http://h:1").url_for("gemini", "/v1beta/models/m:x") == "http://h:1/v1beta/models/m:x"
