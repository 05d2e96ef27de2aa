"""Before the QApplication exists: can Qt's platform plugin load here? If not, say why and exit 2.

On Linux the PySide6 wheel brings Qt but not the system libraries Qt's ``xcb`` (X11) and
``wayland`` plugins link (``libxcb-cursor.so.0``, ``libxcb-icccm.so.4``, ``libEGL.so.1``, …).
Without one of them, or without a display, ``QApplication()`` ends in ``qFatal`` — "no Qt platform
plugin could be initialized" and ``Aborted`` (a core dump). :func:`platform_problem` sees this
first and returns one message naming the missing libraries, the Debian/Ubuntu and Fedora packages
that provide them and the commands that install them; the callers print it and exit with 2.

How, without importing QtGui (and fast: about 3 ms when everything is there, nothing for offscreen):

* the platforms Qt would try, in Qt's order: ``-platform`` / ``QT_QPA_PLATFORM`` when given (a
  ``;`` list), else ``wayland`` in a Wayland session, then ``xcb``. Qt takes the first that loads.
  Only ``xcb`` and ``wayland*`` are checked; ``offscreen``, ``minimal``, ``vnc``, … are left to Qt.
* the plugin file in PySide6's ``Qt/plugins/platforms`` (or ``QT_QPA_PLATFORM_PLUGIN_PATH``);
* its ``DT_NEEDED`` libraries, read from the ELF files and resolved like ld.so does (RPATH,
  ``LD_LIBRARY_PATH``, RUNPATH with ``$ORIGIN``, the system directories, ``/etc/ld.so.cache``),
  recursively through the wheel's Qt libraries (a system library's own dependencies come with
  its package);
* only when something looks missing, ``ldd`` (the dynamic loader itself) confirms and gives the
  final list, so a gap in this resolver can never stop a working app;
* a display: ``DISPLAY`` for xcb (and, for a local display, its X socket), a Wayland socket for
  wayland.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import struct
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import NamedTuple

EXIT_CODE = 2

# soname -> (Debian/Ubuntu package, Fedora package). Every system library PySide6's xcb and
# wayland plugins link, directly or through the Qt libraries (checked against the installed wheel
# by tests/app/test_qt_platform.py), and a few that other Qt builds link.
PACKAGES: dict[str, tuple[str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb"),
    "libxcb-xinerama.so.0": ("libxcb-xinerama0", "libxcb"),
    "libxcb-xinput.so.0": ("libxcb-xinput0", "libxcb"),
    "libxcb-glx.so.0": ("libxcb-glx0", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libXau.so.6": ("libxau6", "libXau"),
    "libXdmcp.so.6": ("libxdmcp6", "libXdmcp"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libGLX.so.0": ("libglx0", "libglvnd-glx"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl"),
    "libGLdispatch.so.0": ("libglvnd0", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype"),
    "libpng16.so.16": ("libpng16-16", "libpng"),
    "libexpat.so.1": ("libexpat1", "expat"),
    "libbrotlidec.so.1": ("libbrotli1", "libbrotli"),
    "libbrotlicommon.so.1": ("libbrotli1", "libbrotli"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libpcre2-8.so.0": ("libpcre2-8-0", "pcre2"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs"),
    "libsystemd.so.0": ("libsystemd0", "systemd-libs"),
    "libwayland-client.so.0": ("libwayland-client0", "libwayland-client"),
    "libwayland-cursor.so.0": ("libwayland-cursor0", "libwayland-cursor"),
    "libwayland-egl.so.1": ("libwayland-egl1", "libwayland-egl"),
    "libffi.so.8": ("libffi8", "libffi"),
    "libzstd.so.1": ("libzstd1", "libzstd"),
    "libz.so.1": ("zlib1g", "zlib"),
    "libbsd.so.0": ("libbsd0", "libbsd"),
    "libmd.so.0": ("libmd0", "libmd"),
    "libstdc++.so.6": ("libstdc++6", "libstdc++"),
    "libgcc_s.so.1": ("libgcc-s1", "libgcc"),
}
# The platforms this module checks, and the plugin file of each (the newest name first).
PLUGIN_FILES: dict[str, tuple[str, ...]] = {
    "xcb": ("libqxcb.so",),
    "wayland": ("libqwayland.so", "libqwayland-generic.so"),
    "wayland-egl": ("libqwayland.so", "libqwayland-egl.so"),
    "wayland-brcm": ("libqwayland.so", "libqwayland-brcm.so"),
}
_DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_RPATH, _DT_RUNPATH = 1, 5, 10, 15, 29


class Elf(NamedTuple):  # NamedTuples, not dataclasses: this module is imported on every start
    """What the dynamic loader reads from a shared object: its kind and what it needs."""

    path: str
    kind: tuple[int, int, int]  # (ELF class, byte order, machine): a library must match to be used
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()


def read_elf(path: str | os.PathLike[str], *, dynamic: bool = True) -> Elf | None:
    """The ELF header (and, with ``dynamic``, the dynamic section) of ``path``; None if not ELF."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        head = os.pread(fd, 64, 0)
        if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
            return None
        end = "<" if head[5] == 1 else ">"
        kind = (head[4], head[5], struct.unpack_from(end + "H", head, 18)[0])
        if not dynamic:
            return Elf(os.fspath(path), kind)
        return _read_dynamic(fd, os.fspath(path), kind, head)
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def _read_dynamic(fd: int, path: str, kind: tuple[int, int, int], head: bytes) -> Elf:
    end = "<" if kind[1] == 1 else ">"
    if kind[0] == 2:  # 64-bit: (type, flags, offset, vaddr, paddr, filesz, …)
        phoff, (phentsize, phnum) = struct.unpack_from(end + "Q", head, 32)[0], struct.unpack_from(end + "HH", head, 54)
        ph_fmt, fields, dyn_fmt = end + "IIQQQQ", (0, 2, 3, 5), end + "qQ"
    else:  # 32-bit: (type, offset, vaddr, paddr, filesz, …)
        phoff, (phentsize, phnum) = struct.unpack_from(end + "I", head, 28)[0], struct.unpack_from(end + "HH", head, 42)
        ph_fmt, fields, dyn_fmt = end + "IIIII", (0, 1, 2, 4), end + "iI"
    table = os.pread(fd, phentsize * phnum, phoff)
    loads: list[tuple[int, int, int]] = []  # (vaddr, filesz, offset)
    dyn_at = dyn_size = 0
    for i in range(phnum):
        p = struct.unpack_from(ph_fmt, table, i * phentsize)
        p_type, offset, vaddr, filesz = (p[f] for f in fields)
        if p_type == 1:  # PT_LOAD
            loads.append((vaddr, filesz, offset))
        elif p_type == 2:  # PT_DYNAMIC
            dyn_at, dyn_size = offset, filesz
    raw = os.pread(fd, dyn_size, dyn_at)
    tags: list[tuple[int, int]] = []
    for tag, val in struct.iter_unpack(dyn_fmt, raw[: len(raw) - len(raw) % struct.calcsize(dyn_fmt)]):
        if tag == 0:  # DT_NULL
            break
        tags.append((tag, val))
    values = dict(tags)
    at = values.get(_DT_STRTAB, -1)
    strtab = next((off + at - va for va, size, off in loads if va <= at < va + size), None)
    if strtab is None:
        return Elf(path, kind)
    limit = values.get(_DT_STRSZ, 0)

    def text(at: int) -> str:  # small reads: the table also holds every symbol name (MBs for Qt)
        chunk = b""
        while b"\0" not in chunk and at + len(chunk) < limit:
            chunk += os.pread(fd, min(256, limit - at - len(chunk)), strtab + at + len(chunk))
        return chunk.split(b"\0", 1)[0].decode()

    def paths(tag: int) -> tuple[str, ...]:
        return tuple(d for t, v in tags if t == tag for d in text(v).split(":") if d)

    needed = tuple(text(v) for t, v in tags if t == _DT_NEEDED)
    return Elf(path, kind, needed, paths(_DT_RPATH), paths(_DT_RUNPATH))


