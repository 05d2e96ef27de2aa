"""The digest: a compaction summary made from the messages themselves, exactly and deterministically.

No model is asked. From the compacted messages it takes what can be taken word for word:

- every user request (long ones cut, with a pointer into the dialog archive);
- the files that tool calls read, created, changed, searched or deleted — our own tools
  (:mod:`engine.tools.registry`) and the usual tools of other agents: Claude Code (Read, Write, Edit,
  MultiEdit, NotebookEdit, Grep, Bash), Codex (``shell``, ``apply_patch``), OpenHands
  (``str_replace_editor``, ``execute_bash``), SWE-agent / mini-swe-agent (``bash`` commands, whose
  file arguments are read conservatively: ``cat``, ``head``, ``sed -n``, redirections …);
- the commands run, with their exit status;
- the errors met (tracebacks, non-zero exits, tool errors) and whether a later call of the same
  kind got past them;
- the assistant's last statement of intent;
- the archive guide: which ``dialog/YYYY-MM-DD.jsonl`` files hold the messages, and their lines.

:func:`extract_facts` gives the :class:`Facts`; :mod:`engine.context.digest_text` renders them as the six
Markdown sections the summary check expects, parses them back and merges an earlier summary's
facts (incremental compaction). Pure: no I/O, no clock (a message without a timestamp is dated
with :func:`engine.model.messages.message_date`, as the archive dates it).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from engine.model.messages import Message, content_text, message_date
from engine.model.text import one_line

REQUEST_CHARS = 800  # a user request longer than this is cut (the archive holds it whole)
INTENT_CHARS = 500
ERROR_CHARS = 240
COMMAND_CHARS = 200

# --------------------------------------------------------------------------- the facts


@dataclass
class Request:
    text: str  # word for word, cut to REQUEST_CHARS
    ts: str  # "YYYY-MM-DD HH:MM" or ""
    day: str  # the archive day file that holds the message
    msg_id: str
    chars: int  # the whole request's length

    @property
    def cut(self) -> bool:
        return self.chars > len(self.text)

    def key(self) -> tuple[str, str]:
        return (self.msg_id, "") if self.cut and self.msg_id else (self.ts, self.text)


@dataclass
class FileFact:
    path: str
    actions: dict[str, int] = field(default_factory=dict)  # verb → times, in first-seen order
    last: str = ""

    @property
    def count(self) -> int:
        return sum(self.actions.values())

    @property
    def changed(self) -> bool:
        """A call changed it (a failed edit, "edited (failed)", did not)."""
        return any(v in CHANGE_VERBS for v in self.actions)

    def add(self, verb: str, times: int = 1) -> None:
        self.actions[verb] = self.actions.get(verb, 0) + times
        self.last = verb


@dataclass
class CommandFact:
    command: str  # one line, cut to COMMAND_CHARS
    runs: int
    status: str  # "exit 0", "exit 2", "ok", "error", "killed (timeout)", "no result"


@dataclass
class ErrorFact:
    key: str  # what kind of call failed: "mix test", "Edit lib/a.ex" …
    text: str  # one line: the exception, the first error line, or the tool's message
    got_past: bool


@dataclass
class Facts:
    requests: list[Request] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    files: dict[str, FileFact] = field(default_factory=dict)
    commands: dict[str, CommandFact] = field(default_factory=dict)
    errors: list[ErrorFact] = field(default_factory=list)
    intent: str = ""  # the last assistant text (current work)
    next_step: str = ""  # the last sentence stating what the assistant will do
    archive: dict[str, int] = field(default_factory=dict)  # day → lines in dialog/<day>.jsonl
    messages: int = 0
    notes: list[str] = field(default_factory=list)  # earlier text kept as written (not digest facts)
    mentioned: list[str] = field(default_factory=list)  # paths named in the text, not opened by a tool
    commands_hidden: int = 0  # distinct commands an earlier digest left out of its list
    archive_exact: bool = False  # archive holds the day files' whole line counts (else: these messages')
    tool_calls: int = 0


CHANGE_VERBS = frozenset({"created", "written", "edited", "deleted"})
READ_VERBS = frozenset({"read", "searched"})

# --------------------------------------------------------------------------- tool calls → files

_READ_TOOLS = {"read_file": "path", "Read": "file_path", "NotebookRead": "notebook_path", "view_file": "path"}
_EDIT_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path", "edit_file": "path"}
_WRITE_TOOLS = {"write_file": "path", "Write": "file_path", "create_file": "path"}
_SEARCH_TOOLS = {"search_text": "path", "Grep": "path"}
SHELL_TOOLS = frozenset({"run_shell", "Bash", "bash", "shell", "execute_bash", "exec_command", "local_shell"})
_EDITOR_VERBS = {"view": "read", "create": "created", "str_replace": "edited", "insert": "edited",
                 "undo_edit": "edited", "write": "written"}
_PATCH_RE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_PATCH_VERBS = {"Add": "created", "Update": "edited", "Delete": "deleted"}
_PATHLIKE = re.compile(r"^[\w.~/+@-][\w.~/+@,=-]*$")
_READ_CMDS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "wc"})
_EDITOR_CMDS = frozenset({"nano", "vim", "vi", "emacs"})
_OPS = frozenset({"&&", "||", ";", "|", "&", ";;", "(", ")", "|&"})


def parse_args(arguments: Any) -> dict[str, Any] | str:
    """A tool call's arguments: the JSON object, or the raw text when it is not JSON."""
    if isinstance(arguments, dict):
        return arguments
    text = "" if arguments is None else str(arguments)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return value if isinstance(value, dict) else text


