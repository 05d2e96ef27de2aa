"""Bad input never crashes and never loses data (issue 7, item 2): property and fuzz tests.

Families (each example is counted in the ``robustness cases`` summary printed at the end):

- session files: ``history.jsonl`` with torn lines, invalid JSON, invalid UTF-8, wrong types,
  unknown roles, non-objects, duplicates, deep nesting, huge lines; ``session.json`` with garbage
  or wrong-typed fields; ``events.jsonl``, ``dialog/*.jsonl`` and ``tool_results/index.jsonl``
  with garbage lines;
- transcripts to import (JSON, JSONL, random bytes and structures);
- tool outputs (binary, invalid UTF-8, NUL bytes, one giant line, 100 MB) through the offloader and
  the real tools;
- tool-call arguments that are not JSON (or not an object, or of the wrong types);
- provider responses through the fake server (truncated streams, empty choices, tool calls with
  missing ids or names, garbage SSE lines);
- settings files and environment overrides.

The rule each test checks: no exception escapes (other than the documented error type, whose text
names what was wrong and where), and whatever was already stored is still there afterwards —
kept, or moved aside byte for byte into a file the report names.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.agent import Agent, unanswered_calls
from engine.context.conversation import Session
from engine.context.offload import Offloader, list_offloaded
from engine.importer import import_transcript
from engine.llm.client import LLMConfig
from engine.model.events import ErrorEvent, Event, MessageAdded, ToolCallFinished, TurnFinished
from engine.model.messages import ROLES, Message, assistant, tool_call, tool_result, user
from engine.store import archive
from engine.store.config import SETTINGS_FILE, Settings, load_settings, save_settings
from engine.store.fsutil import dumps_line
from engine.tools.registry import ToolBox
from engine.transcript import TranscriptError
from tests import fakeserver as fs

if TYPE_CHECKING:
    from tests.engine.conftest import CaseTally

pytestmark = [
    pytest.mark.filterwarnings("ignore:Accessing the .model_:DeprecationWarning"),
    pytest.mark.usefixtures("fast_retries"),
]

FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


def fuzz(examples: int) -> settings:
    return settings(FUZZ, max_examples=examples)
SURROGATE = re.compile("[\ud800-\udfff]")
LINE_TEXT = st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=60)


@pytest.fixture
def tmp() -> Iterator[Path]:
    """Not used by hypothesis bodies (they make their own folders per example)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as d:
        yield Path(d)


class Raw(bytes):
    """Bytes with a short repr (hypothesis prints failing examples; some lines are megabytes)."""

    def __repr__(self) -> str:
        if len(self) <= 120:
            return bytes.__repr__(self)
        return f"Raw({bytes(self[:60])!r} + … {len(self)} bytes)"


class Big(str):
    """A string with a short repr, for the same reason."""

    def __repr__(self) -> str:
        if len(self) <= 120:
            return str.__repr__(self)
        return f"Big({str.__repr__(self[:40])} + … {len(self)} chars)"


def _norm(value: Any) -> Any:
    """Lone surrogates → U+FFFD, recursively (what the session writes for undecodable text)."""
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


# =========================================================================== session files


@st.composite
def good_messages(draw: st.DrawFn) -> Message:
    """A valid stored message (what Session.append writes)."""
    kind = draw(st.sampled_from(["user", "assistant", "calls", "tool", "parts", "reasoning"]))
    text = draw(st.text(max_size=120))
    if kind == "user":
        return user(text)
    if kind == "assistant":
        return assistant(text)
    if kind == "calls":
        n = draw(st.integers(1, 3))
        calls = [tool_call(f"c{i}", "read_file", json.dumps({"path": text})) for i in range(n)]
        return assistant(None, calls)
    if kind == "tool":
        return tool_result(draw(st.text(max_size=10)), text, name="read_file")
    if kind == "parts":
        return user([{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "data:x"}}])
    return assistant(text, reasoning_content=draw(st.text(max_size=40)))


WRONG_TYPES: list[tuple[dict[str, Any], str]] = [
    ({"role": "user", "content": 5}, "'content'"),
    ({"role": "user", "content": {"text": "x"}}, "'content'"),
    ({"role": "user", "content": True}, "'content'"),
    ({"role": "user", "content": [1, 2]}, "content part"),
    ({"role": "assistant", "content": None, "tool_calls": {"id": "x"}}, "'tool_calls'"),
    ({"role": "assistant", "tool_calls": ["call"]}, "tool call 0"),
    ({"role": "assistant", "tool_calls": [{"id": "c", "function": 5}]}, "tool call 0"),
    ({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": 5}}]}, "tool call 0"),
    ({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]},
     "arguments"),
    ({"role": "tool", "content": "x", "tool_call_id": 7}, "'tool_call_id'"),
    ({"role": "user", "content": "x", "id": 12}, "'id'"),
    ({"role": "user", "content": "x", "id": ["a"]}, "'id'"),
    ({"role": "user", "content": "x", "ts": 1700000000}, "'ts'"),
    ({"role": "assistant", "content": "x", "reasoning_content": ["r"]}, "'reasoning_content'"),
    ({"role": "user", "content": "x", "name": {"n": 1}}, "'name'"),
]


@st.composite
def bad_lines(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """(kind, line bytes without newline, text the report must contain) for a line that must be rejected."""
    kind = draw(
        st.sampled_from(
            ["not_json", "binary", "wrong_type", "unknown_role", "system_role", "non_object", "huge_int",
             "deep", "deep_in_message", "torn_mid"]
        )
    )
    if kind == "not_json":
        return kind, ("{" + draw(LINE_TEXT) + "\x01").encode(), "not JSON"
    if kind == "binary":
        raw = draw(st.binary(max_size=60)).replace(b"\n", b"")
        return kind, b"\xc0" + raw, "not JSON"
    if kind == "wrong_type":
        obj, needle = draw(st.sampled_from(WRONG_TYPES))
        return kind, json.dumps(obj).encode(), needle
    if kind == "unknown_role":
        role = draw(
            st.one_of(
                st.text(max_size=12).filter(lambda r: r not in ROLES),
                st.integers(),
                st.none(),
                st.lists(st.integers()),
            )
        )
        return kind, json.dumps({"role": role, "content": "x"}).encode(), "role"
    if kind == "system_role":
        line = json.dumps({"role": "system", "content": "be nice"}).encode()
        return kind, line, "does not belong in the history"
    if kind == "non_object":
        value = draw(
            st.one_of(st.integers(), st.text(max_size=10), st.lists(st.integers(), max_size=3), st.none())
        )
        return kind, json.dumps(value).encode(), "expected a JSON object"
    if kind == "huge_int":
        return kind, Raw(b'{"role": "user", "content": ' + b"9" * 5000 + b"}"), "not JSON"
    if kind == "deep":
        depth = draw(st.sampled_from([2_000, 100_000]))
        return kind, Raw(b"[" * depth + b"]" * depth), "not JSON"
    if kind == "deep_in_message":
        depth = 50_000
        return kind, Raw(b'{"role": "user", "content": ' + b"[" * depth + b"]" * depth + b"}"), "not JSON"
    # a line cut short in the middle of the file (a later append started on a new line)
    line = dumps_line(draw(good_messages())).rstrip(b"\n")
    cut = draw(st.integers(1, len(line) - 1))
    return kind, line[:cut], "not JSON"


@st.composite
def history_files(draw: st.DrawFn) -> dict[str, Any]:
    """A history.jsonl made of valid lines in order, with rejected and repairable lines mixed in."""
    goods = draw(st.lists(good_messages(), min_size=0, max_size=6))
    items: list[tuple[str, Any]] = [("good", m) for m in goods]
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(items)))
        choice = draw(
            st.sampled_from(["bad", "bad", "bad", "no_id", "surrogate_no_id", "extra_keys", "dup", "blank"])
        )
        if choice == "bad":
            items.insert(at, ("bad", draw(bad_lines())))
        elif choice == "no_id":
            items.insert(at, ("no_id", {"role": "user", "content": draw(st.text(max_size=30))}))
        elif choice == "surrogate_no_id":
            content = "\ud800half" + draw(st.text(max_size=5))
            items.insert(at, ("no_id", {"role": "assistant", "content": content}))
        elif choice == "extra_keys":
            msg = user(draw(st.text(max_size=20)))
            msg["x-unknown"] = {"kept": True}
            items.insert(at, ("good", msg))
        elif choice == "dup":
            earlier = [m for kind, m in items[:at] if kind == "good"]
            if earlier:
                items.insert(at, ("dup", earlier[-1]))
        else:
            items.insert(at, ("blank", draw(st.sampled_from([b"", b"   ", b"\t"]))))
    tail = draw(st.sampled_from(["none", "none", "torn", "complete", "complete_bad"]))
    return {"items": items, "tail": tail, "tail_msg": draw(good_messages())}


