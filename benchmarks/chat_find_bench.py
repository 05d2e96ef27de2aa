"""Find in the conversation (issue 13, item 11; widgets/chat_view/find.py) on a 10,000-message chat
(offscreen Qt): the time between a key in the find bar and the hit on screen.

Figures, best of several rounds:

- the first search of a fresh chat (the plain text of each row is lower-cased and cached);
- a search again (the cache is warm): what each key typed in the find bar costs;
- Enter: the next hit, the scroll to it and the paint of the viewport (the hits are 50 rows apart);
- the chat append benchmark's path (append + scroll + paint) with a query active, to show that the
  find hits cost the paint nothing measurable.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")
os.environ.setdefault("QT_LOGGING_RULES", "qt.qpa.*=false")

from benchmarks.engine_bench import Figure, best_of, make_history
from benchmarks.gui_bench import _app


def _ms(name: str, seconds: float, target: float | None) -> Figure:
    if target is None:
        return Figure(name, seconds * 1000, "ms", "report", None)
    return Figure(name, seconds * 1000, "ms", f"< {target * 1000:.0f} ms", seconds < target)


def bench_find(n: int = 10_000) -> list[Figure]:
    from engine.model.messages import new_message
    from widgets.chat_view import ChatView
    from widgets.chat_view.find import ChatFinder

    app = _app()
    history = make_history(n)
    for i in range(0, n, 50):
        history[i] = {**history[i], "content": f"{history[i].get('content') or ''} the Quokka {i}"}
    view = ChatView()
    view.resize(900, 800)
    view.show()
    view.set_messages(history)
    app.processEvents()
    cold = []
    for _ in range(3):
        finder = ChatFinder(view.chat_model())
        t0 = time.perf_counter()
        finder.search("quokka")
        cold.append(time.perf_counter() - t0)
    t_warm = best_of(lambda: finder.search("quokka"), repeat=5, number=5)
    total = view.find_text("quokka")[1]

    def step() -> None:
        view.find_step()
        view.viewport().repaint()

    t_step = best_of(step, repeat=5, number=10)

    def append() -> None:
        msg = new_message("assistant", "A new answer with **markdown** and `code`.\n\n- one\n- two")
        view.append_message(msg)
        view.scroll_to_bottom()
        app.processEvents()

    t_append = best_of(append, repeat=5, number=20)
    view.close()
    return [
        _ms(f"chat find: first search of {n} messages ({total} hits)", min(cold), 0.1),
        _ms(f"chat find: search again ({n} messages, cache warm)", t_warm, 0.03),
        _ms("chat find: next hit + scroll + paint", t_step, 0.03),
        _ms(f"chat find: append 1 to {n} with a query active (+ paint)", t_append, 0.005),
    ]


ALL = {"chat-find": bench_find}
