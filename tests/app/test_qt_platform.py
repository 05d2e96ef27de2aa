"""app.qt_platform: before the QApplication, a missing library or display is one message and exit 2.

Most tests build a fake PySide6 tree of tiny ELF files (a ``libqxcb.so`` that needs a Qt library
through ``$ORIGIN``, which needs system libraries) and a "system" folder the test controls, so no
test depends on what this machine has installed. A few read the real PySide6 plugin: the map of
packages must cover every system library it links, and the README must list their packages.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import qt_platform as qp
from tests.conftest import REPO

EM_X86_64 = 62
XCB_SYSTEM = ("libxcb-cursor.so.0", "libxcb-icccm.so.4", "libEGL.so.1", "libfontconfig.so.1", "libc.so.6")
# Always on a Linux system that runs Python at all: the README does not list their packages.
RUNTIME = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2",
           "librt.so.1", "libz.so.1", "libzstd.so.1"}


def elf_bytes(needed: tuple[str, ...] = (), runpath: str | None = None, *, elf_class: int = 2,
              machine: int = EM_X86_64) -> bytes:
    """A minimal little-endian shared object: one PT_LOAD, one PT_DYNAMIC, DT_NEEDED entries."""
    if elf_class == 1:  # only the header: enough to be told apart from a 64-bit library
        ident = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)
        return ident + struct.pack("<HHI", 3, machine, 1) + bytes(36)
    strings = bytearray(b"\0")
    offsets = []
    for name in (*needed, *([runpath] if runpath else [])):
        offsets.append(len(strings))
        strings += name.encode() + b"\0"
    strtab_at = 64 + 2 * 56
    dyn_at = (strtab_at + len(strings) + 7) // 8 * 8
    dyn = [(1, off) for off in offsets[: len(needed)]]
    if runpath:
        dyn.append((29, offsets[-1]))
    dyn += [(5, strtab_at), (10, len(strings)), (0, 0)]
    dyn_raw = b"".join(struct.pack("<qQ", tag, val) for tag, val in dyn)
    total = dyn_at + len(dyn_raw)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 64, 0, 0, 64, 56, 2, 0, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 4, 0, 0, 0, total, total, 0x1000)
    dynamic = struct.pack("<IIQQQQQQ", 2, 6, dyn_at, dyn_at, dyn_at, len(dyn_raw), len(dyn_raw), 8)
    body = header + load + dynamic + bytes(strings)
    return body + bytes(dyn_at - len(body)) + dyn_raw


class FakeQt:
    """tmp/PySide6/Qt/{plugins/platforms,lib} and tmp/system: the ELF files Qt's loader would read."""

    def __init__(self, root: Path) -> None:
        self.platforms = root / "PySide6" / "Qt" / "plugins" / "platforms"
        self.lib = root / "PySide6" / "Qt" / "lib"
        self.system = root / "system"
        for d in (self.platforms, self.lib, self.system):
            d.mkdir(parents=True)
        self.write(self.platforms / "libqxcb.so", ("libQt6XcbQpa.so.6", "libQt6Gui.so.6", "libxcb-cursor.so.0",
                                                    "libc.so.6"), "$ORIGIN/../../lib")
        self.write(self.platforms / "libqwayland.so", ("libQt6Gui.so.6", "libwayland-client.so.0"),
                   "$ORIGIN/../../lib")
        self.write(self.lib / "libQt6XcbQpa.so.6", ("libQt6Gui.so.6", "libxcb-icccm.so.4"), "$ORIGIN")
        self.write(self.lib / "libQt6Gui.so.6", ("libEGL.so.1", "libfontconfig.so.1", "libc.so.6"), "$ORIGIN")
        for name in XCB_SYSTEM:
            self.write(self.system / name, ("libc.so.6",) if name != "libc.so.6" else ())

    @staticmethod
    def write(path: Path, needed: tuple[str, ...] = (), runpath: str | None = None, **kw: int) -> None:
        path.write_bytes(elf_bytes(needed, runpath, **kw))

    def lookup(self, cache: dict[str, list[str]] | None = None) -> qp.LibraryLookup:
        return qp.LibraryLookup([], [str(self.system)], cache=lambda: cache or {})

    def env(self, **extra: str) -> dict[str, str]:
        return {"QT_QPA_PLATFORM_PLUGIN_PATH": str(self.platforms), **extra}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeQt:
    monkeypatch.setattr(qp, "ldd_missing", lambda plugin: None)  # ldd would read this machine's libraries
    return FakeQt(tmp_path)