def _write_history(folder: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Write the file described by ``spec``; return what Session.load must find."""
    lines: list[bytes] = []
    expect_msgs: list[tuple[str | None, Any]] = []  # (id or None for "gets a new id", content)
    expect_bad: list[tuple[int, bytes, str]] = []  # (line number, bytes, needle)
    seen_ids: set[str] = set()
    for kind, value in spec["items"]:
        n = len(lines) + 1
        if kind == "good":
            if value["id"] in seen_ids:
                continue  # the same message drawn twice: a "dup" item covers that case
            seen_ids.add(value["id"])
            lines.append(dumps_line(value).rstrip(b"\n"))
            expect_msgs.append((value["id"], value.get("content")))
        elif kind == "dup":
            lines.append(dumps_line(value).rstrip(b"\n"))
            expect_bad.append((n, lines[-1], f"repeats message id {value['id']}"))
        elif kind == "no_id":
            lines.append(json.dumps(value).encode())
            expect_msgs.append((None, value["content"]))
        elif kind == "bad":
            _, raw, needle = value
            lines.append(raw)
            expect_bad.append((n, raw, needle))
        else:
            lines.append(value)
    data = b"".join(line + b"\n" for line in lines)
    torn = b""
    tail = spec["tail"]
    msg = spec["tail_msg"]
    if tail == "torn":
        full = dumps_line(msg).rstrip(b"\n")
        torn = full[: max(1, len(full) // 2)]
        data += torn
    elif tail == "complete" and msg["id"] not in seen_ids:
        data += dumps_line(msg).rstrip(b"\n")
        expect_msgs.append((msg["id"], msg.get("content")))
    elif tail == "complete_bad":
        raw = json.dumps({"role": "narrator", "content": "x"}).encode()
        data += raw
        expect_bad.append((len(lines) + 1, raw, "unknown role"))
    Session.create(folder, "fuzz").close()
    (folder / "history.jsonl").write_bytes(data)
    return {"msgs": expect_msgs, "bad": expect_bad, "torn": torn, "data": data}


@fuzz(120)
@given(spec=history_files())
def test_history_file_damage_is_repaired_reported_and_kept_aside(
    spec: dict[str, Any], cases: CaseTally
) -> None:
    cases.add("session files: history.jsonl")
    with tempfile.TemporaryDirectory(prefix="fuzz-hist-") as d:
        folder = Path(d) / "s"
        expect = _write_history(folder, spec)
        s = Session.load(folder)  # must not raise
        report = s.load_report
        got = [(m["id"], _norm(m.get("content"))) for m in s.messages]
        assert len(got) == len(expect["msgs"]), report.describe()
        for (gid, gcontent), (eid, econtent) in zip(got, expect["msgs"], strict=True):
            if eid is not None:
                assert gid == eid
            assert gcontent == _norm(econtent)
        assert len({i for i, _ in got}) == len(got), "an id appears twice"
        # every rejected line is reported by its number, with a reason, and kept byte for byte
        reported = sorted(int(re.match(r"line (\d+): ", e).group(1)) for e in report.invalid)  # type: ignore[union-attr]
        assert reported == [n for n, _, _ in expect["bad"]], report.invalid
        for n, _, needle in expect["bad"]:
            entry = next(e for e in report.invalid if e.startswith(f"line {n}: "))
            assert needle in entry, (needle, entry)
        if expect["bad"]:
            assert report.invalid_path is not None
            assert report.invalid_path.read_bytes() == b"".join(raw + b"\n" for _, raw, _ in expect["bad"])
            assert report.invalid_path.name in report.describe()
        else:
            assert report.invalid_path is None and not list(folder.glob("history.jsonl.invalid-*"))
        if expect["torn"]:
            assert report.torn_path is not None and report.torn_path.read_bytes() == expect["torn"]
            assert "torn" in report.describe()
        else:
            assert report.torn_bytes == 0
        # the repaired file loads clean and the same; appending goes on working
        s.append(user("after the repair"))
        s.close()
        again = Session.load(folder)
        assert again.load_report.clean, again.load_report.describe()
        assert [m["id"] for m in again.messages] == [i for i, _ in got] + [again.messages[-1]["id"]]
        assert again.messages[-1]["content"] == "after the repair"


def test_huge_lines_valid_and_invalid(tmp: Path, cases: CaseTally) -> None:
    """A 30 MB message line loads; a 30 MB garbage line is moved aside whole; nothing else is lost."""
    cases.add("session files: history.jsonl", 3)
    folder = tmp / "s"
    s = Session.create(folder, "huge")
    small = s.append(user("before"))
    big = s.append(tool_result("c1", "y" * 30_000_000))
    s.close()
    garbage = b'{"role": "tool", "content": "' + b"z" * 30_000_000  # torn: no closing quote, no newline
    with open(folder / "history.jsonl", "ab") as fh:
        fh.write(b"\xc0" + b"q" * 30_000_000 + b"\n")  # a huge invalid line in the middle
        fh.write(dumps_line(user("after")))
        fh.write(garbage)
    again = Session.load(folder)
    assert [m["id"] for m in again.messages][:2] == [small["id"], big["id"]]
    assert len(again.messages[1]["content"]) == 30_000_000 and again.messages[2]["content"] == "after"
    assert again.load_report.torn_bytes == len(garbage) and again.load_report.torn_path is not None
    assert again.load_report.torn_path.read_bytes() == garbage
    assert again.load_report.invalid_path is not None
    assert again.load_report.invalid_path.stat().st_size == 30_000_002
    assert "line 3: not JSON" in again.load_report.invalid[0]


META_FIELDS = ["summary", "title", "id", "undo", "pending", "calibrator", "system_prompt", "tools", "window",
               "model", "created", "updated", "format", "message_count", "import"]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def meta_files(draw: st.DrawFn) -> bytes | None:
    kind = draw(st.sampled_from(["garbage", "not_object", "fields", "fields", "fields", "missing", "deep"]))
    if kind == "garbage":
        return draw(st.binary(max_size=200))
    if kind == "not_object":
        return json.dumps(draw(JSON_VALUES.filter(lambda v: not isinstance(v, dict)))).encode()
    if kind == "missing":
        return None
    if kind == "deep":
        return Raw(b'{"summary": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    fields = draw(st.dictionaries(st.sampled_from(META_FIELDS), JSON_VALUES, min_size=1, max_size=4))
    return json.dumps(fields).encode()


@fuzz(100)
@given(meta=meta_files())
def test_session_json_damage_never_loses_the_history(meta: bytes | None, cases: CaseTally) -> None:
    cases.add("session files: session.json")
    with tempfile.TemporaryDirectory(prefix="fuzz-meta-") as d:
        folder = Path(d) / "s"
        s = Session.create(folder, "meta")
        s.extend([user("one"), assistant(None, [tool_call("c", "list_dir", "{}")]), tool_result("c", "x")])
        ids = [m["id"] for m in s.messages]
        s.close()
        if meta is None:
            (folder / "session.json").unlink()
        else:
            (folder / "session.json").write_bytes(meta)
        again = Session.load(folder)  # must not raise
        assert [m["id"] for m in again.messages] == ids
        # the meta the app reads has the right shapes
        assert isinstance(again.summary, str) and isinstance(again.title, str) and again.title
        assert all(isinstance(x, str) for x in again.undo_stack())
        assert again.meta.get("pending") is None or isinstance(again.meta["pending"], dict)
        report = again.load_report
        asides = sorted(folder.glob("session.json.corrupt-*"))
        described = report.describe()
        changed = "rebuilt" in described or "reset" in described
        if changed:
            assert "session.json" in described
        if meta is not None and changed:  # whatever was set aside is named and kept byte for byte
            assert len(asides) == 1 and asides[0].name in described, described
            assert asides[0].read_bytes() == meta
        else:
            assert not asides
        # and the session works: a snapshot, an append, a clean reload
        again.snapshot(Settings(context_window=10_000))
        again.append(user("two"))
        again.close()
        third = Session.load(folder)
        assert third.load_report.clean, third.load_report.describe()
        assert [m["id"] for m in third.messages][:3] == ids and len(third.messages) == 4


@st.composite
def jsonl_garbage(draw: st.DrawFn) -> list[bytes]:
    """Lines for events / archive / index files: garbage, wrong types, and plausible records."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["bad", "context", "compaction", "message", "wrong", "json"]))
        if kind == "bad":
            out.append(draw(bad_lines())[1])
        elif kind == "wrong":
            obj = dict(draw(st.sampled_from(WRONG_TYPES))[0])
            obj["content"] = "zebras" if isinstance(obj.get("content"), str) else obj.get("content")
            out.append(json.dumps(obj).encode())
        elif kind == "context":
            obj = {"type": "context"} | draw(
                st.dictionaries(
                    st.sampled_from(["window", "max_tokens", "system", "summary", "history_user", "tools",
                                     "message_tokens", "provider_prompt_tokens", "ts", "call_index",
                                     "estimator"]),
                    JSON_VALUES,
                    max_size=5,
                )
            )
            out.append(json.dumps(obj).encode())
        elif kind == "compaction":
            obj = {"type": "compaction"} | draw(
                st.dictionaries(st.sampled_from(["result", "summary", "trigger", "tokens_before", "id"]),
                                JSON_VALUES, max_size=4)
            )
            out.append(json.dumps(obj).encode())
        elif kind == "message":
            keys = st.sampled_from(["id", "role", "content", "tool_calls", "ts", "path", "lines", "created",
                                    "tool", "message_id"])
            obj = draw(st.dictionaries(keys, JSON_VALUES, max_size=5))
            out.append(json.dumps(obj).encode())
        else:
            out.append(json.dumps(draw(JSON_VALUES)).encode())
    return out


@fuzz(80)
@given(events=jsonl_garbage(), dialog=jsonl_garbage(), index=jsonl_garbage())
def test_events_archive_and_offload_index_garbage(
    events: list[bytes], dialog: list[bytes], index: list[bytes], cases: CaseTally
) -> None:
    """Readers of events.jsonl, dialog/*.jsonl and tool_results/index.jsonl skip what they cannot use."""
    cases.add("session files: events / archive / offload index")
    with tempfile.TemporaryDirectory(prefix="fuzz-ev-") as d:
        folder = Path(d) / "s"
        s = Session.create(folder, "ev")
        kept = s.append(user("kept"))
        archived = user("archived message about zebras", ts="2025-03-04T05:06:07.000+00:00")
        archive.append(folder, [archived])
        (folder / "tool_results").mkdir()
        (folder / "tool_results" / ("ab" * 16 + ".txt")).write_text("full output\n")
        s.close()
        with open(folder / "events.jsonl", "ab") as fh:
            fh.write(b"".join(line + b"\n" for line in events))
        with open(folder / "dialog" / "2025-03-04.jsonl", "ab") as fh:
            fh.write(b"".join(line + b"\n" for line in dialog))
        (folder / "tool_results" / "index.jsonl").write_bytes(b"".join(line + b"\n" for line in index))
        again = Session.load(folder)
        assert [m["id"] for m in again.messages] == [kept["id"]]
        problems: list[str] = []
        again.read_events(problems)
        for snap in again.snapshots():
            assert isinstance(snap.window, int) and isinstance(snap.regions(), dict)
        again.compaction_events()
        day = archive.read_day(folder, "2025-03-04")
        assert day[0]["id"] == archived["id"]
        hits = archive.search(folder, "zebras")
        assert any(h.message_id == archived["id"] for h in hits)
        listed = list_offloaded(folder)
        assert [f.path for f in listed] == ["tool_results/" + "ab" * 16 + ".txt"]
        assert all(isinstance(f.lines, int) and isinstance(f.created, str) for f in listed)


# --------------------------------------------------------------------------- regressions found by the fuzzing


DEEP = b"[" * 100_000 + b"]" * 100_000


def test_deep_nesting_is_bad_input_everywhere_never_a_recursion_error(tmp: Path, cases: CaseTally) -> None:
    """json.loads / tomllib raise RecursionError (not ValueError) on deep nesting: every reader copes."""
    cases.add("regressions", 9)
    folder = tmp / "s"
    s = Session.create(folder, "deep")
    kept = s.append(user("kept"))
    s.close()
    with open(folder / "history.jsonl", "ab") as fh:
        fh.write(DEEP + b"\n")
    (folder / "events.jsonl").write_bytes(DEEP + b"\n")
    (folder / "dialog").mkdir()
    (folder / "dialog" / "2025-01-01.jsonl").write_bytes(DEEP + b"\n")
    (folder / "tool_results").mkdir()
    (folder / "tool_results" / "index.jsonl").write_bytes(DEEP + b"\n")
    again = Session.load(folder)
    assert [m["id"] for m in again.messages] == [kept["id"]]
    assert again.load_report.invalid == ["line 2: not JSON (nested too deeply)"]
    problems: list[str] = []
    assert again.read_events(problems) == [] and "nested too deeply" in problems[0]
    assert archive.read_day(folder, "2025-01-01") == [] and archive.search(folder, "x") == []
    assert list_offloaded(folder) == []
    # session.json
    (folder / "session.json").write_bytes(b'{"summary": ' + DEEP + b"}")
    third = Session.load(folder)
    assert "nested too deeply" in third.load_report.describe()
    # transcripts: one JSON document, and a JSONL file whose second line is too deep
    one = tmp / "deep.json"
    one.write_bytes(DEEP)
    with pytest.raises(TranscriptError, match=r"deep\.json: not valid JSON \(nested too deeply\)"):
        import_transcript(one, session_dir=tmp / "imp1")
    lines = tmp / "deep.jsonl"
    lines.write_bytes(b'{"role": "user", "content": "hi"}\n' + DEEP + b"\n")
    with pytest.raises(TranscriptError, match=r"deep\.jsonl: line 2: not valid JSON \(nested too deeply\)"):
        import_transcript(lines, session_dir=tmp / "imp2")
    assert not (tmp / "imp1").exists() and not (tmp / "imp2").exists()
    # settings
    cfg = tmp / SETTINGS_FILE
    cfg.write_text("model = " + "[" * 100_000 + "]" * 100_000)
    loaded = load_settings(cfg)
    assert loaded.settings == Settings() and "nested too deeply" in loaded.problems[0]
    # tool-call arguments from the model
    tb = ToolBox(tmp, folder)
    res = asyncio.run(tb.run("read_file", DEEP.decode()))
    assert not res.ok and res.text == "error: read_file: arguments are not valid JSON (nested too deeply)"


def test_history_line_with_lone_surrogate_and_no_id_is_kept(tmp: Path, cases: CaseTally) -> None:
    cases.add("regressions")
    folder = tmp / "s"
    Session.create(folder, "sur").close()
    (folder / "history.jsonl").write_bytes(b'{"role": "user", "content": "bad \\ud800 half"}\n')
    s = Session.load(folder)
    assert s.messages[0]["content"] == "bad \ufffd half" and "had no id" in s.load_report.describe()
    assert Session.load(folder).messages[0]["id"] == s.messages[0]["id"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("pending", [1]), ("pending", "x"), ("pending", {"absent": 5}), ("pending", {"undo_push": "../x"}),
     ("undo", 5), ("undo", ["../../etc"]), ("calibrator", "bad"), ("calibrator", [1]),
     ("calibrator", {"last_fixed": "abc"}), ("summary", 5), ("title", {}), ("tools", "x")],
)
def test_session_json_fields_of_the_wrong_type(tmp: Path, field: str, value: Any, cases: CaseTally) -> None:
    """Each used to crash Session.load or a later call; now the field is reset and the file kept."""
    cases.add("regressions")
    folder = tmp / "s"
    s = Session.create(folder, "types")
    s.extend([user("q"), assistant("a")])
    ids = [m["id"] for m in s.messages]
    s.close()
    meta = json.loads((folder / "session.json").read_bytes())
    meta[field] = value
    original = json.dumps(meta).encode()
    (folder / "session.json").write_bytes(original)
    again = Session.load(folder)
    assert [m["id"] for m in again.messages] == ids
    text = again.load_report.describe()
    assert f"session.json: '{field}'" in text and "reset" in text, text
    aside = next(folder.glob("session.json.corrupt-*"))
    assert aside.read_bytes() == original and aside.name in text
    again.undo_stack()
    again.snapshot(Settings(context_window=8_000))
    again.append(user("more"))
    assert Session.load(folder).load_report.clean


