"""One reader per agent (:mod:`engine.sources.formats`); :func:`read_source` picks it by format."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from engine.sources.formats import FORMATS
from engine.sources.model import SourceError, SourceFormat, SourceSession

log = logging.getLogger(__name__)

READERS: dict[SourceFormat, Callable[[Path], SourceSession]] = {name: f.read for name, f in FORMATS.items()}


def read_source(path: Path, fmt: SourceFormat, lines: Sequence[bytes] | None = None) -> SourceSession:
    """Read ``path`` as ``fmt``; SourceError when it cannot be read at all (bad lines are skipped and
    reported in the session's ``skipped`` list, never raised).

    ``lines``: a line-oriented file's complete lines already read by the caller: the file is not read again."""
    spec = FORMATS.get(fmt)
    if spec is None:
        raise SourceError(f"{fmt} logs are imported by engine.importer, not read as a source")
    started = time.monotonic()
    try:
        if lines is not None and spec.read_lines is not None:
            session = spec.read_lines(Path(path), lines)
        else:
            session = spec.read(Path(path))
    except OSError as exc:
        log.warning("reading %s (%s) failed: %s", path, fmt, exc)
        raise SourceError(f"{Path(path).name}: cannot read: {exc.strerror or exc}") from None
    except SourceError as exc:
        log.warning("reading %s (%s) failed: %s", path, fmt, exc)
        raise
    log.info("read %s (%s): %d calls, %d messages, %d lines skipped, %.2f s", path, fmt, len(session.calls),
             len(session.messages), len(session.skipped), time.monotonic() - started)
    return session