def looks_like_file(token: str) -> bool:
    """A conservative test for a file path in a shell command: no globs, variables or options; a
    slash or an extension; not a device."""
    if not token or token.startswith("-") or not _PATHLIKE.match(token) or token.startswith("/dev/"):
        return False
    if token in (".", "..", "~") or token.endswith("/"):
        return False
    last = token.rsplit("/", 1)[-1]
    return "/" in token or ("." in last.strip(".") and not last.replace(".", "").isdigit())


def _strip_heredocs(command: str) -> str:
    """The command without here-document bodies (their lines are data, not commands)."""
    out: list[str] = []
    ends: list[str] = []
    for line in command.split("\n"):
        if ends:
            if line.strip() == ends[0]:
                ends.pop(0)
            continue
        out.append(line)
        ends.extend(m.group(2) for m in re.finditer(r"<<-?\s*(['\"]?)([A-Za-z_][\w]*)\1", line))
    return "\n".join(out)


_TOKEN_RE = re.compile(
    r"""(?P<space>\s+)
    | (?P<op>&&|\|\||;;|\|&|\d*(?:>>|>&|>\||>)|&>|<<<|<<-|<<|<&|<|[|;&()])
    | (?P<word>(?:'[^']*'|"(?:\\.|[^"\\])*"|\\.|[^\s'"|;&()<>\\])+)
    | (?P<bad>.)""",
    re.VERBOSE | re.DOTALL,
)
_PIECE_RE = re.compile(r"""'([^']*)'|"((?:\\.|[^"\\])*)"|\\(.)|([^'"\\]+)""", re.DOTALL)
_DQ_ESCAPE_RE = re.compile(r'\\([$`"\\\n])')


def _unquote(word: str) -> str:
    out: list[str] = []
    for m in _PIECE_RE.finditer(word):
        single, double, escaped, plain = m.groups()
        if single is not None:
            out.append(single)
        elif double is not None:
            out.append(_DQ_ESCAPE_RE.sub(r"\1", double))
        else:
            out.append(escaped if escaped is not None else plain)
    return "".join(out)


@lru_cache(maxsize=64)  # a call's command is split for its files and again for its kind
def _split_simple(command: str) -> list[list[str]]:
    """The simple commands of a command line, as argument lists (quotes removed; a redirection is its
    own word, its fd number dropped: ``2>&1`` → ``>&``, ``1``); [] when it cannot be parsed.
    The lists are shared (cached): do not change them."""
    text = _strip_heredocs(command).replace("\\\n", " ").replace("\n", " ; ")  # a new line ends a command
    parts: list[list[str]] = [[]]
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "space":
            continue
        if kind == "bad":  # an unbalanced quote: not parsed (the conservative answer)
            return []
        tok = m.group(0)
        if kind == "op":
            op = tok.lstrip("0123456789")
            if op in _OPS:
                parts.append([])
            else:
                parts[-1].append(op)
        else:
            parts[-1].append(_unquote(tok))
    return [p for p in parts if p]