def test_damaged_context_events_are_skipped_and_named(tmp: Path, cases: CaseTally) -> None:
    from engine.model.snapshot import ContextSnapshot

    cases.add("regressions", 4)
    s = Session.create(tmp / "s", "ev")
    s.append(user("q"))
    good = s.snapshot(Settings(context_window=8_000))
    s.record_snapshot(good)
    with open(s.events_path, "ab") as fh:
        for bad in ({"type": "context"}, {"type": "context", **good.to_json(), "window": "big"},
                    {**good.to_json(), "type": "context", "message_tokens": 7}):
            fh.write(dumps_line(bad))
    problems: list[str] = []
    snaps = s.snapshots(problems)
    assert len(snaps) == 1 and snaps[0].window == 8_000
    assert any("'window' is missing" in p for p in problems)
    assert any("'window' must be a number" in p for p in problems)
    assert any("'message_tokens'" in p for p in problems)
    with pytest.raises(ValueError, match="'system' must be a number"):
        ContextSnapshot.from_json({**good.to_json(), "system": True})


def test_archive_records_of_the_wrong_shape_are_skipped(tmp: Path, cases: CaseTally) -> None:
    cases.add("regressions", 3)
    folder = tmp / "s"
    good = user("zebra here", ts="2025-01-01T00:00:00+00:00")
    archive.append(folder, [good])
    with open(folder / "dialog" / "2025-01-01.jsonl", "ab") as fh:
        for bad in ({"role": "user", "content": "zebra", "tool_calls": 5},
                    {"role": "assistant", "content": "zebra", "tool_calls": [{"function": 5}]},
                    {"role": "tool", "content": {"zebra": 1}}):
            fh.write(dumps_line(bad))
    problems: list[str] = []
    assert [m["id"] for m in archive.read_day(folder, "2025-01-01", problems)] == [good["id"]]
    assert len(problems) == 3 and "'tool_calls' must be a list" in problems[0]
    assert [h.message_id for h in archive.search(folder, "zebra")] == [good["id"]]


