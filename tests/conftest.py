"""Shared fixtures: every test runs with its own data and config directories.

Defined here once for every test folder: ``server`` (the scripted fake LLM server of
``tests/fakeserver.py``, real HTTP), ``fast_retries`` (the client's retry back-off cut to
milliseconds; request it, or ``pytestmark = pytest.mark.usefixtures("fast_retries")``), and
``SUMMARY`` (a summary in the six required sections, for the fake server to answer compactions with).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import fakeserver as fs
from tests.memkeyring import MemoryKeyring

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("QT_API", "pyside6")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
TRAJECTORIES = SHARED / "data" / "trajectories"

# a valid structured summary: the six sections the summarizer asks for, each with a body
SUMMARY = "\n\n".join(
    f"## {name}\n{body}"
    for name, body in [
        ("Goal", "Understand the notes in the workspace."),
        ("Constraints & Preferences", "None stated."),
        ("Progress", "### Done\n- read notes.txt\n### In Progress\n- none\n### Blocked\n- none"),
        ("Key Decisions", "Use read_file only."),
        ("Next Steps", "1. Answer the user."),
        ("Critical Context", "notes.txt mentions alpha and beta."),
    ]
)
FAST_RETRY_BASE_DELAY = 0.01
FAST_RETRY_MAX_DELAY = 0.05


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    base = tmp_path_factory.mktemp("ctxbench-home")
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(base / "data"))
    monkeypatch.setenv("CTXBENCH_CONFIG_DIR", str(base / "config"))
    for key in list(os.environ):
        if key.startswith("CTXBENCH_") and key not in ("CTXBENCH_DATA_DIR", "CTXBENCH_CONFIG_DIR"):
            monkeypatch.delenv(key)
    yield


def trajectory_files() -> list[Path]:
    return sorted(TRAJECTORIES.glob("*.traj.json"))


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    """The OS keyring replaced by an in-memory one for the test."""
    import keyring

    previous = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


@pytest.fixture
def server() -> Iterator[fs.FakeLLMServer]:
    """A scripted OpenAI-compatible server on a local port (``tests/fakeserver.py``)."""
    with fs.FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LLM client's retry back-off in milliseconds (the retries themselves are unchanged)."""
    from engine.llm import client as llm

    monkeypatch.setattr(llm, "RETRY_BASE_DELAY", FAST_RETRY_BASE_DELAY)
    monkeypatch.setattr(llm, "RETRY_MAX_DELAY", FAST_RETRY_MAX_DELAY)