def shell_files(command: str, argvs: list[list[str]] | None = None) -> list[tuple[str, str]]:
    """(path, verb) for the files a shell command reads or writes, conservatively (``argvs``: its
    :func:`_split_simple`, when already made)."""
    found: list[tuple[str, str]] = []
    for argv in _split_simple(command) if argvs is None else argvs:
        rest: list[str] = []
        i = 0
        while i < len(argv):  # redirections first
            tok = argv[i]
            if tok in (">", ">>", "&>", ">|") and i + 1 < len(argv):
                if looks_like_file(argv[i + 1]):
                    found.append((argv[i + 1], "written"))
                i += 2
                continue
            if tok in ("<", ">&", "<&", "<<", "<<<", "<<-") and i + 1 < len(argv):
                if tok == "<" and looks_like_file(argv[i + 1]):
                    found.append((argv[i + 1], "read"))
                i += 2
                continue
            rest.append(tok)
            i += 1
        while rest and re.match(r"^[A-Za-z_]\w*=", rest[0]):  # VAR=value prefixes
            rest.pop(0)
        if rest and rest[0] in ("sudo", "command", "exec", "time", "nohup"):
            rest.pop(0)
        if rest:
            found.extend(_program_files(rest))
    return found


def _program_files(argv: list[str]) -> list[tuple[str, str]]:
    prog = argv[0].rsplit("/", 1)[-1]
    args = argv[1:]
    operands = [a for a in args if not a.startswith("-")]
    if prog in _READ_CMDS:
        return [(a, "read") for a in operands if looks_like_file(a)]
    if prog == "sed":
        inplace = any(a == "-i" or a.startswith("-i") or a == "--in-place" for a in args)
        has_script_flag = any(a in ("-e", "--expression") or a.startswith("-e") for a in args)
        files = operands if has_script_flag else operands[1:]  # the first operand is the script
        verb = "edited" if inplace else "read"
        return [(a, verb) for a in files if looks_like_file(a)]
    if prog in _EDITOR_CMDS:
        return [(a, "edited") for a in operands if looks_like_file(a)]
    if prog == "touch":
        return [(a, "created") for a in operands if looks_like_file(a)]
    if prog == "rm":
        return [(a, "deleted") for a in operands if looks_like_file(a)]
    if prog == "tee":
        return [(a, "written") for a in operands if looks_like_file(a)]
    return []


def patch_files(patch: str) -> list[tuple[str, str]]:
    """(path, verb) from an ``apply_patch`` envelope's ``*** Add/Update/Delete File:`` lines."""
    out: list[tuple[str, str]] = []
    for m in _PATCH_RE.finditer(patch):
        if m.group(1):
            out.append((m.group(2), _PATCH_VERBS[m.group(1)]))
        else:
            out.append((m.group(3), "created"))
    return out