def read_ld_cache(path: Path = Path("/etc/ld.so.cache")) -> dict[str, list[str]]:
    """soname -> paths, from glibc's ld.so.cache (the "glibc-ld.so.cache1.1" format); {} if unreadable."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    magic = b"glibc-ld.so.cache1.1"
    base = data.find(magic)  # 0, or after the entries of the old format in a combined file
    if base < 0 or len(data) < base + 48:
        return {}
    nlibs = struct.unpack_from("=I", data, base + 20)[0]
    found: dict[str, list[str]] = {}

    def text(at: int) -> str:
        return data[base + at: data.index(b"\0", base + at)].decode(errors="replace")

    try:
        for _flags, key, value, _os, _hwcap in struct.iter_unpack("=iIIIQ", data[base + 48: base + 48 + 24 * nlibs]):
            found.setdefault(text(key), []).append(text(value))
    except (ValueError, struct.error):
        return found
    return found


def _system_dirs() -> list[str]:
    arch = getattr(sys.implementation, "_multiarch", None) or f"{os.uname().machine}-linux-gnu"
    return [f"/lib/{arch}", f"/usr/lib/{arch}", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]


class LibraryLookup:
    """Finds a soname the way ld.so does; a test builds one over its own folders."""

    def __init__(self, ld_library_path: Sequence[str], system_dirs: Sequence[str],
                 cache: Callable[[], Mapping[str, Sequence[str]]] = read_ld_cache) -> None:
        self.ld_library_path = list(ld_library_path)
        self.system_dirs = list(system_dirs)
        self.cache = cache  # read only when a library is in none of the folders
        self._cache: Mapping[str, Sequence[str]] | None = None

    @classmethod
    def system(cls, env: Mapping[str, str]) -> LibraryLookup:
        return cls([d for d in env.get("LD_LIBRARY_PATH", "").replace(";", ":").split(":") if d], _system_dirs())

    def find(self, soname: str, by: Elf) -> tuple[str, bool] | None:
        """Where ``by`` gets ``soname`` from, and whether from the system (else from its own paths).

        A candidate counts only if its ELF class, byte order and machine are those of ``by``.
        """
        origin = os.path.dirname(by.path)
        own = [*([] if by.runpath else by.rpath), *self.ld_library_path, *by.runpath]
        own_paths = (os.path.join(d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin), soname) for d in own)
        system_paths = chain((os.path.join(d, soname) for d in self.system_dirs), self._cached(soname))
        for is_system, paths in ((False, own_paths), (True, system_paths)):
            for path in paths:
                head = read_elf(path, dynamic=False)
                if head is not None and head.kind == by.kind:
                    return path, is_system
        return None

    def _cached(self, soname: str) -> Iterator[str]:
        if self._cache is None:
            self._cache = self.cache()
        yield from self._cache.get(soname, ())


def missing_libraries(plugin: Path, lookup: LibraryLookup) -> list[str]:
    """The sonames the loader would not find for ``plugin``, in the order it would miss them.

    Followed recursively through the libraries found on the objects' own paths (RUNPATH, RPATH,
    LD_LIBRARY_PATH: the Qt libraries of the wheel); a system library is trusted to come with its
    dependencies (its package brings them). ldd, on the failure path, reports the whole tree.
    """
    root = read_elf(plugin)
    if root is None:
        return []
    found: set[str] = {plugin.name}
    missing: list[str] = []
    queue = [root]
    while queue:
        elf = queue.pop(0)
        for soname in elf.needed:
            if soname in found or soname in missing:
                continue  # ld.so reuses a library already loaded under that soname
            where = lookup.find(soname, elf)
            if where is None:
                missing.append(soname)
                continue
            found.add(soname)
            lib = None if where[1] else read_elf(where[0])
            if lib is not None:
                queue.append(lib)
    return missing


def ldd_missing(plugin: Path) -> list[str] | None:
    """What the dynamic loader itself reports as "not found" for ``plugin``; None if ldd cannot tell."""
    import shutil
    import subprocess

    ldd = shutil.which("ldd")
    if ldd is None:
        return None
    try:
        out = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 and "not found" not in out.stdout:
        return None
    missing: list[str] = []
    for line in out.stdout.splitlines():
        name, sep, where = line.strip().partition("=>")
        if sep and where.strip() == "not found" and name.strip() not in missing:
            missing.append(name.strip())
    return missing


def loader_missing(plugin: Path, lookup: LibraryLookup) -> list[str]:
    """The missing libraries: this module's resolver, confirmed by ldd when it finds a gap."""
    missing = missing_libraries(plugin, lookup)
    if not missing:
        return []
    confirmed = ldd_missing(plugin)
    return missing if confirmed is None else confirmed


