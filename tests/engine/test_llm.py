"""engine.llm.client: delta assembly, error classification, retries and cancellation.

Two kinds of tests:
- a scripted litellm ``CustomLLM`` provider (no network) for assembly and classification logic;
- end-to-end tests of the real litellm HTTP path (openai provider, aiohttp, SSE) against the fake
  OpenAI-compatible server in ``tests/fakeserver.py`` on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.llm import client as llm
from engine.llm.client import LLMConfig, StreamAssembler
from engine.llm.errors import Completion, LLMError, classify_error
from engine.model.messages import validate_message
from tests import fakeserver as fs

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_dir",
            "description": "List a folder",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
]
USER = [{"role": "user", "content": "hi"}]


def cfg(server: fs.FakeLLMServer, **kw: Any) -> LLMConfig:
    return LLMConfig(model="openai/fake-model", api_base=server.base_url, api_key="sk-test", **kw)


# ---------------------------------------------------------------------- assembly (pure)


def delta_chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None
                ) -> dict[str, Any]:
    out: dict[str, Any] = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        out["usage"] = usage
    return out


def test_assembler_text_reasoning_usage() -> None:
    acc = StreamAssembler()
    acc.reasoning.append("think ")
    acc.text.extend(["Hel", "lo"])
    acc.add_usage({"prompt_tokens": 10, "completion_tokens": 3})
    acc.finish_reason = "stop"
    done = acc.completion()
    assert done.message["content"] == "Hello"
    assert done.message["reasoning_content"] == "think "
    assert done.usage == llm.Usage(10, 3, 13)
    assert done.message["usage"] == {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    assert not done.interrupted and "interrupted" not in done.message
    validate_message(done.message)


def test_assembler_tool_calls_by_index_split_args_missing_and_duplicate_ids() -> None:
    acc = StreamAssembler()
    acc.add_tool_delta({"index": 0, "id": "call_a", "function": {"name": "read_file", "arguments": ""}})
    acc.add_tool_delta({"index": 1, "function": {"name": "list_dir", "arguments": '{"pa'}})  # no id
    acc.add_tool_delta({"index": 0, "function": {"arguments": '{"path": '}})
    acc.add_tool_delta({"index": 1, "function": {"arguments": 'th": "."}'}})
    acc.add_tool_delta({"index": 0, "function": {"arguments": '"a.txt"}'}})
    acc.add_tool_delta({"index": 2, "id": "call_a", "function": {"name": "read_file", "arguments": "{}"}})
    msg = acc.message()
    calls = msg["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["read_file", "list_dir", "read_file"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"path": "a.txt"}, {"path": "."}, {}]
    ids = [c["id"] for c in calls]
    assert ids[0] == "call_a" and ids[1].startswith("call_") and len(set(ids)) == 3
    assert msg["content"] is None
    validate_message(msg)


def test_assembler_without_index_and_repeated_name() -> None:
    acc = StreamAssembler()
    acc.add_tool_delta({"id": "x1", "function": {"name": "read_file", "arguments": '{"path"'}})
    acc.add_tool_delta({"function": {"name": "read_file", "arguments": ': "b"}'}})
    acc.add_tool_delta({"id": "x2", "function": {"name": "list_dir", "arguments": "{}"}})
    calls = acc.calls()
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("x1", "read_file", '{"path": "b"}'),
        ("x2", "list_dir", "{}"),
    ]


def test_assembler_interrupted_keeps_only_complete_calls() -> None:
    acc = StreamAssembler()
    acc.text.append("Let me look")
    acc.add_tool_delta({"index": 0, "id": "c0", "function": {"name": "read_file", "arguments": '{"path": "a"}'}})
    acc.add_tool_delta({"index": 1, "id": "c1", "function": {"name": "read_file", "arguments": '{"pa'}})
    part = acc.completion(interrupted=True)
    assert part.interrupted and part.message["interrupted"] is True
    assert part.message["content"] == "Let me look"
    assert [c["id"] for c in part.message["tool_calls"]] == ["c0"]
    results = llm.interrupted_tool_results(part.message)
    assert [(r["role"], r["tool_call_id"], r["name"]) for r in results] == [("tool", "c0", "read_file")]
    assert "interrupted" in results[0]["content"]


# ---------------------------------------------------------------------- classification


def _lit() -> Any:
    return llm._lib()


def test_classify_context_window_variants() -> None:
    lit = _lit()
    cases = [
        lit.ContextWindowExceededError(message="too big", model="m", llm_provider="openai"),
        lit.BadRequestError(message="prompt is too long: 210000 tokens > 200000 maximum", model="m",
                            llm_provider="anthropic"),
        lit.BadRequestError(message="This model's maximum context length is 8192 tokens", model="m",
                            llm_provider="openai"),
        lit.BadRequestError(message='{"code": "context_length_exceeded"}', model="m", llm_provider="openai"),
        lit.BadRequestError(message="Too many tokens in the request", model="m", llm_provider="x"),
        ValueError("Requested tokens (9000) exceed context window of 8192"),
    ]
    for exc in cases:
        err = classify_error(exc)
        assert err.kind == "context_window", (exc, err)
        assert "context window" in err.message


def test_classify_kinds() -> None:
    lit = _lit()
    import httpx

    resp429 = httpx.Response(429, headers={"retry-after": "7"}, request=httpx.Request("POST", "http://x"))
    cases = {
        "transient": [
            lit.RateLimitError(message="slow down", model="m", llm_provider="openai", response=resp429),
            lit.APIConnectionError(message="refused", model="m", llm_provider="openai"),
            lit.Timeout(message="timed out", model="m", llm_provider="openai"),
            lit.InternalServerError(message="boom", model="m", llm_provider="openai"),
            lit.ServiceUnavailableError(message="busy", model="m", llm_provider="openai"),
            ConnectionResetError("reset"),
        ],
        "auth": [
            lit.AuthenticationError(message="bad key", model="m", llm_provider="openai"),
            lit.PermissionDeniedError(message="no", model="m", llm_provider="openai",
                                      response=httpx.Response(403, request=httpx.Request("POST", "http://x"))),
        ],
        "bad_request": [
            lit.BadRequestError(message="invalid messages", model="m", llm_provider="openai"),
            lit.NotFoundError(message="no such model", model="m", llm_provider="openai"),
        ],
        "other": [RuntimeError("weird")],
    }
    for kind, excs in cases.items():
        for exc in excs:
            assert classify_error(exc).kind == kind, (kind, exc)
    assert classify_error(cases["transient"][0]).retry_after == 7.0


def test_classify_message_is_one_clean_scrubbed_line() -> None:
    lit = _lit()
    exc = lit.AuthenticationError(
        message="AuthenticationError: OpenAIException - Incorrect API key provided: sk-live-abcdef1234567890.\n"
        "You can find your API key at https://platform.openai.com/account/api-keys.",
        model="gpt-4o", llm_provider="openai",
    )
    err = classify_error(exc, "openai/gpt-4o")
    assert err.kind == "auth"
    assert "\n" not in err.message
    assert "sk-live-abcdef" not in err.message
    assert err.message.startswith("authentication failed; check the API key (openai/gpt-4o): Incorrect API key")
    assert "litellm." not in err.message and "OpenAIException" not in err.message


def test_retry_delay_bounds() -> None:
    assert llm.retry_delay(1, 3.0) == 3.0
    assert llm.retry_delay(1, 1e6) == llm.RETRY_AFTER_CAP
    for attempt in range(1, 12):
        d = llm.retry_delay(attempt, None)
        assert 0 < d <= llm.RETRY_MAX_DELAY * 1.2


def test_llm_error_rejects_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown LLMError kind"):
        LLMError("weird", "x")


# ---------------------------------------------------------------------- scripted CustomLLM (no network)


class Scripted:
    """A litellm CustomLLM provider ``scripted/*`` that streams queued GenericStreamingChunk lists."""

    def __init__(self) -> None:
        lit = _lit()
        self.scripts: list[list[dict[str, Any]] | BaseException] = []
        self.calls: list[dict[str, Any]] = []
        outer = self

        class Provider(lit.CustomLLM):  # type: ignore[misc]
            async def astreaming(self, *args: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override]
                outer.calls.append(kwargs)
                script = outer.scripts.pop(0)
                if isinstance(script, BaseException):
                    raise script
                for item in script:
                    if isinstance(item, BaseException):
                        raise item
                    yield item

        self.provider = Provider()
        lit.custom_provider_map = [
            *[e for e in lit.custom_provider_map if e["provider"] != "scripted"],
            {"provider": "scripted", "custom_handler": self.provider},
        ]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()


def gchunk(text: str = "", tool: dict[str, Any] | None = None, finish: str = "", usage: Any = None
           ) -> dict[str, Any]:
    return {"text": text, "tool_use": tool, "is_finished": bool(finish), "finish_reason": finish,
            "usage": usage, "index": 0}


@pytest.fixture
def scripted() -> Scripted:
    return Scripted()


@pytest.mark.asyncio
async def test_scripted_provider_tool_calls_and_usage(scripted: Scripted) -> None:
    scripted.scripts.append([
        gchunk("Looking"),
        gchunk(tool={"id": None, "type": "function", "index": 0,
                     "function": {"name": "read_file", "arguments": '{"path":'}}),
        gchunk(tool={"id": None, "type": "function", "index": 0, "function": {"name": None, "arguments": ' "x"}'}}),
        gchunk(finish="tool_calls", usage={"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}),
    ])
    seen: list[tuple[int, dict[str, Any]]] = []
    texts: list[str] = []

    async def on_tool(i: int, call: dict[str, Any]) -> None:
        seen.append((i, call))

    done = await llm.stream_chat(LLMConfig(model="scripted/m"), USER, TOOLS, on_text=texts.append,
                                 on_tool_call=on_tool)
    assert texts == ["Looking"]
    assert done.message["content"] == "Looking"
    (call,) = done.message["tool_calls"]
    assert call["function"] == {"name": "read_file", "arguments": '{"path": "x"}'}
    assert call["id"].startswith("call_")
    assert done.finish_reason == "tool_calls"
    assert done.usage == llm.Usage(5, 4, 9)
    assert seen[-1][0] == 0 and seen[-1][1]["function"]["arguments"] == '{"path": "x"}'
    sent = scripted.calls[0]["optional_params"]
    assert sent["stream_options"] == {"include_usage": True} and sent["tools"] == TOOLS
    assert sent["max_tokens"] == 1024


@pytest.mark.asyncio
async def test_scripted_provider_context_error(scripted: Scripted) -> None:
    lit = _lit()
    scripted.scripts.append(lit.ContextWindowExceededError(message="prompt is too long", model="m",
                                                           llm_provider="scripted"))
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(LLMConfig(model="scripted/m"), USER)
    assert info.value.kind == "context_window" and info.value.attempts == 1


@pytest.mark.asyncio
async def test_scripted_provider_transient_then_success(scripted: Scripted, fast_retries: None) -> None:
    lit = _lit()
    scripted.scripts.append(lit.ServiceUnavailableError(message="overloaded", model="m", llm_provider="s"))
    scripted.scripts.append([gchunk("fine"), gchunk(finish="stop")])
    retries: list[tuple[int, float, str]] = []
    done = await llm.stream_chat(LLMConfig(model="scripted/m"), USER,
                                 on_retry=lambda a, d, e: retries.append((a, d, e.kind)))
    assert done.message["content"] == "fine"
    assert [(a, k) for a, _, k in retries] == [(1, "transient")]


# ---------------------------------------------------------------------- real HTTP path: fake server


@pytest.mark.asyncio
async def test_http_text_reasoning_usage_and_request(server: fs.FakeLLMServer) -> None:
    server.queue(fs.text_reply("Hello there", reasoning_text="Let me think", chunks=4,
                               usage={"prompt_tokens": 123, "completion_tokens": 7}))
    texts: list[str] = []
    reasons: list[str] = []
    done = await llm.stream_chat(cfg(server, max_tokens=77), USER, TOOLS, on_text=texts.append,
                                 on_reasoning=reasons.append)
    assert done.message["content"] == "Hello there" and "".join(texts) == "Hello there" and len(texts) > 1
    assert done.message["reasoning_content"] == "Let me think" == "".join(reasons)
    assert done.usage == llm.Usage(123, 7, 130)
    assert done.finish_reason == "stop" and not done.interrupted
    (req,) = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    body = req.body
    assert body is not None
    assert body["model"] == "fake-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 77
    assert [t["function"]["name"] for t in body["tools"]] == ["read_file", "list_dir"]
    assert body["messages"] == USER


@pytest.mark.asyncio
async def test_http_metadata_never_sent(server: fs.FakeLLMServer) -> None:
    server.queue(fs.text_reply("ok"))
    history = [{"role": "user", "content": "hi", "id": "abc", "ts": "2025-01-01T00:00:00Z", "pinned": True}]
    await llm.stream_chat(cfg(server), history)
    assert server.requests[0].body["messages"] == [{"role": "user", "content": "hi"}]  # type: ignore[index]


@pytest.mark.asyncio
async def test_http_tool_calls_split_over_chunks(server: fs.FakeLLMServer) -> None:
    server.queue(fs.stream(
        fs.text("Checking."),
        fs.tool_call_delta(0, id="call_one", name="read_file"),
        fs.tool_call_delta(1, name="list_dir"),  # no id from this server
        fs.tool_call_delta(0, arguments='{"pa'),
        fs.tool_call_delta(1, arguments='{"path": '),
        fs.tool_call_delta(0, arguments='th": "src/a.py"}'),
        fs.tool_call_delta(1, arguments='"."}'),
        finish_reason="tool_calls",
    ))
    done = await llm.stream_chat(cfg(server), USER, TOOLS)
    calls = done.message["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["read_file", "list_dir"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "src/a.py"}
    assert json.loads(calls[1]["function"]["arguments"]) == {"path": "."}
    assert calls[0]["id"] == "call_one" and calls[1]["id"].startswith("call_") and calls[1]["id"] != "call_one"
    assert done.message["content"] == "Checking."
    assert done.finish_reason == "tool_calls"
    assert done.usage is not None and done.usage.prompt_tokens > 0


@pytest.mark.asyncio
async def test_http_context_length_exceeded(server: fs.FakeLLMServer) -> None:
    server.queue(fs.context_length_exceeded(8192, 9100))
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(cfg(server), USER, TOOLS)
    err = info.value
    assert err.kind == "context_window" and err.status_code == 400
    assert "maximum context length is 8192" in err.message
    assert len(server.requests) == 1  # never retried: the reactive path handles it


@pytest.mark.asyncio
async def test_http_max_prompt_chars_acts_like_a_window(server: fs.FakeLLMServer) -> None:
    server.max_prompt_chars = 200
    server.default = fs.text_reply("fits")
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(cfg(server), [{"role": "user", "content": "x" * 500}])
    assert info.value.kind == "context_window"
    done = await llm.stream_chat(cfg(server), USER)
    assert done.message["content"] == "fits"


@pytest.mark.asyncio
async def test_http_429_retry_after_is_honoured(server: fs.FakeLLMServer) -> None:
    server.queue(fs.rate_limited(retry_after=1), fs.text_reply("after the wait"))
    retries: list[tuple[int, float, str]] = []
    start = time.monotonic()
    done = await llm.stream_chat(cfg(server), USER, on_retry=lambda a, d, e: retries.append((a, d, e.kind)))
    elapsed = time.monotonic() - start
    assert done.message["content"] == "after the wait"
    assert retries == [(1, 1.0, "transient")]
    assert elapsed >= 1.0
    assert len(server.requests) == 2


@pytest.mark.asyncio
async def test_http_500_retried_then_success(server: fs.FakeLLMServer, fast_retries: None) -> None:
    server.queue(fs.server_error(), fs.server_error(), fs.text_reply("third time"))
    done = await llm.stream_chat(cfg(server), USER)
    assert done.message["content"] == "third time"
    assert len(server.requests) == 3


@pytest.mark.asyncio
async def test_http_retries_are_bounded(server: fs.FakeLLMServer, fast_retries: None) -> None:
    server.default = fs.server_error("still broken")
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(cfg(server, max_retries=2), USER)
    assert info.value.kind == "transient" and info.value.attempts == 3
    assert "still broken" in info.value.message
    assert len(server.requests) == 3


@pytest.mark.asyncio
async def test_http_reset_before_first_chunk_is_retried(server: fs.FakeLLMServer, fast_retries: None) -> None:
    server.queue(fs.stream(fs.text("lost"), reset_after=0), fs.text_reply("recovered"))
    done = await llm.stream_chat(cfg(server), USER)
    assert done.message["content"] == "recovered"
    assert len(server.requests) == 2


@pytest.mark.asyncio
async def test_http_reset_mid_stream_keeps_partial_no_retry(server: fs.FakeLLMServer, fast_retries: None) -> None:
    server.queue(fs.stream(fs.text("Half an "), fs.text("answer"), fs.text(" never"), reset_after=2),
                 fs.text_reply("must not be requested"))
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(cfg(server), USER)
    err = info.value
    assert err.kind == "transient" and "connection" in err.message
    assert err.partial is not None and err.partial.interrupted
    assert err.partial.message["content"] == "Half an answer"
    assert len(server.requests) == 1 and server.pending == 1


@pytest.mark.asyncio
async def test_http_malformed_sse_is_a_clear_error(server: fs.FakeLLMServer) -> None:
    server.queue(fs.stream(fs.text("ok so far"), fs.raw("data: {this is not json\n\n"), fs.text("more")))
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(cfg(server), USER)
    err = info.value
    assert err.kind == "other"
    assert err.message.startswith("the provider sent a malformed response stream")
    assert err.partial is not None and err.partial.message["content"] == "ok so far"


@pytest.mark.asyncio
async def test_http_401_no_retry_and_key_scrubbed(server: fs.FakeLLMServer) -> None:
    key = "sk-live-0123456789abcdef"
    server.queue(fs.error(401, f"Incorrect API key provided: {key}", code="invalid_api_key"))
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(LLMConfig(model="openai/fake", api_base=server.base_url, api_key=key), USER)
    err = info.value
    assert err.kind == "auth" and err.status_code == 401
    assert key not in err.message and key not in str(err)
    assert "check the API key" in err.message
    assert len(server.requests) == 1


@pytest.mark.asyncio
async def test_http_400_bad_request_no_retry(server: fs.FakeLLMServer) -> None:
    server.queue(fs.bad_request("Invalid value for 'messages[0].role'."))
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(cfg(server), USER)
    assert info.value.kind == "bad_request"
    assert "Invalid value for 'messages[0].role'." in info.value.message
    assert len(server.requests) == 1


@pytest.mark.asyncio
async def test_http_connection_refused_is_transient(fast_retries: None) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = LLMConfig(model="openai/fake", api_base=f"http://127.0.0.1:{port}/v1", api_key="sk-test",
                       max_retries=1)
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(config, USER)
    assert info.value.kind == "transient" and info.value.attempts == 2


@pytest.mark.asyncio
async def test_http_cancel_closes_stream_and_keeps_partial(server: fs.FakeLLMServer) -> None:
    server.queue(fs.stream(fs.text("The answer "), fs.text("is"), fs.text(" never sent"), hang_after=2))
    partial: list[Completion] = []
    got_text = asyncio.Event()

    def on_text(delta: str) -> None:
        if "is" in delta:
            got_text.set()

    task = asyncio.create_task(llm.stream_chat(cfg(server), USER, on_text=on_text, partial=partial))
    await asyncio.wait_for(got_text.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (part,) = partial
    assert part.interrupted and part.message["interrupted"] is True
    assert part.message["content"] == "The answer is"
    assert await asyncio.to_thread(server.client_disconnected.wait, 5), "connection was not closed"


@pytest.mark.asyncio
async def test_http_cancel_mid_tool_call_leaves_no_dangling_call(server: fs.FakeLLMServer) -> None:
    server.queue(fs.stream(
        fs.tool_call_delta(0, id="c_done", name="read_file", arguments='{"path": "a"}'),
        fs.tool_call_delta(1, id="c_half", name="read_file", arguments='{"path": "b'),
        hang_after=2,
    ))
    partial: list[Completion] = []
    seen = asyncio.Event()

    def on_tool(i: int, call: dict[str, Any]) -> None:
        if i == 1:
            seen.set()

    task = asyncio.create_task(llm.stream_chat(cfg(server), USER, TOOLS, on_tool_call=on_tool, partial=partial))
    await asyncio.wait_for(seen.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    msg = partial[0].message
    assert [c["id"] for c in msg["tool_calls"]] == ["c_done"]
    results = llm.interrupted_tool_results(msg)
    assert {r["tool_call_id"] for r in results} == {"c_done"}


@pytest.mark.asyncio
async def test_complete_text_and_summarizer(server: fs.FakeLLMServer) -> None:
    server.queue(fs.text_reply("  ## Goal\nsummary text  "), fs.text_reply("## Goal\nagain"))
    text = await llm.complete_text(cfg(server), USER, 300)
    assert text == "## Goal\nsummary text"
    body = server.requests[0].body
    assert body is not None and "tools" not in body and body["max_tokens"] == 300
    summarize = llm.make_summarizer(cfg(server))
    assert await summarize(USER, 200) == "## Goal\nagain"
    assert server.requests[1].body["max_tokens"] == 200  # type: ignore[index]


# ---------------------------------------------------------------------- counting and model info


def test_token_counters_remote_model() -> None:
    msgs = [{"role": "user", "content": "hello world " * 20}]
    n = llm.token_counter("gpt-4o", msgs)
    assert 40 <= n <= 60
    assert llm.text_token_counter("gpt-4o", "hello world") == 2
    assert llm.text_token_counter("gpt-4o", "") == 0
    assert llm.tools_token_counter("gpt-4o", TOOLS) > 20
    assert llm.tools_token_counter("gpt-4o", []) == 0
    assert llm.token_counter("openai/unknown-model-xyz", msgs) == n  # unknown model: default encoder


def test_exact_estimator_uses_these_counters() -> None:
    from engine.context.tokens import ExactEstimator

    est = ExactEstimator("gpt-4o")
    assert est.text("hello world") == 2
    assert est.tools(TOOLS) == llm.tools_token_counter("gpt-4o", TOOLS)
    assert est.message({"role": "user", "content": "hi", "id": "x"}) == llm.token_counter(
        "gpt-4o", [{"role": "user", "content": "hi"}]
    )


def test_model_info_and_suggestions() -> None:
    info = llm.model_info("gpt-4o")
    assert info is not None and info["max_input_tokens"] >= 100_000
    assert llm.model_info("openai/no-such-model-zz") is None
    local = llm.model_info(llm.LOCAL_MODEL, n_ctx=2048)
    assert local is not None and local["max_input_tokens"] == 2048
    names = llm.model_suggestions()
    assert names[0] == llm.LOCAL_MODEL
    assert "gpt-4o" in names and len(names) > 100 and len(set(names)) == len(names)


def test_config_from_settings_reads_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.store.config import Settings

    monkeypatch.setenv("MY_PROVIDER_KEY", "sk-env-abcdefghijk")
    config = llm.config_from_settings(Settings(model="openai/gpt-4o", api_key_env="MY_PROVIDER_KEY",
                                               api_base="http://127.0.0.1:1/v1", max_tokens=300))
    assert config.api_key == "sk-env-abcdefghijk" and config.max_tokens == 300
    assert config.api_base == "http://127.0.0.1:1/v1"
    assert "sk-env" not in repr(config)
    local = llm.config_from_settings(Settings(local_n_ctx=1024))
    assert local.is_local and local.api_key is None and local.local_n_ctx == 1024


# ---------------------------------------------------------------------- the fake server itself


@pytest.mark.asyncio
async def test_fakeserver_non_streaming_and_when_conditions(server: fs.FakeLLMServer) -> None:
    server.queue(fs.text_reply("for tools", when={"tools": True}), fs.text_reply("summary", when={"tools": False}))
    response = await llm._lib().acompletion(model="openai/fake", api_base=server.base_url, api_key="sk-test",
                                            messages=USER, max_retries=0)
    assert response.choices[0].message.content == "summary"
    assert response.usage.prompt_tokens > 0
    done = await llm.stream_chat(cfg(server), USER, TOOLS)
    assert done.message["content"] == "for tools"
    server.queue(fs.text_reply("matched", when={"contains": "needle"}))
    with pytest.raises(LLMError, match="no scripted response left"):
        await llm.stream_chat(cfg(server, max_retries=0), USER)
    done = await llm.stream_chat(cfg(server), [{"role": "user", "content": "a needle here"}])
    assert done.message["content"] == "matched"


def test_fakeserver_runs_as_a_subprocess(tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({
        "responses": [fs.tool_call_reply("read_file", {"path": "a"}), fs.context_length_exceeded()],
        "default": fs.text_reply("default answer"),
        "max_prompt_chars": 5000,
    }))
    port_file, log = tmp_path / "port", tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakeserver", "--port-file", str(port_file), "--script", str(script),
         "--log", str(log)],
        cwd=repo, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "fake server did not start"
            time.sleep(0.05)
        base = f"http://127.0.0.1:{int(port_file.read_text())}/v1"
        config = LLMConfig(model="openai/fake", api_base=base, api_key="sk-test", max_retries=0)

        async def talk() -> list[Any]:
            out: list[Any] = [await llm.stream_chat(config, USER, TOOLS)]
            for messages in (USER, [{"role": "user", "content": "y" * 6000}], USER):
                try:
                    out.append(await llm.stream_chat(config, messages))
                except LLMError as exc:
                    out.append(exc.kind)
            return out

        first, second, third, fourth = asyncio.run(talk())
        assert first.message["tool_calls"][0]["function"]["name"] == "read_file"
        assert second == "context_window"  # scripted 400
        assert third == "context_window"  # over max_prompt_chars
        assert fourth.message["content"] == "default answer"
        records = [json.loads(line) for line in log.read_text().splitlines()]
        assert len(records) == 4 and records[0]["body"]["tools"]
        assert [r["response_kind"] for r in records] == ["stream", "error", "error", "stream"]
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_summarizer_knows_its_models_window() -> None:
    local = llm.make_summarizer(llm.LLMConfig(model="local/smollm2-135m-instruct", local_n_ctx=4096))
    assert local.context_window == 4096  # type: ignore[attr-defined]
    known = llm.make_summarizer(llm.LLMConfig(model="gpt-4o-mini"))
    assert known.context_window == 128_000  # type: ignore[attr-defined]  # litellm's model info
    assert llm.summarizer_window(llm.LLMConfig(model="nobody/knows-this-model")) is None


def test_making_a_summarizer_does_not_import_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_import() -> None:
        raise AssertionError("litellm loaded while making a summarizer")

    monkeypatch.setattr(llm, "_lib", no_import)
    summarizer = llm.make_summarizer(llm.LLMConfig(model="gpt-4o-mini"))
    assert callable(summarizer)
    with pytest.raises(AssertionError, match="litellm loaded"):
        _ = summarizer.context_window  # type: ignore[attr-defined]  # looked up on first use only
