"""Issue 28: a first index's pass over a Claude Code file (``engine.usage.claude_pass``) gives the very summary, rows
(calls, tokens, costs, tools, tool results and their tokens, compactions, title, peak fullness) and damaged lines that
the reader's pass gives (``summary_and_rows_read``), on every shared session, on files shaped as the benchmark's and on
lines made to take each way through it (orjson, the standard module, damaged, torn, blank, cut across blocks)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bigsession import ClaudeCopies
from benchmarks.usage_bench import _claude_file
from engine.sources import model as source_model
from engine.sources import session_summary
from engine.sources.readers import read_source
from engine.usage import claude_pass, rows
from engine.usage.prices import PriceTable, load_table
from engine.usage.rows import summary_and_rows_fast, summary_and_rows_read
from tests.conftest import SHARED

CLAUDE = SHARED / "data" / "sessions" / "claude-code"
FILES = sorted(CLAUDE.rglob("*.jsonl"))  # the main files (their subagents read beside them) and the subagent files
MAIN = CLAUDE / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


@pytest.fixture(scope="module")
def prices() -> PriceTable:
    return load_table()


def _same(path: Path, prices: PriceTable) -> rows.WorkerRows:
    fast = summary_and_rows_fast(path, prices)
    read = summary_and_rows_read("claude-code", path, prices)
    assert fast is not None
    assert fast[0] == read[0]  # the Sources summary
    assert fast[1] == read[1]  # the rows (calls, tool results, the session row) and the damaged lines
    done = claude_pass.summary_and_session(path, lambda obj: None)
    assert done is not None
    mine, theirs = done[1], read_source(path, "claude-code")  # what the rows may fall back from, too
    assert ((mine.session_id, mine.cwd, mine.started, mine.last_activity, mine.lines, mine.ignored)
            == (theirs.session_id, theirs.cwd, theirs.started, theirs.last_activity, theirs.lines, theirs.ignored))
    return fast[1]


@pytest.mark.parametrize("path", FILES, ids=lambda p: "/".join(p.relative_to(CLAUDE).parts)[-40:])
def test_the_pass_gives_the_readers_rows_on_every_shared_session(path: Path, prices: PriceTable) -> None:
    done = _same(path, prices)
    assert done is not None and done[0].calls and done[0].session["calls"]


def test_the_pass_gives_the_readers_rows_on_files_shaped_as_the_benchmarks(tmp_path: Path,
                                                                         prices: PriceTable) -> None:
    """Copies of the shared sessions with fresh ids, one or two to a file, without their subagent files (the
    benchmark's folder: the subagents' calls come from the progress lines)."""
    for i, source in enumerate(sorted(CLAUDE.glob("????????-*.jsonl"))):
        gen = ClaudeCopies(source, seed=100 + i)
        gen.copy()
        for copies in (1, 2):
            _claude_file(gen, copies, tmp_path / "new.jsonl", f"/home/dev/work/project-{i}")
            done = _same(tmp_path / f"{gen.last_sid.decode()}.jsonl", prices)  # type: ignore[attr-defined]
            assert done is not None and len(done[0].tool_results) > 100
            assert {c["kind"] for c in done[0].calls} >= {"main", "task"}


def _planted(tmp_path: Path, lines: list[bytes], *, end: bytes = b"") -> Path:
    """The shared session MAIN with ``lines`` put among its own (every 50 lines), ``end`` after its last newline."""
    own = MAIN.read_bytes().splitlines(keepends=True)
    out: list[bytes] = []
    for i, raw in enumerate(own):
        out.append(raw)
        if i % 50 == 25 and lines:
            out.append(lines.pop(0))
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / MAIN.name
    path.write_bytes(b"".join(out + lines) + end)
    shutil.copytree(MAIN.with_suffix(""), tmp_path / MAIN.stem)
    return path


def _user(text: str, uid: str, **more: object) -> bytes:
    line = {"parentUuid": None, "isSidechain": False, "type": "user", "uuid": uid, "sessionId": "planted",
            "timestamp": "2026-02-11T22:00:00.000Z", "message": {"role": "user", "content": text}, **more}
    return json.dumps(line).encode() + b"\n"


PLANTED = [
    b"not json at all\n",  # damaged
    b"[1, 2]\n",  # JSON, not an object
    b"\n", b"   \t\n", b"\r\n",  # blank lines (counted, passed over)
    b'{"type":"user","uuid":"ctl","message":{"role":"user","content":"a\ttab"}}\n',  # a raw tab: the standard module
    _user("\ud800 a lone surrogate", "lone"),  # orjson refuses it, the standard module reads it
    b'{"type":"progress","uuid":"nan","parentUuid":null,"data":{"x":NaN},"timestamp":"2026-02-11T22:00:01.000Z"}\n',
    _user("a huge number", "big", extra=2**70),  # a run of 19 digits: the block read by the standard module
    b'{"type":"no-such-kind","uuid":"odd","timestamp":"2026-02-11T22:00:02.000Z"}\n',  # a kind the reader does not know
    b'{"type":"user","uuid":"bad-utf8","message":{"content":"\xff\xfe"}}\n',  # not UTF-8: damaged
    b'{"type":"user","uuid":"r","message":{"content":"a line ending with a carriage return"}}\r\n',
]


@pytest.mark.parametrize("block", [claude_pass.BLOCK, 4096, 7], ids=["8MB", "4KB", "7B"])
def test_planted_lines_and_blocks_of_any_size_give_the_readers_rows(tmp_path: Path, prices: PriceTable,
                                                                   monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(claude_pass, "BLOCK", block)
    path = _planted(tmp_path, list(PLANTED))
    done = _same(path, prices)
    assert done is not None and done[1] is not None and done[1][0] >= 3  # the damaged lines said, as the reader says


def _progress(uid: object, ts: object, **more: object) -> bytes:
    line = {"parentUuid": "p-parent", "isSidechain": False, "type": "progress", "uuid": uid, "timestamp": ts,
            "data": {"type": "hook_progress"}, **more}
    return json.dumps(line).encode() + b"\n"


_AGENT_CALL = {"type": "assistant", "requestId": "req-planted", "timestamp": "2026-02-11T22:00:03.000Z",
               "message": {"id": "msg-planted", "model": "claude-opus-4-5", "role": "assistant", "content": [],
                           "usage": {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 7}}}
# progress lines, the most of a file's lines, each way through the pass's own path for them (claude_pass._progress)
PROGRESS = [
    _progress("p-agent", "2026-02-11T22:00:03.000Z", parentToolUseID="toolu-planted",
              data={"type": "agent_progress", "agentId": "a-planted", "message": _AGENT_CALL}),  # a subagent's call
    _progress("p-agent-2", "2026-02-11T22:00:03.500Z", data={"agentId": 12}),  # an agentId that is no string
    _progress(7, "2026-02-11T22:00:04.000Z"),  # a uuid that is no string
    _progress("p-odd-parent", "2026-02-11T22:00:05.000Z", parentUuid=5, logicalParentUuid="p-logical"),
    _progress("p-no-parent", "2026-02-11T22:00:05.500Z", parentUuid=None, logicalParentUuid=None),
    _progress("p-bad-time", "yesterday"),  # not a time: the last time stays the line's before
    _progress("p-epoch", 1770850000),  # epoch seconds
    _progress("p-offset", "2026-02-11T23:00:06+01:00"),  # another zone
    _progress("p-no-time", None, data=None),
    json.dumps({"type": "assistant", "uuid": "a-1h", "parentUuid": None, "requestId": "req-1h",  # no 1h figure
                "timestamp": "2026-02-11T22:00:06.500Z", "message": {**_AGENT_CALL["message"], "id": "msg-1h"}}
               ).encode() + b"\n",
    _progress("p-message", "2026-02-11T22:00:07.000Z", requestId="req-1h", message={  # the one-hour pass sees it
        "usage": {"cache_creation": {"ephemeral_1h_input_tokens": 99}}}),
    _progress("p-late", "2026-02-11T22:00:08.000Z", cwd="/elsewhere", sessionId="other"),  # known by now: kept
]


@pytest.mark.parametrize("block", [claude_pass.BLOCK, 4096], ids=["8MB", "4KB"])
def test_progress_lines_of_every_shape_give_the_readers_rows(tmp_path: Path, prices: PriceTable,
                                                             monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(claude_pass, "BLOCK", block)
    _same(_planted(tmp_path / "among", list(PROGRESS)), prices)
    late, timeless = _progress("p-2030", "2030-01-01T00:00:00.000Z"), _user("no time", "u-timeless", timestamp=None)
    for last in ([PROGRESS[5]], [PROGRESS[3], PROGRESS[5], PROGRESS[8]], [PROGRESS[6]], [PROGRESS[7], PROGRESS[5]],
                 [late, timeless], [late, PROGRESS[5], timeless], [late, PROGRESS[2]],
                 [_user("timed", "u-timed", timestamp="2030-01-02T00:00:00.000Z"), PROGRESS[5], timeless]):
        path = _planted(tmp_path / hashlib.sha1(b"".join(last)).hexdigest(), [], end=b"".join(last))
        fast = _same(path, prices)  # the file's last lines: progress lines, the last time among them or before
        assert fast is not None


def _compact(line: bytes) -> bytes:
    """``line`` as Claude Code writes its lines: no space after a separator (the pass's typed path reads such)."""
    return json.dumps(json.loads(line), separators=(",", ":")).encode() + b"\n"


def _posing(at: int, rest: str) -> bytes:
    """A line holding ``"type":"progress"`` at byte ``at`` inside a nested object, its own type given by ``rest``."""
    head = '{"nested":{"' + "k" * (at - len('{"nested":{"":0,')) + '":0,'
    return f'{head}"type":"progress"}},{rest}}}\n'.encode()


def test_progress_lines_written_as_claude_code_writes_them_take_the_typed_path(
        tmp_path: Path, prices: PriceTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress lines without a space after their separators are decoded for the few fields the pass reads
    (``claude_pass._ProgressLine``) where a progress line decoded whole had its type; those it must read whole — a
    ``data`` that is no object, a ``message``, a subagent's id, a repeated ``type``, bytes that are not UTF-8, a
    progress type nested in a line of another type — give the reader's rows all the same, and so does a file ending
    with such lines (the last time is theirs)."""
    checked: dict[bytes, object] = {}
    real = claude_pass.typed_json

    def counted(decode: object, raw: bytes) -> object:
        checked[raw] = got = real(decode, raw)  # type: ignore[arg-type]
        return got

    monkeypatch.setattr(claude_pass, "typed_json", counted)
    base = _compact(_progress("p-typed", "2026-02-11T22:00:08.500Z")).decode().rstrip("\n")
    at = base.find(claude_pass.PROGRESS_TYPE.decode())
    user = ('"uuid":"u-posing","parentUuid":null,"timestamp":"2026-02-11T22:00:09.000Z","message":{"role":"user",'
            '"content":"posing as progress"}')
    planted = [
        base.replace('"data":{"type":"hook_progress"}', '"data":"a text"').encode() + b"\n",  # read whole
        _compact(PROGRESS[9]), _compact(PROGRESS[10]),  # a call, and a progress line's message with its 1h writes
        base.encode().replace(b"hook_progress", b"hook\xff") + b"\n",  # not UTF-8: damaged
        base.replace('"data":{', '"type":"user","data":{').encode() + b"\n",  # its type: the last one
        _compact(PROGRESS[0]).replace(b'"p-agent"', b'"p-agent-typed"'),  # a subagent's call
        _posing(at, '"type":"user",' + user),
        _posing(at, '"type":"system","subtype":"informational","uuid":"s-posing"'),
        *(_compact(line) for line in (*PROGRESS[1:3], *PROGRESS[5:9])),  # (the same head: typed)
    ]
    tip = next(json.loads(raw)["uuid"] for raw in reversed(MAIN.read_bytes().splitlines()) if b'"uuid"' in raw)
    link = _compact(_progress("p-link", "2026-02-11T22:00:10.000Z", parentUuid=tip))  # the chain runs through it
    last = [link, _compact(_user("after the link", "u-link", parentUuid="p-link")),
            *(_compact(_progress(f"p-end-{i}", ts)) for i, ts in enumerate(("2031-01-01T00:00:00.000Z", "late")))]
    other = [_compact(line) for line in PROGRESS[3:5]]  # other heads (a parent 5, null): read whole, learnt
    path = _planted(tmp_path, [], end=b"".join([*other, base.encode() + b"\n", *planted, *last]))  # (after the
    # session's own lines, whose progress lines have their type elsewhere: where the last two had it is kept)
    _same(path, prices)
    lines = [raw.rstrip(b"\n") for raw in [*planted, *last]]
    assert all(raw in checked for raw in lines if raw.find(claude_pass.PROGRESS_TYPE) == at)
    assert [raw for raw in lines if raw in checked and checked[raw] is None] == [lines[0], lines[3]]  # (read whole)
    assert sum(1 for raw in lines if getattr(checked.get(raw), "type", None) == "progress") >= 10


def test_a_progress_line_in_the_chain_links_it_as_the_reader_links_it(tmp_path: Path, prices: PriceTable) -> None:
    """A conversation line whose parent is a progress line linked by ``parentUuid`` or, without one, by
    ``logicalParentUuid``: the conversation (and so its rows) is the reader's either way."""
    for field in ("parentUuid", "logicalParentUuid"):
        own = MAIN.read_bytes().splitlines(keepends=True)
        at = next(i for i, raw in enumerate(own) if i > len(own) // 3 and b'"type":"user"' in raw
                  and json.loads(raw).get("parentUuid"))
        line = json.loads(own[at])
        link = _progress("p-link", line["timestamp"], **{"parentUuid": None, field: line["parentUuid"]})
        line["parentUuid"] = "p-link"
        path = tmp_path / field / MAIN.name
        path.parent.mkdir()
        path.write_bytes(b"".join([*own[:at], link, json.dumps(line).encode() + b"\n", *own[at + 1:]]))
        shutil.copytree(MAIN.with_suffix(""), path.with_suffix(""))
        _same(path, prices)


def test_a_file_opening_with_progress_lines_gives_the_readers_summary(tmp_path: Path, prices: PriceTable) -> None:
    """The first time, the working folder and the session id may come from progress lines, or after them."""
    heads = [
        [_progress("h1", "not a time"), _progress("h2", "2026-02-11T21:00:00.000Z"),
         _progress("h3", "2026-02-11T21:00:01.000Z", cwd="/first", sessionId="sid-first")],
        [_progress("h1", "2026-02-11T21:00:00.000Z", cwd=3, sessionId=None), _progress("h2", 5, cwd="/second")],
        [_progress("h1", "2026-02-11T21:00:00.000Z", cwd="", sessionId="")],
    ]
    for i, head in enumerate(heads):
        folder = tmp_path / str(i)
        path = _planted(folder, [])
        path.write_bytes(b"".join(head) + path.read_bytes())
        _same(path, prices)


def test_a_torn_last_line_gives_the_summary_and_no_rows_yet(tmp_path: Path, prices: PriceTable) -> None:
    for end in (b'{"type":"user","uuid":"torn","message":{"content":"half', b'{"type":"user","uuid":"whole"}'):
        path = _planted(tmp_path / end[-4:].decode(), [], end=end)
        fast = summary_and_rows_fast(path, prices)
        read = summary_and_rows_read("claude-code", path, prices)
        assert fast is not None and fast == read and fast[1] is None


def test_a_line_longer_than_the_reader_holds_is_left_to_the_reader(tmp_path: Path, prices: PriceTable,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_model, "MAX_LINE_BYTES", 20_000)
    path = _planted(tmp_path, [_user("x" * 30_000, "long")])
    assert summary_and_rows_fast(path, prices) is None
    rows.worker_start(prices)
    try:  # what a worker runs: the reader's pass, the long line said as damaged
        entry, done = rows.summary_and_rows(("claude-code", str(path)))
    finally:
        rows.worker_start(None)
    assert (entry, done) == summary_and_rows_read("claude-code", path, prices)
    assert done is not None and done[1] is not None and "more than" in done[1][1]


def test_a_worker_imports_only_what_the_rows_need() -> None:
    """Issue 28, "nothing imported that the command does not use": a first index's worker makes a file's rows without
    the cost and tool-cost modules (and the event records, archive and diff they import)."""
    code = ("import sys; from pathlib import Path; from engine.usage.prices import load_table; "
            "from engine.usage.rows import summary_and_rows_fast; "
            f"assert summary_and_rows_fast(Path({str(MAIN)!r}), load_table())[1]; "
            "print(' '.join(m for m in ('engine.usage.costs', 'engine.usage.tool_costs', 'engine.context.diff', "
            "'engine.store.archive', 'engine.model.records') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.stdout.strip() == ""


@pytest.mark.parametrize("path", [p for p in FILES if "subagents" not in p.parts], ids=lambda p: p.name[:12])
def test_a_file_the_scan_summarised_gets_the_readers_rows(path: Path, prices: PriceTable) -> None:
    """A first index after ``sources`` (its summaries known): a worker's rows_of_file reads a Claude Code file by the
    pass too, and gives the rows the reader's session gives."""
    entry = session_summary.summarize("claude-code", path)
    fid = rows.file_id(entry.path)
    rows.worker_start(prices)
    try:
        done = rows.rows_of_file((entry, fid))
    finally:
        rows.worker_start(None)
    session = read_source(path, "claude-code")
    assert done == (rows.rows_of(entry, session, prices, fid), rows.bad_said(session))