# --------------------------------------------------------------------------- which platform, which display


def platform_candidates(env: Mapping[str, str], qt_args: Sequence[str] = ()) -> list[str]:
    """The platform plugins Qt tries, in order (it takes the first that loads)."""
    chosen = env.get("QT_QPA_PLATFORM", "")
    args = list(qt_args)
    for i, arg in enumerate(args):
        if arg in ("-platform", "--platform") and i + 1 < len(args):
            chosen = args[i + 1]
        elif arg.startswith(("-platform=", "--platform=")):
            chosen = arg.split("=", 1)[1]
    if chosen.strip():
        return [name.split(":", 1)[0].strip() for name in chosen.split(";") if name.strip()]
    wayland = "WAYLAND_DISPLAY" in env or env.get("XDG_SESSION_TYPE") == "wayland"
    return ["wayland", "xcb"] if wayland else ["xcb"]


def plugin_dirs(env: Mapping[str, str]) -> list[Path]:
    """Where Qt looks for platform plugins: QT_QPA_PLATFORM_PLUGIN_PATH, then PySide6's own."""
    dirs = [Path(d) for d in env.get("QT_QPA_PLATFORM_PLUGIN_PATH", "").split(":") if d]
    spec = importlib.util.find_spec("PySide6")  # finds the package without importing it
    for location in (spec.submodule_search_locations or []) if spec else []:
        dirs.append(Path(location) / "Qt" / "plugins" / "platforms")
    return dirs