@pytest.fixture
def x_display() -> Iterator[str]:
    """A listening X socket in the abstract namespace (nothing on disk): DISPLAY=:N answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        for number in range(47000 + os.getpid() % 1000, 49000):
            try:
                server.bind(f"\0/tmp/.X11-unix/X{number}")
                break
            except OSError:
                continue
        server.listen(8)
        yield f":{number}"


# --------------------------------------------------------------------------- which platform Qt tries


@pytest.mark.parametrize(("env", "args", "expected"), [
    ({}, [], ["xcb"]),
    ({"DISPLAY": ":0"}, [], ["xcb"]),
    ({"XDG_SESSION_TYPE": "wayland"}, [], ["wayland", "xcb"]),
    ({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, [], ["wayland", "xcb"]),
    ({"QT_QPA_PLATFORM": "offscreen"}, [], ["offscreen"]),
    ({"QT_QPA_PLATFORM": "wayland;xcb", "WAYLAND_DISPLAY": "w"}, [], ["wayland", "xcb"]),
    ({"QT_QPA_PLATFORM": "vnc:size=800x600"}, [], ["vnc"]),
    ({"QT_QPA_PLATFORM": "xcb"}, ["-platform", "minimal"], ["minimal"]),
])
def test_the_platforms_qt_tries_in_its_order(env: dict[str, str], args: list[str], expected: list[str]) -> None:
    assert qp.platform_candidates(env, args) == expected


@pytest.mark.parametrize("platform", ["offscreen", "minimal", "vnc", "eglfs", "linuxfb"])
def test_offscreen_and_the_like_are_not_checked(platform: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("nothing is looked at for " + platform)

    monkeypatch.setattr(qp, "check_platform", boom)
    monkeypatch.setattr(qp, "plugin_dirs", boom)
    assert qp.platform_problem(env={"QT_QPA_PLATFORM": platform}) is None
    assert qp.platform_problem(["-platform", platform], env={"QT_QPA_PLATFORM": "xcb"}) is None


def test_a_plugin_file_gone_from_pyside6_is_reported(fake: FakeQt, x_display: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (fake.platforms / "libqxcb.so").unlink()
    monkeypatch.setattr(qp, "plugin_dirs", lambda env: [fake.platforms])
    message = qp.platform_problem(env={"DISPLAY": x_display}, lookup=fake.lookup())
    assert message is not None and f'The "xcb" plugin file is not in {fake.platforms}: reinstall' in message
    monkeypatch.setattr(qp, "plugin_dirs", lambda env: [])  # no PySide6: its own import error speaks
    assert qp.platform_problem(env={"DISPLAY": x_display}, lookup=fake.lookup()) is None


# --------------------------------------------------------------------------- the libraries


def test_all_present_is_ok(fake: FakeQt, x_display: str) -> None:
    assert qp.missing_libraries(fake.platforms / "libqxcb.so", fake.lookup()) == []
    assert qp.platform_problem(env=fake.env(QT_QPA_PLATFORM="xcb", DISPLAY=x_display), lookup=fake.lookup()) is None
    assert qp.platform_problem(env=fake.env(DISPLAY=x_display), lookup=fake.lookup()) is None  # Qt's default


def test_missing_libxcb_cursor_is_named_with_its_packages_and_commands(fake: FakeQt, x_display: str) -> None:
    (fake.system / "libxcb-cursor.so.0").unlink()
    assert qp.missing_libraries(fake.platforms / "libqxcb.so", fake.lookup()) == ["libxcb-cursor.so.0"]
    message = qp.platform_problem(env=fake.env(DISPLAY=x_display), lookup=fake.lookup())
    assert message is not None
    assert 'platform plugin "xcb" cannot load' in message
    assert "libxcb-cursor.so.0  (Debian/Ubuntu: libxcb-cursor0, Fedora: xcb-util-cursor)" in message
    assert "sudo apt install libxcb-cursor0\n" in message
    assert "sudo dnf install xcb-util-cursor\n" in message
    assert "DISPLAY" not in message  # the display is fine


def test_libraries_missing_behind_the_qt_libraries_are_found_too(fake: FakeQt) -> None:
    for name in ("libxcb-icccm.so.4", "libEGL.so.1", "libfontconfig.so.1"):
        (fake.system / name).unlink()
    missing = qp.missing_libraries(fake.platforms / "libqxcb.so", fake.lookup())
    assert missing == ["libxcb-icccm.so.4", "libEGL.so.1", "libfontconfig.so.1"]  # breadth-first, like ld.so
    commands = qp.install_commands(missing)
    assert commands[0].endswith("sudo apt install libxcb-icccm4 libegl1 libfontconfig1")
    assert commands[1].endswith("sudo dnf install xcb-util-wm libglvnd-egl fontconfig")


def test_an_unknown_library_is_named_by_its_soname(fake: FakeQt, x_display: str) -> None:
    fake.write(fake.lib / "libQt6Gui.so.6", ("libEGL.so.1", "libweird-thing.so.7"), "$ORIGIN")
    message = qp.platform_problem(env=fake.env(DISPLAY=x_display), lookup=fake.lookup())
    assert message is not None
    assert "libweird-thing.so.7  (find its package: apt-file search libweird-thing.so.7" in message
    assert "sudo apt install" not in message  # nothing known to install


def test_a_library_of_the_wrong_kind_does_not_count(fake: FakeQt) -> None:
    fake.write(fake.system / "libxcb-cursor.so.0", elf_class=1)  # a 32-bit copy
    assert qp.missing_libraries(fake.platforms / "libqxcb.so", fake.lookup()) == ["libxcb-cursor.so.0"]
    fake.write(fake.system / "libxcb-cursor.so.0", machine=183)  # an aarch64 one
    assert qp.missing_libraries(fake.platforms / "libqxcb.so", fake.lookup()) == ["libxcb-cursor.so.0"]


def test_ld_library_path_and_the_ld_cache_are_searched(fake: FakeQt, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (fake.system / "libxcb-cursor.so.0").rename(elsewhere / "libxcb-cursor.so.0")
    plugin = fake.platforms / "libqxcb.so"
    assert qp.missing_libraries(plugin, fake.lookup()) == ["libxcb-cursor.so.0"]
    cached = fake.lookup({"libxcb-cursor.so.0": [str(elsewhere / "libxcb-cursor.so.0")]})
    assert qp.missing_libraries(plugin, cached) == []
    in_path = qp.LibraryLookup([str(elsewhere)], [str(fake.system)], cache=dict)
    assert qp.missing_libraries(plugin, in_path) == []


def test_the_ld_cache_is_read_only_when_the_folders_do_not_have_a_library(fake: FakeQt) -> None:
    def no_cache() -> dict[str, list[str]]:
        raise AssertionError("the cache was read although every library was in the folders")

    lookup = qp.LibraryLookup([], [str(fake.system)], cache=no_cache)
    assert qp.missing_libraries(fake.platforms / "libqxcb.so", lookup) == []


def test_ldd_has_the_last_word_on_a_gap(fake: FakeQt, x_display: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (fake.system / "libxcb-cursor.so.0").unlink()
    env = fake.env(DISPLAY=x_display)
    monkeypatch.setattr(qp, "ldd_missing", lambda plugin: [])  # the loader finds it after all
    assert qp.platform_problem(env=env, lookup=fake.lookup()) is None
    monkeypatch.setattr(qp, "ldd_missing", lambda plugin: ["libxcb-cursor.so.0", "libxcb-xkb.so.1"])
    message = qp.platform_problem(env=env, lookup=fake.lookup())
    assert message is not None and "sudo apt install libxcb-cursor0 libxcb-xkb1" in message


def test_ldd_output_is_parsed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ldd = tmp_path / "ldd"
    ldd.write_text("#!/bin/sh\nprintf '\\tlinux-vdso.so.1 (0x1)\\n\\tlibxcb-icccm.so.4 => not found\\n"
                   "\\tlibX11.so.6 => /usr/lib/libX11.so.6 (0x2)\\n\\tlibxcb-icccm.so.4 => not found\\n'\n")
    ldd.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert qp.ldd_missing(Path("/any")) == ["libxcb-icccm.so.4"]


# --------------------------------------------------------------------------- the display


def test_no_display_is_one_clear_message(fake: FakeQt) -> None:
    message = qp.platform_problem(env=fake.env(QT_QPA_PLATFORM="xcb"), lookup=fake.lookup())
    assert message is not None
    assert 'No display for "xcb": DISPLAY is not set.' in message
    assert "desktop session" in message and "QT_QPA_PLATFORM=offscreen" in message
    assert "screenshots and tests only" in message
    assert "missing" not in message  # the libraries are all there


def test_a_display_nobody_answers_on(fake: FakeQt, x_display: str) -> None:
    silent = f":{int(x_display[1:]) + 1}"
    message = qp.platform_problem(env=fake.env(DISPLAY=silent), lookup=fake.lookup())
    assert message is not None and f"no X server answers on DISPLAY={silent}" in message


def test_wayland_falls_back_to_xcb_like_qt(fake: FakeQt, x_display: str, tmp_path: Path) -> None:
    env = fake.env(XDG_SESSION_TYPE="wayland", XDG_RUNTIME_DIR=str(tmp_path), DISPLAY=x_display)
    assert qp.platform_problem(env=env, lookup=fake.lookup()) is None  # no compositor, but X is there
    env.pop("DISPLAY")
    message = qp.platform_problem(env=env, lookup=fake.lookup())
    assert message is not None and 'platform plugins "wayland", "xcb" cannot load' in message
    assert f"no Wayland compositor at {tmp_path / 'wayland-0'}" in message
    (tmp_path / "wayland-0").touch()
    assert "libwayland-client.so.0" in (qp.platform_problem(env=env, lookup=fake.lookup()) or "")
    fake.write(fake.system / "libwayland-client.so.0")
    assert qp.platform_problem(env=env, lookup=fake.lookup()) is None


# --------------------------------------------------------------------------- the app exits 2, never aborts


def run_ctxbench(env: dict[str, str], prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(prelude) + "import sys\nfrom app.cli import main\nsys.exit(main([]))\n"
    base = {k: v for k, v in os.environ.items()
            if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**base, **env}, capture_output=True,
                          text=True, timeout=60)


def test_ctxbench_with_libxcb_cursor_missing_exits_2(fake: FakeQt, x_display: str) -> None:
    (fake.system / "libxcb-cursor.so.0").unlink()
    proc = run_ctxbench(fake.env(QT_QPA_PLATFORM="xcb", DISPLAY=x_display), f"""
        import app.qt_platform as qp
        qp.ldd_missing = lambda plugin: None
        qp.LibraryLookup.system = classmethod(lambda cls, env: cls([], [{str(fake.system)!r}], cache=dict))
    """)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)  # not -6 (SIGABRT) nor a core dump
    assert proc.stderr.count("the desktop app cannot start") == 1, proc.stderr
    assert "libxcb-cursor0" in proc.stderr and "xcb-util-cursor" in proc.stderr
    assert "sudo apt install libxcb-cursor0" in proc.stderr and "sudo dnf install xcb-util-cursor" in proc.stderr
    assert "Aborted" not in proc.stderr and "qt.qpa.plugin" not in proc.stderr


def test_ctxbench_without_a_display_exits_2() -> None:
    proc = run_ctxbench({"QT_QPA_PLATFORM": "xcb"})  # this machine's real PySide6 plugin and libraries
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("the desktop app cannot start") == 1, proc.stderr
    assert "DISPLAY is not set" in proc.stderr and "QT_QPA_PLATFORM=offscreen" in proc.stderr
    assert "could not connect to display" not in proc.stderr and "Aborted" not in proc.stderr


def test_the_screenshot_tool_checks_too_when_told_to_use_a_display(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    proc = subprocess.run([sys.executable, "-m", "app.screenshot", str(tmp_path / "shot.png")], cwd=REPO,
                          env={**base, "QT_QPA_PLATFORM": "xcb"}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("python -m app.screenshot: the desktop app cannot start")
    assert "DISPLAY is not set" in proc.stderr and not (tmp_path / "shot.png").exists()


def test_nothing_is_checked_once_a_qapplication_exists(qapp: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    monkeypatch.delenv("DISPLAY", raising=False)
    assert qp.ensure_platform() == 0  # this process's (offscreen) application is already up


# --------------------------------------------------------------------------- the real PySide6 plugins


def real_plugin(name: str) -> Path:
    for d in qp.plugin_dirs({}):
        if (d / name).is_file():
            return d / name
    pytest.skip(f"no {name} in PySide6")


def system_sonames(plugin: Path) -> set[str]:
    """Every library ``plugin`` and the wheel's Qt libraries it links need from the system."""
    qt_lib = plugin.parents[2] / "lib"
    seen: set[str] = set()
    queue = [plugin]
    wanted: set[str] = set()
    while queue:
        elf = qp.read_elf(queue.pop())
        assert elf is not None
        for soname in elf.needed:
            if (qt_lib / soname).is_file():
                if soname not in seen:
                    seen.add(soname)
                    queue.append(qt_lib / soname)
            elif not soname.startswith("ld-linux"):
                wanted.add(soname)
    return wanted


