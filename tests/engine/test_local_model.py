"""engine.llm.local_model: the offline SmolLM2 model behind litellm's custom-provider path.

The ``slow`` tests run the real GGUF model with llama-cpp-python (about a second each); they stay
in the default run. The tool-call parser and prompt format are tested without the model.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from engine.llm import client as llm
from engine.llm.client import LLMConfig, local_model
from engine.llm.errors import Completion, LLMError
from engine.llm.local_model import LOCAL_MODEL, ToolCallParser, render_prompt, tools_prompt

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "start_line": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
]


def feed_all(parser: ToolCallParser, pieces: list[str]) -> tuple[str, str, list[dict[str, str]]]:
    shown = "".join(parser.feed(p) for p in pieces)
    rest, calls = parser.finish()
    return shown, rest, calls


# ---------------------------------------------------------------------- tool-call parsing (no model)


def test_parser_plain_text_streams_through() -> None:
    p = ToolCallParser(["read_file"])
    assert p.feed("Hello") == "Hello"
    assert p.feed(" wor") == " wor"
    assert p.feed("ld <") == "ld "  # '<' may start a tool call: held back
    assert p.feed("b>bold") == "<b>bold"
    assert p.finish() == ("", [])


def test_parser_tool_call_block_split_across_pieces() -> None:
    pieces = ["I will read it. <to", "ol_call>{\"name\": \"read_", 'file", "arguments": {"path": "a.txt"}}',
              "</tool_call>"]
    shown, rest, calls = feed_all(ToolCallParser(["read_file"]), pieces)
    assert shown == "I will read it. "
    assert rest == ""
    assert calls == [{"name": "read_file", "arguments": '{"path": "a.txt"}'}]


def test_parser_list_unclosed_and_parameters_key() -> None:
    text = '<tool_call>[{"name": "read_file", "parameters": {"path": "x"}}, {"name": "list_dir"}]'
    _, rest, calls = feed_all(ToolCallParser(["read_file", "list_dir"]), [text])
    assert rest == ""
    assert calls == [{"name": "read_file", "arguments": '{"path": "x"}'}, {"name": "list_dir", "arguments": "{}"}]


def test_parser_bad_json_stays_text() -> None:
    text = "<tool_call>{name: read_file}</tool_call>"
    shown, rest, calls = feed_all(ToolCallParser(["read_file"]), [text])
    assert calls == [] and shown + rest == text


def test_parser_json_only_reply() -> None:
    reply = '```json\n{"name": "read_file", "arguments": {"path": "b"}}\n```'
    shown, rest, calls = feed_all(ToolCallParser(["read_file"]), ["  ", reply])
    assert shown == "" and rest == ""
    assert calls == [{"name": "read_file", "arguments": '{"path": "b"}'}]
    other = '{"name": "Paris", "country": "France"}'
    shown, rest, calls = feed_all(ToolCallParser(["read_file"]), [other])
    assert calls == [] and shown + rest == other


# ---------------------------------------------------------------------- prompt format (no model)


def test_render_prompt_chatml() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Summary: we talked."},
        {"role": "user", "content": [{"type": "text", "text": "read a"}, {"type": "image_url"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "A's text"},
    ]
    prompt = render_prompt(messages, TOOLS)
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\nSummary: we talked.\n\nYou can use tools.")
    assert prompt.count("<|im_start|>system") == 1
    assert "<|im_start|>user\nread a [image]<|im_end|>\n" in prompt
    assert '<|im_start|>assistant\n<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>' in prompt
    assert '<tool_response name="read_file">\nA\'s text\n</tool_response>' in prompt
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert render_prompt([{"role": "user", "content": "hi"}]).startswith(
        f"<|im_start|>system\n{local_model.DEFAULT_SYSTEM}<|im_end|>"
    )


def test_tools_prompt_lists_signatures() -> None:
    text = tools_prompt(TOOLS)
    assert "- read_file(path: string, start_line?: integer): Read a file." in text
    assert "<tool_call>" in text
    assert tools_prompt([]) == ""


def test_model_info_and_configure() -> None:
    assert local_model.model_info(512)["max_input_tokens"] == 512
    before = local_model.current_n_ctx()
    try:
        local_model.configure(n_ctx=4096)
        assert local_model.model_info()["max_input_tokens"] == 4096
        assert llm.model_info(LOCAL_MODEL)["max_input_tokens"] == 4096  # type: ignore[index]
    finally:
        local_model.configure(n_ctx=before)
    with pytest.raises(ValueError, match="local_n_ctx"):
        local_model.configure(n_ctx=10)
    with pytest.raises(ValueError, match="local_threads"):
        local_model.configure(threads=0)


def test_model_file_ships_with_package() -> None:
    path = local_model.model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000


@pytest.mark.asyncio
async def test_unknown_local_model_name_is_a_clear_error() -> None:
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(LLMConfig(model="local/other-model"), [{"role": "user", "content": "hi"}])
    assert info.value.kind == "bad_request"
    assert "unknown local model 'other-model'" in info.value.message
    assert LOCAL_MODEL in info.value.message


@pytest.mark.asyncio
async def test_tool_call_output_becomes_tool_calls_through_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generation is scripted (the tiny model rarely calls tools); the parsing and the litellm
    custom-provider path are real."""
    out = ['Sure. <tool', '_call>{"name": "read_file", ', '"arguments": {"path": "notes.txt"}}</tool_call>']

    def scripted_generate(job: Any, emit: Any) -> None:
        assert "read_file(path: string" in job.prompt  # the tools were described to the model
        for piece in out:
            emit("text", piece)
        emit("done", {"prompt_tokens": 50, "completion_tokens": 20, "finish_reason": "stop"})

    monkeypatch.setattr(local_model, "_generate", scripted_generate)
    texts: list[str] = []
    done = await llm.stream_chat(LLMConfig(model=LOCAL_MODEL), [{"role": "user", "content": "read notes"}],
                                 TOOLS, on_text=texts.append)
    assert "".join(texts) == "Sure. "
    assert done.message["content"] == "Sure. "  # what was shown is what is kept
    (call,) = done.message["tool_calls"]
    assert call["function"] == {"name": "read_file", "arguments": '{"path": "notes.txt"}'}
    assert call["id"].startswith("call_")
    assert done.finish_reason == "tool_calls"
    assert done.usage == llm.Usage(50, 20, 70)


