"""Edit → Copy / Select All and the Help menu (issue 27).

- **Edit → Copy** (Ctrl+C) and **Edit → Select All** (Ctrl+A) act on the focused widget: the chat (its
  selection, else the message last clicked; Select All: that message, else the whole conversation),
  a text box or viewer (its own copy / select all), a list or table (select all). Text boxes handle
  the keys themselves; the menu items reach them too.
- **Help → Keyboard shortcuts** lists every shortcut of the window's actions and the chat's own keys.
- **Help → Open log folder**: the folder of the log file (engine/store/logs.py), in the system's file manager.
- **Help → About Context Workbench**: the version, the runtime, and where the settings, the sessions,
  the window layout, the log file and the Sources index live (each path copyable).

:func:`wire_help` is called once from ``MainWindow._connect``; its state is a :class:`HelpWiring`
stored as ``window.help_wiring``.
"""

from __future__ import annotations

import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import QObject, Qt, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QApplication, QLineEdit, QMenu, QPlainTextEdit, QTextEdit, QWidget

from engine.sources.formats import names, spoken_list
from engine.store.config import config_dir, data_dir, settings_path
from engine.store.logs import log_dir, log_file
from widgets.chat_view import ChatView
from widgets.help_dialogs import AboutDialog, AboutFacts, ShortcutsDialog

if TYPE_CHECKING:
    from app.window_base import WindowBase

CHAT_KEYS: tuple[tuple[str, str], ...] = (
    ("Ctrl+Enter", "Send the message"),
    ("Esc", "Stop the running turn (in the message box); close the find bar"),
    ("/", "Slash commands in the message box (/compact, /context, /clear …)"),
    ("Enter / Shift+Enter", "Next / previous hit in the find bar"),
    ("Home / End", "Top / bottom of the conversation"),
    ("Drag, double-click, triple-click", "Select text in the conversation (across messages, a word, a paragraph)"),
)


def app_version() -> str:
    try:
        return version("ctxbench")
    except PackageNotFoundError:
        return "(not installed)"


def about_facts(window: WindowBase) -> AboutFacts:
    """What Help → About shows (read when it is opened: the environment may move the folders)."""
    root = getattr(window.controller.store, "root", data_dir() / "sessions")
    places = (
        ("Settings file", str(settings_path())),
        ("Sessions", str(root)),
        ("Data folder", str(data_dir())),
        ("Window layout", str(config_dir() / "window.ini")),
        ("Log file", str(log_file())),
    )
    runtime = (f"Python {platform.python_version()} · PySide6 {pyside_version} · "
               f"{platform.system() or sys.platform} {platform.machine()}")
    return AboutFacts(version=app_version(), versions=runtime, places=places,
                      agents=spoken_list(names(in_usage=True)))


def _chat_of(widget: QWidget | None) -> ChatView | None:
    while widget is not None:
        if isinstance(widget, ChatView):
            return widget
        widget = widget.parentWidget()
    return None


def copy_from(widget: QWidget | None) -> bool:
    """Edit → Copy on ``widget`` (the focused one); False when it has nothing to copy."""
    chat = _chat_of(widget)
    if chat is not None:
        return bool(chat.copy_current())
    if isinstance(widget, QLineEdit | QTextEdit | QPlainTextEdit):
        widget.copy()
        return True
    return False


def select_all_in(widget: QWidget | None) -> bool:
    """Edit → Select All on ``widget`` (the focused one); False when it has nothing to select."""
    chat = _chat_of(widget)
    if chat is not None:
        return chat.select_current()
    if isinstance(widget, QLineEdit | QTextEdit | QPlainTextEdit | QAbstractItemView):
        widget.selectAll()
        return True
    return False


