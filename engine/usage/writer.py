"""The usage index's writes and repairs: new Parquet files for what changed, the manifest switched to them.

:class:`IndexFiles` is the index's folder as a writer sees it (:class:`engine.usage.index.UsageIndex` is one, and
adds the reading of session files). A write (:meth:`IndexFiles.write_rows`) replaces the rows of the session files
read: only the days they touch are written again (one Parquet file a day), the sessions file, and the rollups (their
rows of these files replaced, summed from the new call rows alone; all of them from the day files when the index has
none of this version). Then :meth:`IndexFiles.save` switches to the manifest naming the new files (see
:mod:`engine.usage.storage`) and removes what no manifest names.

**Damage** (a listed file DuckDB cannot read: truncated, flipped bytes, missing, empty, of other columns) is
found when a write or a query fails (:meth:`IndexFiles.sized_wrong`, :meth:`IndexFiles.probe`), named
(``IndexReport.warnings``, :attr:`IndexFiles.notices`) and rebuilt (:meth:`IndexFiles.repair`,
:meth:`IndexFiles.without`): the file leaves the manifest; the session files whose rows lived in it are marked to be
read again from their sources; the sessions file is written again from the manifest's session rows, the rollups from
the day files.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from engine.model.text import printable
from engine.sources.model import shown_path
from engine.store.fsutil import atomic_write_bytes, fsync_dir
from engine.usage.queries import CALL_ROLLUP, ROLLUP_VERSION, ROLLUPS, SESSION_ROLLUP, TOOL_ROLLUP, sql_str
from engine.usage.rows import CALL_COLUMNS, SESSION_COLUMNS, TOOL_COLUMNS, FileRows
from engine.usage.storage import (
    LOCK_FILE,
    LOCK_WAIT,
    MANIFEST,
    ROLLUP_MARKER,
    TABLES,
    IndexReadOnly,
    Manifest,
    UsageIndexError,
    copy_to,
    duck_folder,
    empty_relation,
    expected_columns,
    fsync_file,
    listing,
    load_rows,
    locked,
    read_manifest,
)


class IndexFiles:
    """The data files of the usage index in ``root``: its manifest, its writes, its repairs (see the module's doc)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._db: Any = None  # the in-memory DuckDB database of the writes (see connection)
        self._db_lock = threading.Lock()
        self.notices: list[str] = []  # what the queries found and did (a damaged file rebuilt), for the caller to say
        self.lock_wait = LOCK_WAIT  # seconds a repair during a query waits for the lock

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def manifest(self, *, whole: bool = True) -> Manifest:
        return read_manifest(self.root, whole=whole)

    def save(self, manifest: Manifest, written: list[Path]) -> None:
        """Make ``manifest`` the index: the files ``written`` for it and their folders fsync'd, then the manifest
        replaced atomically (fsync'd); then the files no manifest names any more go."""
        # at once, from threads: the file system commits them together (one after the other costs a commit each)
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(fsync_file, written))
            list(pool.map(fsync_dir, sorted({p.parent for p in written})))
        fresh = {str(p) for p in written}
        manifest.sizes = {n: (self.root / n).stat().st_size if str(self.root / n) in fresh or n not in manifest.sizes
                          else manifest.sizes[n] for n in manifest.listed()}
        atomic_write_bytes(self.manifest_path, manifest.to_bytes())
        self.sweep(manifest)

    def sweep(self, manifest: Manifest) -> None:
        """Remove what ``manifest`` does not name: the files a write replaced, what a stopped writer left (staged
        files, older versions' files and folders), empty day folders. Only under the lock."""
        keep = {str(self.root / n) for n in manifest.listed()}
        for stale in [*self.root.glob(".*.tmp"), *self.root.glob(".tmp-*"), self.root / ROLLUP_MARKER,
                      *self.root.glob("*.parquet")]:
            if str(stale) in keep:
                continue
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    stale.unlink()
        for table in TABLES:
            try:
                folders = list(os.scandir(self.root / table))
            except OSError:
                continue
            for folder in folders:
                try:
                    names = os.listdir(folder.path)
                except OSError:  # not a folder
                    with contextlib.suppress(OSError):
                        os.unlink(folder.path)
                    continue
                left = len(names)
                for name in names:
                    path = os.path.join(folder.path, name)
                    if path not in keep:
                        with contextlib.suppress(OSError):
                            os.unlink(path)
                            left -= 1
                if not left:
                    with contextlib.suppress(OSError):
                        os.rmdir(folder.path)

    def connection(self) -> Any:
        """A cursor of the in-memory DuckDB database this object keeps for its writes (made once: a new
        database costs 15–35 ms, a cursor 0.2 ms). Its temporary tables go with the cursor."""
        import duckdb

        with self._db_lock:
            if self._db is None:
                self._db = duckdb.connect()
            return self._db.cursor()

    def new_name(self, kind: str, generation: int, day: str = "") -> str:
        stem = f"{generation % 1_000_000:06d}-{uuid.uuid4().hex[:12]}.parquet"
        return f"{kind}/day={day}/{stem}" if day else f"{kind}-{stem}"

    def write_rows(self, base: Manifest, changed: dict[str, FileRows], old_days: set[str], version: str,
                   *, all_sessions: bool = False) -> tuple[int, int]:
        """Write the rows of the files read (``changed``: by file id) in place of the rows they had, as new files:
        the days either touches, the sessions file (from every known session file's row with ``all_sessions``),
        the rollups (their rows of these files replaced; all of them from the day files when ``base`` has none of
        this version); then switch to the manifest naming them. The days rewritten, and the rows with a number
        DuckDB cannot hold (stored as NULL)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fids = set(changed)
        new = base.copy()
        new.valid, new.generation, new.token, new.prices = True, base.generation + 1, uuid.uuid4().hex, version
        written: list[Path] = []
        bad = 0
        con = self.connection()
        try:
            days: set[str] = set(old_days)
            for table, columns, rows_key in (("calls", CALL_COLUMNS, "calls"),
                                             ("tool_results", TOOL_COLUMNS, "tool_results")):
                rows = [r for fr in changed.values() for r in getattr(fr, rows_key)]
                bad += load_rows(con, f"new_{table}", columns, rows)
                days.update(r["day"] for r in rows)
            for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
                self.rewrite_days(con, new, table, columns, sorted(days), fids, written)
            if all_sessions:
                sessions = [k["session"] for k in new.files.values() if isinstance(k, dict)
                            and isinstance(k.get("session"), dict) and k["session"]]
                fresh_fids: set[str] = set()
            else:
                sessions = [fr.session for fr in changed.values() if fr.session]
                fresh_fids = fids
            bad += load_rows(con, "new_sessions", SESSION_COLUMNS, sessions)
            self.replace_rows(con, new, "sessions", "SELECT * FROM new_sessions", fresh_fids, written,
                               keep_old=not all_sessions)
            if base.rollups_current():
                con.execute("CREATE OR REPLACE TEMP TABLE new_call_rollup AS "
                            + CALL_ROLLUP.format(source="new_calls"))
                self.replace_rows(con, new, "call_rollup", "SELECT * FROM new_call_rollup", fids, written)
                self.replace_rows(con, new, "tool_rollup", TOOL_ROLLUP.format(
                    results="new_tool_results", calls="new_calls"), fids, written)
                self.replace_rows(con, new, "session_rollup", SESSION_ROLLUP.format(
                    calls="new_call_rollup", sessions="new_sessions"), fids, written)
            else:  # a new index, a repaired one or one of older rollups: all of them from the day files
                self.write_rollups(con, new, written)
        except BaseException as exc:
            for path in written:  # never named by a manifest: gone now rather than at the next sweep
                with contextlib.suppress(OSError):
                    path.unlink()
            if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise IndexReadOnly(f"the usage index in {shown_path(self.root)} is read-only "
                                    f"({exc.strerror or exc})") from None
            raise
        finally:
            con.close()
        self.save(new, written)
        return len(days), bad

    def replace_rows(self, con: Any, m: Manifest, name: str, fresh: str, fids: set[str], written: list[Path],
                      *, keep_old: bool = True) -> None:
        """A new ``name`` file in ``m``: the rows of its old file of files not in ``fids`` kept, those of ``fresh``
        added."""
        folder = duck_folder(self.root)
        query = f"SELECT * FROM ({fresh})"
        old = m.single.get(name)
        if old and keep_old:
            fid_list = ", ".join(sql_str(f) for f in sorted(fids)) or "''"
            query = (f"SELECT * FROM read_parquet({listing(folder, [old])}) WHERE file_id NOT IN ({fid_list}) "
                     f"UNION ALL BY NAME ({query})")
        order = " ORDER BY day" if name in ("call_rollup", "tool_rollup") else ""
        target = self.new_name(name, m.generation)
        copy_to(con, f"SELECT * FROM ({query}){order}", folder / target)
        written.append(self.root / target)
        m.single[name] = target

    def rewrite_days(self, con: Any, m: Manifest, table: str, columns: Mapping[str, str], days: list[str],
                      fids: set[str], written: list[Path]) -> None:
        """Each day in ``days``: its old rows of files not in ``fids`` + the new rows, as one new Parquet file named
        in ``m`` (a day left without rows leaves ``m``)."""
        folder = duck_folder(self.root)
        names = ", ".join(f'"{k}"' for k in columns)
        fid_list = ", ".join(sql_str(f) for f in sorted(fids)) or "''"
        for day in days:
            old = m.days[table].get(day)
            parts = [f"SELECT {names} FROM new_{table} WHERE day = DATE {sql_str(day)}"]
            if old:
                parts.insert(0, f"SELECT {names} FROM read_parquet({listing(folder, [old])}) "
                                f"WHERE file_id NOT IN ({fid_list})")
            target = self.new_name(table, m.generation, day)
            (self.root / target).parent.mkdir(parents=True, exist_ok=True)
            count = copy_to(con, f"SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY ts NULLS LAST",
                             folder / target)
            if count:
                written.append(self.root / target)
                m.days[table][day] = target
            else:
                (self.root / target).unlink()
                m.days[table].pop(day, None)

    def write_rollups(self, con: Any, m: Manifest, written: list[Path]) -> None:
        """Write the rollups of ``m`` from all its call and tool-result rows (written already) and its sessions."""
        folder = duck_folder(self.root)
        sources = {}
        for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
            files = sorted(m.days[table].values())
            sources[table] = f"read_parquet({listing(folder, files)})" if files else empty_relation(columns)
        con.execute("CREATE OR REPLACE TEMP TABLE all_call_rollup AS " + CALL_ROLLUP.format(source=sources["calls"]))
        sessions = m.single.get("sessions")
        sessions_sql = f"read_parquet({listing(folder, [sessions])})" if sessions else empty_relation(SESSION_COLUMNS)
        tools = TOOL_ROLLUP.format(results=sources["tool_results"], calls=sources["calls"])
        fresh = {"call_rollup": "SELECT * FROM all_call_rollup ORDER BY day",
                 "tool_rollup": f"SELECT * FROM ({tools}) ORDER BY day",
                 "session_rollup": SESSION_ROLLUP.format(calls="all_call_rollup", sessions=sessions_sql)}
        for name, query in fresh.items():
            target = self.new_name(name, m.generation)
            copy_to(con, query, folder / target)
            written.append(self.root / target)
            m.single[name] = target
        m.rollups = ROLLUP_VERSION

    def rebuild_rollups(self, *, lock_wait: float = LOCK_WAIT) -> None:
        """Write the rollups from all the call and tool-result rows (and switch to them)."""
        with locked(self.root / LOCK_FILE, wait=lock_wait):
            base = self.manifest()
            if not base.valid:
                return
            new = base.copy()
            new.generation, new.token = base.generation + 1, uuid.uuid4().hex
            written: list[Path] = []
            con = self.connection()
            try:
                self.write_rollups(con, new, written)
            finally:
                con.close()
            self.save(new, written)

    def adopt(self, days: Mapping[str, Mapping[str, str]], sessions: str, prices: str = "adopted") -> None:
        """Make an index of data files written by another tool (the benchmarks' synthetic index): ``days`` (table ->
        day -> name) and ``sessions`` named as :meth:`new_name` names them, under ``root``; rollups built."""
        with locked(self.root / LOCK_FILE):
            m = Manifest(True, 1, uuid.uuid4().hex, prices, 0, {t: dict(days.get(t) or {}) for t in TABLES},
                         {"sessions": sessions})
            written: list[Path] = []
            con = self.connection()
            try:
                self.write_rollups(con, m, written)
            finally:
                con.close()
            written += [self.root / n for n in m.listed()]
            self.save(m, sorted(set(written)))

    # ------------------------------------------------------------------ damage

    def sized_wrong(self, m: Manifest) -> dict[str, str]:
        """The files ``m`` names that are gone or whose size is not the size they were written with."""
        wrong: dict[str, str] = {}
        for name in m.listed():
            try:
                size = (self.root / name).stat().st_size
            except FileNotFoundError:
                wrong[name] = "missing"
                continue
            except OSError as exc:
                wrong[name] = exc.strerror or str(exc)
                continue
            if name in m.sizes and size != m.sizes[name]:
                wrong[name] = "empty (0 bytes)" if not size else f"{size:,} bytes, written with {m.sizes[name]:,}"
        return wrong

    def probe(self, m: Manifest) -> dict[str, str]:
        """The files ``m`` names that DuckDB cannot read whole, or that do not hold their table's columns: name ->
        what is wrong."""
        import duckdb

        folder = duck_folder(self.root)
        expected = expected_columns()
        kinds = {n: t for t in TABLES for n in m.days[t].values()} | {n: k for k, n in m.single.items()}
        broken: dict[str, str] = {}
        con = duckdb.connect()
        try:
            for name, kind in kinds.items():
                path = self.root / name
                try:
                    size = path.stat().st_size
                except OSError as exc:
                    broken[name] = "missing" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
                    continue
                if not size:
                    broken[name] = "empty (0 bytes)"
                    continue
                try:
                    source = f"read_parquet({listing(folder, [name])})"
                    columns = [d[0] for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description]
                    con.execute(f"SELECT max(hash(COLUMNS(*))) FROM {source}").fetchall()  # every value read
                except duckdb.Error as exc:
                    broken[name] = printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                    continue
                if columns != expected[kind]:
                    broken[name] = "not a file of this table (other columns)"
        finally:
            con.close()
        return broken

    def repair(self, seen: Manifest) -> bool:
        """A query failed on the index of manifest ``seen``: find the damaged files and rebuild without them (under
        the lock; the session files whose rows they held are read again by the next update). Whether something
        was rebuilt (or the manifest changed meanwhile: worth another try)."""
        try:
            with locked(self.root / LOCK_FILE, wait=self.lock_wait):
                m = self.manifest()
                if not m.valid or m.token != seen.token:
                    return m.token != seen.token  # another process wrote meanwhile
                broken = self.sized_wrong(m) or self.probe(m)
                if not broken:
                    return False
                new = self.without(m, broken, self.notices)
                new.generation, new.token = m.generation + 1, uuid.uuid4().hex
                written: list[Path] = []
                con = self.connection()
                try:
                    if "sessions" not in new.single:
                        load_rows(con, "new_sessions", SESSION_COLUMNS, [
                            k["session"] for k in new.files.values()
                            if isinstance(k, dict) and isinstance(k.get("session"), dict) and k["session"]])
                        self.replace_rows(con, new, "sessions", "SELECT * FROM new_sessions", set(), written,
                                           keep_old=False)
                    self.write_rollups(con, new, written)
                finally:
                    con.close()
                self.save(new, written)
                return True
        except UsageIndexError as exc:  # busy, read-only: the damage stays (said)
            self.notices.append(f"{exc}: the damaged index could not be rebuilt now")
            return False

    def without(self, manifest: Manifest, broken: Mapping[str, str], said: list[str]) -> Manifest:
        """``manifest`` without the ``broken`` files (name -> why): the session files whose rows lived in one are
        marked to be read again (their rows of the other days are replaced then); a broken sessions file is
        written again from the manifest's session rows, broken rollups from the day
        files. Each said (appended to ``said``)."""
        m = manifest.copy()
        stale = 0
        for name, why in broken.items():
            for table in TABLES:
                for day, listed in list(m.days[table].items()):
                    if listed != name:
                        continue
                    del m.days[table][day]
                    for path, known in list(m.files.items()):
                        if isinstance(known, dict) and day in (known.get("days") or ()) and known.get("stamp"):
                            m.files[path] = {**known, "stamp": None}
                            stale += 1
            for kind, listed in list(m.single.items()):
                if listed == name:
                    del m.single[kind]
            said.append(f"usage index file {shown_path(self.root / name)} could not be read ({why}): rebuilt")
        if stale:
            said.append(f"{stale} session file(s) whose rows it held are read again")
        for kind in ROLLUPS:  # built again from the day files, whichever part was lost
            m.single.pop(kind, None)
        return m
