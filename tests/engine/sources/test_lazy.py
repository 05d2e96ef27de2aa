"""Issue 28, nothing imported that a command does not use: the format registry and the sources scan name every
agent's reader, but import one only when it is used (``engine.sources.lazy``)."""

from __future__ import annotations

import subprocess
import sys

from engine.sources.lazy import LazyModule
from engine.usage.prices import litellm_version
from tests.conftest import REPO

READERS = ("claude_code", "codex", "gemini_cli", "opencode", "kilo", "pi", "copilot", "cline", "qwen_code",
           "openhands", "swe_agent", "atif", "capture")


def test_a_lazy_module_is_the_module_once_asked() -> None:
    lazy = LazyModule("codex")
    from engine.sources import codex

    assert lazy.read_codex is codex.read_codex and "engine.sources.codex" in repr(lazy)


def test_the_registry_and_the_scan_import_no_reader_until_one_is_used() -> None:
    code = ("import sys; import engine.sources.formats, engine.sources.discovery, engine.usage.index; "
            f"print([m for m in {READERS!r} if 'engine.sources.' + m in sys.modules]); "
            "from engine.sources.formats import agent_format; agent_format('codex').read; "
            "import engine.sources.formats as f; print(f.names(growth='appended'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    first, names = out.stdout.splitlines()
    assert first == "[]", first  # none imported by the modules that name them
    assert "claude-code" in names


def test_litellms_version_from_its_dist_info_is_its_metadatas() -> None:
    from importlib.metadata import version

    assert litellm_version() == version("litellm")