class HelpWiring(QObject):
    """The Edit → Copy / Select All actions and the Help menu (see the module docstring)."""

    def __init__(self, window: WindowBase) -> None:
        super().__init__(window)
        self.window = window
        self.about_dialog: AboutDialog | None = None
        self.shortcuts_dialog: ShortcutsDialog | None = None
        self.copy_action = QAction("&Copy", window)
        self.copy_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Copy))
        self.copy_action.setToolTip("Copy the selection of the focused pane (the chat: the message last clicked)")
        self.copy_action.triggered.connect(self._on_copy)
        self.select_all_action = QAction("Select &All", window)
        self.select_all_action.setShortcut(QKeySequence(QKeySequence.StandardKey.SelectAll))
        self.select_all_action.triggered.connect(self._on_select_all)
        for action in (self.copy_action, self.select_all_action):
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        edit = _menu(window, "Edit")
        if edit is not None:  # Undo compaction | Copy, Select All | Compact, Stop | Find
            after_undo = edit.actions()[1] if len(edit.actions()) > 1 else None
            if after_undo is None:
                edit.addSeparator()
                edit.addActions([self.copy_action, self.select_all_action])
            else:
                edit.insertActions(after_undo, [self.copy_action, self.select_all_action])
                edit.insertSeparator(self.copy_action)
                edit.insertSeparator(after_undo)
        help_menu = window.menuBar().addMenu("&Help")
        self.help_menu = help_menu
        self.shortcuts_action = help_menu.addAction("&Keyboard shortcuts")
        self.shortcuts_action.setShortcut(QKeySequence(QKeySequence.StandardKey.HelpContents))
        self.shortcuts_action.triggered.connect(self.show_shortcuts)
        self.log_action = help_menu.addAction("Open &log folder")
        self.log_action.setToolTip("The log file (what was read, called and what failed) to look at or send")
        self.log_action.triggered.connect(self.open_log_folder)
        help_menu.addSeparator()
        self.about_action = help_menu.addAction("&About Context Workbench")
        self.about_action.setMenuRole(QAction.MenuRole.AboutRole)
        self.about_action.triggered.connect(self.show_about)

    def _on_copy(self) -> None:
        copy_from(QApplication.focusWidget())

    def _on_select_all(self) -> None:
        select_all_in(QApplication.focusWidget())

    def shortcut_rows(self) -> list[tuple[str, str]]:
        """Every window action with a shortcut (as the menus name it), then the chat's own keys."""
        rows: list[tuple[str, str]] = []
        seen: set[str] = set()
        for action in self.window.findChildren(QAction):
            keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            name = action.text().replace("&", "").rstrip("…").strip()
            if keys and name and name not in seen:
                seen.add(name)
                rows.append((keys, name))
        rows.sort(key=lambda r: r[1].lower())
        return rows + list(CHAT_KEYS)

    def show_shortcuts(self) -> ShortcutsDialog:
        if self.shortcuts_dialog is None:
            self.shortcuts_dialog = ShortcutsDialog(self.window, self.shortcut_rows())
        self.shortcuts_dialog.open()
        return self.shortcuts_dialog

    def open_log_folder(self) -> str:
        """Show the log folder in the system's file manager (made if missing); its path."""
        folder = log_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # the file manager says it is not there
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))
        return str(folder)

    def show_about(self) -> AboutDialog:
        if self.about_dialog is not None:
            self.about_dialog.deleteLater()
        self.about_dialog = AboutDialog(self.window, about_facts(self.window))
        self.about_dialog.open()
        return self.about_dialog


def _menu(window: WindowBase, name: str) -> QMenu | None:
    for action in window.menuBar().actions():
        menu: Any = action.menu()
        if isinstance(menu, QMenu) and action.text().replace("&", "") == name:
            return menu
    return None


def wire_help(window: WindowBase) -> HelpWiring:
    """Add Edit → Copy / Select All and the Help menu to ``window`` (see the module docstring)."""
    wiring = HelpWiring(window)
    window.help_wiring = wiring  # type: ignore[attr-defined]
    return wiring


__all__ = ["HelpWiring", "about_facts", "copy_from", "select_all_in", "wire_help"]
