"""Status bar: model, tokens used / window and %, estimate vs provider on the last call, state.

Public API of :class:`ContextStatusBar` (a ``QStatusBar``)
---------------------------------------------------------
Methods:
    set_model(name)
    set_snapshot(snapshot)              a ContextSnapshot (or None): used / window, %, accuracy
    set_last_call(estimated, reported)  the last call's estimate against what the provider reported
    set_state(state)                    "idle" | "streaming" | "tool" | "compacting" (others shown as is)
    set_agent_cost(usd, by_model=None)  an imported session's agent's own cost (its cost records),
                                        per model in the tooltip; None hides it
    set_session_cost(cost)              the session's cost so far at litellm's prices, an
                                        engine.usage.costs.SessionCost (main + subagents + compaction calls;
                                        the breakdown and the agent's own in the tooltip); None or no calls
                                        hides it
    set_palette(palette)
    texts() -> dict[str, str]           the shown texts by part (tests, accessibility)
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

from engine.model.snapshot import ContextSnapshot
from engine.usage.costs import SessionCost
from widgets.formatting import cost_tooltip, format_usd
from widgets.theme import Palette, format_tokens, palette, percent

STATE_LABELS = {
    "idle": "idle",
    "streaming": "streaming…",
    "tool": "running a tool…",
    "compacting": "compacting…",
}


class ContextStatusBar(QStatusBar):
    """The main window's status bar (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None, pal: Palette | None = None) -> None:
        super().__init__(parent)
        self._pal = pal or palette()
        self._state = "idle"
        self._over = ""
        self.model_label = QLabel("model: —")
        self.tokens_label = QLabel("— / — tokens")
        self.calls_label = QLabel("last call: —")
        self.state_label = QLabel()
        self.cost_label = QLabel()
        self.session_cost_label = QLabel()
        for w in (self.model_label, self.tokens_label, self.calls_label, self.state_label, self.cost_label,
                  self.session_cost_label):
            w.setContentsMargins(6, 0, 6, 0)
        self.addWidget(self.model_label)
        self.addPermanentWidget(self.session_cost_label)
        self.session_cost_label.hide()
        self.addPermanentWidget(self.cost_label)
        self.cost_label.hide()
        self.addPermanentWidget(self.tokens_label)
        self.addPermanentWidget(self.calls_label)
        self.addPermanentWidget(self.state_label)
        self.tokens_label.setToolTip(
            "Tokens the next request uses (prompt + output reserve) of the context window"
        )
        self.calls_label.setToolTip(
            "Our estimate of the last request against the provider's reported prompt tokens"
        )
        self.set_state("idle")

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self.set_state(self._state)
        self._style_tokens()

    def set_model(self, name: str) -> None:
        self.model_label.setText(f"model: {name or '—'}")
        self.model_label.setToolTip(name)

    def set_snapshot(self, s: ContextSnapshot | None) -> None:
        if s is None:
            self.tokens_label.setText("— / — tokens")
            self._over = ""
            self._style_tokens()
            return
        used = s.used + s.draft
        self.tokens_label.setText(
            f"{format_tokens(used)} / {format_tokens(s.window)} tokens ({percent(used, s.window)})"
            f" · {s.accuracy}"
        )
        self._over = "window" if used > s.window else ("threshold" if used > s.threshold_tokens else "")
        self._style_tokens()
        if s.model:
            self.set_model(s.model)

    def _style_tokens(self) -> None:
        pal = self._pal
        if self._over == "window":
            self.tokens_label.setStyleSheet(f"color: {pal.error}; font-weight: bold;")
        elif self._over == "threshold":
            self.tokens_label.setStyleSheet(f"color: {pal.warning}; font-weight: bold;")
        else:
            self.tokens_label.setStyleSheet("")

    def set_last_call(self, estimated: int | None, reported: int | None) -> None:
        if estimated is None and reported is None:
            self.calls_label.setText("last call: —")
            return
        text = f"last call: est. {format_tokens(estimated)} · reported {format_tokens(reported)}"
        if estimated is not None and reported:
            text += f" ({(estimated - reported) / reported * 100:+.1f}%)"
        self.calls_label.setText(text)

    def set_state(self, state: str) -> None:
        self._state = state
        pal = self._pal
        color = {
            "idle": pal.ok,
            "streaming": pal.regions["history_user"],
            "tool": pal.regions["history_tool"],
            "compacting": pal.marker,
        }.get(state, pal.muted)
        self.state_label.setText(f"<span style='color:{color}'>●</span> {STATE_LABELS.get(state, state)}")

    def set_agent_cost(self, usd: float | None, by_model: dict[str, float] | None = None) -> None:
        if usd is None:
            self.cost_label.clear()
            self.cost_label.setToolTip("")
            self.cost_label.hide()
            return
        self.cost_label.setText(f"agent's cost: {format_usd(usd)}")
        self.cost_label.setToolTip(cost_tooltip(usd, by_model))
        self.cost_label.show()

    def set_session_cost(self, cost: SessionCost | None) -> None:
        total = cost.total if cost is not None else None
        if cost is None or total is None or not total.calls:
            self.session_cost_label.clear()
            self.session_cost_label.setToolTip("")
            self.session_cost_label.hide()
            return
        if total.usd is None:
            self.session_cost_label.setText("cost: unknown")
        else:
            self.session_cost_label.setText(f"cost: {format_usd(total.usd)}{'+' if total.lower_bound else ''}")
        self.session_cost_label.setToolTip("\n".join(
            [f"What this session's {total.calls:,} call(s) cost so far (the calls' own figures)", *cost.lines()]))
        self.session_cost_label.show()

    def texts(self) -> dict[str, str]:
        return {
            "session_cost": self.session_cost_label.text(),
            "agent_cost": self.cost_label.text(),
            "model": self.model_label.text(),
            "tokens": self.tokens_label.text(),
            "last_call": self.calls_label.text(),
            "state": self.state_label.text(),
        }