def shell_command(args: dict[str, Any] | str) -> str:
    """The command line of a shell tool call (Codex passes an argv list such as ["bash", "-lc", …])."""
    if isinstance(args, str):
        return args
    cmd = args.get("command", args.get("cmd", ""))
    if isinstance(cmd, list):
        parts = [str(c) for c in cmd]
        if len(parts) >= 3 and parts[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and parts[1] in ("-lc", "-c"):
            return parts[2]
        return shlex.join(parts)
    return str(cmd or "")


def call_files(name: str, args: dict[str, Any] | str, result: str) -> list[tuple[str, str]]:
    """(path, verb) for every file one tool call names; ``result`` tells created from overwritten."""
    if isinstance(args, str):
        if name == "apply_patch" or "*** Begin Patch" in args:
            return patch_files(args)
        return shell_files(args) if name in SHELL_TOOLS else []
    for table, verb in ((_READ_TOOLS, "read"), (_EDIT_TOOLS, "edited")):
        if name in table:
            p = args.get(table[name])
            return [(p, verb)] if isinstance(p, str) and p else []
    if name in _WRITE_TOOLS:
        p = args.get(_WRITE_TOOLS[name])
        head = result[:200].lower()
        verb = "created" if ("created" in head and "overwrote" not in head) else "written"
        return [(p, verb)] if isinstance(p, str) and p else []
    if name in _SEARCH_TOOLS:
        p = args.get(_SEARCH_TOOLS[name])
        return [(p, "searched")] if isinstance(p, str) and looks_like_file(p) else []
    if name == "str_replace_editor" or (name.endswith("editor") and "command" in args):
        p = args.get("path")
        verb = _EDITOR_VERBS.get(str(args.get("command") or ""), "")
        return [(p, verb)] if isinstance(p, str) and p and verb else []
    if name == "apply_patch":
        text = args.get("input") or args.get("patch") or ""
        return patch_files(str(text))
    if name in SHELL_TOOLS:
        cmd = shell_command(args)
        if "*** Begin Patch" in cmd:
            return patch_files(cmd)
        return shell_files(cmd)
    return []


# --------------------------------------------------------------------------- tool results → status

_EXIT_RES = (
    re.compile(r"\A\s*exit code:?\s*(-?\d+)", re.IGNORECASE),  # ours ("exit code 1"), Claude Code ("Exit code 1")
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),  # mini-swe-agent
    re.compile(r"\[Command finished with exit code (-?\d+)\]"),  # OpenHands
    re.compile(r"^Process exited with code (-?\d+)", re.MULTILINE),  # Codex
    re.compile(r"\"exit_code\"\s*:\s*(-?\d+)"),  # Codex (JSON output)
)
_TOOL_ERROR_RES = (
    re.compile(r"\A\s*error:", re.IGNORECASE),  # ours
    re.compile(r"<tool_use_error>"),  # Claude Code
    re.compile(r"\A\s*(ERROR|Error):"),
    re.compile(r"\AThe user doesn't want to proceed with this tool use"),  # Claude Code rejection
)
_TRACEBACK = "Traceback (most recent call last):"
_EXC_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*)$")
_ERRORISH = re.compile(r"error|fail|fatal|exception|not found|denied|cannot|can't|undefined", re.IGNORECASE)


def exit_code(result: str) -> int | None:
    """The exit code a result states (looked for in its first and last 2,000 characters)."""
    edges = result if len(result) <= 4_000 else result[:2_000] + "\n" + result[-2_000:]
    for rx in _EXIT_RES:
        m = rx.search(edges)
        if m:
            return int(m.group(1))
    return None


def _traceback_line(result: str) -> str:
    """The exception line that ends the last traceback in ``result`` ("" when there is none)."""
    at = result.rfind(_TRACEBACK)
    if at < 0:
        return ""
    for line in result[at:].splitlines()[1:]:
        m = _EXC_LINE.match(line)
        if m and not line.startswith((" ", "\t")):
            return m.group(1)
    return ""


def _first_error_line(result: str, skip_first: bool) -> str:
    lines = [ln for ln in result.splitlines() if ln.strip()]
    if skip_first and lines:
        lines = lines[1:]
    lines = [ln for ln in lines if not re.match(r"^\s*</?(returncode|output)>", ln)]
    for ln in lines:
        if _ERRORISH.search(ln):
            return ln.strip()
    return lines[0].strip() if lines else ""


def result_status(name: str, result: str | None) -> tuple[str, str]:
    """(status, error text) of one tool call from its result; error text is "" when it went well.

    Status: ``exit N`` when the result states an exit code, ``killed (timeout)``, ``error`` for a
    tool error, ``no result`` when no result came back, else ``ok``.
    """
    if result is None:
        return "no result", ""
    tb = _traceback_line(result)
    if result.startswith("killed after"):
        return "killed (timeout)", one_line(result.splitlines()[0], ERROR_CHARS)
    code = exit_code(result)
    if code is not None:
        if code == 0:
            return "exit 0", (one_line(tb, ERROR_CHARS) if tb else "")
        text = tb or _first_error_line(result, skip_first=bool(_EXIT_RES[0].match(result)))
        return f"exit {code}", one_line(text or f"exit {code}", ERROR_CHARS)
    if any(rx.search(result[:300]) for rx in _TOOL_ERROR_RES):
        return "error", one_line(result.replace("<tool_use_error>", "").replace("</tool_use_error>", ""),
                                  ERROR_CHARS)
    if tb:
        return "ok", one_line(tb, ERROR_CHARS)
    return "ok", ""


