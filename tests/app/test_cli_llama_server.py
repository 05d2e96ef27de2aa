"""``ctxbench run`` against a server nobody here wrote: llama-cpp-python's own OpenAI-compatible
server (``python -m llama_cpp.server``) serving the bundled SmolLM2 GGUF, through real litellm HTTP.

That server answers an overflowing *streamed* request with HTTP 200 and a stream that closes with
no chunk (only the same request unstreamed gets the 400 ``context_length_exceeded``). A turn must
never end ``ok`` with an empty answer, and no empty answer may ever be stored.

Runs in the GUI pytest process (like test_cli.py): the CLI is a subprocess, the server another.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.context.conversation import Session
from engine.llm import local_model
from engine.model import messages as m
from tests.app.test_cli import ctxbench, events

N_CTX = 2048
ALIAS = "smollm2-server"
MODEL = f"openai/{ALIAS}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 with the bundled GGUF and a small ``n_ctx``."""

    def __init__(self, log: Path, n_ctx: int = N_CTX) -> None:
        self.port = _free_port()
        self.log_path = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(local_model.model_path()),
             "--model_alias", ALIAS, "--n_ctx", str(n_ctx), "--n_threads", "2", "--seed", "0",
             "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._wait_ready()

    def _wait_ready(self, timeout: float = 90.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"llama_cpp.server exited: {self.log_path.read_text(errors='replace')}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as resp:
                    if ALIAS in resp.read().decode():
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("llama_cpp.server did not start in time")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is a test dependency")
    server = LlamaServer(tmp_path_factory.mktemp("llama-server") / "server.log")
    yield server
    server.stop()


def long_prompt(turn: int) -> str:
    """About 1,000 tokens of digits and short words (what the estimate undershot most)."""
    words = " ".join(f"{n} is {'odd' if n % 2 else 'even'}" for n in range(turn * 1000, turn * 1000 + 160))
    return f"Turn {turn}. Read this list, then say in one short sentence what it is: {words}"


def run_turn(server: LlamaServer, session: Path, prompt: str, window: int) -> list[dict[str, Any]]:
    proc = ctxbench(
        "run", "--session", str(session), "--model", MODEL, "--api-base", server.base_url,
        "--context-window", str(window), "--max-tokens", "48", prompt,
        env={"OPENAI_API_KEY": "sk-none"}, timeout=240,
    )
    out = events(proc)
    finished = [e for e in out if e["type"] == "turn_finished"]
    assert len(finished) == 1, proc.stderr
    assert proc.returncode == (0 if finished[0]["ok"] else 1), proc.stderr
    return out


def assert_no_empty_answer(session_dir: Path) -> None:
    session = Session.load(session_dir)
    try:
        for msg in session.messages:
            if msg["role"] == "assistant":
                assert m.content_text(msg.get("content")).strip() or msg.get("tool_calls"), msg
    finally:
        session.close()


def test_streamed_text_and_usage_arrive(llama_server: LlamaServer, tmp_path: Path) -> None:
    out = run_turn(llama_server, tmp_path / "s", "What is the capital of France? One word.", N_CTX)
    deltas = [e for e in out if e["type"] == "text_delta"]
    done = next(e for e in out if e["type"] == "turn_finished")
    assert done["ok"] and done["final_text"].strip()
    assert len(deltas) > 1  # streamed, not one block
    assert "".join(d["text"] for d in deltas).strip() == done["final_text"].strip()
    context = [e for e in out if e["type"] == "context" and e.get("provider_prompt_tokens")]
    assert context and context[-1]["provider_prompt_tokens"] > 100  # llama.cpp's own count arrived


@pytest.mark.parametrize("window", [100_000, N_CTX], ids=["window-unknown-to-user", "right-window"])
def test_long_turns_never_end_ok_with_an_empty_answer(llama_server: LlamaServer, tmp_path: Path,
                                                      window: int) -> None:
    """Four ~1,000-token turns into a 2,048-token server: the overflow is noticed (reactive
    compaction, then a real answer, or a clear error), never stored as an empty answer."""
    session = tmp_path / "s"
    outcomes = []
    for turn in range(4):
        out = run_turn(llama_server, session, long_prompt(turn), window)
        done = next(e for e in out if e["type"] == "turn_finished")
        errors = [e for e in out if e["type"] == "error" and not e.get("retrying")]
        if done["ok"]:
            assert done["final_text"].strip(), out
        else:
            assert errors and errors[-1]["message"].strip(), out  # a clear error names the cause
        outcomes.append((done["ok"], [c["trigger"] for c in out if c["type"] == "compaction"],
                         [e["kind"] for e in errors]))
        assert_no_empty_answer(session)
    ok_turns = [o for o in outcomes if o[0]]
    assert len(ok_turns) >= 3, outcomes
    # four ~1,000-token turns cannot all fit 2,048 tokens: something was compacted
    assert any(o[1] for o in outcomes), outcomes
    if window == 100_000:  # told a window far too large, only the provider's refusal reveals it
        assert any("reactive" in o[1] for o in outcomes), outcomes
    print(json.dumps({"window": window, "outcomes": outcomes}), file=sys.stderr)


def test_the_server_really_drops_an_overflowing_stream(llama_server: LlamaServer) -> None:
    """The premise of this file, checked against the installed server: streamed overflow → HTTP 200
    with no chunk; unstreamed → 400 naming the context length."""
    body = {"model": ALIAS, "max_tokens": 8,
            "messages": [{"role": "user", "content": "1 2 3 " * 1500}]}

    def post(payload: dict[str, Any]) -> tuple[int, str]:
        req = urllib.request.Request(llama_server.base_url + "/chat/completions", method="POST",
                                     data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode(errors="replace")

    status, text = post({**body, "stream": True})
    assert status == 200 and '"content"' not in text and "finish_reason" not in text
    status, text = post(body)
    assert status == 400 and "context" in text.lower()
