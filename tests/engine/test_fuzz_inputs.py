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
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import archive
from engine.config import SETTINGS_FILE, Settings, load_settings
from engine.fsutil import dumps_line
from engine.importer import TranscriptError, import_transcript
from engine.messages import ROLES, Message, assistant, tool_call, tool_result, user
from engine.offload import list_offloaded
from engine.session import Session
from engine.tools import ToolBox

if TYPE_CHECKING:
    from tests.engine.conftest import CaseTally

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
        return assistant(None, [tool_call(f"c{i}", "read_file", json.dumps({"path": text})) for i in range(n)])
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
    ({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]}, "arguments"),
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
            ["not_json", "binary", "wrong_type", "unknown_role", "system_role", "non_object", "huge_int", "deep",
             "deep_in_message", "torn_mid"]
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
                st.text(max_size=12).filter(lambda r: r not in ROLES), st.integers(), st.none(), st.lists(st.integers())
            )
        )
        return kind, json.dumps({"role": role, "content": "x"}).encode(), "role"
    if kind == "system_role":
        return kind, json.dumps({"role": "system", "content": "be nice"}).encode(), "does not belong in the history"
    if kind == "non_object":
        value = draw(st.one_of(st.integers(), st.text(max_size=10), st.lists(st.integers(), max_size=3), st.none()))
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
        choice = draw(st.sampled_from(["bad", "bad", "bad", "no_id", "surrogate_no_id", "extra_keys", "dup", "blank"]))
        if choice == "bad":
            items.insert(at, ("bad", draw(bad_lines())))
        elif choice == "no_id":
            items.insert(at, ("no_id", {"role": "user", "content": draw(st.text(max_size=30))}))
        elif choice == "surrogate_no_id":
            items.insert(at, ("no_id", {"role": "assistant", "content": "\ud800half" + draw(st.text(max_size=5))}))
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
def test_history_file_damage_is_repaired_reported_and_kept_aside(spec: dict[str, Any], cases: CaseTally) -> None:
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
                                     "message_tokens", "provider_prompt_tokens", "ts", "call_index", "estimator"]),
                    JSON_VALUES,
                    max_size=5,
                )
            )
            out.append(json.dumps(obj).encode())
        elif kind == "compaction":
            obj = {"type": "compaction"} | draw(
                st.dictionaries(st.sampled_from(["result", "summary", "trigger", "tokens_before", "id"]), JSON_VALUES,
                                max_size=4)
            )
            out.append(json.dumps(obj).encode())
        elif kind == "message":
            obj = draw(st.dictionaries(st.sampled_from(["id", "role", "content", "tool_calls", "ts", "path", "lines",
                                                        "created", "tool", "message_id"]), JSON_VALUES, max_size=5))
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
    from engine.budget import ContextSnapshot

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
