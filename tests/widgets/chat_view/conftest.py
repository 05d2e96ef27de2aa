"""The chat view under test: shown, 700×600, light palette."""

from __future__ import annotations

import pytest

from widgets.chat_view import ChatView
from widgets.theme import LIGHT


@pytest.fixture
def view(qtbot):
    v = ChatView(pal=LIGHT)
    qtbot.addWidget(v)
    v.resize(700, 600)
    v.show()
    qtbot.waitExposed(v)
    return v