def display_problem(platform: str, env: Mapping[str, str], qt_args: Sequence[str] = ()) -> str | None:
    """Why ``platform`` has no display to talk to, or None when it has one (as far as we can tell)."""
    if platform == "xcb":
        args = list(qt_args)
        given = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-display", "--display")), None)
        display = given or env.get("DISPLAY", "")
        if not display:
            return "DISPLAY is not set"
        host, _, rest = display.rpartition(":")
        number = rest.split(".", 1)[0]
        if host not in ("", "unix") or not number.isdigit():
            return None  # a TCP or launchd display: Qt will tell
        sock = f"/tmp/.X11-unix/X{number}"
        for address in ("\0" + sock, sock):  # libxcb tries the abstract socket, then the file
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(1.0)
                try:
                    probe.connect(address)
                    return None
                except OSError:
                    continue
        return f"no X server answers on DISPLAY={display} ({sock})"
    if env.get("WAYLAND_SOCKET"):
        return None
    name = env.get("WAYLAND_DISPLAY") or "wayland-0"
    path = Path(name) if name.startswith("/") else Path(env.get("XDG_RUNTIME_DIR", "/nonexistent")) / name
    return None if path.exists() else f"no Wayland compositor at {path}"


# --------------------------------------------------------------------------- the check


class Problem(NamedTuple):
    """Why one platform plugin cannot start."""

    platform: str
    missing: tuple[str, ...] = ()
    no_display: str | None = None
    no_plugin: tuple[Path, ...] = ()


