"""The format registry: each agent format declared once — its name and display name, its whole-file reader, its
incremental reader, how a growing session is followed (appended file tailed, or database polled), where the agent
keeps its sessions (:class:`engine.sources.places.Place`) and the light pass that lists one in Sources (its title,
project and figures), and whether reasoning tokens are inside its output figure.

Import, follow, the window's live views, the usage index and the prices read formats only from here (a test
checks every registered format is complete and that the modules reading them name no format).

The incremental readers share one protocol, :class:`AppendedReader`: bytes (or complete lines) in,
:class:`engine.sources.model.SourceChanges` out, :meth:`AppendedReader.finish` for the whole session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, cast, runtime_checkable

from engine.sources import places
from engine.sources.lazy import LazyModule
from engine.sources.model import SourceChanges, SourceError, SourceFormat, SourceSession
from engine.sources.places import Place

session_summary = LazyModule("session_summary")  # each listed format's light pass (Sources), imported when first used

if TYPE_CHECKING:
    from engine.sources import (
        atif,
        capture,
        claude_code,
        cline,
        codex,
        copilot,
        gemini_cli,
        kilo,
        opencode,
        openhands,
        pi,
        qwen_code,
        swe_agent,
    )
    from engine.sources.entry import SourceEntry
else:  # each imported when a format first uses it (engine.sources.lazy)
    atif = LazyModule("atif")
    capture = LazyModule("capture")
    claude_code = LazyModule("claude_code")
    cline = LazyModule("cline")
    codex = LazyModule("codex")
    copilot = LazyModule("copilot")
    gemini_cli = LazyModule("gemini_cli")
    kilo = LazyModule("kilo")
    opencode = LazyModule("opencode")
    openhands = LazyModule("openhands")
    pi = LazyModule("pi")
    qwen_code = LazyModule("qwen_code")
    swe_agent = LazyModule("swe_agent")

Growth = Literal["appended", "polled", "rewritten"]


class AppendedReader(Protocol):
    """An incremental reader of a file agents write by appending (Claude Code, Codex, Gemini CLI)."""

    session: SourceSession

    def feed(self, data: bytes) -> SourceChanges:
        """Take appended bytes; a partial last line waits inside the reader for its newline."""
        ...

    def feed_lines(self, lines: Iterable[bytes]) -> SourceChanges:
        """Take complete lines (each with its newline)."""
        ...

    def finish(self) -> SourceSession:
        """The whole session read so far (what lives beside the file added)."""
        ...


@runtime_checkable
class RewrittenReader(AppendedReader, Protocol):
    """An incremental reader of a file the agent rewrites whole (Cline): fed the whole file again after each
    change, told so by :meth:`restart`; it works out itself what the new version adds (or ``reset``), and a
    version not completely written yet is waited on (no change), never an error."""

    def restart(self) -> None:
        """The file is read again from its start: what was fed so far is dropped, the session kept."""
        ...


@dataclass(frozen=True)
class AgentFormat:
    """One agent format (see the module docstring).

    ``read``: the whole session at a path; ``read_lines``: the same from complete lines the caller already read
    (a line-oriented file is then not read again); ``appended``: a new incremental reader of the path (``bulk``:
    the whole file is fed at once); ``growth``: how a growing session is followed — ``appended`` (tailed and fed
    to ``appended``), ``polled`` (a database: its reader is polled) or ``rewritten`` (the agent rewrites the file:
    read whole again; with an ``appended`` reader, a :class:`RewrittenReader`, it is followed: fed the whole file
    after each change); ``follow_open_last``: following starts from the call open at the end of the file;
    ``polled``: a new polled reader of a path (``subagents``: its child sessions read too);
    ``place``: where the agent keeps its sessions (``listed``: it has one, and Sources looks there), each file
    summarised by ``summary`` (its light pass; a polled database is summarised session by session by
    :mod:`engine.sources.opencode_summary`);
    ``light_pass_kept``: the light pass of a growing file is kept for what is appended (Claude Code's);
    ``subagents_beside``: its subagents' files lie beside it and are read with it (``read_beside``);
    ``cache_hours_in_lines``: its lines say how much of a call's cache write is kept an hour (Claude Code's
    ``ephemeral_1h``), read by the usage index's one-hour pass where the call does not carry it; ``usage_pass``:
    the usage index has a pass of its own for its files (:mod:`engine.usage.claude_pass`: the same rows, less work);
    ``first_screen``: a large file is shown first as its context since the last compaction, read from its end
    (:func:`engine.workbench.source_views.preview_view`), while the whole file is read;
    ``reasoning_in_output``: the output figure includes reasoning; ``in_usage``: the usage index counts its sessions
    (a proxy's capture is not: the calls it recorded are the ones the agent's own file holds, and would be counted
    twice); ``records_cost``: its files hold the agent's own cost (its reader sets ``agent_cost_usd``); ``spoken``: how
    a sentence that lists formats names it, when not by ``display`` (:func:`spoken_list`)."""

    name: SourceFormat
    display: str
    read: Callable[[Path], SourceSession]
    read_lines: Callable[[Path, Sequence[bytes]], SourceSession] | None = None
    appended: Callable[[Path, bool], AppendedReader] | None = None
    polled: Callable[[Path, bool], opencode.OpenCodeReader] | None = None
    growth: Growth = "rewritten"
    follow_open_last: bool = False
    place: Place | None = None
    summary: Callable[[Path], SourceEntry] | None = None
    light_pass_kept: bool = False
    subagents_beside: bool = False
    cache_hours_in_lines: bool = False
    usage_pass: bool = False
    first_screen: bool = False
    reasoning_in_output: bool = True
    in_usage: bool = True
    records_cost: bool = False
    spoken: str = ""

    @property
    def listed(self) -> bool:
        """Sources looks for its sessions (the format has a place)."""
        return self.place is not None


FORMATS: dict[SourceFormat, AgentFormat] = {f.name: f for f in (
    AgentFormat("claude-code", "Claude Code", lambda path: claude_code.read_claude_code(path),
                read_lines=lambda path, lines: claude_code.read_claude_code(path, lines=lines),
                appended=lambda path, bulk: claude_code.ClaudeCodeReader(path, bulk=bulk),
                growth="appended", follow_open_last=True, light_pass_kept=True,
                subagents_beside=True, cache_hours_in_lines=True, usage_pass=True, first_screen=True,
                records_cost=True,
                place=Place(places.claude_code_roots, "~/.claude/projects", "*/*.jsonl", places.not_a_subagent_file,
                            by_first_line=True),
                summary=lambda path: session_summary._summary_claude(path)),
    AgentFormat("codex", "Codex", lambda path: codex.read_codex(path),
                read_lines=lambda path, lines: codex.read_codex(path, lines=lines),
                appended=lambda path, _bulk: codex.CodexReader(path),
                growth="appended",
                place=Place(places.codex_roots, "~/.codex/sessions", "**/rollout-*.jsonl",
                            anywhere="**/rollout-*.jsonl"),
                summary=lambda path: session_summary._summary_codex(path)),
    AgentFormat("gemini-cli", "Gemini CLI", lambda path: gemini_cli.read_gemini_cli(path),
                read_lines=lambda path, lines: gemini_cli.read_gemini_cli(path, lines=lines),
                appended=lambda path, _bulk: gemini_cli.GeminiCliReader(path),
                growth="appended", follow_open_last=True, reasoning_in_output=False,
                place=Place(places.gemini_cli_roots, "~/.gemini/tmp", "*/chats/session-*.jsonl", by_first_line=True),
                summary=lambda path: session_summary._summary_gemini(path)),
    AgentFormat("opencode", "OpenCode", lambda path: opencode.read_opencode(path),
                polled=lambda path, subagents: opencode.open_reader(path, subagents=subagents),
                growth="polled", reasoning_in_output=False, records_cost=True,
                place=Place(places.data_home_roots("opencode"), "~/.local/share/opencode", "opencode*.db",
                            anywhere="**/opencode*.db", is_source=lambda path: opencode.is_opencode_source(path))),
    AgentFormat("kilo", "Kilo CLI", lambda path: kilo.read_kilo(path),  # OpenCode's reader in Kilo's dialect
                polled=lambda path, subagents: kilo.open_kilo(path, subagents=subagents),
                growth="polled", reasoning_in_output=False, records_cost=True,
                place=Place(places.data_home_roots("kilo"), "~/.local/share/kilo", "kilo*.db",
                            anywhere="**/kilo*.db", is_source=lambda path: kilo.is_kilo_source(path))),
    AgentFormat("pi", "Pi", lambda path: pi.read_pi(path),
                read_lines=lambda path, lines: pi.read_pi(path, lines=lines),
                appended=lambda path, _bulk: pi.PiReader(path), growth="appended", records_cost=True,
                place=Place(places.pi_roots, "~/.pi/agent/sessions", "*/*.jsonl", by_first_line=True),
                summary=lambda path: session_summary._summary_pi(path)),
    AgentFormat("copilot-cli", "Copilot CLI", lambda path: copilot.read_copilot(path),
                read_lines=lambda path, lines: copilot.read_copilot(path, lines=lines),
                appended=lambda path, _bulk: copilot.CopilotReader(path), growth="appended",
                place=Place(places.copilot_roots, "~/.copilot/session-state", "*/events.jsonl", by_first_line=True),
                summary=lambda path: session_summary._summary_copilot(path)),
    AgentFormat("cline", "Cline", lambda path: cline.read_cline(path),
                read_lines=lambda path, lines: cline.read_cline_lines(path, lines),
                appended=lambda path, _bulk: cline.ClineReader(path), growth="rewritten", records_cost=True,
                place=Place(places.cline_roots, "~/.cline/data/sessions", "*/*.messages.json",
                            anywhere="**/*.messages.json"),
                summary=lambda path: session_summary._summary_cline(path)),
    AgentFormat("qwen-code", "Qwen Code", lambda path: qwen_code.read_qwen_code(path),
                read_lines=lambda path, lines: qwen_code.read_qwen_code(path, lines=lines),
                appended=lambda path, _bulk: qwen_code.QwenCodeReader(path), growth="appended",
                place=Place(places.qwen_code_roots, "~/.qwen/projects", "*/chats/*.jsonl", by_first_line=True),
                summary=lambda path: session_summary._summary_qwen_code(path)),
    AgentFormat("openhands", "OpenHands", lambda path: openhands.read_openhands(path)),
    AgentFormat("swe-agent", "SWE-agent", lambda path: swe_agent.read_swe_agent(path)),
    AgentFormat("atif", "ATIF trajectory (Harbor)", lambda path: atif.read_atif(path), records_cost=True,
                spoken="an ATIF trajectory (Harbor)"),
    AgentFormat("proxy-capture", "Recorded (proxy)", lambda path: capture.read_capture(path),  # engine.capture's files
                read_lines=lambda path, lines: capture.read_capture(path, lines=lines),
                appended=lambda path, _bulk: capture.CaptureReader(path), growth="appended",
                place=Place(places.capture_roots, "<data dir>/captures", "capture-*.jsonl", places.first_capture_part,
                            by_first_line=True),
                summary=lambda path: session_summary._summary_capture(path), in_usage=False,
                spoken="the recording proxy's captures"),
)}

# logs the importer reads (engine.importer), not sources with a reader here
LOG_FORMATS: dict[SourceFormat, str] = {"mini-swe-agent": "mini-swe-agent", "openai": "an OpenAI-format log"}


def agent_format(name: str) -> AgentFormat:
    """The registered format ``name``; SourceError naming the known ones when it is not one."""
    spec = FORMATS.get(cast(SourceFormat, name))
    if spec is None:
        raise SourceError(f"{name!r} is not a format read as a source (known: {', '.join(FORMATS)})")
    return spec


def display_name(name: str) -> str:
    """How a person calls the format's agent ("Claude Code"); the name itself when it is none of ours."""
    spec = FORMATS.get(cast(SourceFormat, name))
    return spec.display if spec is not None else LOG_FORMATS.get(cast(SourceFormat, name), name)


