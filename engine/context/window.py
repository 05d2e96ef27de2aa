"""The one window resolver: which context window (and output reserve) a request is measured against.

Every place that needs a window asks :func:`resolve_window` for the rules, through one of the
readers below, which only gather its inputs:

- :func:`resolve_window` — the rules: an override wins; else the model's input limit; else
  ``max_tokens × 4`` (``source`` says which);
- :func:`resolve_context_window` — the model's limit looked up (litellm's model info, through
  :mod:`engine.llm.client`, or an injected ``model_info``);
- :func:`window_for` — what the settings say (a given window, the override, the settings' model);
- :func:`agent_window` — the window a running agent plans with (its LLM config's model);
- :func:`session_window` — a session at rest (the window its last turn stored, or its import's);
- :func:`imported_window` — an imported session's own window, while no turn has run on it;
- :func:`import_window` — the window an import settles on (observed from the log when unknown).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.model.snapshot import WindowInfo
from engine.store.config import Settings

if TYPE_CHECKING:
    from engine.llm.client import LLMConfig
    from engine.store.session import StoredSession

ModelInfo = Callable[[str], dict[str, Any] | None]

WINDOW_FALLBACK_FACTOR = 4
OBSERVED_STEP = 1024  # an observed window is rounded up to a multiple of this


def resolve_window(
    model_max_input: int | None,
    override: int | None,
    max_tokens: int,
) -> WindowInfo:
    """The window rules: a setting overrides model info; with neither, window = max_tokens × 4."""
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    if override is not None:
        if override <= 0:
            raise ValueError(f"context window override must be positive, got {override}")
        return WindowInfo(int(override), max_tokens, "override")
    if model_max_input and model_max_input > 0:
        return WindowInfo(int(model_max_input), max_tokens, "model")
    return WindowInfo(max_tokens * WINDOW_FALLBACK_FACTOR, max_tokens, "fallback")


def resolve_context_window(
    model: str,
    override: int | None,
    max_tokens: int,
    model_info: ModelInfo | None = None,
) -> WindowInfo:
    """Resolve the window for ``model`` using litellm's model info (via engine.llm.client) unless overridden."""
    if override is not None:
        return resolve_window(None, override, max_tokens)
    if model_info is None:
        from engine.llm import client as llm

        model_info = llm.model_info
    try:
        info = model_info(model)  # None for a model litellm does not know
    except ImportError:  # litellm cannot be loaded: fall back to settings
        info = None
    max_input = None
    if info:
        max_input = info.get("max_input_tokens") or info.get("max_tokens")
    return resolve_window(max_input if isinstance(max_input, int) else None, None, max_tokens)


def window_for(settings: Settings, window: WindowInfo | int | None = None) -> WindowInfo:
    """The window to plan with: given, else the settings' override, else model info, else max_tokens × 4."""
    if isinstance(window, WindowInfo):
        return window
    if isinstance(window, int):
        return resolve_window(None, window, settings.max_tokens)
    if settings.context_window is not None:
        return resolve_window(None, settings.context_window, settings.max_tokens)
    return resolve_context_window(settings.model, None, settings.max_tokens)


def _local_aware(n_ctx: int | None) -> ModelInfo:
    from engine.llm import client as llm

    return lambda name: llm.model_info(name, n_ctx=n_ctx)


def agent_window(settings: Settings, config: LLMConfig) -> WindowInfo:
    """The window the agent plans with: the settings' override, else the model's (the local model's
    ``n_ctx``), else ``max_tokens × 4``."""
    return resolve_context_window(
        config.model, settings.context_window, config.max_tokens, model_info=_local_aware(config.local_n_ctx)
    )


def session_window(
    session: StoredSession,
    settings: Settings,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
) -> WindowInfo:
    """The window of a session at rest (``inspect``, manual compaction without an agent).

    The settings' override; else the window the agent last ran with (stored in session.json); else
    the window an import settled on; else the model's (``model``, the session's, or the settings').
    """
    reserve = max_tokens or settings.max_tokens
    if settings.context_window is not None:
        return resolve_window(None, settings.context_window, reserve)
    stored = session.meta.get("window")
    stored_window = stored.get("context_window") if isinstance(stored, dict) else None
    if isinstance(stored, dict) and isinstance(stored_window, int) and stored_window > 0:
        kept = stored.get("max_tokens")
        reserve = max_tokens or (kept if isinstance(kept, int) and kept > 0 else settings.max_tokens)
        return WindowInfo(stored_window, reserve, str(stored.get("source") or "model"))
    imported = session.meta.get("import")
    if isinstance(imported, dict) and isinstance(imported.get("window"), int) and imported["window"] > 0:
        return WindowInfo(imported["window"], reserve, str(imported.get("window_source") or "observed"))
    name = model or str(session.meta.get("model") or "") or settings.model
    return resolve_context_window(name, None, reserve, model_info=_local_aware(settings.local_n_ctx))


def imported_window(session: StoredSession, settings: Settings) -> tuple[WindowInfo, str] | None:
    """The window and model of the agent that made an imported session, while it is still what was
    imported (no ctxbench turn has run on it since: a turn stores the window it ran with); None for
    any other session. The view of such a session is drawn against its own model, whatever model the
    settings choose for running turns (and whatever window override they hold)."""
    imported = session.meta.get("import")
    if not isinstance(imported, dict) or session.meta.get("window") is not None:
        return None
    window = imported.get("window")
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        return None
    source = str(imported.get("window_source") or "observed")
    return WindowInfo(window, settings.max_tokens, source), str(session.meta.get("model") or "")


def import_window(
    settings: Settings,
    window: WindowInfo | int | None,
    model: str,
    model_info: ModelInfo | None,
    max_prompt: int,
) -> WindowInfo:
    """The window an import settles on: given, or the settings' override; else the model's; for an
    unknown model the smallest multiple of 1024 that held every prompt the log reports."""
    if window is not None or settings.context_window is not None:
        return window_for(settings, window)
    info = WindowInfo(0, settings.max_tokens, "fallback")
    if model and model_info is not None:
        info = resolve_context_window(model, None, settings.max_tokens, model_info=model_info)
    if info.source == "fallback":
        need = max(max_prompt + settings.max_tokens, settings.max_tokens * WINDOW_FALLBACK_FACTOR)
        info = WindowInfo(-(-need // OBSERVED_STEP) * OBSERVED_STEP, settings.max_tokens, "observed")
    return info
