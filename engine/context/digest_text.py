"""The digest as Markdown: render :class:`engine.context.digest.Facts` in the six summary sections, read an
earlier digest back, and build the digest of a compaction (incremental: the earlier summary's facts
merged with the new span's).

Every fact line has a fixed shape so that :func:`parse_digest` reads it back exactly::

    1. [2026-02-11 21:03] the user's words            (a request; continuation lines "   > …")
    - "a sentence of the user's stating a rule"        (Constraints & Preferences)
    - [edited · 5×: read 2, edited 3] lib/a.ex          (a file: last action, times, all actions)
    - [exit 2 · 3×] mix test                            (a command: last status, runs)
    - [mix test] ** (CompileError) lib/a.ex:3: …        (an error and the kind of call that met it)
    - dialog/2026-02-11.jsonl — 412 lines               (the archive guide)

Anything else found in an earlier summary (a model's text, the user's edits, a drop note) is kept as
written under "Earlier notes", its headings demoted so the six sections stay unambiguous.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine.context.digest import (
    CommandFact,
    ErrorFact,
    Facts,
    FileFact,
    Request,
    extract_facts,
    merge_facts,
)
from engine.model.messages import Message

MAX_COMMANDS = 40  # distinct commands listed (the most recent); the archive holds every run
MAX_GOT_PAST = 15  # errors that a later step got past (the most recent)
MAX_CONSTRAINTS = 20


@dataclass(frozen=True)
class Limits:
    """How much of each list the text shows; :func:`render_digest` tightens them to fit ``max_chars``."""

    commands: int = MAX_COMMANDS
    got_past: int = MAX_GOT_PAST
    constraints: int = MAX_CONSTRAINTS
    request_chars: int = 0  # 0: as extracted; else requests are cut again to this length
    files_inline: bool = False  # files read or named: paths only, on one line


# each step shows less; the archive keeps everything word for word
TIGHTER = (
    Limits(),
    Limits(commands=15, got_past=5, constraints=8),
    Limits(commands=8, got_past=3, constraints=5, request_chars=300),
    Limits(commands=5, got_past=2, constraints=3, request_chars=160, files_inline=True),
)
NARRATIVE_HEADING = "## Narrative"

H_GOAL = "## Goal"
H_CONSTRAINTS = "## Constraints & Preferences"
H_PROGRESS = "## Progress"
H_DONE = "### Done"
H_IN_PROGRESS = "### In Progress"
H_BLOCKED = "### Blocked"
H_DECISIONS = "## Key Decisions"
H_NEXT = "## Next Steps"
H_CRITICAL = "## Critical Context"
H_NOTES = "### Earlier notes (kept as written)"

T_REQUESTS = "The user's requests, oldest first, word for word (long ones are cut; the archive holds them whole):"
T_NO_REQUESTS = "- No request from the user in the compacted messages."
T_CONSTRAINTS = "Sentences of the user's requests that set a rule or preference:"
T_NO_CONSTRAINTS = "- None stated in the user's requests."
T_CHANGED = "Files created or changed, by path ([last action · times: every action] path):"
T_NO_CHANGED = "- No file created or changed by a tool call."
T_INTENT = "- Last stated by the assistant: "
T_NO_INTENT = "- No statement from the assistant."
T_BLOCKED = "Errors no later step got past ([kind of call] error):"
T_NO_BLOCKED = "- No error left unresolved."
T_GOT_PAST = "Errors met and got past by a later call of the same kind ([kind of call] error):"
T_NO_GOT_PAST = "- No error met, or none got past yet."
T_DECISIONS = "- The reasons behind choices are in the assistant's messages (dialog archive)."
T_NEXT = "- The assistant's last stated next step: "
T_NO_NEXT = "- No next step stated by the assistant."
T_LATEST = "- The user's latest request is number "
T_READ = "Files read, searched or only tried, not changed, by path ([last action · times: every action] path):"
T_NO_READ = "- No file only read."
T_READ_INLINE = "- Paths only: "  # the tightest form: "- Paths only: a.py, b/c.txt"
T_MENTIONED = "Files named in the conversation, not opened by a tool call: "
T_COMMANDS = "Commands run, most recent last ([last status · runs] command):"
T_NO_COMMANDS = "- No command run."
T_MORE_COMMANDS = "- … and {n} earlier distinct command(s), in the archive."
T_ARCHIVE = (
    "The compacted messages, word for word, one JSON message per line (oldest first; read them with "
    "read_file, start_line=N to go on):"
)
T_COUNT = "- Compacted so far: {m} messages, {t} tool calls."

_REQ_RE = re.compile(r"^(\d+)\. (?:\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\] )?(.*)$")
_REQ_MORE_RE = re.compile(r"^   >(?: (.*))?$")
_REQ_CUT_RE = re.compile(
    r"^   … \(cut: (\d+) characters in all; the whole text(?: is in the archive|: dialog/(\d{4}-\d{2}-\d{2})\.jsonl)"
    r"(?:, message (\S+))?\)$"
)
_QUOTED_RE = re.compile(r'^- "(.*)"$')
_BRACKET_RE = re.compile(r"^- \[(.+?)\] (.*)$")
_FILE_META_RE = re.compile(r"^(.+?) · (\d+)×(?:: (.+))?$")
_CMD_META_RE = re.compile(r"^(.+?) · (\d+)×$")
_MORE_RE = re.compile(r"^- … and (\d+) earlier distinct command\(s\), in the archive\.$")
_ARCHIVE_RE = re.compile(r"^- dialog/(\d{4}-\d{2}-\d{2})\.jsonl — (\d+) lines?$")
_COUNT_RE = re.compile(r"^- Compacted so far: (\d+) messages, (\d+) tool calls\.$")
_HEADING_LINE = re.compile(r"^\s{0,3}(#{1,6})\s")
_FIXED = frozenset({
    T_REQUESTS, T_NO_REQUESTS, T_CONSTRAINTS, T_NO_CONSTRAINTS, T_CHANGED, T_NO_CHANGED, T_NO_INTENT,
    T_BLOCKED, T_NO_BLOCKED, T_GOT_PAST, T_NO_GOT_PAST, T_DECISIONS, T_NO_NEXT, T_READ, T_NO_READ,
    T_COMMANDS, T_NO_COMMANDS, T_ARCHIVE, H_NOTES, H_DONE, H_IN_PROGRESS, H_BLOCKED,
})


# --------------------------------------------------------------------------- render


def _quote(text: str) -> str:
    return '"' + text + '"'


def _render_request(n: int, r: Request, limit: int = 0) -> list[str]:
    if limit and len(r.text) > limit:
        r = Request(r.text[:limit].rstrip(), r.ts, r.day, r.msg_id, r.chars)
    lines = [ln.rstrip() for ln in r.text.split("\n")]
    head = f"{n}. " + (f"[{r.ts}] " if r.ts else "") + lines[0]
    out = [head] + [("   > " + ln) if ln else "   >" for ln in lines[1:]]
    if r.cut:
        where = f"; the whole text: dialog/{r.day}.jsonl" if r.day else "; the whole text is in the archive"
        out.append(f"   … (cut: {r.chars} characters in all{where}" + (f", message {r.msg_id})" if r.msg_id else ")"))
    return out


def _file_line(ff: FileFact) -> str:
    every = ", ".join(f"{verb} {n}" for verb, n in ff.actions.items())
    return f"- [{ff.last} · {ff.count}×: {every}] {ff.path}"


def _section_goal(f: Facts, lim: Limits) -> list[str]:
    out = [H_GOAL, T_REQUESTS if f.requests else T_NO_REQUESTS]
    for i, r in enumerate(f.requests, 1):
        out.extend(_render_request(i, r, lim.request_chars))
    return out


def _section_constraints(f: Facts, lim: Limits) -> list[str]:
    if not f.constraints:
        return [H_CONSTRAINTS, T_NO_CONSTRAINTS]
    return [H_CONSTRAINTS, T_CONSTRAINTS] + [f"- {_quote(c)}" for c in f.constraints[-lim.constraints :]]


def _section_progress(f: Facts, lim: Limits) -> list[str]:
    changed = sorted((ff for ff in f.files.values() if ff.changed), key=lambda ff: ff.path)
    out = [H_PROGRESS, H_DONE, T_CHANGED if changed else T_NO_CHANGED]
    out += [_file_line(ff) for ff in changed]
    out += [H_IN_PROGRESS, (T_INTENT + _quote(f.intent)) if f.intent else T_NO_INTENT]
    blocked = [e for e in f.errors if not e.got_past]
    out += [H_BLOCKED, T_BLOCKED if blocked else T_NO_BLOCKED]
    out += [f"- [{e.key}] {e.text}" for e in blocked]
    return out


def _section_decisions(f: Facts, lim: Limits) -> list[str]:
    past = [e for e in f.errors if e.got_past][-lim.got_past :]
    out = [H_DECISIONS, T_GOT_PAST if past else T_NO_GOT_PAST]
    out += [f"- [{e.key}] {e.text}" for e in past]
    return [*out, T_DECISIONS]


def _section_next(f: Facts, lim: Limits) -> list[str]:
    out = [H_NEXT, (T_NEXT + _quote(f.next_step)) if f.next_step else T_NO_NEXT]
    if f.requests:
        out.append(f"{T_LATEST}{len(f.requests)} (see Goal).")
    return out


def _section_critical(f: Facts, lim: Limits) -> list[str]:
    read = sorted((ff for ff in f.files.values() if not ff.changed), key=lambda ff: ff.path)
    out = [H_CRITICAL, T_READ if read else T_NO_READ]
    if lim.files_inline and read:
        out.append(T_READ_INLINE + ", ".join(ff.path for ff in read))
    else:
        out += [_file_line(ff) for ff in read]
    if f.mentioned:
        out.append(T_MENTIONED + ", ".join(f.mentioned))
    cmds = list(f.commands.values())
    out.append(T_COMMANDS if cmds else T_NO_COMMANDS)
    hidden = f.commands_hidden + max(0, len(cmds) - lim.commands)
    if hidden:
        out.append(T_MORE_COMMANDS.format(n=hidden))
    out += [f"- [{c.status} · {c.runs}×] {c.command}" for c in cmds[-lim.commands :]]
    out.append(T_ARCHIVE)
    out += [f"- dialog/{d}.jsonl — {n} line{'s' if n != 1 else ''}" for d, n in f.archive.items()]
    out.append(T_COUNT.format(m=f.messages, t=f.tool_calls))
    if f.notes:
        out.append(H_NOTES)
        out += f.notes
    return out


def render_digest(facts: Facts, max_chars: int | None = None) -> str:
    """The facts as the six ``##`` sections of a summary (always passes the summary check).

    With ``max_chars``, the lists are shortened step by step (:data:`TIGHTER`) until the text fits
    or nothing more can go; every request, changed file and unresolved error stays."""
    text = ""
    for lim in TIGHTER:
        parts = [
            _section_goal(facts, lim), _section_constraints(facts, lim), _section_progress(facts, lim),
            _section_decisions(facts, lim), _section_next(facts, lim), _section_critical(facts, lim),
        ]
        text = "\n\n".join("\n".join(p) for p in parts)
        if max_chars is None or len(text) <= max_chars:
            break
    return text


# --------------------------------------------------------------------------- parse back


def demote(line: str) -> str:
    """A Markdown heading made plain bold text (so it cannot open a section of ours)."""
    m = _HEADING_LINE.match(line)
    return f"**{line[m.end():].strip()}**" if m else line


@dataclass
class _Parser:
    facts: Facts
    section: str = ""
    sub: str = ""
    keep_narrative: bool = True

    def feed(self, raw: str) -> None:
        line = raw.rstrip()
        if line.startswith("## "):
            self.section, self.sub = line, ""
            if line.startswith(NARRATIVE_HEADING) and self.keep_narrative:
                self.facts.notes.append(demote(line))
            elif not self._known_section(line):
                self.facts.notes.append(demote(line))
            return
        if line.startswith("### "):
            self.sub = line
            if line not in _FIXED:
                self.facts.notes.append(demote(line))
            return
        if self.section.startswith(NARRATIVE_HEADING):
            if self.keep_narrative and line:
                self.facts.notes.append(demote(line))
            return
        if not line or line in _FIXED:
            return
        if self.sub == H_NOTES or not self._fact(line):
            self.facts.notes.append(demote(line))

    @staticmethod
    def _known_section(line: str) -> bool:
        return line in (H_GOAL, H_CONSTRAINTS, H_PROGRESS, H_DECISIONS, H_NEXT, H_CRITICAL)

    def _fact(self, line: str) -> bool:
        """Take one line as a fact of the current section; False when it is not one of ours."""
        f = self.facts
        if self.section == H_GOAL:
            return self._request(line)
        if self.section == H_CONSTRAINTS and (m := _QUOTED_RE.match(line)):
            f.constraints.append(m.group(1))
            return True
        if line.startswith(T_INTENT) and line.endswith('"'):
            f.intent = line[len(T_INTENT) + 1 : -1]
            return True
        if line.startswith(T_NEXT) and line.endswith('"'):
            f.next_step = line[len(T_NEXT) + 1 : -1]
            return True
        if line.startswith(T_LATEST):
            return True
        if line.startswith(T_READ_INLINE):
            for p in line[len(T_READ_INLINE) :].split(", "):
                if p and p not in f.files:
                    f.files[p] = FileFact(p, {"read": 1}, "read")
            return True
        if line.startswith(T_MENTIONED):
            f.mentioned.extend(p for p in line[len(T_MENTIONED):].split(", ") if p)
            return True
        if m := _MORE_RE.match(line):
            f.commands_hidden += int(m.group(1))
            return True
        if m := _ARCHIVE_RE.match(line):
            f.archive[m.group(1)] = int(m.group(2))
            return True
        if m := _COUNT_RE.match(line):
            f.messages, f.tool_calls = int(m.group(1)), int(m.group(2))
            return True
        m = _BRACKET_RE.match(line)
        return m is not None and self._bracket(m.group(1), m.group(2))

    def _bracket(self, meta: str, rest: str) -> bool:
        f = self.facts
        in_files = self.sub == H_DONE or (self.section == H_CRITICAL and (fm := _FILE_META_RE.match(meta)) and
                                          fm.group(3) is not None)
        if in_files and (fm := _FILE_META_RE.match(meta)):
            ff = f.files.setdefault(rest, FileFact(rest))
            every = fm.group(3) or f"{fm.group(1)} {fm.group(2)}"
            for part in every.split(", "):
                verb, _, n = part.rpartition(" ")
                if verb and n.isdigit():
                    ff.actions[verb] = ff.actions.get(verb, 0) + int(n)
            ff.last = fm.group(1)
            return True
        if self.section == H_CRITICAL and (cm := _CMD_META_RE.match(meta)):
            f.commands[rest] = CommandFact(rest, int(cm.group(2)), cm.group(1))
            return True
        if self.sub == H_BLOCKED or self.section == H_DECISIONS:
            f.errors.append(ErrorFact(meta, rest, self.section == H_DECISIONS))
            return True
        return False

    def _request(self, line: str) -> bool:
        reqs = self.facts.requests
        if (m := _REQ_MORE_RE.match(line)) and reqs:
            r = reqs[-1]
            r.text += "\n" + (m.group(1) or "")
            r.chars = max(r.chars, len(r.text))
            return True
        if (m := _REQ_CUT_RE.match(line)) and reqs:
            r = reqs[-1]
            r.chars, r.day, r.msg_id = int(m.group(1)), m.group(2) or "", m.group(3) or ""
            return True
        if m := _REQ_RE.match(line):
            reqs.append(Request(m.group(3), m.group(2) or "", "", "", len(m.group(3))))
            return True
        return False


def parse_digest(summary: str, *, keep_narrative: bool = True) -> Facts:
    """The facts of an earlier summary; lines that are not digest facts become ``notes`` (kept as
    written, headings demoted). ``keep_narrative=False`` leaves out a model's narrative section (the
    model is given the earlier summary and rewrites it)."""
    if T_REQUESTS not in summary and T_NO_REQUESTS not in summary:  # not a digest: keep it all
        return Facts(notes=[demote(ln.rstrip()) for ln in summary.splitlines() if ln.strip()])
    parser = _Parser(Facts(), keep_narrative=keep_narrative)
    for line in summary.splitlines():
        parser.feed(line)
    # a request's text never ends with the blank continuation lines the render adds for empty lines
    for r in parser.facts.requests:
        r.text = r.text.rstrip("\n")
    return parser.facts


# --------------------------------------------------------------------------- the digest


def build_digest(
    messages: Sequence[Message],
    previous_summary: str = "",
    *,
    archive_lines: Mapping[str, int] | None = None,
    keep_narrative: bool = True,
    max_chars: int | None = None,
) -> str:
    """The digest summary of ``messages``, merged with the facts of ``previous_summary`` (its other
    text kept under "Earlier notes"), its lists shortened to fit ``max_chars`` when given.
    Deterministic; always passes the summary check."""
    facts = extract_facts(messages, archive_lines)
    if previous_summary.strip():
        facts = merge_facts(parse_digest(previous_summary, keep_narrative=keep_narrative), facts)
    return render_digest(facts, max_chars)