# ---------------------------------------------------------------------- the real model


QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
ANSWER = "The capital of France is Paris."  # what the bundled model says at temperature 0
# One llama.cpp thread: on a shared 2-core machine two threads spin-wait on each other whenever
# another process holds a core, which makes generation several times slower, not faster.
THREADS = 1


def local(**kw: Any) -> LLMConfig:
    return LLMConfig(model=LOCAL_MODEL, local_threads=THREADS, **kw)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_real_model_streams_text_with_usage_through_litellm() -> None:
    lit = llm._lib()
    response = await lit.acompletion(model=LOCAL_MODEL, messages=QUESTION, stream=True,
                                     stream_options={"include_usage": True}, max_tokens=24, seed=1,
                                     temperature=0.0, local_threads=THREADS)
    texts: list[str] = []
    usage = None
    async for chunk in response:
        if chunk.choices and chunk.choices[0].delta.content:
            texts.append(chunk.choices[0].delta.content)
        if getattr(chunk, "usage", None):
            usage = chunk.usage
    assert len(texts) >= 2 and "".join(texts).strip() == ANSWER
    assert usage is not None
    assert usage.prompt_tokens == local_model.count_text(render_prompt(QUESTION))
    assert 1 <= usage.completion_tokens <= 25
    assert llm.token_counter(LOCAL_MODEL, QUESTION) == local_model.count_messages(QUESTION)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_real_model_via_stream_chat_and_complete_text() -> None:
    config = local(max_tokens=20, local_n_ctx=2048, temperature=0.0)
    deltas: list[str] = []
    done = await llm.stream_chat(config, QUESTION, on_text=deltas.append)
    assert done.message["content"] == "".join(deltas) and len(deltas) >= 2
    assert done.message["content"].strip() == ANSWER
    assert done.usage is not None and done.usage.prompt_tokens > 10
    text = await llm.complete_text(config, QUESTION, 12)
    assert text.strip() == ANSWER
    response = await llm._lib().acompletion(model=LOCAL_MODEL, messages=QUESTION, max_tokens=8, temperature=0.0,
                                            local_n_ctx=2048, local_threads=THREADS)
    assert response.choices[0].message.content.startswith("The capital of France")  # cut at 8 tokens
    assert response.usage.prompt_tokens == done.usage.prompt_tokens


