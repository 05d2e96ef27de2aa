"""Typed settings with the SPEC defaults.

Loaded from ``settings.toml`` in the platformdirs config dir, then overridden by environment
variables ``CTXBENCH_<KEY>`` (upper case). A bad value gives a clear message naming the key and
falls back to the default: loading never raises. API keys are never stored here: they come from
the environment or the OS keyring (see :mod:`engine.store.secrets`).

Paths:
- settings: ``$CTXBENCH_CONFIG_DIR`` or ``platformdirs.user_config_dir("ctxbench")``
- sessions and data: ``$CTXBENCH_DATA_DIR`` or ``platformdirs.user_data_dir("ctxbench")``
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import platformdirs

APP_NAME = "ctxbench"
SETTINGS_FILE = "settings.toml"
ENV_PREFIX = "CTXBENCH_"
LOCAL_MODEL = "local/smollm2-135m-instruct"

ESTIMATORS = ("auto", "heuristic", "exact")
OFFLOAD_STRATEGIES = ("truncate", "prune", "middle_out")
THEMES = ("system", "light", "dark")
LOG_LEVELS = ("debug", "info", "warning", "error")  # what the log file keeps (engine.store.logs)
# how compaction summaries are made (engine.context.summaries): auto = the digest on the bundled model, both elsewhere
SUMMARY_MODE_CHOICES = ("auto", "digest", "model", "both")


def config_dir() -> Path:
    env = os.environ.get(ENV_PREFIX + "CONFIG_DIR")
    return Path(env) if env else Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def data_dir() -> Path:
    env = os.environ.get(ENV_PREFIX + "DATA_DIR")
    return Path(env) if env else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def settings_path() -> Path:
    return config_dir() / SETTINGS_FILE


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


@dataclass
class Settings:
    # provider
    model: str = LOCAL_MODEL
    api_base: str = ""
    api_key_env: str = ""  # name of an environment variable holding the key (never the key itself)
    request_timeout: float = 120.0
    max_retries: int = 3
    # window
    context_window: int | None = None  # override; None = from model info (× 4 fallback)
    max_tokens: int = 1024
    local_n_ctx: int = 8192
    local_threads: int = 2
    # compaction
    compact_threshold_ratio: float = 0.8
    reserve_ratio: float = 0.1
    summary_max_tokens: int = 1024
    summary_mode: str = "auto"  # auto | digest | model | both (see engine.context.summaries)
    estimator: str = "auto"
    auto_compact: bool = True
    # offload
    offload_strategy: str = "truncate"
    offload_recent_bytes: int = 50_000
    offload_old_bytes: int = 3_000
    offload_recent_n: int = 2
    offload_retention_days: int = 5
    prune_protect_tokens: int = 40_000
    prune_minimum_tokens: int = 20_000
    prune_protect_turns: int = 2
    # agent and tools
    workspace: str = ""
    source_dirs: str = ""  # more folders of agent sessions for `ctxbench sources` (separated by os.pathsep)
    allow_write: bool = False
    allow_shell: bool = False
    max_iterations: int = 25
    system_prompt: str = ""  # empty = the bundled default prompt
    # ui
    theme: str = "system"
    log_level: str = "info"  # the log file in the data directory (engine.store.logs): debug, info, warning, error

    def validate(self) -> None:
        """Raise ValueError naming the first bad key."""
        for key in _NAMES:
            _validate_field(key, getattr(self, key))
        if self.reserve_ratio >= self.compact_threshold_ratio and self.compact_threshold_ratio > 0:
            # allowed (SPEC §5 edge case) but worth knowing; the plan copes with it
            pass

    def to_toml(self) -> str:
        lines = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == f.default:
                continue
            lines.append(f"{f.name} = {_toml_value(value)}")
        return "\n".join(lines) + ("\n" if lines else "")

    def replace(self, **changes: Any) -> Settings:
        new = dataclasses.replace(self, **changes)
        new.validate()
        return new


_NAMES = tuple(f.name for f in fields(Settings))
_TYPES: dict[str, Any] = {f.name: f.type for f in fields(Settings)}


def _validate_field(key: str, value: Any) -> None:
    ratio_keys = ("compact_threshold_ratio", "reserve_ratio")
    positive_ints = (
        "max_tokens", "local_n_ctx", "summary_max_tokens", "offload_recent_bytes", "offload_old_bytes",
        "max_iterations", "local_threads",
    )
    non_negative_ints = (
        "offload_recent_n", "offload_retention_days", "prune_protect_tokens", "prune_minimum_tokens",
        "prune_protect_turns", "max_retries",
    )
    if key in ratio_keys:
        _check(0.0 <= value <= 1.0, f"{key} must be between 0 and 1, got {value}")
    elif key in positive_ints:
        _check(value > 0, f"{key} must be a positive integer, got {value}")
    elif key in non_negative_ints:
        _check(value >= 0, f"{key} must be 0 or more, got {value}")
    elif key == "context_window":
        _check(value is None or value > 0, f"context_window must be a positive integer, got {value}")
    elif key == "request_timeout":
        _check(value > 0, f"request_timeout must be positive, got {value}")
    elif key == "estimator":
        _check(value in ESTIMATORS, f"estimator must be one of {', '.join(ESTIMATORS)}, got {value!r}")
    elif key == "offload_strategy":
        _check(
            value in OFFLOAD_STRATEGIES,
            f"offload_strategy must be one of {', '.join(OFFLOAD_STRATEGIES)}, got {value!r}",
        )
    elif key == "summary_mode":
        _check(
            value in SUMMARY_MODE_CHOICES,
            f"summary_mode must be one of {', '.join(SUMMARY_MODE_CHOICES)}, got {value!r}",
        )
    elif key == "theme":
        _check(value in THEMES, f"theme must be one of {', '.join(THEMES)}, got {value!r}")
    elif key == "log_level":
        _check(value in LOG_LEVELS, f"log_level must be one of {', '.join(LOG_LEVELS)}, got {value!r}")
    elif key == "model":
        _check(bool(value.strip()), "model must not be empty")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    s = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


def _coerce(key: str, value: Any) -> Any:
    """Convert a TOML or environment value to the field's type; raise ValueError naming the key."""
    typ = _TYPES[key]
    text_input = isinstance(value, str)
    try:
        if typ == "bool":
            if isinstance(value, bool):
                return value
            if text_input and value.strip().lower() in ("1", "true", "yes", "on"):
                return True
            if text_input and value.strip().lower() in ("0", "false", "no", "off"):
                return False
            raise TypeError
        if typ == "int":
            if isinstance(value, bool):
                raise TypeError
            if isinstance(value, int) or (text_input and value.strip().lstrip("-").isdigit()):
                return int(value)
            raise TypeError
        if typ == "int | None":
            if value is None or (text_input and value.strip().lower() in ("", "auto", "none")):
                return None
            if isinstance(value, bool):
                raise TypeError
            if isinstance(value, int) or (text_input and value.strip().isdigit()):
                return int(value)
            raise TypeError
        if typ == "float":
            if isinstance(value, bool):
                raise TypeError
            if isinstance(value, int | float):
                return float(value)
            if text_input:
                return float(value)
            raise TypeError
        if typ == "str":
            if isinstance(value, str):
                return value
            raise TypeError
    except (TypeError, ValueError):
        pass
    expected = {"int | None": "an integer or 'auto'"}.get(typ, f"a {typ}")
    raise ValueError(f"{key} must be {expected}, got {value!r}")


