"""The LLM client: the only module (with :mod:`engine.llm.local_model`) that imports litellm, lazily.

- :func:`stream_chat` — ``litellm.acompletion(stream=True, stream_options={"include_usage": True})``
  with tools; text, reasoning and tool-call deltas assembled into one assistant message; the usage
  the provider reports; transient errors retried with bounded exponential backoff (only while
  nothing has streamed in that attempt); every failure raised as :class:`LLMError` with a ``kind``.
- :func:`classify_error` — context window exceeded (→ the reactive compaction path), transient
  (rate limit, connection, timeout, 5xx), auth, bad request, other.
- :func:`complete_text` / :func:`make_summarizer` — plain completions for the compaction summary.
- :func:`token_counter`, :func:`text_token_counter`, :func:`tools_token_counter` — exact counts for
  :class:`engine.context.tokens.ExactEstimator` (the tokenizer is selected once per model and cached; the
  local model counts with its own tokenizer; nothing is ever downloaded).
- :func:`model_info`, :func:`model_suggestions`.

Cancellation. ``task.cancel()`` while :func:`stream_chat` runs stops the stream and closes the
connection (``await response.aclose()``). The partial result is delivered through the optional
``partial`` sink: before ``asyncio.CancelledError`` propagates, a :class:`Completion` with
``interrupted=True`` is appended to the list passed as ``partial=``. Its message keeps the text and
reasoning streamed so far and is marked ``"interrupted": True``; it holds only the tool calls whose
arguments had arrived complete (valid JSON) — :func:`interrupted_tool_results` makes the results
that say those calls were interrupted, so no call is ever left without a result. Mid-stream errors
carry the same partial completion in :attr:`LLMError.partial`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

from engine.llm import local_model, retry
from engine.llm.errors import (
    MAX_ERROR_CHARS,
    Completion,
    LLMError,
    Usage,
    classify_error,
)
from engine.llm.lazyimport import gate, gated_import
from engine.model.messages import Message, new_message, tool_result
from engine.model.text import one_line
from engine.store.secrets import remember_secret, scrub

log = logging.getLogger(__name__)

LOCAL_MODEL = local_model.LOCAL_MODEL

RETRY_BASE_DELAY = retry.RETRY_BASE_DELAY  # read at each retry: tests make them short here
RETRY_MAX_DELAY = retry.RETRY_MAX_DELAY
RETRY_AFTER_CAP = retry.RETRY_AFTER_CAP

SummarizeFn = Callable[[list[dict[str, Any]], int], Awaitable[str]]
TextCallback = Callable[[str], Any]
ToolCallCallback = Callable[[int, dict[str, Any]], Any]
RetryCallback = Callable[[int, float, "LLMError"], Any]

# ---------------------------------------------------------------------- litellm, lazily


_litellm: Any = None
_imports = {"attempts": 0, "failures": 0}


def _lib() -> Any:
    """litellm, imported and set up once (~3 s): local price map, no HF downloads, quiet.

    Imported through :func:`engine.llm.lazyimport.gated_import`: callers in other threads wait while
    one thread imports it, and a failed import is undone, so the next call imports it afresh.
    """
    if _litellm is not None:
        return _litellm
    with gate():
        if _litellm is None:
            _import_litellm()
    return _litellm


def _import_litellm() -> None:
    global _litellm
    _imports["attempts"] += 1
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        litellm: Any = gated_import("litellm")
    except BaseException:
        _imports["failures"] += 1
        raise
    litellm.suppress_debug_info = True
    litellm.disable_hf_tokenizer_download = True
    litellm.drop_params = False
    _litellm = litellm
    local_model.register()


local_model.set_loader(lambda: _lib())  # the local model reaches litellm through this gate (patchable)


_never_wait: set[int] = set()


def never_wait_on_this_thread() -> None:
    """On the calling thread (the app's UI thread), a model-info lookup never imports litellm: while
    it is not loaded yet the answer is "unknown" (None) instead of a multi-second freeze."""
    _never_wait.add(threading.get_ident())


def litellm_loaded() -> bool:
    """Whether litellm is imported and set up (a call will not wait for the import)."""
    return _litellm is not None


async def ready() -> Any:
    """litellm, waiting off the event loop while it is imported (here or in another thread)."""
    if _litellm is not None:
        return _litellm
    return await asyncio.to_thread(_lib)


# ---------------------------------------------------------------------- data


@dataclass
class LLMConfig:
    model: str
    api_base: str | None = None
    api_key: str | None = None
    max_tokens: int = 1024
    timeout: float = 120.0
    max_retries: int = 3
    temperature: float | None = None
    local_n_ctx: int = local_model.DEFAULT_N_CTX
    local_threads: int = local_model.DEFAULT_THREADS

    def __repr__(self) -> str:  # never print the key
        key = "set" if self.api_key else None
        return (
            f"LLMConfig(model={self.model!r}, api_base={self.api_base!r}, api_key={key}, "
            f"max_tokens={self.max_tokens}, timeout={self.timeout}, max_retries={self.max_retries}, "
            f"temperature={self.temperature}, local_n_ctx={self.local_n_ctx}, local_threads={self.local_threads})"
        )

    @property
    def is_local(self) -> bool:
        return local_model.is_local(self.model)


def config_from_settings(settings: Any, *, model: str | None = None, api_base: str | None = None,
                         max_tokens: int | None = None) -> LLMConfig:
    """An :class:`LLMConfig` from :class:`engine.store.config.Settings`; the API key comes from the
    environment or the OS keyring (:mod:`engine.store.secrets`), never from our files."""
    from engine.store.secrets import get_api_key

    chosen = model or settings.model
    key = None if local_model.is_local(chosen) else get_api_key(chosen, settings.api_key_env)
    return LLMConfig(
        model=chosen,
        api_base=(api_base if api_base is not None else settings.api_base) or None,
        api_key=key,
        max_tokens=max_tokens or settings.max_tokens,
        timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        local_n_ctx=settings.local_n_ctx,
        local_threads=settings.local_threads,
    )


def retry_delay(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry ``attempt`` (:func:`engine.llm.retry.backoff` with this module's limits)."""
    return retry.backoff(attempt, retry_after, RETRY_BASE_DELAY, RETRY_MAX_DELAY, RETRY_AFTER_CAP)


# ---------------------------------------------------------------------- stream assembly


def _new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


@dataclass
class _CallSlot:
    id: str | None = None
    name: str = ""
    arguments: str = ""

    def as_call(self) -> dict[str, Any]:
        return {"id": self.id or "", "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class StreamAssembler:
    """Accumulates streamed deltas (OpenAI / litellm chunk objects or dicts) into one message."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    slots: dict[Any, _CallSlot] = field(default_factory=dict)
    order: list[Any] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    started: bool = False  # anything of the answer received (text, reasoning or a tool call)
    _last_key: Any = None

    @property
    def empty(self) -> bool:
        """Nothing came from the provider: no text, no reasoning, no tool call, no usage. A provider
        that drops a stream (llama.cpp's server closes an overflowing one with HTTP 200 and no chunk)
        looks like this; it is a failure, never an empty answer. (The finish reason cannot tell:
        litellm makes up ``stop`` for a stream that ended without one.)"""
        return not self.started and self.usage is None

    def add_usage(self, usage: Any) -> None:
        if usage is None:
            return
        prompt = _get(usage, "prompt_tokens")
        completion = _get(usage, "completion_tokens")
        if prompt is None and completion is None:
            return
        prompt, completion = int(prompt or 0), int(completion or 0)
        total = _get(usage, "total_tokens")
        self.usage = Usage(prompt, completion, int(total) if total is not None else prompt + completion)

    def add_tool_delta(self, tc: Any) -> tuple[int, _CallSlot]:
        index = _get(tc, "index")
        call_id = _get(tc, "id") or None
        fn = _get(tc, "function")
        name = _get(fn, "name") or ""
        args = _get(fn, "arguments") or ""
        if index is None:
            # no index: a new id starts a new call, otherwise continue the last one
            key = ("id", call_id) if call_id else (self._last_key if self._last_key is not None else ("n", 0))
        else:
            key = index
            slot = self.slots.get(key)
            if slot is not None and call_id and slot.id and call_id != slot.id:
                # a server that reuses one index for parallel calls: a new id is a new call
                key = (index, call_id)
        slot = self.slots.get(key)
        if slot is None:
            slot = _CallSlot()
            self.slots[key] = slot
            self.order.append(key)
        self._last_key = key
        if call_id and not slot.id:
            slot.id = call_id
        if name and name != slot.name:  # a name sent again in full is not appended twice
            slot.name = name if not slot.name or name.startswith(slot.name) else slot.name + name
        slot.arguments += args if isinstance(args, str) else json.dumps(args)
        self.started = True
        return self.order.index(key), slot

    def calls(self, complete_only: bool = False) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for key in self.order:
            slot = self.slots[key]
            if not slot.name and not slot.arguments:
                continue
            if complete_only:
                try:
                    json.loads(slot.arguments or "{}")
                except json.JSONDecodeError:
                    continue
                if not slot.name:
                    continue
            call = slot.as_call()
            if not call["id"] or call["id"] in seen:
                call["id"] = _new_call_id()
                slot.id = call["id"]
            seen.add(call["id"])
            out.append(call)
        return out

    def message(self, *, interrupted: bool = False) -> Message:
        content = "".join(self.text)
        calls = self.calls(complete_only=interrupted)
        msg = new_message("assistant", content if content or not calls else None)
        if calls:
            msg["tool_calls"] = calls
        if self.reasoning:
            msg["reasoning_content"] = "".join(self.reasoning)
        if self.usage is not None:
            msg["usage"] = asdict(self.usage)
        if interrupted:
            msg["interrupted"] = True
        return msg

    def completion(self, *, interrupted: bool = False) -> Completion:
        return Completion(self.message(interrupted=interrupted), self.usage, self.finish_reason, interrupted)


async def _call(cb: Callable[..., Any] | None, *args: Any) -> None:
    if cb is None:
        return
    result = cb(*args)
    if inspect.isawaitable(result):
        await result


def _request_kwargs(config: LLMConfig, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                    stream: bool) -> dict[str, Any]:
    from engine.model.messages import to_wire

    wire = [to_wire(m) if "role" in m else m for m in messages]
    kwargs: dict[str, Any] = {
        "model": config.model,
        "messages": wire,
        "max_tokens": config.max_tokens,
        "timeout": config.timeout,
        "max_retries": 0,  # we retry ourselves, only while nothing has streamed
        "num_retries": 0,
    }
    if stream:
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
    if tools:
        kwargs["tools"] = tools
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    if config.is_local:
        kwargs["local_n_ctx"] = config.local_n_ctx
        kwargs["local_threads"] = config.local_threads
    else:
        if config.api_base:
            kwargs["api_base"] = config.api_base
        if config.api_key:
            kwargs["api_key"] = config.api_key
    return kwargs


async def _one_attempt(
    config: LLMConfig,
    kwargs: dict[str, Any],
    acc: StreamAssembler,
    on_text: TextCallback | None,
    on_reasoning: TextCallback | None,
    on_tool_call: ToolCallCallback | None,
) -> None:
    litellm = _lib()
    if config.is_local:
        local_model.register()  # idempotent; survives code that replaced litellm.custom_provider_map
    response = await litellm.acompletion(**kwargs)
    try:
        async for chunk in response:
            acc.add_usage(_get(chunk, "usage"))
            for choice in _get(chunk, "choices") or []:
                delta = _get(choice, "delta")
                reasoning = _get(delta, "reasoning_content")
                if reasoning:
                    acc.started = True
                    acc.reasoning.append(reasoning)
                    await _call(on_reasoning, reasoning)
                content = _get(delta, "content")
                if content:
                    acc.started = True
                    acc.text.append(content)
                    await _call(on_text, content)
                for tc in _get(delta, "tool_calls") or []:
                    index, slot = acc.add_tool_delta(tc)
                    await _call(on_tool_call, index, slot.as_call())
                finish = _get(choice, "finish_reason")
                if finish:
                    acc.finish_reason = finish
    finally:
        # on success, error or cancellation: end the stream and close the connection
        aclose = getattr(response, "aclose", None)
        if aclose is not None:
            try:
                await asyncio.shield(aclose())
            except Exception:  # provider boundary: closing litellm's stream (httpx, the provider's SDK) can fail
                # in any way; the answer (or the error already raised) stands
                log.warning("closing the stream of %s failed", config.model, exc_info=True)


EMPTY_STREAM = "the provider ended the stream without an answer (no text, no tool call, no usage report)"


async def _explain_empty_stream(
    config: LLMConfig,
    kwargs: dict[str, Any],
    acc: StreamAssembler,
    on_text: TextCallback | None,
    on_tool_call: ToolCallCallback | None,
) -> None:
    """An empty stream is a failure whose cause the stream did not say: send the same request once
    unstreamed. Its error (llama.cpp's server answers an overflow with a 400 here) is raised as
    what it is, so a context-window overflow takes the reactive path; a real answer fills ``acc``;
    another empty answer raises :class:`LLMError` ``empty_response``."""
    plain = {k: v for k, v in kwargs.items() if k not in ("stream", "stream_options")}
    response = await _lib().acompletion(**plain)
    acc.add_usage(_get(response, "usage"))
    choices = _get(response, "choices") or []
    choice = choices[0] if choices else None
    message = _get(choice, "message")
    content = _get(message, "content")
    reasoning = _get(message, "reasoning_content")
    if reasoning:
        acc.started = True
        acc.reasoning.append(str(reasoning))
    if content:
        acc.started = True
        acc.text.append(str(content))
        await _call(on_text, str(content))
    for i, tc in enumerate(_get(message, "tool_calls") or []):
        fn = _get(tc, "function")
        delta = {"index": i, "id": _get(tc, "id"),
                 "function": {"name": _get(fn, "name"), "arguments": _get(fn, "arguments") or ""}}
        index, slot = acc.add_tool_delta(delta)
        await _call(on_tool_call, index, slot.as_call())
    if not (content or acc.slots):
        finish = _get(choice, "finish_reason")
        why = f"; the same request unstreamed returned no answer either (finish reason: {finish or 'none'})"
        raise LLMError("empty_response", f"{EMPTY_STREAM} ({config.model}){why}")
    acc.finish_reason = _get(choice, "finish_reason") or "stop"


async def stream_chat(
    config: LLMConfig,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    on_text: TextCallback | None = None,
    on_reasoning: TextCallback | None = None,
    on_tool_call: ToolCallCallback | None = None,
    on_retry: RetryCallback | None = None,
    partial: list[Completion] | None = None,
) -> Completion:
    """Stream one completion; see the module docstring for retries, errors and cancellation.

    Callbacks (plain functions or coroutines): ``on_text(delta)``, ``on_reasoning(delta)``,
    ``on_tool_call(index, call_so_far)`` on every tool-call delta, ``on_retry(attempt, delay, error)``
    before each retry. On cancellation the partial :class:`Completion` is appended to ``partial``.
    """
    remember_secret(config.api_key)
    if config.is_local:
        local_model.configure(n_ctx=config.local_n_ctx, threads=config.local_threads)
    kwargs = _request_kwargs(config, messages, tools, stream=True)
    try:
        await ready()
    except Exception as exc:  # plugin boundary: importing litellm runs its code and its dependencies' (any error)
        log.warning("litellm could not be loaded", exc_info=True)
        raise LLMError("other", f"litellm could not be loaded ({config.model}): "
                                f"{one_line(scrub(str(exc)))[:MAX_ERROR_CHARS]}") from exc
    attempt = 0
    while True:
        attempt += 1
        acc = StreamAssembler()
        started = time.monotonic()
        try:
            await _one_attempt(config, kwargs, acc, on_text, on_reasoning, on_tool_call)
            if acc.empty:
                await _explain_empty_stream(config, kwargs, acc, on_text, on_tool_call)
            done = acc.completion()
            log.info("provider call %s: %d messages, %d tools, %.2f s, usage %s", config.model, len(messages),
                     len(tools or []), time.monotonic() - started, done.usage)
            return done
        except asyncio.CancelledError:
            log.info("provider call %s stopped after %.2f s", config.model, time.monotonic() - started)
            if partial is not None:
                partial.append(acc.completion(interrupted=True))
            raise
        except Exception as exc:  # provider boundary: litellm and the provider's SDK raise anything; classified
            err = classify_error(exc, config.model)
            err.attempts = attempt
            log.warning("provider call %s failed (attempt %d, %s): %s", config.model, attempt, err.kind,
                        scrub(str(err))[:MAX_ERROR_CHARS], exc_info=True)
            if acc.started:
                err.partial = acc.completion(interrupted=True)
            if err.kind == "transient" and not acc.started and attempt <= config.max_retries:
                delay = retry_delay(attempt, err.retry_after)
                await _call(on_retry, attempt, delay, err)
                await asyncio.sleep(delay)
                continue
            raise err from exc


def interrupted_tool_results(message: dict[str, Any], note: str = "interrupted: the turn was stopped before "
                             "this tool ran") -> list[Message]:
    """Tool results for every call in ``message`` so that none is left without one."""
    out = []
    for call in message.get("tool_calls") or []:
        name = (call.get("function") or {}).get("name") or None
        out.append(tool_result(call.get("id") or "", note, name=name, interrupted=True))
    return out


async def complete_text(config: LLMConfig, messages: list[dict[str, Any]], max_tokens: int) -> str:
    """A plain completion (no tools) of at most ``max_tokens``; returns the text (may be empty)."""
    cfg = replace(config, max_tokens=max_tokens)
    result = await stream_chat(cfg, messages)
    return (result.message.get("content") or "").strip()


class Summarizer:
    """The compaction summarizer: ``await summarizer(messages, max_tokens) -> str``.

    ``context_window`` is the summarizing model's own input limit (its n_ctx for the local model;
    litellm's model info otherwise; None when unknown), so the compactor can fit the material to the
    model that reads it, which need not be the session's model. It is looked up on first use: making
    a summarizer must not import litellm (the app imports it in the background after start-up).
    """

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._window: int | None = None
        self._window_known = False

    async def __call__(self, messages: list[dict[str, Any]], max_tokens: int) -> str:
        return await complete_text(self.config, messages, max_tokens)

    @property
    def context_window(self) -> int | None:
        if not self._window_known:
            self._window = summarizer_window(self.config)
            self._window_known = True
        return self._window


def make_summarizer(config: LLMConfig) -> SummarizeFn:
    """The compaction summarizer for ``config`` (see :class:`Summarizer`)."""
    return Summarizer(config)


def summarizer_window(config: LLMConfig) -> int | None:
    """Input tokens the summarizing model accepts, when known."""
    if local_model.is_local(config.model):
        return int(config.local_n_ctx)
    info = model_info(config.model)
    value = (info or {}).get("max_input_tokens")
    return int(value) if isinstance(value, int) and value > 0 else None


# ---------------------------------------------------------------------- token counting, model info


@lru_cache(maxsize=64)
def _tokenizer(model: str) -> Any:
    """litellm's tokenizer for ``model``, chosen once (choosing it costs ~0.1 ms a call)."""
    _lib()  # through the gate first: importing litellm.utils imports litellm
    from litellm.utils import select_tokenizer

    return select_tokenizer(model)


_local_counting = {"ok": True}


def _local_count(fn: Callable[..., int], *args: Any) -> int | None:
    """Count with the local model's tokenizer; None (fall back to litellm's default encoder) when
    the model or llama-cpp-python is not available."""
    if not _local_counting["ok"]:
        return None
    try:
        return fn(*args)
    except (local_model.LocalModelError, ImportError, OSError, ValueError):
        _local_counting["ok"] = False
        return None


def _litellm_count(model: str, **kwargs: Any) -> int:
    return int(_lib().token_counter(model=model, custom_tokenizer=_tokenizer(model), **kwargs))


def _count(model: str, local_fn: Callable[[Any], int], arg: Any, **kwargs: Any) -> int:
    """The local model's own tokenizer for ``arg`` when it is the model; litellm's counter otherwise."""
    if local_model.is_local(model):
        n = _local_count(local_fn, arg)
        if n is not None:
            return n
    return _litellm_count(model, **kwargs)


def token_counter(model: str, messages: list[dict[str, Any]]) -> int:
    """Tokens of ``messages`` for ``model`` (litellm's counter; the local model's own tokenizer)."""
    return _count(model, local_model.count_messages, messages, messages=messages)


def text_token_counter(model: str, text: str) -> int:
    return _count(model, local_model.count_text, text, text=text) if text else 0


@lru_cache(maxsize=64)
def _empty_request_tokens(model: str) -> int:
    return _litellm_count(model, messages=[])


def tools_token_counter(model: str, tools: Sequence[dict[str, Any]]) -> int:
    """Tokens the tool definitions add to a request."""
    if not tools:
        return 0
    if local_model.is_local(model):
        n = _local_count(local_model.count_tools, tools)
        if n is not None:
            return n
    return max(0, _litellm_count(model, messages=[], tools=list(tools)) - _empty_request_tokens(model))


def model_info(model: str, n_ctx: int | None = None) -> dict[str, Any] | None:
    """litellm's model info, or None for a model it does not know. The local model reports
    ``max_input_tokens = n_ctx`` (the configured one when ``n_ctx`` is not given)."""
    if local_model.is_local(model):
        return local_model.model_info(n_ctx)
    if _litellm is None and threading.get_ident() in _never_wait:
        return None  # not known yet: the caller shows a provisional window and asks again once loaded
    litellm = _lib()
    try:
        info = litellm.get_model_info(model)
    except litellm.exceptions.ModelNotMappedError:  # a model litellm does not know
        return None
    except Exception:  # provider boundary: litellm's lookup turns any other failure into a bare Exception
        log.warning("litellm's model info of %s failed", model, exc_info=True)
        return None
    return dict(info) if info else None


@lru_cache(maxsize=1)
def _suggestions() -> tuple[str, ...]:
    litellm = _lib()
    names = set()
    for name, info in litellm.model_cost.items():
        if isinstance(info, dict) and info.get("mode") == "chat" and name != "sample_spec":
            names.add(name)
    return (LOCAL_MODEL, *sorted(names - {LOCAL_MODEL}))


def model_suggestions() -> list[str]:
    """Model names for a picker: the offline default first, then litellm's chat models."""
    return list(_suggestions())