@pytest.mark.slow
@pytest.mark.asyncio
async def test_real_model_context_limit_is_context_window_error() -> None:
    long = [{"role": "user", "content": "Please summarise this. " + "The quick brown fox jumps. " * 200}]
    lit = llm._lib()
    with pytest.raises(lit.ContextWindowExceededError) as raw:
        response = await lit.acompletion(model=LOCAL_MODEL, messages=long, stream=True, max_tokens=16,
                                         local_n_ctx=512, local_threads=THREADS)
        async for _ in response:
            pass
    assert "exceed context window of 512" in str(raw.value)
    assert llm.classify_error(raw.value).kind == "context_window"
    with pytest.raises(LLMError) as info:
        await llm.stream_chat(local(local_n_ctx=512, max_tokens=16), long)
    assert info.value.kind == "context_window" and info.value.attempts == 1
    assert "exceed context window of 512" in info.value.message
    assert llm.model_info(LOCAL_MODEL)["max_input_tokens"] == 512  # type: ignore[index]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_real_model_cancel_stops_generation_promptly() -> None:
    config = local(max_tokens=2000, local_n_ctx=2048, temperature=0.8)
    story = [{"role": "user", "content": "Write a very long story about a dragon, with many chapters."}]
    partial: list[Completion] = []
    first = asyncio.Event()
    task = asyncio.create_task(llm.stream_chat(config, story, on_text=lambda d: first.set(), partial=partial))
    await asyncio.wait_for(first.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert partial and partial[0].interrupted and partial[0].message["content"]
    deadline = time.monotonic() + 5
    while any(t.name == "smollm2" and t.is_alive() for t in threading.enumerate()):
        assert time.monotonic() < deadline, "generation thread still running after cancel"
        await asyncio.sleep(0.02)
    # the model is free again: the next call completes, and answers the question
    done = await llm.stream_chat(local(max_tokens=8, local_n_ctx=2048, temperature=0.0), QUESTION)
    assert done.message["content"].startswith("The capital of France")


@pytest.mark.slow
@pytest.mark.asyncio
async def test_real_model_generation_runs_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two generations (one after the other, behind the model lock) run in worker threads while the
    loop goes on: each waits, before generating, until the loop has run a callback after it started,
    which could never happen on the loop's own thread. (How often the loop ticks meanwhile is a
    benchmark figure: ``python -m benchmarks local_loop``.)"""
    config = local(max_tokens=40, local_n_ctx=2048, temperature=0.0)
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    ran_on: list[int] = []
    loop_answered: list[bool] = []
    real_generate = local_model._generate

    def spy(job: Any, emit: Any) -> None:
        ran_on.append(threading.get_ident())
        seen = threading.Event()
        loop.call_soon_threadsafe(seen.set)
        loop_answered.append(seen.wait(30))
        real_generate(job, emit)

    monkeypatch.setattr(local_model, "_generate", spy)
    results = await asyncio.gather(llm.stream_chat(config, QUESTION), llm.stream_chat(config, QUESTION))
    assert [r.message["content"].strip() for r in results] == [ANSWER, ANSWER]
    assert len(ran_on) == 2 and loop_thread not in ran_on
    assert loop_answered == [True, True]
    assert json.dumps([r.message for r in results])


def test_counting_falls_back_when_the_model_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Any:
        raise local_model.LocalModelError("the offline model is not installed")

    monkeypatch.setitem(llm._local_counting, "ok", True)
    monkeypatch.setattr(local_model, "_vocab", None)
    monkeypatch.setattr(local_model, "model_path", missing)
    msgs = [{"role": "user", "content": "hello world " * 10}]
    assert llm.token_counter(LOCAL_MODEL, msgs) == llm.token_counter("gpt-4o", msgs)
    assert llm.text_token_counter(LOCAL_MODEL, "hello world") == 2
    assert llm._local_counting["ok"] is False  # not retried on every count


def test_local_counts_use_the_model_tokenizer() -> None:
    msg = {"role": "user", "content": "hello"}
    assert llm.token_counter(LOCAL_MODEL, [msg]) == local_model.count_text("<|im_start|>user\nhello<|im_end|>\n")
    assert llm.tools_token_counter(LOCAL_MODEL, TOOLS) == local_model.count_tools(TOOLS) > 20
    assert llm.text_token_counter(LOCAL_MODEL, "<|im_end|>") == 1


def test_the_local_estimator_counts_what_llama_cpp_is_given(tmp_path: Any) -> None:
    """The bundled model's pre-call figure: the snapshot's regions add up to the tokens llama.cpp
    counts in the prompt it is given (system prompt, tools, user / assistant / tool-call / tool-result
    messages), with no calibration (the first call must be right)."""
    from pathlib import Path

    from engine.agent import default_system_prompt, default_tools
    from engine.context.conversation import Session
    from engine.context.request import build_request
    from engine.context.tokens import LocalEstimator, make_estimator
    from engine.model import messages as m
    from engine.store.config import Settings

    est = make_estimator("auto", LOCAL_MODEL)
    assert isinstance(est, LocalEstimator) and est.name == "exact"
    assert make_estimator("auto", "openai/gpt-4o-mini").name == "heuristic"
    session = Session.create(Path(tmp_path) / "s", "t", estimator=est)
    call = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    session.extend([
        m.user("What is in a.py? 12 34 56 78 90 and some short words: a b c d e f g."),
        m.assistant(None, tool_calls=[call]),
        m.tool_result("call_1", "def f(x):\n    return x * 2  # 0123456789\n" * 20, name="read_file"),
        m.assistant("It defines f, which doubles its argument."),
        m.user("Thanks. Now 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 — what comes next?"),
    ])
    tools = default_tools()
    system = default_system_prompt()
    snap = session.snapshot(Settings(), est, system, tools, window=8192, calibrated=False)
    prompt = render_prompt(build_request(system, "", session.messages), tools)
    actual = local_model.count_text(prompt)
    print("local estimate", snap.raw_prompt_tokens, "llama.cpp", actual)
    assert abs(snap.raw_prompt_tokens - actual) <= max(2, actual // 200), (snap.raw_prompt_tokens, actual)
    session.close()