def test_the_package_map_covers_what_the_real_plugins_link() -> None:
    needed = system_sonames(real_plugin("libqxcb.so")) | system_sonames(real_plugin("libqwayland.so"))
    assert {"libxcb-cursor.so.0", "libxcb-icccm.so.4", "libEGL.so.1", "libfontconfig.so.1"} <= needed
    assert needed - RUNTIME <= set(qp.PACKAGES), sorted(needed - RUNTIME - set(qp.PACKAGES))


def test_the_readme_lists_the_packages_beside_the_two_commands() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    apt = re.search(r"^sudo apt install (.+)$", section, re.M)
    dnf = re.search(r"^sudo dnf install (.+)$", section, re.M)
    assert apt and dnf, "one apt line and one dnf line in 'The two commands'"
    needed = (system_sonames(real_plugin("libqxcb.so")) | system_sonames(real_plugin("libqwayland.so"))) - RUNTIME
    assert {qp.PACKAGES[s][0] for s in needed} <= set(apt.group(1).split())
    assert {qp.PACKAGES[s][1] for s in needed} <= set(dnf.group(1).split())


@pytest.mark.skipif(not shutil.which("ldd"), reason="no ldd")
def test_the_resolver_agrees_with_the_dynamic_loader_on_the_real_plugins() -> None:
    for name in ("libqxcb.so", "libqwayland.so"):
        plugin = real_plugin(name)
        ours = qp.missing_libraries(plugin, qp.LibraryLookup.system(dict(os.environ)))
        assert set(ours) == set(qp.ldd_missing(plugin) or []), name


def test_the_real_ld_cache_is_read() -> None:
    if not Path("/etc/ld.so.cache").is_file():
        pytest.skip("no /etc/ld.so.cache")
    cache = qp.read_ld_cache()
    assert any(Path(p).is_file() for p in cache.get("libc.so.6", [])), sorted(cache)[:5]
