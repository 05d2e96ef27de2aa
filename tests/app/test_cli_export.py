"""``ctxbench export`` as a subprocess, on a real Claude Code session imported by ``ctxbench import``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from engine import export
from engine.store.fsutil import read_jsonl_objects
from tests.app.test_cli import assert_one_line_error, ctxbench, events
from tests.conftest import SHARED

CLAUDE = SHARED / "data" / "sessions" / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"

pytestmark = pytest.mark.skipif(not CLAUDE.exists(), reason="the shared sessions are not on this machine")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli-export") / "cc"
    proc = ctxbench("import", str(CLAUDE), "--session", str(folder), "--no-model-info")
    assert proc.returncode == 0, proc.stderr
    return folder


def test_export_csv_json_md(session: Path, tmp_path: Path) -> None:
    calls = [e for e in read_jsonl_objects(session / "events.jsonl") if e.get("type") == "context"]
    proc = ctxbench("export", "--session", str(session), "--format", "csv", "-o", str(tmp_path / "c.csv"))
    assert proc.returncode == 0, proc.stderr
    [report] = events(proc)
    assert report == {"type": "export", "format": "csv", "path": str(tmp_path / "c.csv"),
                      "bytes": (tmp_path / "c.csv").stat().st_size, "messages": 322, "calls": len(calls)}
    rows = list(csv.DictReader(io.StringIO((tmp_path / "c.csv").read_text(encoding="utf-8"))))
    assert len(rows) == len(calls) == 143 and list(rows[0]) == list(export.CALL_FIELDS)
    assert [int(r["cache_read_tokens"]) for r in rows] == [c["cache_read_tokens"] for c in calls]

    proc = ctxbench("export", "--session", str(session), "--format", "json", "-o", "-")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["calls"] == export.call_rows(export.read_session(session))

    proc = ctxbench("export", "--session", str(session), "--format", "md", "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    written = tmp_path / f"{session.name}.md"
    assert events(proc)[0]["path"] == str(written)
    assert written.read_text(encoding="utf-8") == export.session_markdown(export.read_session(session))


def test_export_errors(tmp_path: Path) -> None:
    proc = ctxbench("export", "--session", str(tmp_path), "--format", "md")
    assert_one_line_error(proc, "not a session folder")
    proc = ctxbench("export", "--session", str(tmp_path), "--format", "pdf")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