def command_key(command: str, argvs: list[list[str]] | None = None) -> str:
    """What kind of command this is, for "a later step got past it": its program and first word."""
    for argv in (_split_simple(command) if argvs is None else argvs) or [command.split()]:
        words = [w for w in argv if not re.match(r"^[A-Za-z_]\w*=", w)]
        if not words or words[0] in ("cd", "export", "source", ".", "set", "echo", "sleep"):
            continue
        if words[0] in ("sudo", "time", "nohup", "exec") and len(words) > 1:
            words = words[1:]
        prog = words[0].rsplit("/", 1)[-1]
        if prog.startswith("python") and len(words) > 1 and words[1] in ("-c", "-m"):
            return one_line(" ".join([prog, *words[1:3]]) if words[1] == "-m" else f"{prog} -c", 60)
        sub = next((w for w in words[1:] if not w.startswith("-")), "")
        if prog in ("python", "python3", "node", "ruby", "bash", "sh") and sub:
            return one_line(f"{prog} {sub.rsplit('/', 1)[-1]}", 60)
        return f"{prog} {sub}".strip() if re.match(r"^[\w.:-]{1,40}$", sub or "x") else prog
    return one_line(command, 40)


# --------------------------------------------------------------------------- requests, intent

_CONSTRAINT_RE = re.compile(
    r"\b(must|must not|never|always|do not|don't|dont|avoid|without|prefer|instead of|make sure|"
    r"no need|only use|should not|shouldn't|not allowed|keep (?:it|them|the))\b",
    re.IGNORECASE,
)
_INTENT_RE = re.compile(
    r"\b(let me|let's|i'll|i will|i'm going to|i am going to|i need to|next,? i|now i|then i|"
    r"next step|i should)\b",
    re.IGNORECASE,
)
FILE_EXTENSIONS = (
    "py", "pyi", "js", "mjs", "cjs", "ts", "tsx", "jsx", "json", "jsonl", "md", "rst", "txt", "toml", "yaml",
    "yml", "ini", "cfg", "css", "scss", "html", "htm", "heex", "eex", "ex", "exs", "erl", "rb", "go", "rs",
    "java", "kt", "swift", "c", "h", "cc", "cpp", "hpp", "cs", "php", "sh", "bash", "zsh", "sql", "xml",
    "svg", "lock", "csv", "ipynb", "vue", "svelte", "lua", "r", "scala", "gradle", "mk", "proto", "env",
)
MENTION_RE = re.compile(
    r"(?<![\w/.@-])((?:~?/)?(?:[\w.@-]+/)*[\w@-][\w.@-]*\.(?:" + "|".join(FILE_EXTENSIONS) + r"))(?![\w/-])"
)
MAX_MENTIONED = 80
_SENTENCE_RE = re.compile(r"[^\n]+?(?:[.!?](?=\s|$)|(?=\n)|$)")


def _ts_minute(msg: Message) -> str:
    ts = msg.get("ts")
    if isinstance(ts, str) and len(ts) >= 16 and ts[4] == "-":
        return ts[:16].replace("T", " ")
    return ""


def is_request(msg: Message) -> bool:
    """A user message that a person wrote (not a tool result carried in a user message)."""
    return msg.get("role") == "user" and bool(content_text(msg.get("content")).strip())


def constraints_in(text: str, limit: int = 300) -> list[str]:
    """The sentences of a request that state a rule or preference, word for word."""
    out: list[str] = []
    for m in _SENTENCE_RE.finditer(text):
        s = m.group(0).strip()
        if len(s) >= 8 and _CONSTRAINT_RE.search(s) and not s.startswith(("```", "<", "$", ">")):
            out.append(one_line(s, limit))
    return out


