"""The lock file is hash-checked and keeps known-compromised releases out."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "requirements.lock"
COMPROMISED = {"litellm": re.compile(r"^1\.107(\.|$)")}


def _locked() -> dict[str, tuple[str, list[str]]]:
    pins: dict[str, tuple[str, list[str]]] = {}
    current = None
    for raw in LOCK.read_text().splitlines():
        line = raw.strip()
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", line)
        if m:
            current = m.group(1).lower().replace("_", "-")
            pins[current] = (m.group(2), [])
        elif line.startswith("--hash=sha256:") and current:
            pins[current][1].append(line.split(":", 1)[1].rstrip(" \\"))
    return pins


def find_compromised(pins: dict[str, tuple[str, list[str]]]) -> list[str]:
    return [f"{n}=={v}" for n, (v, _) in pins.items() if n in COMPROMISED and COMPROMISED[n].match(v)]


def test_every_locked_package_has_hashes() -> None:
    pins = _locked()
    assert len(pins) > 50
    missing = [n for n, (_, hashes) in pins.items() if not hashes]
    assert missing == []
    assert all(len(h) == 64 for _, hashes in pins.values() for h in hashes)


def test_no_compromised_release_is_locked() -> None:
    pins = _locked()
    assert "litellm" in pins
    assert find_compromised(pins) == []


def test_detector_flags_litellm_1_107() -> None:
    assert find_compromised({"litellm": ("1.107.3", ["x"])}) == ["litellm==1.107.3"]
    assert find_compromised({"litellm": ("1.106.2", ["x"])}) == []


def test_install_uses_hash_checking() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "--require-hashes" in makefile
    assert "requirements.lock" in makefile
