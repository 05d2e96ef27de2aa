"""Retrying a transient failure: how long to wait (the provider's Retry-After, else bounded
exponential backoff with jitter)."""

from __future__ import annotations

import email.utils
import random
import time
from typing import Any

RETRY_BASE_DELAY = 0.5  # seconds; doubled per attempt
RETRY_MAX_DELAY = 8.0
RETRY_AFTER_CAP = 30.0


def retry_after_of(exc: BaseException) -> float | None:
    """The delay the provider asked for (``retry-after-ms`` / ``retry-after`` headers), in seconds."""
    headers: Any = getattr(exc, "litellm_response_headers", None)
    if not headers:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after-ms")
        if value:
            return max(0.0, float(value) / 1000)
        value = headers.get("retry-after")
    except (AttributeError, TypeError, ValueError, ArithmeticError):  # headers of no foreseen shape, no number
        return None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff(
    attempt: int,
    retry_after: float | None,
    base_delay: float = RETRY_BASE_DELAY,
    max_delay: float = RETRY_MAX_DELAY,
    after_cap: float = RETRY_AFTER_CAP,
) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): Retry-After if given (capped), else
    exponential backoff with jitter, capped."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), after_cap)
    base = min(base_delay * (2.0 ** (attempt - 1)), max_delay)
    return base * (0.8 + 0.4 * random.random())
