"""Issue 26 item 7: whatever the CLI prints for a terminal shows other agents' control characters as escapes.

A Claude Code session whose project (cwd), session id, model, tool name, prompt and tool results hold each kind of
control a terminal acts on (OSC 52, OSC 0, ESC[2J, CR, BEL, backspace, DEL, C1, bidi overrides and isolates) is
read by every command that prints its text; the raw bytes printed hold none of them, and the names are still
there, escaped."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.hostile import HOSTILE_TEXT, claude_session, write_lines
from tests.conftest import REPO

RAW = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")
ESCAPED = "evil\\x1b]52;c;aGVsbG8=\\x07"  # how the start of HOSTILE_TEXT is shown


def _run(home: Path, *args: str, stdout: int | None = subprocess.PIPE, timeout: float = 120
         ) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "CODEX_", "GEMINI_", "XDG_"))}
    env.update(HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=REPO, env=env, stdout=stdout,
                          stderr=subprocess.PIPE, timeout=timeout, check=False)


def assert_safe(raw: bytes, *, shown: bool = True) -> None:
    """No control character in ``raw``; with ``shown``, the hostile names are there, escaped."""
    found = RAW.search(raw)
    assert found is None, f"raw {found.group()!r}: {raw[max(0, found.start() - 40):found.start() + 20]!r}"
    if shown:
        assert "evil" in raw.decode()


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """(home, session file): the hostile session in the home's Claude Code projects folder."""
    home = tmp_path / "home"
    path = write_lines(home / ".claude" / "projects" / "-work-x" / "hostile.jsonl",
                       claude_session(f"sid-{HOSTILE_TEXT}", cwd=f"/work/{HOSTILE_TEXT}", model=HOSTILE_TEXT,
                                      tool=HOSTILE_TEXT, prompt=HOSTILE_TEXT, result=HOSTILE_TEXT))
    return home, path


def test_the_session_really_holds_every_control(hostile: tuple[Path, Path]) -> None:
    raw = hostile[1].read_text(encoding="utf-8")
    assert "\\u001b]52;" in raw and "\\u001b]0;" in raw and "\\u001b[2J" in raw and "\\r" in raw  # JSON escapes C0
    assert "\x9b" in raw and "\u202e" in raw and "\u2066" in raw and "\x7f" in raw  # raw in the file


def test_sources_table(hostile: tuple[Path, Path]) -> None:
    proc = _run(hostile[0], "sources")
    assert proc.returncode == 0, proc.stderr
    assert_safe(proc.stdout)
    assert ESCAPED in proc.stdout.decode()  # the project column, escaped
    assert_safe(proc.stderr, shown=False)


def test_sources_table_with_a_control_in_the_file_name(hostile: tuple[Path, Path]) -> None:
    home, path = hostile
    path.rename(path.with_name(f"x{HOSTILE_TEXT}.jsonl"))
    proc = _run(home, "sources")
    assert proc.returncode == 0, proc.stderr
    assert_safe(proc.stdout)
    assert f"/x{ESCAPED}" in proc.stdout.decode()  # the path column


@pytest.mark.parametrize("by", ["project", "model", "tool", "session"])
def test_usage_tables(hostile: tuple[Path, Path], by: str) -> None:
    proc = _run(hostile[0], "usage", "--by", by)
    assert proc.returncode == 0, proc.stderr
    assert_safe(proc.stdout)
    assert_safe(proc.stderr, shown=False)


def test_tools(hostile: tuple[Path, Path]) -> None:
    proc = _run(hostile[0], "tools", str(hostile[1]))
    assert proc.returncode == 0, proc.stderr
    assert_safe(proc.stdout)
    text = proc.stdout.decode()
    assert text.count(ESCAPED) >= 3  # the tool row, the largest results' tool and first line, the cost's model


def test_diff(hostile: tuple[Path, Path]) -> None:
    proc = _run(hostile[0], "diff", str(hostile[1]), "1", "3")
    assert proc.returncode == 0, proc.stderr
    assert_safe(proc.stdout)
    assert ESCAPED in proc.stdout.decode()


@pytest.mark.parametrize("argv", [["sources", "--json"], ["usage", "--by", "model", "--json"],
                                  ["tools", "{}", "--json"], ["diff", "{}", "1", "3", "--json"]])
def test_json_output_escapes_them_and_reads_back_unchanged(hostile: tuple[Path, Path], argv: list[str]) -> None:
    import json

    proc = _run(hostile[0], *[a.format(hostile[1]) for a in argv])
    assert proc.returncode == 0, proc.stderr
    assert_safe(proc.stdout)

    def strings(value: object) -> list[str]:
        if isinstance(value, dict):
            return [s for k, v in value.items() for s in [k, *strings(v)]]
        return [s for v in value for s in strings(v)] if isinstance(value, list) else [str(value)]

    values = [s for line in proc.stdout.decode().splitlines() for s in strings(json.loads(line))]
    assert any(HOSTILE_TEXT in s for s in values)  # json.loads gives the names back exactly


def test_follow(hostile: tuple[Path, Path]) -> None:
    import signal

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "CODEX_", "GEMINI_", "XDG_"))}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "follow", str(hostile[1])], cwd=REPO,
                            env={**env, "HOME": str(hostile[0])}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the first call, with the hostile model name
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert_safe(first + out)
    assert b'"model": "evil' in first


def test_import_then_inspect(hostile: tuple[Path, Path], tmp_path: Path) -> None:
    folder = tmp_path / "imported"
    proc = _run(hostile[0], "import", str(hostile[1]), "--session", str(folder), "--no-model-info")
    assert proc.returncode == 0, proc.stderr
    assert_safe(proc.stdout, shown=False)
    proc = _run(hostile[0], "inspect", "--session", str(folder), "--context-window", "200000")
    assert proc.returncode == 0, proc.stderr
    assert_safe(proc.stdout)


def test_export_to_a_terminal_and_to_a_pipe(hostile: tuple[Path, Path], tmp_path: Path) -> None:
    folder = tmp_path / "imported"
    assert _run(hostile[0], "import", str(hostile[1]), "--session", str(folder), "--no-model-info").returncode == 0
    args = ("export", "--session", str(folder), "--format", "md", "-o", "-")
    piped = _run(hostile[0], *args)  # to a file or a pipe: the text as it is
    assert piped.returncode == 0 and b"\x1b]52;" in piped.stdout
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "CODEX_", "GEMINI_", "XDG_"))}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", *args], cwd=REPO, env={**env, "HOME": str(hostile[0])},
                            stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not select.select([master], [], [], 0.2)[0]:
            if proc.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(30) == 0
    shown = b"".join(chunks).replace(b"\r\n", b"\n")  # the terminal's own line ends
    assert_safe(shown)
    assert b"\n" in shown and ESCAPED.encode() in shown  # the Markdown keeps its lines


def test_errors_and_warnings_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import warn

    missing = tmp_path / f"no{HOSTILE_TEXT}"
    proc = _run(tmp_path, "inspect", "--session", str(missing))
    assert proc.returncode == 1
    assert_safe(proc.stderr)
    assert proc.stderr.decode().startswith("ctxbench: error: no session folder at ")
    warn(f"a file {HOSTILE_TEXT} \udcff")
    err = capsys.readouterr().err
    assert_safe(err.encode())
    assert err == f"ctxbench: warning: a file {ESCAPED}\\x1b]0;pwned\\x07\\x1b[2J \\x07\\x08\\x7f\\x9b31m" \
                  "\\x9d0;t\\x9c\\u202e\\u2066\\u2069name \\xff\n"
