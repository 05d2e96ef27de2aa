from __future__ import annotations

from pathlib import Path

import pytest

from engine.store.config import LOCAL_MODEL, Settings, config_dir, data_dir, load_settings, save_settings, settings_path


def test_defaults_match_spec() -> None:
    s = Settings()
    assert s.model == LOCAL_MODEL
    assert s.compact_threshold_ratio == 0.8
    assert s.reserve_ratio == 0.1
    assert s.offload_recent_bytes == 50_000
    assert s.offload_old_bytes == 3_000
    assert s.offload_recent_n == 2
    assert s.offload_retention_days == 5
    assert s.prune_protect_tokens == 40_000 and s.prune_minimum_tokens == 20_000
    assert s.context_window is None
    assert s.local_n_ctx == 8192
    assert not s.allow_write and not s.allow_shell
    s.validate()


def test_dirs_follow_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("CTXBENCH_CONFIG_DIR", str(tmp_path / "c"))
    assert data_dir() == tmp_path / "d"
    assert config_dir() == tmp_path / "c"
    assert settings_path() == tmp_path / "c" / "settings.toml"


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path / "none.toml", env={})
    assert loaded.settings == Settings()
    assert loaded.problems == []


def test_file_values_load(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('model = "openai/gpt-4o"\ncontext_window = 32000\ncompact_threshold_ratio = 0.7\n'
                    'allow_write = true\nestimator = "exact"\n')
    loaded = load_settings(path, env={})
    assert loaded.problems == []
    s = loaded.settings
    assert (s.model, s.context_window, s.compact_threshold_ratio, s.allow_write, s.estimator) == (
        "openai/gpt-4o", 32000, 0.7, True, "exact")


def test_bad_values_name_the_key_and_fall_back(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('max_tokens = "lots"\ncompact_threshold_ratio = 1.5\nestimator = "magic"\n'
                    'offload_old_bytes = -1\nallow_shell = "maybe"\nmodel = "ok/model"\nmystery = 3\n')
    loaded = load_settings(path, env={})
    s = loaded.settings
    assert s.max_tokens == 1024 and s.compact_threshold_ratio == 0.8 and s.estimator == "auto"
    assert s.offload_old_bytes == 3000 and s.allow_shell is False
    assert s.model == "ok/model"
    text = "\n".join(loaded.problems)
    for key in ("max_tokens", "compact_threshold_ratio", "estimator", "offload_old_bytes", "allow_shell", "mystery"):
        assert key in text
    assert len(loaded.problems) == 6


def test_unparseable_file_never_crashes(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_bytes(b"model = [unclosed\n\xff\xfe")
    loaded = load_settings(path, env={})
    assert loaded.settings == Settings()
    assert "cannot read settings" in loaded.problems[0]


def test_environment_overrides_file(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("max_tokens = 2000\n")
    env = {"CTXBENCH_MAX_TOKENS": "3000", "CTXBENCH_CONTEXT_WINDOW": "auto", "CTXBENCH_AUTO_COMPACT": "off",
           "CTXBENCH_RESERVE_RATIO": "0.25", "CTXBENCH_LOCAL_N_CTX": "nope"}
    loaded = load_settings(path, env=env)
    s = loaded.settings
    assert s.max_tokens == 3000 and s.context_window is None and s.auto_compact is False
    assert s.reserve_ratio == 0.25 and s.local_n_ctx == 8192
    assert any("CTXBENCH_LOCAL_N_CTX" in p for p in loaded.problems)


def test_save_round_trip_is_atomic_and_minimal(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "settings.toml"
    s = Settings(model="anthropic/claude-x", api_base="http://127.0.0.1:1/v1", context_window=9000,
                 system_prompt='say "hi"\nthen go')
    save_settings(s, path)
    assert load_settings(path, env={}).settings == s
    assert "max_tokens" not in path.read_text()  # defaults are not written
    assert not [p for p in path.parent.iterdir() if p.name != "settings.toml"]  # no temp files left


def test_save_refuses_invalid(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reserve_ratio"):
        save_settings(Settings(reserve_ratio=2.0), tmp_path / "s.toml")
    assert not (tmp_path / "s.toml").exists()


def test_replace_validates() -> None:
    with pytest.raises(ValueError, match="offload_strategy"):
        Settings().replace(offload_strategy="shred")
    assert Settings().replace(max_tokens=5).max_tokens == 5
