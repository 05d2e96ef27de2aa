from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from engine.store.config import LOCAL_MODEL, Settings, config_dir
from widgets.settings_dialog import SettingsDialog


@pytest.fixture
def dlg(qtbot):
    d = SettingsDialog()
    qtbot.addWidget(d)
    d.open()
    qtbot.waitExposed(d)
    return d


def custom(tmp_path: Path) -> Settings:
    return Settings(
        model="openai/gpt-4o-mini", api_base="http://localhost:8080/v1", api_key_env="MY_KEY",
        request_timeout=30.0, max_retries=1, context_window=64_000, max_tokens=2_000, local_n_ctx=4096,
        local_threads=4, compact_threshold_ratio=0.7, reserve_ratio=0.2, summary_max_tokens=800,
        estimator="exact", auto_compact=False, offload_strategy="middle_out", offload_recent_bytes=40_000,
        offload_old_bytes=2_000, offload_recent_n=3, offload_retention_days=9, prune_protect_tokens=30_000,
        prune_minimum_tokens=10_000, prune_protect_turns=1, workspace=str(tmp_path), allow_write=True,
        allow_shell=True, max_iterations=12, system_prompt="Be brief.\nAlways cite files.", theme="dark",
        source_dirs=str(tmp_path / "sessions"),
    )


def test_every_setting_has_an_editor(dlg):
    for f in dataclasses.fields(Settings):
        assert dlg.field(f.name) is not None, f.name


def test_round_trip(dlg, tmp_path):
    s = custom(tmp_path)
    dlg.set_settings(s)
    assert dlg.settings() == s
    assert dlg.validate() == ""
    dlg.window_override.setChecked(False)
    assert dlg.settings().context_window is None


def test_defaults_round_trip(dlg):
    assert dlg.settings() == Settings()


def test_accept_emits_settings_and_key_but_writes_nothing(dlg, qtbot, tmp_path):
    dlg.set_settings(custom(tmp_path))
    dlg.api_key_edit.setText("  sk-secret-value  ")
    got, keys = [], []
    dlg.settings_accepted.connect(got.append)
    dlg.api_key_entered.connect(keys.append)
    qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Save), Qt.MouseButton.LeftButton)
    assert got == [custom(tmp_path)]
    assert keys == ["sk-secret-value"]
    assert dlg.api_key_edit.text() == ""
    assert not dlg.isVisible()
    # the dialog never writes files: the (isolated) config dir holds nothing
    assert not config_dir().exists() or os.listdir(config_dir()) == []


def test_empty_key_field_keeps_the_stored_key(dlg):
    keys = []
    dlg.api_key_entered.connect(keys.append)
    assert dlg.try_accept()
    assert keys == []


@pytest.mark.parametrize(
    ("setup", "reason", "field"),
    [
        (lambda d: d.field("max_tokens").setValue(0), "max_tokens must be a positive integer, got 0",
         "max_tokens"),
        (lambda d: d.model_edit.setText("   "), "model must not be empty", "model"),
        (lambda d: d.api_base_edit.setText("ftp://example.com"),
         "api_base must be an http:// or https:// URL", "api_base"),
        (lambda d: d.api_key_env_edit.setText("sk-abcdefghijklmnopqrstuvwxyz012345"),
         "takes the NAME of an environment variable", "api_key_env"),
        (lambda d: d.api_key_env_edit.setText("MY KEY"), "api_key_env must be an environment variable name",
         "api_key_env"),
        (lambda d: (d.window_override.setChecked(True), d.window_spin.setValue(1000)),
         "max_tokens (1,024) must be smaller than the context window (1,000)", "max_tokens"),
        (lambda d: (d.window_override.setChecked(True), d.window_spin.setValue(0)),
         "context_window must be a positive integer", "context_window"),
        (lambda d: d.workspace_edit.setText("/definitely/not/here"), "workspace folder does not exist",
         "workspace"),
        (lambda d: d.field("offload_old_bytes").setValue(60_000),
         "offload_old_bytes (60,000) must not exceed", "offload_old_bytes"),
        (lambda d: d.field("request_timeout").setValue(0), "request_timeout must be positive",
         "request_timeout"),
        (lambda d: d.field("local_threads").setValue(0), "local_threads must be a positive integer",
         "local_threads"),
    ],
)
def test_invalid_values_are_refused_with_a_reason(dlg, qtbot, setup, reason, field):
    got = []
    dlg.settings_accepted.connect(got.append)
    setup(dlg)
    assert not dlg.try_accept()
    assert got == []
    assert dlg.isVisible()
    assert reason in dlg.error_text()
    widget = dlg.field(field)
    assert "border" in widget.styleSheet()  # the field is marked ...
    assert dlg.tabs.currentWidget().isAncestorOf(widget)  # ... and its tab is shown
    with pytest.raises(ValueError, match=reason.split(" ")[0]):
        dlg.settings()


def test_fixing_the_value_accepts(dlg):
    dlg.field("max_tokens").setValue(0)
    assert dlg.validate()
    dlg.field("max_tokens").setValue(512)
    assert dlg.validate() == ""
    assert dlg.error_text() == ""
    assert dlg.field("max_tokens").styleSheet() == ""


def test_model_suggestions_and_offline_default(dlg, qtbot):
    dlg.set_model_suggestions(["gpt-4o", "gpt-4o-mini", "anthropic/claude-3-5-haiku", ""])
    names = dlg.model_suggestions()
    assert LOCAL_MODEL in names and "gpt-4o" in names and "" not in names
    completer = dlg.model_edit.completer()
    completer.setCompletionPrefix("4o-m")  # matches anywhere in the name
    assert completer.currentCompletion() == "gpt-4o-mini"
    dlg.model_edit.setText("x")
    qtbot.mouseClick(dlg.local_button, Qt.MouseButton.LeftButton)
    assert dlg.settings().model == LOCAL_MODEL


def test_status_texts_and_forget_key(dlg, qtbot):
    dlg.set_api_key_status("A key is stored in the OS keyring")
    assert dlg.key_status.text() == "A key is stored in the OS keyring"
    dlg.set_window_info("auto: 128,000 tokens from model info")
    assert "128,000" in dlg.window_info.text()
    with qtbot.waitSignal(dlg.api_key_forget_requested):
        qtbot.mouseClick(dlg.forget_key, Qt.MouseButton.LeftButton)
    assert dlg.api_key_edit.echoMode() == dlg.api_key_edit.EchoMode.Password
    dlg.show_key.setChecked(True)
    assert dlg.api_key_edit.echoMode() == dlg.api_key_edit.EchoMode.Normal


def test_workspace_browse_is_non_modal(dlg, tmp_path):
    dlg._browse_workspace()
    fd = dlg._file_dialog
    assert fd is not None and fd.isVisible()
    fd.fileSelected.emit(str(tmp_path))
    assert dlg.workspace_edit.text() == str(tmp_path)
    fd.reject()
    assert dlg.validate() == ""


def test_cancel_emits_nothing(dlg, qtbot):
    got = []
    dlg.settings_accepted.connect(got.append)
    qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Cancel), Qt.MouseButton.LeftButton)
    assert got == [] and not dlg.isVisible()