def last_intent(messages: Sequence[Message]) -> tuple[str, str]:
    """(the last assistant text, the last sentence saying what it will do next)."""
    current = ""
    nxt = ""
    for msg in reversed(messages):
        if msg.get("role") != "assistant":
            continue
        text = content_text(msg.get("content")).strip()
        if not text:
            continue
        if not current:
            current = one_line(text, INTENT_CHARS)
        for m in reversed(list(_SENTENCE_RE.finditer(text))):
            if _INTENT_RE.search(m.group(0)):
                nxt = one_line(m.group(0).strip(), INTENT_CHARS)
                break
        if nxt:
            break
    return current, nxt


# --------------------------------------------------------------------------- extraction


def _results_by_call(messages: Sequence[Message]) -> dict[str, str]:
    out: dict[str, str] = {}
    for msg in messages:
        if msg.get("role") == "tool":
            cid = str(msg.get("tool_call_id") or "")
            if cid and cid not in out:
                out[cid] = content_text(msg.get("content"))
    return out


@dataclass
class _Call:
    name: str
    key: str
    status: str
    error: str


def display_command(command: str) -> str:
    """A command on one line, each here-document body replaced by its line count, cut to COMMAND_CHARS."""
    stripped = _strip_heredocs(command)
    body = command.count("\n") - stripped.count("\n")
    text = stripped + (f" [here-document: {body} line{'s' if body != 1 else ''}]" if body else "")
    return one_line(text, COMMAND_CHARS)


def _walk_call(facts: Facts, call: dict[str, Any], results: Mapping[str, str]) -> _Call:
    fn = call.get("function") or {}
    name = str(fn.get("name") or "?")
    args = parse_args(fn.get("arguments"))
    cid = str(call.get("id") or "")
    result = results.get(cid) if cid else None
    status, error = result_status(name, result)
    files = call_files(name, args, result or "")
    failed = bool(error) and status != "ok" and status != "exit 0"
    for path, verb in files:
        ff = facts.files.get(path)
        if ff is None:
            ff = facts.files[path] = FileFact(path)
        ff.add(f"{verb} (failed)" if failed and name not in SHELL_TOOLS else verb)
    cmd = shell_command(args) if name in SHELL_TOOLS else ""
    if cmd:
        line = display_command(cmd)
        prev = facts.commands.pop(line, None)  # re-insert: the dict keeps the order of the last run
        facts.commands[line] = CommandFact(line, (prev.runs if prev else 0) + 1, status)
        key = command_key(cmd)
    elif files:
        key = f"{name} {files[0][0]}"
    else:
        key = name
    return _Call(name, key, status, error)


def extract_facts(
    messages: Sequence[Message], archive_lines: Mapping[str, int] | None = None
) -> Facts:
    """The facts of ``messages`` (oldest first). ``archive_lines``: day → lines its dialog file will
    hold once these messages are archived (default: the messages of each day, as for a new file)."""
    facts = Facts(messages=len(messages))
    results = _results_by_call(messages)
    calls: list[_Call] = []
    per_day: dict[str, int] = {}
    for msg in messages:
        role = msg.get("role")
        if role not in ("user", "assistant", "tool"):
            continue
        day = message_date(msg).isoformat()
        per_day[day] = per_day.get(day, 0) + 1
        if is_request(msg):
            text = content_text(msg.get("content")).strip()
            cut = text if len(text) <= REQUEST_CHARS else text[:REQUEST_CHARS].rstrip()
            facts.requests.append(Request(cut, _ts_minute(msg), day, str(msg.get("id") or ""), len(text)))
            for c in constraints_in(text[:4 * REQUEST_CHARS]):
                if c not in facts.constraints:
                    facts.constraints.append(c)
        elif role == "assistant":
            for call in msg.get("tool_calls") or ():
                if isinstance(call, dict):
                    facts.tool_calls += 1
                    calls.append(_walk_call(facts, call, results))
    facts.errors = _errors(calls)
    facts.mentioned = _mentioned(messages, facts.files)
    facts.intent, facts.next_step = last_intent(messages)
    if archive_lines is not None:
        facts.archive_exact = True
        facts.archive = {d: max(n, int(archive_lines.get(d, 0))) for d, n in sorted(per_day.items())}
    else:
        facts.archive = dict(sorted(per_day.items()))
    return facts