# =========================================================================== transcripts to import

ROLE_VALUES = st.sampled_from(
    ["user", "assistant", "tool", "system", "developer", "function", "exit", "", None, 5]
)
TEXTISH = st.one_of(st.text(max_size=40), JSON_VALUES)


@st.composite
def raw_transcript_messages(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(JSON_VALUES)  # not even an object
    msg: dict[str, Any] = {"role": draw(ROLE_VALUES)}
    if draw(st.booleans()):
        part = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)})
        parts = st.lists(st.one_of(part, JSON_VALUES), max_size=2)
        msg["content"] = draw(st.one_of(st.text(max_size=40), st.none(), parts, JSON_VALUES))
    if draw(st.integers(0, 2)) == 0:
        function = st.fixed_dictionaries({}, optional={"name": TEXTISH, "arguments": TEXTISH})
        call = st.fixed_dictionaries(
            {}, optional={"id": TEXTISH, "type": st.just("function"), "function": function}
        )
        msg["tool_calls"] = draw(st.one_of(st.lists(st.one_of(call, JSON_VALUES), max_size=2), JSON_VALUES))
    for key in ("tool_call_id", "name", "reasoning_content", "function_call", "extra", "usage", "timestamp"):
        if draw(st.integers(0, 5)) == 0:
            msg[key] = draw(TEXTISH)
    return msg


