"""What a failed completion is: :class:`LLMError` with a ``kind``, and :func:`classify_error`, which
maps any exception from litellm or the provider to one — context window exceeded (→ the reactive
compaction path), transient (rate limit, connection, timeout, 5xx), auth, bad request, other.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from engine.llm import local_model
from engine.llm.retry import retry_after_of
from engine.model.text import one_line
from engine.store.secrets import scrub

ErrorKind = Literal["context_window", "transient", "auth", "bad_request", "empty_response", "other"]
ERROR_KINDS: tuple[ErrorKind, ...] = ("context_window", "transient", "auth", "bad_request", "empty_response", "other")
MAX_ERROR_CHARS = 400

CONTEXT_PATTERNS = (
    "maximum context length",
    "context_length_exceeded",
    "context length exceeded",
    "context window exceeded",
    "exceeds the context window",
    "exceed context window",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "maximum prompt length",
    "reduce the length of the messages",
    "string_above_max_length",
)
_LLAMA_CTX = re.compile(r"requested tokens \(\d+\) exceed context window of \d+", re.I)


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass
class Completion:
    message: dict[str, Any]  # assistant message: content, reasoning_content, tool_calls (+ id, ts)
    usage: Usage | None
    finish_reason: str | None
    interrupted: bool = False


class LLMError(Exception):
    """A failed completion. ``kind`` is one of :data:`ERROR_KINDS`; ``message`` is one clean line."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        retry_after: float | None = None,
        status_code: int | None = None,
        partial: Completion | None = None,
        attempts: int = 1,
    ) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown LLMError kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after
        self.status_code = status_code
        self.partial = partial
        self.attempts = attempts

    def __str__(self) -> str:
        return self.message


def _clean_provider_text(text: str) -> str:
    """Strip litellm's prefixes ("litellm.BadRequestError: …OpenAIException - ") from a message."""
    text = one_line(text)
    text = text.split(" Original exception:", 1)[0]
    if "Exception - " in text:
        text = text.rsplit("Exception - ", 1)[1]
    text = re.sub(r"^(?:litellm\.)?\w*(?:Error|Exception)\s*:\s*", "", text)
    while True:
        stripped = re.sub(r"^(?:litellm\.)?\w+(?:Error|Exception)\s*:\s*", "", text)
        if stripped == text:
            break
        text = stripped
    text = text.replace("Received Model Group=", "model ").strip()
    return text


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen and len(seen) < 10:
        seen.append(cur)
        cur = getattr(cur, "original_exception", None) or cur.__cause__ or cur.__context__
    return seen


def _is_malformed_stream(exc: BaseException) -> bool:
    if any(isinstance(e, json.JSONDecodeError) for e in _chain(exc)):
        return True
    text = str(exc)
    return any(s in text for s in ("Expecting property name", "Expecting value", "JSONDecodeError",
                                   "Unterminated string", "Extra data: line"))


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    try:
        return int(code) if code is not None else None
    except (TypeError, ValueError):
        return None


def classify_error(exc: BaseException, model: str | None = None) -> LLMError:
    """Map any exception from a completion to an :class:`LLMError` with a clear, scrubbed line."""
    if isinstance(exc, LLMError):
        return exc
    raw = scrub(str(exc) or type(exc).__name__)
    detail = _clean_provider_text(raw) or type(exc).__name__
    lower = raw.lower()
    status = _status(exc)
    name = type(exc).__name__
    names = {type(e).__name__ for e in _chain(exc)} | {c.__name__ for c in type(exc).__mro__}
    provider = getattr(exc, "llm_provider", None) or (model.split("/", 1)[0] if model and "/" in model else None)
    where = f" ({model})" if model else ""

    def make(kind: ErrorKind, label: str) -> LLMError:
        text = f"{label}{where}: {detail}" if detail and detail.lower() not in label.lower() else label + where
        if len(text) > MAX_ERROR_CHARS:
            text = text[: MAX_ERROR_CHARS - 1] + "…"
        return LLMError(kind, text, retry_after=retry_after_of(exc), status_code=status)

    rate_limited = "RateLimitError" in names or status == 429
    if "ContextWindowExceededError" in names or _LLAMA_CTX.search(raw) or (
        not rate_limited and any(p in lower for p in CONTEXT_PATTERNS)
    ):
        return make("context_window", "the request does not fit the model's context window")
    if _is_malformed_stream(exc):
        return make("other", "the provider sent a malformed response stream")
    if "AuthenticationError" in names or status == 401:
        return make("auth", "authentication failed; check the API key")
    if "PermissionDeniedError" in names or status == 403:
        return make("auth", "permission denied by the provider; check the API key and its access")
    if rate_limited:
        return make("transient", "rate limited by the provider")
    if provider == local_model.PROVIDER and "NotFoundError" not in names:
        return make("other", "the offline model failed")
    if names & {"Timeout", "APITimeoutError", "TimeoutError", "ReadTimeout", "ConnectTimeout"}:
        return make("transient", "the request timed out")
    if names & {"APIConnectionError", "ConnectError", "ConnectionError", "ClientConnectionError",
                "ServerDisconnectedError", "RemoteProtocolError", "ReadError", "ClientPayloadError"}:
        return make("transient", "connection to the provider failed")
    if names & {"InternalServerError", "ServiceUnavailableError", "BadGatewayError",
                "MidStreamFallbackError"} or (status is not None and status >= 500):
        return make("transient", f"the provider had a server error{f' ({status})' if status else ''}")
    if names & {"NotFoundError"} or status == 404:
        return make("bad_request", "model or endpoint not found")
    if names & {"BadRequestError", "UnprocessableEntityError", "UnsupportedParamsError",
                "InvalidRequestError"} or status in (400, 413, 422):
        return make("bad_request", "the provider rejected the request")
    return make("other", f"completion failed ({name})")
