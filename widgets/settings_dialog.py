"""Settings dialog: every field of ``engine.store.config.Settings``, grouped, validated before it is accepted.

The dialog never writes a file and never stores a secret: on Save it emits the validated
``Settings`` (the app saves them) and, when the user typed an API key, ``api_key_entered(key)`` (the
app puts it in the OS keyring). Invalid values are refused in the dialog: the first problem is
shown with its reason (the engine's own validation, plus checks only a form can make — a URL that is
not http(s), a workspace folder that does not exist, an output limit not below the window) and the
field is focused; nothing is emitted.

Non-modal: show it with ``open()`` and listen to ``settings_accepted``.

Public API of :class:`SettingsDialog`
-------------------------------------
Signals:
    settings_accepted(object)     the validated ``Settings``
    api_key_entered(str)          a new API key typed by the user (store it in the keyring)
    api_key_forget_requested()    "Forget stored key"
Methods:
    set_settings(settings)        fill the form
    settings() -> Settings        the form's values, validated (raises ValueError naming the field)
    validate() -> str             "" when valid, else the reason (also shown in the dialog)
    try_accept() -> bool          validate, emit, close
    set_model_suggestions(names)  completion list for the model field (e.g. from litellm's model list)
    set_api_key_status(text)      e.g. "A key is stored in the OS keyring" / "No keyring: set $OPENAI_API_KEY"
    set_window_info(text)         e.g. "auto: 128,000 tokens from model info"
    field(name) -> QWidget        the editor of a Settings field (tests)
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QStringListModel, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QCompleter,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.store.config import (
    ESTIMATORS,
    LOCAL_MODEL,
    LOG_LEVELS,
    OFFLOAD_STRATEGIES,
    SUMMARY_MODE_CHOICES,
    THEMES,
    Settings,
)
from widgets.theme import Palette, palette

INT_MAX = 2_000_000_000
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEYLIKE = re.compile(r"^(sk-|sk_|gsk_|xai-|AIza)|^[A-Za-z0-9_\-]{32,}$")


def _spin(minimum: int, maximum: int, suffix: str = "") -> QSpinBox:
    s = QSpinBox()
    s.setRange(minimum, maximum)
    s.setGroupSeparatorShown(True)
    if suffix:
        s.setSuffix(suffix)
    s.setAlignment(Qt.AlignmentFlag.AlignRight)
    return s


def _dspin(minimum: float, maximum: float, step: float, decimals: int, suffix: str = "") -> QDoubleSpinBox:
    s = QDoubleSpinBox()
    s.setRange(minimum, maximum)
    s.setSingleStep(step)
    s.setDecimals(decimals)
    if suffix:
        s.setSuffix(suffix)
    s.setAlignment(Qt.AlignmentFlag.AlignRight)
    return s


class SettingsDialog(QDialog):
    """Grouped settings form (see the module docstring)."""

    settings_accepted = Signal(object)
    api_key_entered = Signal(str)
    api_key_forget_requested = Signal()

    def __init__(self, parent: QWidget | None = None, settings: Settings | None = None,
                 pal: Palette | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setModal(False)
        self.resize(640, 560)
        self._pal = pal or palette()
        self._base = settings or Settings()
        self._fields: dict[str, QWidget] = {}
        self._file_dialog: QFileDialog | None = None

        layout = QVBoxLayout(self)
        self.tabs = QTabWidget()
        layout.addWidget(self.tabs, 1)
        self._build_provider_page()
        self._build_window_page()
        self._build_compaction_page()
        self._build_offload_page()
        self._build_agent_page()
        self._build_appearance_page()
        self._build_buttons(layout)
        self.set_palette(self._pal)
        self.set_settings(self._base)

    # --- construction
    def _build_provider_page(self) -> None:
        """Model (with completion and the offline default), endpoint, API key, timeouts."""
        form = self._page("Provider")
        self.model_edit = QLineEdit()
        self.model_edit.setPlaceholderText(f"e.g. gpt-4o-mini, anthropic/claude-3-5-haiku, {LOCAL_MODEL}")
        self._model_list = QStringListModel([LOCAL_MODEL], self)
        completer = QCompleter(self._model_list, self)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        completer.setMaxVisibleItems(12)
        self.model_edit.setCompleter(completer)
        self.local_button = QPushButton("Offline default")
        self.local_button.setToolTip(f"Use the bundled local model ({LOCAL_MODEL}); no key, no network")
        self.local_button.setAutoDefault(False)
        self.local_button.clicked.connect(lambda: self.model_edit.setText(LOCAL_MODEL))
        row = QHBoxLayout()
        row.addWidget(self.model_edit, 1)
        row.addWidget(self.local_button)
        form.addRow("Model", row)
        self._fields["model"] = self.model_edit
        self.api_base_edit = QLineEdit()
        self.api_base_edit.setPlaceholderText("empty = the provider's default endpoint")
        form.addRow("API base URL", self.api_base_edit)
        self._fields["api_base"] = self.api_base_edit
        self.api_key_edit = QLineEdit()
        self.api_key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key_edit.setPlaceholderText("leave empty to keep the stored key")
        self.show_key = QCheckBox("Show")
        self.show_key.toggled.connect(
            lambda on: self.api_key_edit.setEchoMode(
                QLineEdit.EchoMode.Normal if on else QLineEdit.EchoMode.Password
            )
        )
        self.forget_key = QPushButton("Forget stored key")
        self.forget_key.setAutoDefault(False)
        self.forget_key.clicked.connect(self.api_key_forget_requested)
        key_row = QHBoxLayout()
        key_row.addWidget(self.api_key_edit, 1)
        key_row.addWidget(self.show_key)
        key_row.addWidget(self.forget_key)
        form.addRow("API key", key_row)
        self.key_status = QLabel("The key is kept in the OS keyring, never in our files")
        self.key_status.setWordWrap(True)
        form.addRow("", self.key_status)
        self.api_key_env_edit = QLineEdit()
        self.api_key_env_edit.setPlaceholderText("name of an environment variable, e.g. OPENAI_API_KEY")
        form.addRow("Key from environment", self.api_key_env_edit)
        self._fields["api_key_env"] = self.api_key_env_edit
        self._add(form, "request_timeout", "Request timeout", _dspin(0, 3600, 5, 1, " s"))
        self._add(form, "max_retries", "Retries on transient errors", _spin(0, 100))

    def _build_window_page(self) -> None:
        """The context window (auto or overridden), the output limit, the local model's context."""
        form = self._page("Context window")
        self.window_override = QCheckBox("Override")
        self.window_spin = _spin(0, INT_MAX, " tokens")
        self.window_spin.setEnabled(False)
        self.window_override.toggled.connect(self.window_spin.setEnabled)
        wrow = QHBoxLayout()
        wrow.addWidget(self.window_override)
        wrow.addWidget(self.window_spin, 1)
        form.addRow("Context window", wrow)
        self._fields["context_window"] = self.window_spin
        self.window_info = QLabel("auto: from the model's info (max output × 4 when unknown)")
        self.window_info.setWordWrap(True)
        form.addRow("", self.window_info)
        self._add(form, "max_tokens", "Max output tokens", _spin(0, INT_MAX, " tokens"))
        self._add(form, "local_n_ctx", "Local model context", _spin(0, INT_MAX, " tokens"))
        self._add(form, "local_threads", "Local model threads", _spin(0, 256))

    def _build_compaction_page(self) -> None:
        form = self._page("Compaction")
        self._add(form, "compact_threshold_ratio", "Compact at", _dspin(0, 1, 0.05, 2, " × window"))
        self._add(form, "reserve_ratio", "Keep verbatim", _dspin(0, 1, 0.05, 2, " × window"))
        self._add(form, "summary_max_tokens", "Summary length limit", _spin(0, INT_MAX, " tokens"))
        mode = QComboBox()
        mode.addItems(list(SUMMARY_MODE_CHOICES))
        mode.setToolTip("digest: facts taken from the messages, no model · model: the model's summary, given "
                        "the digest · both: the digest and the model's narrative · auto: the digest on the "
                        "bundled offline model, both on any other")
        self._add(form, "summary_mode", "Summaries", mode)
        est = QComboBox()
        est.addItems(list(ESTIMATORS))
        self._add(form, "estimator", "Token estimator", est)
        self._add(form, "auto_compact", "", QCheckBox("Compact automatically after a turn"))

    def _build_offload_page(self) -> None:
        form = self._page("Tool results")
        strat = QComboBox()
        strat.addItems(list(OFFLOAD_STRATEGIES))
        self._add(form, "offload_strategy", "Strategy", strat)
        self._add(form, "offload_recent_bytes", "Recent result limit", _spin(0, INT_MAX, " bytes"))
        self._add(form, "offload_old_bytes", "Older result limit", _spin(0, INT_MAX, " bytes"))
        self._add(form, "offload_recent_n", "Recent results", _spin(0, 100_000))
        self._add(form, "offload_retention_days", "Keep offloaded files", _spin(0, 100_000, " days"))
        self._add(form, "prune_protect_tokens", "Prune: protect newest", _spin(0, INT_MAX, " tokens"))
        self._add(form, "prune_minimum_tokens", "Prune: at least", _spin(0, INT_MAX, " tokens"))
        self._add(form, "prune_protect_turns", "Prune: protect turns", _spin(0, 100_000))

    def _build_agent_page(self) -> None:
        """Workspace folder, permissions, iterations, system prompt, more session folders."""
        form = self._page("Agent and tools")
        self.workspace_edit = QLineEdit()
        self.workspace_edit.setPlaceholderText("folder the agent's tools may read (empty = none)")
        browse = QPushButton("Browse…")
        browse.setAutoDefault(False)
        browse.clicked.connect(self._browse_workspace)
        wsrow = QHBoxLayout()
        wsrow.addWidget(self.workspace_edit, 1)
        wsrow.addWidget(browse)
        form.addRow("Workspace folder", wsrow)
        self._fields["workspace"] = self.workspace_edit
        self._add(form, "allow_write", "", QCheckBox("Allow the agent to write files in the workspace"))
        self._add(form, "allow_shell", "", QCheckBox("Allow the agent to run shell commands"))
        self._add(form, "max_iterations", "Max model calls per turn", _spin(0, 100_000))
        prompt = QPlainTextEdit()
        prompt.setPlaceholderText("empty = the bundled default system prompt")
        prompt.setMinimumHeight(90)
        self._add(form, "system_prompt", "System prompt", prompt)
        sources = QLineEdit()
        sources.setPlaceholderText(f"more folders of agent sessions for `ctxbench sources` (separated by {os.pathsep})")
        self._add(form, "source_dirs", "Agent session folders", sources)

    def _build_appearance_page(self) -> None:
        form = self._page("Appearance")
        theme = QComboBox()
        theme.addItems(list(THEMES))
        self._add(form, "theme", "Theme", theme)
        level = QComboBox()
        level.addItems(list(LOG_LEVELS))
        level.setToolTip("What the log file in the data directory keeps (Help → Open log folder)")
        self._add(form, "log_level", "Log level", level)

    def _build_buttons(self, layout: QVBoxLayout) -> None:
        """The line that shows the first problem, then Save / Cancel."""
        self.error_label = QLabel("")
        self.error_label.setWordWrap(True)
        self.error_label.setVisible(False)
        layout.addWidget(self.error_label)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.try_accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)

    def _page(self, title: str) -> QFormLayout:
        """A new tab holding a form."""
        page = QWidget()
        form = QFormLayout(page)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        self.tabs.addTab(page, title)
        return form

    def _add(self, form: QFormLayout, name: str, label: str, widget: QWidget) -> None:
        self._fields[name] = widget
        form.addRow(label, widget)

    def field(self, name: str) -> QWidget:
        return self._fields[name]

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self.error_label.setStyleSheet(f"color: {pal.error}; font-weight: bold;")
        self.key_status.setStyleSheet(f"color: {pal.muted};")
        self.window_info.setStyleSheet(f"color: {pal.muted};")

    # --- public API
    def set_model_suggestions(self, names: Iterable[str]) -> None:
        unique = sorted({n for n in names if n} | {LOCAL_MODEL})
        self._model_list.setStringList(unique)

    def model_suggestions(self) -> list[str]:
        return self._model_list.stringList()

    def set_api_key_status(self, text: str) -> None:
        self.key_status.setText(text)

    def set_window_info(self, text: str) -> None:
        self.window_info.setText(text)

    def set_settings(self, settings: Settings) -> None:
        self._base = settings
        for f in dataclasses.fields(Settings):
            value = getattr(settings, f.name)
            if f.name == "context_window":
                self.window_override.setChecked(value is not None)
                self.window_spin.setValue(int(value) if value is not None else 0)
                continue
            self._set_value(self._fields[f.name], value)
        self.api_key_edit.clear()
        self.set_error("")

    @staticmethod
    def _set_value(w: QWidget, value: Any) -> None:
        if isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif isinstance(w, QSpinBox):
            w.setValue(int(value))
        elif isinstance(w, QDoubleSpinBox):
            w.setValue(float(value))
        elif isinstance(w, QComboBox):
            i = w.findText(str(value))
            w.setCurrentIndex(max(0, i))
        elif isinstance(w, QPlainTextEdit):
            w.setPlainText(str(value))
        elif isinstance(w, QLineEdit):
            w.setText(str(value))

    @staticmethod
    def _get_value(w: QWidget) -> Any:
        if isinstance(w, QCheckBox):
            return w.isChecked()
        if isinstance(w, QSpinBox):
            return w.value()
        if isinstance(w, QDoubleSpinBox):
            return round(w.value(), w.decimals())
        if isinstance(w, QComboBox):
            return w.currentText()
        if isinstance(w, QPlainTextEdit):
            return w.toPlainText()
        if isinstance(w, QLineEdit):
            return w.text().strip()
        raise TypeError(type(w))

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(Settings):
            if f.name == "context_window":
                out[f.name] = self.window_spin.value() if self.window_override.isChecked() else None
            else:
                out[f.name] = self._get_value(self._fields[f.name])
        return out

    def settings(self) -> Settings:
        """The form as validated Settings; raise ValueError whose text starts with the field name."""
        values = self.values()
        base = dataclasses.replace(self._base, **values)
        base.validate()  # engine rules: ranges, choices, non-empty model
        self._form_checks(base)
        return base

    @staticmethod
    def _form_checks(s: Settings) -> None:
        if s.api_base and not re.match(r"^https?://[^\s/]+", s.api_base):
            raise ValueError(f"api_base must be an http:// or https:// URL, got {s.api_base!r}")
        if s.api_key_env:
            if KEYLIKE.search(s.api_key_env) and not ENV_NAME.match(s.api_key_env):
                raise ValueError(
                    "api_key_env takes the NAME of an environment variable (e.g. OPENAI_API_KEY), "
                    "not the key itself: put the key in the API key field"
                )
            if not ENV_NAME.match(s.api_key_env):
                raise ValueError(
                    "api_key_env must be an environment variable name (letters, digits, _), "
                    f"got {s.api_key_env!r}"
                )
        if s.context_window is not None and s.max_tokens >= s.context_window:
            raise ValueError(
                f"max_tokens ({s.max_tokens:,}) must be smaller than the context window "
                f"({s.context_window:,})"
            )
        if s.workspace:
            p = Path(s.workspace).expanduser()
            if not p.is_dir():
                raise ValueError(f"workspace folder does not exist: {s.workspace}")
        if s.offload_old_bytes > s.offload_recent_bytes:
            raise ValueError(
                f"offload_old_bytes ({s.offload_old_bytes:,}) must not exceed offload_recent_bytes "
                f"({s.offload_recent_bytes:,}): older results get the smaller limit"
            )

    def validate(self) -> str:
        try:
            self.settings()
        except ValueError as exc:
            reason = str(exc)
            self.set_error(reason)
            self._focus_field(reason)
            return reason
        self.set_error("")
        return ""

    def _focus_field(self, reason: str) -> None:
        for field in self._fields.values():
            field.setStyleSheet("")
        name = reason.split(" ", 1)[0]
        w = self._fields.get(name)
        if w is None:
            for key in sorted(self._fields, key=len, reverse=True):
                if key in reason:
                    w = self._fields[key]
                    break
        if w is None:
            return
        page = w.parentWidget()
        while page is not None and self.tabs.indexOf(page) < 0:
            page = page.parentWidget()
        if page is not None:
            self.tabs.setCurrentWidget(page)
        w.setStyleSheet(f"border: 2px solid {self._pal.error};")
        w.setFocus()

    def set_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))
        if not text:
            for w in self._fields.values():
                w.setStyleSheet("")

    def error_text(self) -> str:
        return self.error_label.text() if self.error_label.isVisible() else ""

    def try_accept(self) -> bool:
        if self.validate():
            return False
        settings = self.settings()
        key = self.api_key_edit.text().strip()
        self._base = settings
        self.settings_accepted.emit(settings)
        if key:
            self.api_key_entered.emit(key)
            self.api_key_edit.clear()
        self.accept()
        return True

    def _browse_workspace(self) -> None:
        dlg = QFileDialog(self, "Workspace folder", self.workspace_edit.text() or str(Path.home()))
        dlg.setFileMode(QFileDialog.FileMode.Directory)
        dlg.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dlg.fileSelected.connect(self.workspace_edit.setText)
        self._file_dialog = dlg
        dlg.open()
