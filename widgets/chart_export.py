"""PNG and SVG bytes of a pyqtgraph scene, with pyqtgraph's own exporters.

pyqtgraph 0.14.0's ``SVGExporter`` fails on every plot with this Qt ("ValueError: not enough values
to unpack" in ``correctCoordinates``): Qt's SVG generator now closes paths with a ``Z`` token, which
the exporter's coordinate parser does not expect (pyqtgraph issue #3495, fixed after 0.14.0).
:func:`svg_bytes` therefore runs the exporter with ``correctCoordinates`` wrapped, for the duration
of the call only, so that each ``Z`` becomes the equivalent explicit line back to the sub-path's
start before pyqtgraph parses the path.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import QBuffer, QByteArray, QIODevice


def _close_explicitly(d: str) -> str:
    """``M1,2 L3,4 Z`` → ``M1,2 L3,4 L1,2``: the same outline without a ``Z`` token."""
    out: list[str] = []
    start = ""
    for tok in d.split():
        if tok in ("Z", "z"):
            if start:
                out.append("L" + start)
            continue
        if tok[0] in "Mm":
            start = tok[1:]
        out.append(tok)
    return " ".join(out)


@contextlib.contextmanager
def _closed_paths_supported() -> Iterator[None]:
    module: Any = sys.modules["pyqtgraph.exporters.SVGExporter"]
    original: Callable[..., Any] = module.correctCoordinates

    def correct(node: Any, defs: Any, item: Any, options: Any) -> Any:
        for path in node.getElementsByTagName("path"):
            d = path.getAttribute("d")
            if "Z" in d or "z" in d:
                path.setAttribute("d", _close_explicitly(d))
        return original(node, defs, item, options)

    module.correctCoordinates = correct
    try:
        yield
    finally:
        module.correctCoordinates = original


def svg_bytes(scene: Any) -> bytes:
    """The scene (all its plot items and axes) as an SVG document."""
    from pyqtgraph.exporters import SVGExporter

    exporter = SVGExporter(scene)
    with _closed_paths_supported():
        data = exporter.export(toBytes=True)
    return bytes(data)


def png_bytes(scene: Any, width: int, height: int) -> bytes:
    """The scene rendered at ``width`` × ``height`` pixels, as PNG."""
    from pyqtgraph.exporters import ImageExporter

    exporter = ImageExporter(scene)
    exporter.parameters()["width"] = width
    exporter.parameters()["height"] = height
    image = exporter.export(toBytes=True)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data.data())
