"""Settings and API keys: save and use settings, the key's status, store / forget it in the OS keyring."""

from __future__ import annotations

from engine.store.config import Settings, save_settings
from engine.workbench.core import WorkbenchCore, one_line
from engine.workbench.display import Display
from engine.workbench.document import OpenDocument
from engine.workbench.events import SettingsChanged
from engine.workbench.runtime import LlmRuntime

WINDOW_SOURCES = {
    "override": "set here",
    "model": "from the model's info",
    "fallback": "max output × 4 (the model's window is not known)",
}


def api_key_status(settings: Settings) -> str:
    """Where the key for the settings' model comes from (a sentence for the settings dialog)."""
    from engine.llm.local_model import is_local
    from engine.store.secrets import env_var_for, lookup_api_key, provider_of

    model = settings.model
    if is_local(model):
        return "The offline model needs no key"
    provider = provider_of(model)
    found = lookup_api_key(model, settings.api_key_env)
    if found.source == "keyring":
        return f"A key for {provider} is stored in the OS keyring"
    if found.key:
        return f"A key for {provider} comes from the {found.source}"
    return (f"No key for {provider}: type one here (kept in the OS keyring) or set "
            f"${env_var_for(provider)} in the environment")


class KeysPart:
    """The settings part of the service: it replaces the core's settings, and builds the open document's agent
    again with them (the runtime says when it is stale; the display shows the state after)."""

    def __init__(self, core: WorkbenchCore, doc: OpenDocument, runtime: LlmRuntime, display: Display) -> None:
        self.core = core
        self.doc = doc
        self.runtime = runtime
        self.display = display

    def apply_settings(self, settings: Settings) -> bool:
        """Save and use ``settings``; False (and a notice) when they cannot be saved."""
        try:
            save_settings(settings)
        except (ValueError, OSError) as exc:
            self.core.notice("error", f"settings not saved: {one_line(str(exc))}")
            return False
        self.core.settings = settings
        self.core.emit(SettingsChanged(settings))
        if self.doc.session is not None and not self.doc.session.closed:
            if self.doc.busy:
                self.runtime.agent_stale = True  # used from the next turn on
            else:
                self.doc.make_agent()
                self.display.emit_state()
        return True

    def api_key_status(self) -> str:
        return api_key_status(self.core.settings)

    def store_api_key(self, key: str) -> bool:
        from engine.store.secrets import provider_of, store_api_key

        provider = provider_of(self.core.settings.model)
        try:
            store_api_key(provider, key)
        except (RuntimeError, ValueError) as exc:
            self.core.notice("error", f"the API key was not stored: {exc}")
            return False
        self.core.notice("info", f"the API key for {provider} is stored in the OS keyring")
        if self.doc.session is not None and not self.doc.busy:
            self.doc.make_agent()
        return True

    def forget_api_key(self) -> bool:
        from engine.store.secrets import delete_api_key, provider_of

        provider = provider_of(self.core.settings.model)
        removed = delete_api_key(provider)
        self.core.notice("info", f"the stored key for {provider} was removed" if removed
                    else f"no key for {provider} was stored in the OS keyring")
        return removed

    def window_description(self) -> str:
        agent = self.doc.agent
        if agent is None:
            return ""
        w = agent.window
        return f"now: {w.context_window:,} tokens ({WINDOW_SOURCES.get(w.source, w.source)})"


__all__ = ["KeysPart", "api_key_status"]