def check_platform(platform: str, env: Mapping[str, str], qt_args: Sequence[str],
                   lookup: LibraryLookup) -> Problem | None:
    """None when Qt can start ``platform``; else what stops it."""
    files = PLUGIN_FILES[platform]
    dirs = plugin_dirs(env)
    if not dirs:
        return None  # no PySide6 at all: its import says so
    plugin = next((d / f for f in files for d in dirs if (d / f).is_file()), None)
    if plugin is None:
        return Problem(platform, no_plugin=tuple(dirs))
    no_display = display_problem(platform, env, qt_args)
    missing = tuple(loader_missing(plugin, lookup))
    if no_display is None and not missing:
        return None
    return Problem(platform, missing, no_display)


def platform_problem(qt_args: Sequence[str] = (), env: Mapping[str, str] | None = None, *,
                     prog: str = "ctxbench", lookup: LibraryLookup | None = None) -> str | None:
    """The message to print instead of letting Qt abort, or None when Qt's platform can load."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux"):
        return None
    problems: list[Problem] = []
    lookup = lookup or LibraryLookup.system(env)
    for platform in platform_candidates(env, qt_args):
        if platform not in PLUGIN_FILES:
            return None  # offscreen, minimal, vnc, eglfs, …: nothing to check, Qt speaks for itself
        problem = check_platform(platform, env, qt_args, lookup)
        if problem is None:
            return None
        problems.append(problem)
    return describe(problems, prog) if problems else None


def _app_exists() -> bool:
    gui = sys.modules.get("PySide6.QtGui")  # already imported by someone else: ask it, else no app
    return gui is not None and gui.QGuiApplication.instance() is not None


def ensure_platform(qt_args: Sequence[str] = (), *, prog: str = "ctxbench") -> int:
    """0 when the GUI can start; else prints the reason on stderr and returns the exit code (2)."""
    message = None if _app_exists() else platform_problem(qt_args, prog=prog)
    if message is None:
        return 0
    print(message, file=sys.stderr, flush=True)
    return EXIT_CODE


# --------------------------------------------------------------------------- the message


def install_commands(sonames: Iterable[str]) -> list[str]:
    """The apt and dnf lines that install the packages providing ``sonames`` (known ones only)."""
    known = [PACKAGES[s] for s in sonames if s in PACKAGES]
    if not known:
        return []
    debian = " ".join(dict.fromkeys(d for d, _ in known))
    fedora = " ".join(dict.fromkeys(f for _, f in known))
    return [f"Debian/Ubuntu:  sudo apt install {debian}", f"Fedora:         sudo dnf install {fedora}"]


def describe(problems: Sequence[Problem], prog: str = "ctxbench") -> str:
    """One message for all the platforms Qt would have tried."""
    names = ", ".join(f'"{p.platform}"' for p in problems)
    plugins = "plugins" if len(problems) > 1 else "plugin"
    lines = [f"{prog}: the desktop app cannot start: Qt's platform {plugins} {names} cannot load here."]
    missing = list(dict.fromkeys(s for p in problems for s in p.missing))
    for p in problems:
        if p.no_plugin:
            lines.append(f'  The "{p.platform}" plugin file is not in {", ".join(map(str, p.no_plugin))}: '
                         "reinstall PySide6 (make clean && make run).")
        if p.no_display:
            lines.append(f'  No display for "{p.platform}": {p.no_display}.')
    if missing:
        lines.append("  These system libraries are missing:")
        for soname in missing:
            if soname in PACKAGES:
                debian, fedora = PACKAGES[soname]
                lines.append(f"    {soname}  (Debian/Ubuntu: {debian}, Fedora: {fedora})")
            else:
                lines.append(f"    {soname}  (find its package: apt-file search {soname}; "
                             f"dnf provides '*/{soname}')")
        commands = install_commands(missing)
        if commands:
            lines.append("  Install them, then start again:")
            lines.extend(f"    {c}" for c in commands)
    if any(p.no_display for p in problems):
        lines.append("  Start it from a desktop session (or over ssh -X). QT_QPA_PLATFORM=offscreen runs it "
                     "without a display, invisibly: for screenshots and tests only.")
    if prog == "ctxbench":
        lines.append(f"  Without a window, {prog} run, inspect, compact and import work as they are.")
    return "\n".join(lines)