def names(*, growth: Growth | None = None, listed: bool | None = None,
          reasoning_in_output: bool | None = None, in_usage: bool | None = None,
          records_cost: bool | None = None) -> tuple[SourceFormat, ...]:
    """The registered formats with the given properties, in registration order."""
    return tuple(f.name for f in FORMATS.values()
                 if (growth is None or f.growth == growth) and (listed is None or f.listed == listed)
                 and (reasoning_in_output is None or f.reasoning_in_output == reasoning_in_output)
                 and (in_usage is None or f.in_usage == in_usage)
                 and (records_cost is None or f.records_cost == records_cost))


def importable() -> tuple[SourceFormat, ...]:
    """Every format ``ctxbench import`` (and the window's Open) reads: the registered ones, then the logs."""
    return (*FORMATS, *LOG_FORMATS)


def spoken_list(names: Iterable[str], last: str = "and") -> str:
    """The formats ``names`` as a sentence lists them ("Claude Code, Codex and Gemini CLI"): each by its ``spoken``
    name, else its display name (:func:`display_name`), in the order given."""
    words = [spec.spoken or spec.display if (spec := FORMATS.get(cast(SourceFormat, n))) else display_name(n)
             for n in names]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}" if words else ""


def cost_recorded_by() -> str:
    """The agents Sources lists whose files hold their own cost, as a sentence lists them: what the "agent's cost"
    column of the Sources list and of the usage view (which count the sessions Sources lists) says it comes from."""
    return spoken_list(names(records_cost=True, listed=True))


