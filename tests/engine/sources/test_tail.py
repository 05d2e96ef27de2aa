"""The one follower of a file (:class:`engine.sources.tail.Tail`): its block form, which the usage index's kept
readers, the sources scan's light pass and the captures' scan read through, gives the very lines its line form
(``ctxbench follow``, the window) gives, whatever the appends: lines cut anywhere, over-long lines, carriage
returns inside a line, a rewrite."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engine.sources import model
from engine.sources.tail import Tail, lines_holding
from tests.engine.sources.conftest import BIG_CLAUDE


def _appends(rng: random.Random, limit: int) -> list[bytes]:
    """Random appends: lines of every length (some over ``limit``), with \\r inside, cut at random places."""
    data = b"".join(
        (b"x" * rng.choice((0, 1, 5, limit - 1, limit, limit + 1, 3 * limit)) + b"\r" * rng.randint(0, 1) + b"\n")
        for _ in range(60))
    cuts = sorted(rng.sample(range(1, len(data)), 25))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def test_the_block_form_gives_the_lines_the_line_form_gives(tmp_path: Path) -> None:
    rng = random.Random(28)
    cut_lines = 0
    for round_ in range(20):
        path = tmp_path / f"f{round_}.jsonl"
        path.write_bytes(b"")
        by_lines, by_blocks = Tail(path, limit=16), Tail(path, limit=16)
        lines: list[bytes] = []
        blocks: list[bytes] = []
        for part in _appends(rng, 16):
            with path.open("ab") as fh:
                fh.write(part)
            size = rng.choice((3, 7, 1 << 20))
            more = True
            while more:
                got, _, more = by_lines.read(size)
                lines += got
            more = True
            while more:
                block, _, more = by_blocks.read_block(size)
                blocks.append(block)
            assert by_blocks.offset == by_lines.offset == path.stat().st_size
            assert by_blocks.partial == by_lines.partial
            assert by_blocks.waiting == (b"" if len(by_blocks.partial) > 16 else bytes(by_blocks.partial))
        whole = b"".join(blocks)
        assert whole.endswith(b"\n") and whole[:-1].split(b"\n") == lines
        assert any(line.endswith(b"\r") for line in lines)  # a carriage return is the line's
        cut_lines += sum(1 for line in lines if len(line) == 17)  # a partial line held over the limit: cut
    assert cut_lines > 0


def test_a_rewritten_file_is_read_again_from_its_start_in_the_block_form(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c"')
    tail = Tail(path)
    assert tail.read_block() == (b'{"a": 1}\n{"b": 2}\n', None, False) and tail.waiting == b'{"c"'
    path.write_bytes(b'{"z": 9}\n{"b": 2}\n{"c": 3}\n')  # rewritten in place, longer
    assert tail.read_block() == (b'{"z": 9}\n{"b": 2}\n{"c": 3}\n', "rewritten", False)
    path.write_bytes(b'{"z": 9}\n')
    assert tail.read_block() == (b'{"z": 9}\n', "truncated", False) and tail.waiting == b""
    with path.open("rb") as fh:  # read from a file the caller opened: all there is at once
        with path.open("ab") as out:
            out.write(b'{"y": 8}\n' * 3)
        assert tail.read_from(fh, None) == (b'{"y": 8}\n' * 3, None, False)


@pytest.mark.parametrize("block", [5, 333, 65_536, 8 * 2**20])
def test_the_lines_holding_a_needle_are_the_ones_a_pass_line_by_line_finds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(model, "MAX_LINE_BYTES", 50_000)
    lines = BIG_CLAUDE.read_bytes().splitlines(keepends=True)
    long_line = b'{"usage": "' + b"u" * 60_000 + b'"}\n'  # over the cap: passed over unread
    data = b"".join(lines[:3]) + long_line + b"".join(lines[3:]) + b'{"usage": 1'  # a partial last line
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    needle = b'"usage"'
    want = [ln for ln in data.splitlines(keepends=True) if needle in ln and ln.endswith(b"\n") and len(ln) <= 50_001]
    with path.open("rb") as fh:
        assert list(lines_holding(fh, needle, block=block)) == want and len(want) > 100
    with path.open("rb") as fh:  # the partial last line too, when asked
        assert list(lines_holding(fh, needle, block=block, partial=True)) == [*want, b'{"usage": 1']


def test_needles_asked_again_after_each_line_look_for_less(tmp_path: Path) -> None:
    """A pass that found what a needle was for stops looking for it: the lines holding only that needle, after the
    first, are not given (what the light passes' titles and starts rely on)."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"title": 1}\n{"n": 1}\n{"title": 2}\n{"usage": 3}\n{"title": 4, "usage": 5}\n')
    seen: list[bytes] = []

    def needles() -> tuple[bytes, ...]:
        return (b'"usage"',) + (() if seen else (b'"title"',))

    with path.open("rb") as fh:
        for line in lines_holding(fh, needles):
            seen.append(line)
    assert seen == [b'{"title": 1}\n', b'{"usage": 3}\n', b'{"title": 4, "usage": 5}\n']
