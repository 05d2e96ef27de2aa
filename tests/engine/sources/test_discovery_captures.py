"""Captures of the recording proxy in the sources scan (:mod:`engine.sources.discovery`): listed from
``<data dir>/captures`` once per capture (a rolled-over part is not a row of its own), titled by the first prompt
the agent sent (not what it wraps around it), with calls, last prompt and how full the window is."""

from __future__ import annotations

import os
from pathlib import Path

from engine.capture.files import captures_dir
from engine.sources import discovery
from engine.store.config import Settings
from tests.engine.sources.test_capture import anthropic_answer, claude_capture, exchange, write


def test_a_capture_is_listed_titled_by_its_first_prompt(tmp_path: Path) -> None:
    folder = captures_dir()
    folder.mkdir(parents=True)
    path = claude_capture(folder, compact=True).rename(folder / "capture-20260101T000000Z-ab12cd34.jsonl")
    entries = [e for e in discovery.scan_sources(Settings(), env={}, home=tmp_path / "home")
               if e.agent == "proxy-capture"]
    assert len(entries) == 1
    entry = entries[0]
    assert entry.path == str(path)
    assert entry.title == "run ls"
    assert entry.calls == 6  # four of the main thread, the title and the subagent; count_tokens and the 529 not
    assert entry.last_prompt_tokens == 3 + 40 + 400
    assert entry.model == "claude-x"
    assert entry.project == "w"  # the folder the agent ran in
    assert entry.started  # when the recording started (its header)
    assert entry.last_activity == "2026-01-01T00:00:08.000+00:00"


def test_the_title_leaves_out_what_the_agent_wraps_around_the_prompt(tmp_path: Path) -> None:
    body = {"model": "claude-x", "max_tokens": 100, "system": "s", "tools": [{"name": "Bash"}], "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\nAs you answer, use this context:\n</system-reminder>"},
            {"type": "text", "text": "  fix the\nfailing test  "}]}]}
    folder = captures_dir()
    path = write(folder / "capture-20260101T000000Z-00000001.jsonl",
                 [exchange(1, "anthropic", "/v1/messages", body, *anthropic_answer(1, "ok"))])
    entry = discovery.summarize("proxy-capture", path)
    assert entry.title == "fix the failing test"
    assert entry.window == 200_000 and entry.percent_full is not None


def test_a_rolled_over_capture_is_one_row_counting_every_part(tmp_path: Path) -> None:
    folder = captures_dir()
    body = {"model": "claude-x", "max_tokens": 100, "system": "s", "tools": [{"name": "Bash"}],
            "messages": [{"role": "user", "content": "hello"}]}
    records = [exchange(i, "anthropic", "/v1/messages", body, *anthropic_answer(i, "ok")) for i in range(1, 5)]
    first = write(folder / "capture-20260101T000000Z-00000002.jsonl", records, max_bytes=1500)
    parts = sorted(folder.glob("capture-*-00000002*.jsonl"))
    assert len(parts) > 1  # it did roll over
    os.utime(first, (1, 1))
    entries = [e for e in discovery.scan_sources(Settings(), env={}, home=tmp_path / "home")
               if e.agent == "proxy-capture"]
    assert [e.path for e in entries] == [str(first)]
    assert entries[0].calls == 4


def test_a_capture_in_a_folder_of_the_settings_is_found_by_its_first_line(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    body = {"model": "gemini-2.5-pro", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    answer = {"responseId": "r1", "candidates": [{"content": {"role": "model", "parts": [{"text": "hello"}]}}],
              "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2}}
    write(folder / "recorded.jsonl", [exchange(1, "gemini", "/v1beta/models/gemini-2.5-pro:generateContent", body,
                                               answer, answer["usageMetadata"])])
    entries = discovery.scan_sources(Settings(source_dirs=str(folder)), env={}, home=tmp_path / "home")
    found = [e for e in entries if e.agent == "proxy-capture"]
    assert [Path(e.path).name for e in found] == ["recorded.jsonl"]
    assert found[0].title == "hi" and found[0].window == 1_048_576 and found[0].last_prompt_tokens == 10
