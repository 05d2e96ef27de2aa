"""A real Claude Code session (8463c716: one compaction, one subagent) imported once per test module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED

PARENT = SHARED / "data" / "sessions" / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


def import_parent(tmp: Path) -> Path:
    """The session folder of 8463c716 imported into ``tmp`` (skips when the data is not here)."""
    if not PARENT.exists():
        pytest.skip(f"{PARENT} is not here")
    from engine.ingest import import_source

    folder = tmp / "session"
    import_source(PARENT, session_dir=folder, model_info=None)
    return folder
