"""Markdown loads nothing (widgets/chat_view/document.py)."""

from __future__ import annotations

from PySide6.QtGui import QTextDocument

from tests.widgets.chat_view.rows import msg
from widgets.chat_view import SafeTextDocument


def test_markdown_loads_no_resource(view):
    text = (
        "look ![local](file:///etc/hostname) and ![remote](https://example.com/x.png)\n\n"
        '<img src="file:///etc/passwd"> [site](https://example.com) [file](file:///etc/passwd)'
    )
    view.set_messages([msg(1, "assistant", text)])
    view.viewport().repaint()
    item = view.item("m1")
    lay = view.layouter().layout(item, view.row_width())
    doc = lay.docs[0][1]
    assert isinstance(doc, SafeTextDocument)
    doc.documentLayout().documentSize()  # lay out images: every request must be refused
    assert any("etc/hostname" in u for u in doc.refused)
    assert any("example.com/x.png" in u for u in doc.refused)
    from PySide6.QtCore import QUrl

    assert doc.resource(QTextDocument.ResourceType.ImageResource, QUrl("file:///etc/hostname")) is None
    # raw HTML is not interpreted: the <img> tag stays text
    assert "<img" in doc.toPlainText()
    # links: http(s) is reported to the app, file: is ignored
    links = []
    view.link_activated.connect(links.append)
    view.activate(item, "link", "https://example.com")
    view.activate(item, "link", "file:///etc/passwd")
    assert links == ["https://example.com"]

def test_safe_document_refuses_directly():
    doc = SafeTextDocument()
    from PySide6.QtCore import QUrl

    image = int(QTextDocument.ResourceType.ImageResource)
    assert doc.loadResource(image, QUrl("file:///etc/hostname")) is None
    doc.set_markdown("![a](file:///etc/hostname)")
    doc.setTextWidth(300)
    doc.documentLayout().documentSize()
    assert doc.refused
