"""app.screenshot and the sample session it opens (resources/sample_session, made by the real agent)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QImage

from engine.context.conversation import Session
from engine.context.offload import list_offloaded
from tests.conftest import REPO, SHARED
from widgets.chart_cache import CACHE_COLORS

SAMPLE = REPO / "resources" / "sample_session"
CLAUDE = SHARED / "data" / "sessions" / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


def test_the_sample_session_looks_like_a_real_one(tmp_path: Path) -> None:
    copy = tmp_path / "sample_session"
    shutil.copytree(SAMPLE, copy)
    session = Session.load(copy)
    assert session.load_report.clean
    roles = [x["role"] for x in session.messages]
    assert roles.count("user") >= 3 and "tool" in roles
    assert session.summary.startswith("## Goal")
    calls = [s for s in session.snapshots()]
    assert 12 <= len(calls) <= 20
    assert all(isinstance(s.provider_prompt_tokens, int) and s.provider_prompt_tokens > 0 for s in calls)
    compactions = session.compaction_events()
    assert [c.result for c in compactions] == ["summarized"]
    assert session.undo_stack() == [compactions[0].id]
    files = list_offloaded(copy)
    assert files and max(f.size for f in files) > 20_000
    archived = list((copy / "dialog").glob("*.jsonl"))
    assert archived, "the compacted messages are in the dialog archive"
    tool_names = {c["function"]["name"] for x in session.messages for c in x.get("tool_calls") or []}
    assert all(json.loads(c["function"]["arguments"]) for x in session.messages for c in x.get("tool_calls") or [])
    assert {"read_file", "search_text"} <= tool_names


@pytest.mark.slow
def test_screenshot_command_writes_a_png_of_the_window(tmp_path: Path) -> None:
    out = tmp_path / "shot.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-m", "app.screenshot", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1400, 900)
    colours = {image.pixel(x, y) for x in range(0, 1400, 7) for y in range(0, 900, 7)}
    assert len(colours) > 200, "the window has content, not a blank frame"
    assert not list(SAMPLE.glob("*.torn-*")), "the shipped sample session is never modified"


@pytest.mark.slow
@pytest.mark.skipif(not CLAUDE.exists(), reason="the shared sessions are not on this machine")
def test_screenshot_of_an_imported_session_in_the_cache_view(tmp_path: Path) -> None:
    out = tmp_path / "cache.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-m", "app.screenshot", str(out), "--open", str(CLAUDE), "--cache-view"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    image = QImage(str(out))
    read = QColor(CACHE_COLORS["light"]["cache_read"]).rgb()
    greens = sum(image.pixel(x, y) == read for x in range(700, 1400, 2) for y in range(250, 600, 2))
    assert greens > 2_000, "the timeline shows the cache-read columns"


def test_screenshot_refuses_a_bad_size(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "app.screenshot", str(tmp_path / "x.png"), "--size", "big"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--size must look like 1400x900" in proc.stderr
