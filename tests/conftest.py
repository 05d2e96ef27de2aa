"""Shared fixtures: every test runs with its own data and config directories."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.memkeyring import MemoryKeyring

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("QT_API", "pyside6")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
TRAJECTORIES = SHARED / "data" / "trajectories"


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