@st.composite
def transcript_files(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["list", "object", "jsonl", "jsonl", "bytes", "value"]))
    msgs = draw(st.lists(raw_transcript_messages(), max_size=6))
    if kind == "list":
        return "t.json", json.dumps(msgs).encode()
    if kind == "object":
        extra = draw(st.dictionaries(st.sampled_from(["info", "tools", "instance_id", "model"]), JSON_VALUES,
                                     max_size=2))
        return "t.traj.json", json.dumps({"messages": msgs, **extra}).encode()
    if kind == "jsonl":
        lines = [json.dumps(m).encode() for m in msgs]
        if lines and draw(st.booleans()):
            at = draw(st.integers(0, len(lines) - 1))
            lines[at] = draw(bad_lines())[1]
        return "t.jsonl", b"\n".join(lines) + draw(st.sampled_from([b"", b"\n", b"\n\n"]))
    if kind == "value":
        return "t.json", json.dumps(draw(JSON_VALUES)).encode()
    return "t.json", draw(st.binary(max_size=300))


WHERE = re.compile(r"^(?:t(?:\.traj)?\.jsonl?: |message index \d+|messages\[\d+\]|line \d+|cannot import)")


@fuzz(150)
@given(file=transcript_files())
def test_transcript_import_succeeds_or_names_the_problem(file: tuple[str, bytes], cases: CaseTally) -> None:
    cases.add("transcripts to import")
    name, data = file
    with tempfile.TemporaryDirectory(prefix="fuzz-imp-") as d:
        root = Path(d)
        existing = Session.create(root / "sessions" / "existing", "stored before")
        existing.append(user("must survive any import"))
        existing.close()
        before = {p: p.read_bytes() for p in (root / "sessions" / "existing").rglob("*") if p.is_file()}
        src = root / name
        src.write_bytes(data)
        target = root / "sessions" / "imported"
        try:
            report = import_transcript(src, session_dir=target, window=8192)
        except TranscriptError as exc:
            assert WHERE.match(str(exc)), f"the message does not say where: {exc}"
            assert not target.exists()
        else:
            s = Session.load(target)
            assert s.load_report.clean, s.load_report.describe()
            assert len(s.messages) == report.messages > 0
            assert report.describe()
        leftovers = [p.name for p in (root / "sessions").iterdir() if p.name.startswith(".import-")]
        assert leftovers == []
        after = {p: p.read_bytes() for p in (root / "sessions" / "existing").rglob("*") if p.is_file()}
        assert after == before


# =========================================================================== tool outputs


@st.composite
def tool_outputs(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["bytes", "text", "giant_line", "nul", "lines"]))
    if kind == "bytes":  # undecodable bytes come through as lone surrogates (surrogateescape)
        return draw(st.binary(min_size=0, max_size=20_000)).decode("utf-8", "surrogateescape")
    if kind == "text":
        return draw(st.text(max_size=5_000))
    if kind == "giant_line":
        char = draw(st.sampled_from(["x", "é", "漢", "🙂", "\ud800", "\udcff"]))
        return Big(char * draw(st.integers(2_000, 60_000)))
    if kind == "nul":
        return Big("\x00" * draw(st.integers(0, 10_000)) + draw(st.text(max_size=100)))
    return "".join(f"{draw(st.text(max_size=30))}\n" for _ in range(draw(st.integers(0, 400))))


