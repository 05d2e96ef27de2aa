"""Save a PNG of the main window on the sample session: ``python -m app.screenshot OUT.png``.

The app runs offscreen (``QT_QPA_PLATFORM=offscreen`` unless set) with its own temporary data and
config folders, so neither the user's sessions nor their settings are touched: the sample session
shipped in ``resources/sample_session/`` (made by ``resources/make_sample_session.py``) is copied
there and opened, the offloaded log is opened in the inspector, and the window (1400×900 unless
``--size WxH``) is grabbed once the chart has drawn. ``make screenshot`` writes ``docs/screenshot.png``.

``--open FILE`` imports an agent's session file (Claude Code, Codex, … — whatever ``ctxbench import``
reads) and shows it instead of the sample; ``--cache-view`` switches the timeline to its cache view;
``--source FILE`` shows the file as a read-only source view (Sources → Open) with the Sources tab of
the sessions panel listing the folder it is in (as ``source_dirs``);
``--tab NAME`` raises that inspector tab (``tools`` waits for its figures; ``compactions`` selects the
first compaction); ``--diff A B`` computes the context diff from call A to call B and also writes the
diff window to ``OUT-diff.png``; ``--usage DIR`` indexes the agent session files in DIR (as ``source_dirs``,
nothing of this machine) and shows the Usage view over all time (a window of its own: also written to
``OUT-usage.png``).

``--first-frame`` also writes ``OUT-first.png``: the window as first painted, before the session has
opened (what a launch shows in its first second). ``--sources DIR`` starts on a new, empty session
with the agent session files in DIR scanned (as ``source_dirs``, nothing of this machine), as a first
launch does: the pointer to the Sources tab shows. ``--menu NAME`` also writes ``OUT-menu.png``: that
menu of the menu bar, open. ``--help-dialog about|shortcuts`` also writes ``OUT-help.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.workbench.views import SessionView

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "resources" / "sample_session"
SAMPLE_SETTINGS = """model = "openai/gpt-4o-mini"
context_window = 8192
max_tokens = 1024
reserve_ratio = 0.1
offload_recent_bytes = 8000
offload_old_bytes = 2000
auto_compact = false
theme = "{theme}"
"""


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m app.screenshot", description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="PNG file to write")
    p.add_argument("--size", default="1400x900", help="window size, WxH (default 1400x900)")
    p.add_argument("--theme", choices=("light", "dark"), default="light")
    p.add_argument("--open", type=Path, metavar="FILE", help="import this agent session file and show it")
    p.add_argument("--cache-view", action="store_true", help="show the timeline's cache view")
    p.add_argument("--find", metavar="TEXT", help="open the chat's find bar on TEXT (Ctrl+F) at its first hit")
    p.add_argument("--source", type=Path, metavar="FILE", help="show this agent session file as a read-only view")
    p.add_argument("--tab", choices=("files", "archive", "summary", "compactions", "tools"),
                   help="raise this inspector tab")
    p.add_argument("--usage", type=Path, metavar="DIR",
                   help="show the Usage dock on the agent session files in DIR (all time)")
    p.add_argument("--first-frame", action="store_true",
                   help="also write OUT-first.png: the window before the session has opened")
    p.add_argument("--sources", type=Path, metavar="DIR",
                   help="start on a new empty session with the agent session files in DIR scanned")
    p.add_argument("--menu", metavar="NAME", help="also write OUT-menu.png: this menu (File, Edit, View, Help) open")
    p.add_argument("--help-dialog", choices=("about", "shortcuts"), help="also write OUT-help.png: that dialog")
    p.add_argument("--record-dialog", action="store_true",
                   help="also write OUT-record.png: File → Record an agent…, the proxy started on a free port "
                        "(upstream 127.0.0.1:9, nothing there) and one request sent through it")
    p.add_argument("--diff", type=int, nargs=2, metavar=("A", "B"),
                   help="show the context diff from call A to call B (also written to OUT-diff.png)")
    args = p.parse_args(argv)
    try:
        w, h = (int(x) for x in args.size.lower().split("x"))
    except ValueError:
        p.error(f"--size must look like 1400x900, got {args.size!r}")
    args.width, args.height = w, h
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if not (SAMPLE / "history.jsonl").is_file():
        print(f"screenshot: the sample session is missing: {SAMPLE}", file=sys.stderr)
        return 1
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from app.qt_platform import ensure_platform

    if code := ensure_platform(prog="python -m app.screenshot"):  # only when told to use a real display
        return code
    os.environ["QT_API"] = "pyside6"
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory(prefix="ctxbench-screenshot-") as tmp:
        home = Path(tmp)
        os.environ["CTXBENCH_DATA_DIR"] = str(home / "data")
        os.environ["CTXBENCH_CONFIG_DIR"] = str(home / "config")
        (home / "config").mkdir()
        text = SAMPLE_SETTINGS.format(theme=args.theme)
        shown = args.source.resolve().parent if args.source is not None else (args.usage or args.sources)
        if shown is not None:  # the Sources tab lists the file's folder (and nothing of this machine)
            os.environ["HOME"] = str(home)
            os.environ.pop("CLAUDE_CONFIG_DIR", None)
            os.environ.pop("CODEX_HOME", None)
            text += f'source_dirs = "{Path(shown).resolve()}"\n'
        (home / "config" / "settings.toml").write_text(text)
        shutil.copytree(SAMPLE, home / "data" / "sessions" / SAMPLE.name)
        _import_trajectory(home / "data" / "sessions")

        import qasync
        from PySide6.QtWidgets import QApplication

        from app.qt_hooks import defuse_feature_hook

        defuse_feature_hook()
        app = QApplication.instance() or QApplication([sys.argv[0]])
        if isinstance(app, QApplication):
            app.setQuitOnLastWindowClosed(False)  # _shoot ends the loop (a followed view has tasks to cancel)
        with asyncio.Runner(loop_factory=qasync.QEventLoop) as runner:
            ok = runner.run(_shoot(app, args))
    if ok:
        print(f"wrote {args.out} ({args.width}×{args.height})")
    return 0 if ok else 1


def _import_trajectory(sessions: Path) -> None:
    """A second entry for the sessions list: a real agent run, imported (when the data is here)."""
    trajectories = REPO.parent / "shared" / "data" / "trajectories"
    found = sorted(trajectories.glob("astropy*.traj.json")) if trajectories.is_dir() else []
    if not found:
        return
    from engine.context.conversation import SessionStore
    from engine.importer import import_transcript

    import_transcript(found[0], store=SessionStore(sessions))


async def _shoot(app: Any, args: argparse.Namespace) -> bool:
    from app.controller import Controller
    from app.main_window import MainWindow

    controller = Controller()
    window = MainWindow(controller)
    window.resize(args.width, args.height)
    window.show()
    if args.first_frame:  # as app.main: painted, then the chart built, before the session opens
        app.processEvents()
        window.ensure_chart()
        await asyncio.sleep(0.05)
        window.grab().save(str(_beside(args.out, "first")), "PNG")
    loaded = asyncio.get_running_loop().create_future()

    def on_loaded(view: object) -> None:
        if not loaded.done():
            loaded.set_result(view)

    controller.session_loaded.connect(on_loaded)
    controller.list_sessions()
    if args.source is not None:
        window.sessions.tabs.setCurrentWidget(window.sessions.sources)
        controller.open_source(str(args.source.resolve()))
    elif args.open is not None:
        controller.import_transcript(str(args.open.resolve()))
    elif args.sources is not None:
        controller.new_session()
        controller.scan_sources()  # as app.main does at launch
    else:
        controller.open_session(SAMPLE.name)
    view = await asyncio.wait_for(loaded, 60)
    if args.source is not None or args.sources is not None:
        await asyncio.sleep(0.5)  # the Sources scan
        if args.sources is not None:
            await _until(lambda: bool(window.sources_wiring.counts), 60)  # type: ignore[attr-defined]
    chart = window.ensure_chart()
    chart.set_cache_view(args.cache_view)
    await _show_largest_result_and_marker(window, controller, view)
    if args.find:  # the find bar on its first hit (app/wire_chat.py)
        window.chat_wiring.open()  # type: ignore[attr-defined]
        window.chat_wiring.bar.edit.setText(args.find)  # type: ignore[attr-defined]
    await asyncio.sleep(0.3)
    await _analysis_views(window, args)
    if args.usage is not None:
        wiring = window.usage_wiring  # type: ignore[attr-defined]
        window.inspector_dock.hide()  # the dock gets the whole right side
        wiring.show().set_days(0, update=True)
        await _until(lambda: wiring.report is not None and not wiring.report.updating, 120)
        await asyncio.sleep(0.3)
    chart.flush()
    window.chat.flush()
    # let the loop process Qt's events (app.processEvents() inside this task could run a followed view's
    # wake-up callback re-entrantly: "Cannot enter into task … while another task is being executed")
    await asyncio.sleep(0.1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ok = bool(window.grab().save(str(args.out), "PNG"))
    if ok and args.usage is not None and window.usage_wiring.dock.isFloating():  # type: ignore[attr-defined]
        # the Usage view is a window of its own: written beside the main window's
        dock = window.usage_wiring.dock  # type: ignore[attr-defined]
        ok = bool(dock.grab().save(str(args.out.with_name(args.out.stem + "-usage.png")), "PNG"))
    if ok and (args.menu or args.help_dialog or args.record_dialog):
        ok = await _menus_and_help(window, args)
    dialog = window.analysis.dialog
    if ok and args.diff and dialog is not None:
        ok = bool(dialog.grab().save(str(args.out.with_name(args.out.stem + "-diff.png")), "PNG"))
    window.close()
    await controller.shutdown()
    if not ok:
        print(f"screenshot: cannot write {args.out}", file=sys.stderr)
    return ok


async def _show_largest_result_and_marker(window: Any, controller: Any, view: SessionView) -> None:
    """The largest tool result open in the inspector (at its first 429, if any), the chat at the compaction
    marker with one archived (dimmed) message above it."""
    if view.files:
        path = max(view.files, key=lambda f: f.size).path
        window.inspector.files.select(path)
        controller.read_offloaded(path)
        await asyncio.sleep(0.2)
        window.inspector.viewer.find("429 Too Many Requests")
        window.inspector.viewer.text_view.horizontalScrollBar().setValue(0)  # keep the timestamps in view
    await asyncio.sleep(0.2)
    marker = next(iter(window.chat.marker_ids()), None)
    if marker is not None:
        window.chat.scroll_to_message(marker)
        bar = window.chat.verticalScrollBar()
        bar.setValue(max(0, bar.value() - 90))


def _beside(out: Path, tag: str) -> Path:
    return out.with_name(f"{out.stem}-{tag}.png")


async def _menus_and_help(window: Any, args: argparse.Namespace) -> bool:
    """--menu, --help-dialog and --record-dialog: the menu open over the window (one image), a dialog on its own."""
    from PySide6.QtGui import QPainter, QPixmap

    ok = True
    if args.menu:
        found = [a for a in window.menuBar().actions() if a.text().replace("&", "").lower() == args.menu.lower()]
        if not found or found[0].menu() is None:
            print(f"screenshot: no menu {args.menu!r}", file=sys.stderr)
            return False
        action = found[0]
        menu = action.menu()
        rect = window.menuBar().actionGeometry(action)
        menu.popup(window.menuBar().mapToGlobal(rect.bottomLeft()))
        await asyncio.sleep(0.2)
        shot = QPixmap(window.grab())
        painter = QPainter(shot)
        painter.drawPixmap(window.menuBar().mapTo(window, rect.bottomLeft()), menu.grab())
        painter.end()
        menu.hide()
        ok = bool(shot.save(str(_beside(args.out, "menu")), "PNG"))
    if ok and args.help_dialog:
        wiring = window.help_wiring
        dlg = wiring.show_about() if args.help_dialog == "about" else wiring.show_shortcuts()
        await asyncio.sleep(0.2)
        ok = bool(dlg.grab().save(str(_beside(args.out, "help")), "PNG"))
        dlg.close()
    if ok and args.record_dialog:
        ok = await _record_dialog(window, args)
    return ok


async def _record_dialog(window: Any, args: argparse.Namespace) -> bool:
    """--record-dialog: the dialog with the proxy running and one real exchange (its upstream refuses: a 502)."""
    import urllib.request

    wiring = window.record_wiring
    dlg = wiring.show_dialog()
    dlg.port.setValue(0)
    dlg.upstream.setText("http://127.0.0.1:9")
    dlg.start_button.click()
    if not await _until(lambda: wiring.service.running and dlg.capture):
        print("screenshot: the proxy did not start", file=sys.stderr)
        return False
    url = dlg.status_text().split("Recording on ", 1)[1].split(" ", 1)[0]

    def send() -> None:
        req = urllib.request.Request(url + "/v1/messages", data=b'{"model": "claude-x", "messages": []}',
                                     method="POST", headers={"content-type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=10).close()
        except OSError:
            pass  # the 502 it answers

    await asyncio.to_thread(send)
    await _until(lambda: bool(dlg.exchange_rows()))
    await asyncio.sleep(0.2)
    ok = bool(dlg.grab().save(str(_beside(args.out, "record")), "PNG"))
    dlg.close()
    await _until(lambda: not wiring.service.running)
    return ok


async def _until(check: Any, timeout: float = 30.0) -> bool:
    for _ in range(int(timeout / 0.05)):
        if check():
            return True
        await asyncio.sleep(0.05)
    return False


async def _analysis_views(window: Any, args: argparse.Namespace) -> None:
    """--tab and --diff: the inspector tab raised (its figures in), the diff window shown."""
    if args.tab:
        window.inspector.show_tab(args.tab)
        if args.tab == "tools":
            await _until(lambda: window.inspector.tools.attribution is not None)
        elif args.tab == "compactions" and window.inspector.log.events:
            window.inspector.show_compaction(window.inspector.log.events[0])
    if args.diff:
        window.controller.diff_calls(*args.diff)
        await _until(lambda: window.analysis.dialog is not None and window.analysis.dialog.isVisible())
        await asyncio.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
