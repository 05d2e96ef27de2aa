"""``make agents-latest``: the real-agent tier run against the newest version of every pinned agent on npm.

The pinned versions (``tests/agents/package.json`` and its lock) stay as they are. The newest versions are
installed into a scratch folder (``--dir``, else a new temporary one) and the tier runs with
``CTXBENCH_AGENTS_DIR`` pointing there (``tests/agents/conftest.py`` takes the binaries and the versions from
it). The report: each package pinned → newest, the tests that failed, and what is new — the record kinds,
event types, attachment types … the tier found that the readers do not know (its drift checks name them,
with the version).

    python -m tests.agents.latest [--dir DIR] [-- PYTEST_ARGS …]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
NEW_KIND = re.compile(r"(is not known|is of no known (kind|type)|unknown (record|kind|type))", re.IGNORECASE)


def pinned(package_json: Mapping[str, object]) -> dict[str, str]:
    """Every pinned package and its version (optional ones included)."""
    out: dict[str, str] = {}
    for key in ("dependencies", "optionalDependencies"):
        section = package_json.get(key)
        if isinstance(section, dict):
            out.update({str(k): str(v) for k, v in section.items()})
    return out


def newest_package_json(package_json: Mapping[str, object], newest: Mapping[str, str]) -> dict[str, object]:
    """The same package.json with each pinned version replaced by the newest one found (kept when none was)."""
    out: dict[str, object] = dict(package_json)
    for key in ("dependencies", "optionalDependencies"):
        section = package_json.get(key)
        if isinstance(section, dict):
            out[key] = {name: newest.get(name) or version for name, version in section.items()}
    return out


def npm_newest(name: str) -> str:
    """The newest version of ``name`` on the registry ("" when it cannot be asked)."""
    try:
        done = subprocess.run(["npm", "view", name, "version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def failures(junit_xml: str) -> list[tuple[str, str]]:
    """(test id, first line of its failure) for every failed or erroring test of a JUnit report."""
    out: list[tuple[str, str]] = []
    for case in ET.fromstring(junit_xml).iter("testcase"):
        for problem in [*case.findall("failure"), *case.findall("error")]:
            text = (problem.get("message") or problem.text or "").strip()
            out.append((f"{case.get('classname', '')}::{case.get('name', '')}", text.splitlines()[0] if text else ""))
    return out


def what_is_new(found: Sequence[tuple[str, str]]) -> list[str]:
    """The failures that name something a reader does not know (a new record kind, type, key …), once each."""
    seen: list[str] = []
    for _test, message in found:
        if NEW_KIND.search(message) and message not in seen:
            seen.append(message)
    return seen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.agents.latest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="the scratch folder for the newest agents (default: a new one)")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    args = parser.parse_args(argv)
    package_json = json.loads((HERE / "package.json").read_text())
    versions = pinned(package_json)
    newest = {name: npm_newest(name) for name in versions}
    scratch = args.dir or Path(tempfile.mkdtemp(prefix="ctxbench-agents-latest-"))
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "package.json").write_text(json.dumps(newest_package_json(package_json, newest), indent=2) + "\n")
    print(f"{'package':40} {'pinned':>12} → newest")
    for name, version in versions.items():
        mark = "" if newest[name] in ("", version) else "   (new)"
        print(f"{name:40} {version:>12} → {newest[name] or '(registry not reached)'}{mark}")
    install = subprocess.run(["npm", "install", "--prefix", str(scratch), "--no-audit", "--no-fund",
                              "--loglevel=error"], text=True)
    if install.returncode != 0:
        print(f"npm install of the newest versions in {scratch} failed (exit {install.returncode})", file=sys.stderr)
        return install.returncode
    report = scratch / "report.xml"
    env = os.environ | {"CTXBENCH_AGENTS_DIR": str(scratch)}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests/agents", "-q", "-p", "no:cacheprovider",
                          f"--junitxml={report}", *args.pytest_args], cwd=REPO, env=env)
    found = failures(report.read_text()) if report.exists() else []
    print(f"\nthe tier against the newest versions: {'passed' if run.returncode == 0 else 'FAILED'} "
          f"({len(found)} failing test(s)); the agents are in {scratch}")
    for test, message in found:
        print(f"  {test}: {message}")
    new = what_is_new(found)
    print("what is new (kinds the readers do not know yet):" if new else "nothing new the drift checks name")
    for message in new:
        print(f"  - {message}")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