@fuzz(80)
@given(text=tool_outputs(), strategy=st.sampled_from(["truncate", "middle_out", "prune"]))
def test_any_tool_output_is_stored_whole_and_cut_to_valid_text(
    text: str, strategy: str, cases: CaseTally
) -> None:
    cases.add("tool outputs")
    limit = 2_000
    settings_ = Settings(offload_recent_bytes=limit, offload_old_bytes=500, offload_strategy=strategy)
    with tempfile.TemporaryDirectory(prefix="fuzz-out-") as d:
        s = Session.create(Path(d) / "s", "out")
        s.extend([user("run it"), assistant(None, [tool_call("c1", "run_shell", '{"command": "x"}')])])
        msg = tool_result("c1", text, name="run_shell")
        records = asyncio.run(Offloader(s.path, settings_).offload_session(s, [msg]))
        s.close()
        again = Session.load(s.path)
        assert again.load_report.clean
        stored = again.messages[-1]
        assert stored["id"] == msg["id"]
        content = stored["content"]
        content.encode("utf-8")  # valid text: no lone surrogate reaches the context
        try:  # undecodable bytes come back as they were; other lone surrogates as "?"
            full = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            full = text.encode("utf-8", "replace")
        if len(_norm(text).encode()) > limit + 100:  # the size the context would hold
            assert len(records) == 1 and stored["offload"]["path"] in content
            path = again.path / stored["offload"]["path"]
            assert path.read_bytes() == full  # the whole output, byte for byte
            assert len(content.encode()) < limit + 1_000
        else:
            assert records == [] and "offload" not in stored
            assert content == _norm(text)


@fuzz(60)
@given(data=st.binary(max_size=5_000))
def test_real_tools_on_binary_and_invalid_utf8_files(data: bytes, cases: CaseTally) -> None:
    cases.add("tool outputs", 3)
    with tempfile.TemporaryDirectory(prefix="fuzz-bin-") as d:
        ws = Path(d) / "ws"
        ws.mkdir()
        (ws / "blob.bin").write_bytes(data)
        tb = ToolBox(ws, Path(d) / "session")
        for name, args in (("read_file", {"path": "blob.bin"}), ("search_text", {"pattern": "."}),
                           ("list_dir", {})):
            res = asyncio.run(tb.run(name, json.dumps(args)))
            res.text.encode("utf-8")  # always valid text
            if not res.ok:
                assert "binary file" in res.text or "is empty" in res.text, res.text
        assert (ws / "blob.bin").read_bytes() == data


# =========================================================================== tool-call arguments

ARGUMENTS = st.one_of(
    st.text(max_size=60),
    st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape")),
    JSON_VALUES.map(json.dumps),
    st.dictionaries(st.sampled_from(["path", "start_line", "max_lines", "pattern", "glob", "ignore_case",
                                     "max_results", "bogus"]), JSON_VALUES, max_size=3).map(json.dumps),
)


@fuzz(300)
@given(name=st.sampled_from(["read_file", "list_dir", "search_text", "write_file", "run_shell", "nope", ""]),
       arguments=ARGUMENTS)
def test_tool_arguments_that_are_not_json_or_not_right(name: str, arguments: str, cases: CaseTally) -> None:
    cases.add("tool-call arguments")
    with tempfile.TemporaryDirectory(prefix="fuzz-args-") as d:
        ws = Path(d) / "ws"
        ws.mkdir()
        (ws / "a.txt").write_text("alpha\n")
        res = asyncio.run(ToolBox(ws, Path(d) / "session").run(name, arguments))
        if res.ok:
            return
        assert res.text.startswith("error: "), res.text
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            parsed = ...
        if name not in ("read_file", "list_dir", "search_text", "write_file", "run_shell"):
            assert "unknown tool" in res.text
        elif name in ("write_file", "run_shell"):
            assert "disabled" in res.text
        elif parsed is ...:
            assert "arguments are not valid JSON" in res.text
        elif not isinstance(parsed, dict):
            assert "arguments must be a JSON object" in res.text
        assert (ws / "a.txt").read_text() == "alpha\n"


# =========================================================================== settings files


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(value), repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items()) + "}"


KNOWN_KEYS = [f for f in Settings.__dataclass_fields__]
TOML_VALUES = st.recursive(
    st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=2),
    max_leaves=5,
)


@st.composite
def settings_files(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 4)) == 0:
        return draw(st.binary(max_size=200))
    keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(min_size=1, max_size=12))
    doc = draw(st.dictionaries(keys, TOML_VALUES, max_size=6))
    return "".join(f"{_toml_key(k)} = {_toml(v)}\n" for k, v in doc.items()).encode()


@fuzz(200)
@given(
    data=settings_files(),
    env=st.dictionaries(st.sampled_from(KNOWN_KEYS), st.text(max_size=12), max_size=2),
)
def test_settings_files_never_crash_and_name_the_key(
    data: bytes, env: dict[str, str], cases: CaseTally
) -> None:
    cases.add("settings files")
    with tempfile.TemporaryDirectory(prefix="fuzz-cfg-") as d:
        path = Path(d) / SETTINGS_FILE
        path.write_bytes(data)
        environ = {"CTXBENCH_" + k.upper(): v.replace("\x00", "") for k, v in env.items()}
        loaded = load_settings(path, env=environ)
        loaded.settings.validate()  # whatever was loaded is usable
        assert path.read_bytes() == data  # loading never rewrites the file
        for problem in loaded.problems:
            assert problem.startswith((f"{path}: ", "environment CTXBENCH_")), problem
        try:
            import tomllib

            doc = tomllib.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            unreadable = any("cannot read settings" in p for p in loaded.problems)
            assert not data.strip() or unreadable, loaded.problems
            return
        defaults = Settings()
        for key, value in doc.items():
            env_key = "CTXBENCH_" + key.upper()
            if key not in KNOWN_KEYS:
                assert any(repr(key) in p and "unknown setting" in p for p in loaded.problems)
            elif env_key not in environ and getattr(loaded.settings, key) == getattr(defaults, key):
                # not taken: the default stands, and a problem names the key (unless it is the default)
                named = any(f"{path}: {key} " in p for p in loaded.problems)
                assert value == getattr(defaults, key) or named, (key, value, loaded.problems)
        for env_key in environ:
            key = env_key.removeprefix("CTXBENCH_").lower()
            if getattr(loaded.settings, key) == getattr(defaults, key):
                assert any(p.startswith(f"environment {env_key}: ") for p in loaded.problems) or (
                    str(getattr(defaults, key)).lower() == environ[env_key].strip().lower()
                    or environ[env_key].strip().lower() in ("", "auto", "none", "0", "false", "no", "off")
                    or _same_number(environ[env_key], getattr(defaults, key))
                ), (env_key, environ[env_key], loaded.problems)


