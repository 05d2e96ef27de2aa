"""The SPEC's budget test: is a request of these messages, tools and reserve over the window?

Pure: messages and integers in, a yes or no out; it never builds the request. (The snapshot types and
``history_budget`` live in :mod:`engine.model.snapshot`, calibration in :mod:`engine.context.calibration`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.context.tokens import estimate_message_tokens, estimate_tool_defs_tokens
from engine.model.messages import Message


def is_over_context_budget(
    context_window: int,
    messages: Sequence[Message],
    tool_defs: Sequence[dict[str, Any]] | None,
    max_tokens: int,
) -> bool:
    """Σ estimate(messages) + estimate(tool_defs) + max_tokens > context_window."""
    total = sum(estimate_message_tokens(m) for m in messages)
    return total + estimate_tool_defs_tokens(tool_defs) + max_tokens > context_window
