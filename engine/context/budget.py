"""The budget test and calibration.

    history_budget = context_window − system − summary − tool_definitions − max_tokens

Budget functions are pure: messages and integers in, numbers out. They never build the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.context.calibration import Calibrator  # noqa: F401  (re-exported)
from engine.context.snapshots import build_snapshot, scaled_sum  # noqa: F401  (re-exported)
from engine.context.tokens import estimate_message_tokens, estimate_tool_defs_tokens
from engine.context.window import WINDOW_FALLBACK_FACTOR, resolve_context_window, resolve_window  # noqa: F401
from engine.model.messages import Message
from engine.model.snapshot import (  # noqa: F401  (re-exported: the names' old home)
    CALIBRATED,
    ESTIMATED,
    EXACT,
    PROMPT_REGIONS,
    REPORTED,
    Accuracy,
    ContextSnapshot,
    WindowInfo,
    history_budget,
)


def is_over_context_budget(
    context_window: int,
    messages: Sequence[Message],
    tool_defs: Sequence[dict[str, Any]] | None,
    max_tokens: int,
) -> bool:
    """Σ estimate(messages) + estimate(tool_defs) + max_tokens > context_window."""
    total = sum(estimate_message_tokens(m) for m in messages)
    return total + estimate_tool_defs_tokens(tool_defs) + max_tokens > context_window