def _mentioned(messages: Sequence[Message], touched: Mapping[str, FileFact]) -> list[str]:
    """Paths with a source-file extension that the user or the assistant wrote, not opened by a
    tool call (nor the tail of a path one opened), most recent last."""
    found: dict[str, None] = {}
    for msg in messages:
        if msg.get("role") in ("user", "assistant"):
            for m in MENTION_RE.finditer(content_text(msg.get("content"))):
                found.pop(m.group(1), None)
                found[m.group(1)] = None
    return _untouched(list(found), touched)[-MAX_MENTIONED:]


def _untouched(paths: Sequence[str], touched: Mapping[str, FileFact]) -> list[str]:
    """``paths`` that are not a touched file nor the tail of one."""
    tails = {p.rsplit("/", 1)[-1] for p in touched}

    def opened(p: str) -> bool:
        q = p.lstrip("./")
        return p in touched or ("/" not in p and p in tails) or any(t.endswith("/" + q) for t in touched)

    return [p for p in paths if not opened(p)]


def _errors(calls: Sequence[_Call]) -> list[ErrorFact]:
    """Each distinct error once (its latest occurrence), and whether a later call of the same kind
    went well."""
    last_ok: dict[str, int] = {}
    for i, c in enumerate(calls):
        if not c.error and c.status in ("ok", "exit 0"):
            last_ok[c.key] = i
    seen: dict[tuple[str, str], int] = {}
    for i, c in enumerate(calls):
        if c.error:
            seen.pop((c.key, c.error), None)
            seen[(c.key, c.error)] = i
    return [ErrorFact(k, e, last_ok.get(k, -1) > i) for (k, e), i in seen.items()]


def files_touched(facts: Facts) -> list[str]:
    return list(facts.files)


def merge_facts(older: Facts, newer: Facts) -> Facts:
    """An earlier summary's facts followed by a new span's: no duplicates, the oldest requests first."""
    out = Facts(
        messages=older.messages + newer.messages,
        tool_calls=older.tool_calls + newer.tool_calls,
        commands_hidden=older.commands_hidden + newer.commands_hidden,
    )
    keys: set[tuple[str, str]] = set()
    for r in [*older.requests, *newer.requests]:
        if r.key() not in keys:
            keys.add(r.key())
            out.requests.append(r)
    out.constraints = list(dict.fromkeys([*older.constraints, *newer.constraints]))
    for src in (older, newer):
        for path, ff in src.files.items():
            into = out.files.setdefault(path, FileFact(path))
            for verb, n in ff.actions.items():
                into.actions[verb] = into.actions.get(verb, 0) + n
            into.last = ff.last or into.last
        for line, cf in src.commands.items():
            prev = out.commands.pop(line, None)
            out.commands[line] = CommandFact(line, cf.runs + (prev.runs if prev else 0), cf.status)
    ok_now = {c.key for c in newer.errors if c.got_past}
    ok_now |= {command_key(line) for line, cf in newer.commands.items() if cf.status in ("ok", "exit 0")}
    merged: dict[tuple[str, str], ErrorFact] = {}
    for e in older.errors:
        merged[(e.key, e.text)] = ErrorFact(e.key, e.text, e.got_past or e.key in ok_now)
    for e in newer.errors:
        merged.pop((e.key, e.text), None)
        merged[(e.key, e.text)] = e
    out.errors = list(merged.values())
    out.intent = newer.intent or older.intent
    out.next_step = newer.next_step or older.next_step
    days = set(older.archive) | set(newer.archive)
    if newer.archive_exact:  # the caller counted the files: those counts win
        out.archive = {d: newer.archive.get(d) or older.archive.get(d, 0) for d in sorted(days)}
    else:  # the new span's messages go after the earlier ones
        out.archive = {d: older.archive.get(d, 0) + newer.archive.get(d, 0) for d in sorted(days)}
    out.archive_exact = newer.archive_exact
    out.notes = list(dict.fromkeys([*older.notes, *newer.notes]))
    order = dict.fromkeys(older.mentioned)
    for p in newer.mentioned:  # a path named again moves to the end (most recent last)
        order.pop(p, None)
        order[p] = None
    out.mentioned = _untouched(list(order), out.files)[-MAX_MENTIONED:]
    return out


def archive_days(messages: Iterable[Message]) -> list[str]:
    return sorted({message_date(m).isoformat() for m in messages})