@dataclass
class LoadedSettings:
    settings: Settings
    problems: list[str] = field(default_factory=list)
    path: Path | None = None


def load_settings(path: Path | None = None, env: dict[str, str] | None = None) -> LoadedSettings:
    """Settings from the TOML file, then the environment. Never raises for bad content."""
    path = settings_path() if path is None else path
    env = dict(os.environ) if env is None else env
    problems: list[str] = []
    values: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            problems.append(f"{path}: cannot read settings ({exc}); using defaults")
            data = {}
        except RecursionError:
            problems.append(f"{path}: cannot read settings (a value is nested too deeply); using defaults")
            data = {}
        for key, raw in data.items():
            if key not in _TYPES:
                problems.append(f"{path}: unknown setting {key!r} ignored")
                continue
            values[key] = (raw, f"{path}: ")
    for key in _NAMES:
        env_key = ENV_PREFIX + key.upper()
        if env_key in env:
            values[key] = (env[env_key], f"environment {env_key}: ")
    settings = Settings()
    for key, (raw, where) in values.items():
        try:
            value = _coerce(key, raw)
            _validate_field(key, value)
        except ValueError as exc:
            problems.append(f"{where}{exc}; using default {getattr(settings, key)!r}")
            continue
        setattr(settings, key, value)
    return LoadedSettings(settings, problems, path)


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    """Validate and write settings atomically (temp file, fsync, rename)."""
    from engine.store.fsutil import atomic_write_text

    settings.validate()
    path = settings_path() if path is None else path
    atomic_write_text(path, settings.to_toml())
    return path