def _same_number(text: str, value: Any) -> bool:
    try:
        return float(text) == float(value)
    except (TypeError, ValueError):
        return False


def test_saving_bad_settings_keeps_the_old_file(tmp: Path, cases: CaseTally) -> None:
    cases.add("settings files", 3)
    path = tmp / SETTINGS_FILE
    save_settings(Settings(max_tokens=2048), path)
    before = path.read_bytes()
    for bad in (Settings(max_tokens=0), Settings(compact_threshold_ratio=1.5), Settings(estimator="magic")):
        with pytest.raises(ValueError, match=r"max_tokens|compact_threshold_ratio|estimator"):
            save_settings(bad, path)
        assert path.read_bytes() == before


def test_lone_surrogates_count_as_the_context_holds_them(tmp: Path, cases: CaseTally) -> None:
    """Regression: 2,000 lone surrogates passed a 2,000-byte limit and became 6,000 bytes of U+FFFD."""
    cases.add("regressions")
    s = Session.create(tmp / "s", "sur")
    s.extend([user("go"), assistant(None, [tool_call("c1", "run_shell", "{}")])])
    msg = tool_result("c1", "\ud800" * 2_000)
    records = asyncio.run(Offloader(s.path, Settings(offload_recent_bytes=2_000)).offload_session(s, [msg]))
    assert len(records) == 1
    assert len(s.messages[-1]["content"].encode()) < 2_000 + 400
    assert (s.path / records[0].path).read_bytes() == b"?" * 2_000  # not encodable: replaced, still whole


# =========================================================================== through the agent: tool outputs,
# arguments and provider responses (real HTTP against tests/fakeserver.py)


class Run:
    """One agent turn in fresh folders against the shared fake server; the events it emitted."""

    def __init__(
        self, root: Path, server: fs.FakeLLMServer, *, allow_shell: bool = False, **settings: Any
    ) -> None:
        settings.setdefault("context_window", 100_000)
        settings.setdefault("max_tokens", 256)
        settings.setdefault("max_iterations", 4)
        self.settings = Settings().replace(allow_shell=allow_shell, **settings)
        self.workspace = root / "ws"
        self.workspace.mkdir(exist_ok=True)
        self.session = Session.create(root / "session", "fuzz")
        self.events: list[Event] = []

        async def approve(name: str, args: dict[str, Any]) -> bool:
            return True

        config = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="sk-fuzz-000000",
                           max_tokens=256, max_retries=1, timeout=20)
        toolbox = ToolBox(self.workspace, self.session.path, allow_shell=allow_shell, approve=approve)
        self.agent = Agent(self.session, self.settings, llm_config=config, toolbox=toolbox,
                           emit=self.events.append)

    def turn(self, text: str = "go") -> TurnFinished:
        async def go() -> TurnFinished:
            done = await self.agent.run_turn(text)
            if self.agent.auto_task is not None:
                await self.agent.auto_task
            return done

        return asyncio.run(go())

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def check_consistent(self) -> None:
        """No message twice (in the history or in the events); every call answered; disk = memory."""
        ids = [m["id"] for m in self.session.messages]
        assert len(ids) == len(set(ids)), "a message is stored twice"
        added = [e.message["id"] for e in self.of(MessageAdded)]
        assert len(added) == len(set(added)), "a message was announced twice"
        assert set(added) <= set(ids)
        assert unanswered_calls(self.session.messages) == []
        for msg in self.session.messages:
            msg_calls = [c["id"] for c in msg.get("tool_calls") or []]
            assert len(msg_calls) == len(set(msg_calls)) and all(msg_calls), msg
        again = Session.load(self.session.path)
        assert again.load_report.clean, again.load_report.describe()
        assert [m["id"] for m in again.messages] == ids


@pytest.mark.slow
def test_100mb_of_output_from_a_real_tool_goes_through_a_turn(tmp: Path, server: fs.FakeLLMServer,
                                                              cases: CaseTally) -> None:
    """run_shell prints 100 MB on one line; read_file reads a 100 MB one-line file: the turn goes on."""
    cases.add("tool outputs", 2)
    run = Run(tmp, server, allow_shell=True)
    (run.workspace / "big.txt").write_bytes(b"y" * 100_000_000)
    command = "head -c 100000000 /dev/zero | tr '\\0' x"
    server.queue(
        fs.tool_call_reply("run_shell", {"command": command}, call_id="big1"),
        fs.tool_call_reply("read_file", {"path": "big.txt"}, call_id="big2"),
        fs.text_reply("Both were huge."),
    )
    done = run.turn("make a lot of output")
    assert done.ok and done.final_text == "Both were huge."
    finished = run.of(ToolCallFinished)
    assert [f.ok for f in finished] == [True, True]
    shell, read = run.session.messages[2], run.session.messages[4]
    assert shell["content"].startswith("exit code 0\nxxxx") and shell["offload"]["bytes"] > 100_000
    full = (run.session.path / shell["offload"]["path"]).read_text()
    assert full.endswith("[… output cut: 100000000 bytes in total]")
    assert "[…line cut]" in read["content"] and len(read["content"].encode()) < 45_000
    assert (run.session.path / "history.jsonl").stat().st_size < 200_000
    run.check_consistent()


