"""engine.sources.formats: every agent format declared once, complete, and read from there only."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from engine.sources import discovery, follow, formats
from engine.sources.formats import FORMATS, LOG_FORMATS, agent_format, appended_reader, display_name, names
from engine.sources.model import SourceError, SourceFormat

REPO = Path(__file__).resolve().parents[3]
FORMAT_MODULES = {"engine/sources/claude_code.py", "engine/sources/codex.py", "engine/sources/gemini_cli.py",
                  "engine/sources/opencode.py", "engine/sources/openhands.py", "engine/sources/swe_agent.py",
                  "engine/sources/capture.py", "engine/sources/pi.py", "engine/sources/copilot.py",
                  "engine/sources/cline.py", "engine/sources/qwen_code.py",
                  "engine/sources/kilo.py", "engine/sources/atif.py",
                  # the listed formats' light passes (each named by its format's ``summary`` in the registry)
                  "engine/sources/session_summary.py", "engine/sources/opencode_summary.py",
                  "engine/sources/entry.py",  # the listed formats' names as a type (Agent)
                  "engine/sources/formats.py", "engine/sources/detect.py", "engine/sources/model.py"}
# modules that still name a format outside the registry: none is left (a module that starts naming one fails the test
# below; a format's knowledge goes in its registry entry)
NOT_MOVED_YET: set[str] = set()


def test_every_format_is_registered_or_a_log_the_importer_reads() -> None:
    assert set(get_args(SourceFormat)) == set(FORMATS) | set(LOG_FORMATS)
    assert not set(FORMATS) & set(LOG_FORMATS)


@pytest.mark.parametrize("name", list(FORMATS))
def test_each_registered_format_is_complete(name: SourceFormat) -> None:
    spec = FORMATS[name]
    assert spec.name == name and spec.display and spec.display != name and callable(spec.read)
    if spec.growth == "appended":  # tailed: read incrementally, and from lines already read
        assert spec.appended is not None and spec.read_lines is not None and spec.polled is None
    elif spec.growth == "polled":
        assert spec.polled is not None and spec.appended is None
    elif spec.appended is not None:  # rewritten whole, followed: its reader is fed the whole file again
        assert spec.read_lines is not None and spec.polled is None and not spec.follow_open_last
        assert isinstance(spec.appended(Path("x.messages.json"), False), formats.RewrittenReader)
    else:
        assert spec.polled is None and not spec.follow_open_last
    if spec.listed:  # Sources finds its sessions where the agent keeps them, and summarises each (light pass)
        assert spec.place is not None and spec.place.pattern and spec.place.shown
        roots = spec.place.roots({}, Path("/home/u"))
        assert roots and all(isinstance(root, Path) for root in roots)
        assert (spec.summary is None) == (spec.growth == "polled")  # a database: summarised session by session
        assert (spec.place.anywhere is not None) != spec.place.by_first_line  # found in a folder of source_dirs
    else:
        assert spec.place is None and spec.summary is None and not spec.light_pass_kept


def test_the_formats_listed_in_sources_are_the_ones_discovery_finds() -> None:
    assert set(names(listed=True)) == set(get_args(discovery.Agent))
    rewritten_followed = {n for n in names(growth="rewritten") if FORMATS[n].appended is not None}
    assert "cline" in rewritten_followed
    assert set(follow.FOLLOWED) == set(names(growth="appended")) | set(names(growth="polled")) | rewritten_followed


def test_display_names_and_errors_name_what_is_known() -> None:
    assert display_name("gemini-cli") == "Gemini CLI" and display_name("openai") == "an OpenAI-format log"
    assert display_name("something-new") == "something-new"
    with pytest.raises(SourceError, match=r"'nope' is not a format read as a source .*claude-code"):
        agent_format("nope")
    with pytest.raises(SourceError, match="OpenHands sessions are not read by appending"):
        appended_reader("openhands", Path("x.json"))


def _names_a_format(path: Path) -> list[str]:
    known = set(get_args(SourceFormat)) - {"openai"}  # also the provider's name, everywhere
    tree = ast.parse(path.read_text(), str(path))
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known]


def test_no_module_outside_the_formats_names_one() -> None:
    naming = {str(p.relative_to(REPO)) for folder in ("app", "engine", "widgets")
              for p in (REPO / folder).rglob("*.py") if _names_a_format(p)}
    assert naming - FORMAT_MODULES == NOT_MOVED_YET
    assert formats.__file__ is not None


def test_lists_of_formats_as_a_sentence_says_them() -> None:
    assert formats.spoken_list(["claude-code"]) == "Claude Code"
    assert formats.spoken_list(["claude-code", "codex"], "or") == "Claude Code or Codex"
    assert formats.spoken_list(["pi", "atif", "proxy-capture", "mini-swe-agent", "openai"]) == (
        "Pi, an ATIF trajectory (Harbor), the recording proxy's captures, mini-swe-agent and an OpenAI-format log")
    assert formats.spoken_list([]) == ""


def test_what_is_followed_imported_and_listed_comes_from_the_registry() -> None:
    assert formats.importable() == (*FORMATS, *LOG_FORMATS) and set(formats.importable()) == set(get_args(SourceFormat))
    assert formats.listed_places() == tuple((FORMATS[n].display, FORMATS[n].place.shown)  # type: ignore[union-attr]
                                            for n in names(listed=True))
    assert ("Cline", "~/.cline/data/sessions") in formats.listed_places()


def _assigns_agent_cost(module: str, seen: set[str]) -> bool:
    """Whether ``engine/sources/<module>.py``, or a module of engine.sources it imports (not the light passes' module,
    which imports every format), sets a session's ``agent_cost_usd``."""
    if module in seen or module == "session_summary":
        return False
    seen.add(module)
    path = REPO / "engine" / "sources" / f"{module}.py"
    if not path.is_file():
        return False
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr == "agent_cost_usd" for t in targets):
                return True
    imported = {n.module.rsplit(".", 1)[-1] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                and n.module and n.module.startswith("engine.sources.")}
    return any(_assigns_agent_cost(m, seen) for m in sorted(imported))


@pytest.mark.parametrize("name", list(FORMATS))
def test_records_cost_is_declared_for_exactly_the_formats_whose_reader_reads_the_agents_cost(name: str) -> None:
    spec = FORMATS[name]  # type: ignore[index]
    module = spec.read.__code__.co_names[0]  # (each reader is ``lambda path: <module>.<reader>(path)``)
    assert _assigns_agent_cost(module, set()) == spec.records_cost, module
    if spec.records_cost and spec.listed:  # (the views that say whose cost they show list these sessions only)
        assert (spec.spoken or spec.display) in formats.cost_recorded_by()
    else:
        assert (spec.spoken or spec.display) not in formats.cost_recorded_by()