def listed_places() -> tuple[tuple[str, str], ...]:
    """(display name, where a person finds its sessions: ``Place.shown``) of every format Sources lists."""
    return tuple((f.display, f.place.shown) for f in FORMATS.values() if f.place is not None)


def light_summary(name: str, path: Path) -> SourceEntry:
    """The Sources summary of one session file of the format ``name`` (its light pass: only the lines that carry
    usage, the title and the project are parsed)."""
    spec = agent_format(name)
    if spec.summary is None:
        raise SourceError(f"{spec.display} sessions are not listed file by file")
    return spec.summary(Path(path))


def appended_reader(name: str, path: Path, *, bulk: bool = False) -> AppendedReader:
    """A new incremental reader of ``path`` in the format ``name`` (one that grows by appending)."""
    spec = agent_format(name)
    if spec.appended is None:
        raise SourceError(f"{spec.display} sessions are not read by appending")
    return spec.appended(Path(path), bulk)


def polled_reader(name: str, path: Path, *, subagents: bool = True) -> opencode.OpenCodeReader:
    """A new polled reader of ``path`` in the format ``name`` (a database)."""
    spec = agent_format(name)
    if spec.polled is None:
        raise SourceError(f"{spec.display} sessions are not polled")
    return spec.polled(Path(path), subagents)


__all__ = ["FORMATS", "LOG_FORMATS", "AgentFormat", "AppendedReader", "Growth", "RewrittenReader", "agent_format",
           "appended_reader", "cost_recorded_by", "display_name", "importable", "light_summary",
           "listed_places", "names", "polled_reader", "spoken_list"]
