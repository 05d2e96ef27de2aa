"""Streams reassembled: the SSE parser gives the same events however the bytes are cut, and each API family's
events fold into the message the provider answers unstreamed, with its usage."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.capture.streams import Assembler, SSEParser, family_of, usage_of


def sse(events: list[tuple[str, dict[str, Any]]], eol: str = "\n") -> bytes:
    out = ""
    for name, data in events:
        out += (f"event: {name}{eol}" if name else "") + f"data: {json.dumps(data, ensure_ascii=False)}{eol}{eol}"
    return out.encode()


def parse(data: bytes, cuts: list[int]) -> list[tuple[str, str]]:
    parser = SSEParser()
    out: list[tuple[str, str]] = []
    last = 0
    for cut in sorted(set(cuts)):
        out += parser.feed(data[last:cut])
        last = cut
    out += parser.feed(data[last:])
    return out + parser.close()


def assemble(family: str, data: bytes, pieces: int = 7) -> tuple[dict[str, Any], Assembler]:
    asm = Assembler(family)
    rng = random.Random(pieces)
    cuts = sorted(rng.randrange(len(data)) for _ in range(pieces))
    for event, payload in parse(data, cuts):
        asm.add(event, payload)
    return asm.result(), asm


EVENTS = [("message_start", {"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 3}}}),
          ("ping", {"type": "ping"}),
          ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": "ünï\ncode"}})]


@given(st.lists(st.integers(min_value=0, max_value=400), max_size=12), st.sampled_from(["\n", "\r\n", "\r"]))
def test_events_are_the_same_however_the_bytes_are_cut(cuts: list[int], eol: str) -> None:
    data = sse(EVENTS, eol)
    whole = parse(data, [])
    assert [name for name, _ in whole] == ["message_start", "ping", "content_block_delta"]
    assert parse(data, [c % (len(data) + 1) for c in cuts]) == whole
    assert json.loads(whole[2][1])["delta"]["text"] == "ünï\ncode"


def test_comments_multi_line_data_and_a_last_event_without_its_blank_line() -> None:
    parser = SSEParser()
    assert parser.feed(b": keep-alive\n\ndata: a\ndata: b\n\ndata: [DONE]") == [("", "a\nb")]
    assert parser.close() == [("", "[DONE]")]


def test_anthropic_text_tool_use_thinking_and_usage() -> None:
    data = sse([
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "c", "role": "assistant",
                                                                 "content": [], "usage": {"input_tokens": 5,
                                                                                          "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking",
                                                                                               "thinking": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "signature_delta", "signature": "sig"}}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "text",
                                                                                               "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "text_delta", "text": "Hi"}}),
        ("content_block_start", {"type": "content_block_start", "index": 2, "content_block": {
            "type": "tool_use", "id": "t1", "name": "Read", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2,
                                 "delta": {"type": "input_json_delta", "partial_json": '{"path": "a"}'}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                           "usage": {"output_tokens": 9}}),
        ("message_stop", {"type": "message_stop"}),
    ])
    msg, asm = assemble("anthropic", data)
    assert msg["content"] == [{"type": "thinking", "thinking": "hmm", "signature": "sig"},
                              {"type": "text", "text": "Hi"},
                              {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}}]
    assert msg["stop_reason"] == "tool_use" and msg["id"] == "msg_1"
    assert usage_of("anthropic", msg) == {"input_tokens": 5, "output_tokens": 9}
    assert not asm.errors and not asm.truncated


def test_openai_chat_chunks_with_tool_calls_and_usage() -> None:
    chunks = [
        {"id": "c1", "model": "g", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Le"}}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"content": "t me"}}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "function": {"name": "read", "arguments": '{"pa'}}]}}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": 'th": 1}'}}]}, "finish_reason": "tool_calls"}]},
        {"id": "c1", "choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 8,
                                              "prompt_tokens_details": {"cached_tokens": 32}}},
    ]
    data = sse([("", c) for c in chunks]) + b"data: [DONE]\n\n"
    msg, _ = assemble("openai-chat", data)
    (choice,) = msg["choices"]
    assert choice["message"]["content"] == "Let me" and choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [{"id": "call_1", "type": "function",
                                                "function": {"name": "read", "arguments": '{"path": 1}'}}]
    assert usage_of("openai-chat", msg)["prompt_tokens"] == 40


def test_openai_responses_take_the_completed_response() -> None:
    done = {"id": "resp_1", "status": "completed", "output": [{"type": "message", "content": [
        {"type": "output_text", "text": "ok"}]}], "usage": {"input_tokens": 10, "output_tokens": 2}}
    data = sse([("response.created", {"type": "response.created", "response": {"id": "resp_1", "output": []}}),
                ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "ok"}),
                ("response.completed", {"type": "response.completed", "response": done})])
    msg, _ = assemble("openai-responses", data)
    assert msg == done and usage_of("openai-responses", msg) == {"input_tokens": 10, "output_tokens": 2}


def test_gemini_parts_add_up_and_the_last_usage_counts() -> None:
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}, "index": 0}],
         "usageMetadata": {"promptTokenCount": 7}, "responseId": "r1", "modelVersion": "gemini-x"},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}, "index": 0}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
                         "finishReason": "STOP", "index": 0}],
         "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 4}},
    ]
    msg, _ = assemble("gemini", sse([("", c) for c in chunks], "\r\n"))
    cand = msg["candidates"][0]
    assert cand["content"]["parts"] == [{"text": "Hello"}, {"functionCall": {"name": "ls", "args": {}}}]
    assert cand["finishReason"] == "STOP" and msg["responseId"] == "r1"
    assert usage_of("gemini", msg) == {"promptTokenCount": 7, "candidatesTokenCount": 4}


def test_text_past_the_limit_is_cut_and_said() -> None:
    asm = Assembler("anthropic", limit=10)
    asm.add("content_block_start", json.dumps({"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}}))
    for _ in range(5):
        asm.add("content_block_delta", json.dumps({"type": "content_block_delta", "index": 0,
                                                   "delta": {"type": "text_delta", "text": "abcd"}}))
    msg = asm.result()
    assert msg["content"][0]["text"] == "abcdabcdab" and asm.truncated


def test_a_bad_event_is_noted_not_raised() -> None:
    asm = Assembler("anthropic")
    asm.add("", "{not json")
    asm.add("content_block_delta", json.dumps({"type": "content_block_delta", "index": "x"}))
    assert len(asm.errors) == 2 and asm.result()["content"] == []


def test_family_of_paths() -> None:
    assert family_of("/v1/messages?beta=true") == "anthropic"
    assert family_of("/v1/messages/count_tokens") == "anthropic"
    assert family_of("/v1/chat/completions") == "openai-chat"
    assert family_of("/openai/v1/responses") == "openai-responses"
    assert family_of("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse") == "gemini"
    assert family_of("/v1/models/x:generateContent") == "gemini"
    assert family_of("/v1/models") == "other"
    assert family_of("/x", {"anthropic-version": "2023-06-01"}) == "anthropic"