def test_tool_arguments_that_are_not_json_through_the_agent(tmp: Path, server: fs.FakeLLMServer,
                                                            cases: CaseTally) -> None:
    cases.add("tool-call arguments", 4)
    run = Run(tmp, server)
    server.queue(
        fs.tool_call_reply("read_file", '{"path": "a.txt"', call_id="t1"),  # cut short
        fs.tool_call_reply("read_file", "[1, 2]", call_id="t2"),
        fs.tool_call_reply("list_dir", "{'path': '.'}", call_id="t3"),  # Python, not JSON
        fs.tool_call_reply("read_file", '{"path": 5, "start_line": "x"}', call_id="t4"),
        fs.text_reply("I give up on tools."),
    )
    run.settings.max_iterations = 6
    done = run.turn("read a.txt")
    assert done.ok
    results = [m for m in run.session.messages if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == ["t1", "t2", "t3", "t4"]
    assert all(r.get("tool_error") for r in results)
    assert "arguments are not valid JSON" in results[0]["content"]
    assert "arguments must be a JSON object, got list" in results[1]["content"]
    assert "arguments are not valid JSON" in results[2]["content"]
    assert "argument 'path' must be str" in results[3]["content"]
    last = server.requests[-1].body
    assert last is not None and [m["tool_call_id"] for m in last["messages"] if m["role"] == "tool"] == [
        "t1", "t2", "t3", "t4"]
    run.check_consistent()


EMPTY_CHOICES = (
    'data: {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}\n\n'
)
GARBAGE_SSE = [
    "data: {not json\n\n", "data: [1, 2]\n\n", "data: null\n\n", ": keep-alive comment\n\n",
    "event: ping\n\n",
    "data: \n\n", "\n\n", 'data: {"choices": [{"delta": 5}]}\n\n', 'data: {"choices": [{"index": 0}]}\n\n',
    'data: {"choices": [{"delta": {"tool_calls": [{"index": 0}]}}]}\n\n', EMPTY_CHOICES, EMPTY_CHOICES,
]
SSE_EVENT = st.one_of(
    st.builds(fs.text, st.text(max_size=20)),
    st.builds(fs.reasoning, st.text(max_size=20)),
    st.builds(
        lambda i, cid, name, args: fs.tool_call_delta(i, id=cid, name=name, arguments=args),
        st.integers(0, 2),
        st.one_of(st.none(), st.sampled_from(["c1", "c2", ""]), st.text(max_size=4)),
        st.one_of(st.none(), st.sampled_from(["list_dir", "read_file", "nope", ""])),
        st.one_of(st.text(max_size=12), st.just('{"path": "."}'), st.just("{}")),
    ),
    st.builds(fs.raw, st.sampled_from(GARBAGE_SSE)),
    st.builds(fs.raw, st.text(max_size=30).map(lambda t: f"data: {t}\n\n")),
)
RESPONSES = st.one_of(
    st.builds(
        lambda events, done, reset, finish: fs.stream(
            *events, done=done, reset_after=reset, finish_reason=finish
        ),
        st.lists(SSE_EVENT, max_size=8),
        st.booleans(),
        st.one_of(st.none(), st.integers(0, 8)),
        st.sampled_from([None, "stop", "tool_calls", "length", "content_filter"]),
    ),
    st.sampled_from([fs.server_error(), fs.bad_request(), fs.unauthorized(), fs.rate_limited(0)]),
)


# one server for all examples (the conftest's, function-scoped): each example resets what it uses
@settings(fuzz(40), suppress_health_check=[*FUZZ.suppress_health_check, HealthCheck.function_scoped_fixture])
@given(responses=st.lists(RESPONSES, min_size=1, max_size=3))
def test_any_provider_response_ends_the_turn_cleanly(
    responses: list[dict[str, Any]], server: fs.FakeLLMServer, cases: CaseTally
) -> None:
    """Truncated streams, empty choices, tool calls without ids or names, garbage SSE, errors."""
    cases.add("provider responses", len(responses))
    with tempfile.TemporaryDirectory(prefix="fuzz-sse-") as d:
        server._queue.clear()
        server.default = fs.text_reply("Final answer.")
        start = len(server.requests)
        run = Run(Path(d), server)
        server.queue(*responses)
        done = run.turn("hello")
        errors = [e for e in run.of(ErrorEvent) if not e.retrying]
        if not done.ok:
            assert len(errors) == 1 and errors[0].message.strip(), [e.message for e in errors]
        else:
            assert errors == [] and run.session.messages[-1]["role"] == "assistant"
        assert run.of(TurnFinished) == [done]
        calls = len(server.requests) - start
        assert calls <= done.iterations * 2  # max_retries = 1: at most one retry per call
        run.check_consistent()
        server.default = None


def test_endless_shell_output_is_counted_not_held(tmp: Path, cases: CaseTally) -> None:
    """Regression: ``yes`` until the timeout was buffered whole by communicate() (~1 GB in 2 s; tens
    of GB at the default 60 s timeout); now the head is kept and the rest only counted."""
    import tracemalloc

    cases.add("regressions")

    async def allow(name: str, args: dict[str, Any]) -> bool:
        return True

    tb = ToolBox(tmp, tmp / "session", allow_shell=True, approve=allow)
    tracemalloc.start()
    try:
        res = asyncio.run(tb.run("run_shell", json.dumps({"command": "yes", "timeout": 1})))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.ok and res.text.startswith("killed after 1 s (timeout)\ny\ny\n")
    total = int(re.search(r"output cut: (\d+) bytes in total", res.text).group(1))  # type: ignore[union-attr]
    assert total > 10_000_000 and peak < 20_000_000, (total, peak)
    assert len(res.text) < 100_200


def test_a_pattern_that_backtracks_for_ever_is_given_up(tmp: Path, cases: CaseTally,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: search_text("(a|aa)+$") on a line of 60 a's ran for ever holding the GIL: the turn,
    the event loop and the whole app froze and the process could not even exit. Now the search runs
    in a worker thread and gives up; how long the loop waits is a benchmark figure
    (``python -m benchmarks search_loop``)."""
    from engine.store import textsearch

    cases.add("regressions")
    (tmp / "a.txt").write_text("a" * 60 + "b\n" + "aaa\n")
    tb = ToolBox(tmp, tmp / "session")
    searched_on: list[int] = []
    real_search = textsearch.search

    def spy(pattern: Any, text: str, *args: Any, **kwargs: Any) -> Any:
        searched_on.append(threading.get_ident())
        return real_search(pattern, text, *args, **kwargs)

    monkeypatch.setattr(textsearch, "search", spy)

    async def main() -> tuple[int, Any]:
        return threading.get_ident(), await asyncio.wait_for(
            tb.run("search_text", json.dumps({"pattern": "(a|aa)+$"})), 20
        )

    loop_thread, res = asyncio.run(main())
    assert not res.ok and "backtracks too much" in res.text
    assert searched_on and loop_thread not in searched_on  # never on the event loop's thread
    assert asyncio.run(tb.run("search_text", json.dumps({"pattern": "^a{3}$"}))).text.endswith("a.txt:2: aaa")
