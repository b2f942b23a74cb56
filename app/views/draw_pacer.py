"""Deferred redraws of a document's views, one per event-loop turn.

A new result (a solve's incumbent, every tenth of a second at best) used to be drawn by each view
in an event of its own, but those events all ran in one turn of the event loop, and their paints
in the next: on 2 busy cores the window then stalled 55-74 ms when VGG16's first incumbent
arrived (``bench/draw.py --stall``). A :class:`DrawPacer` runs the views' pending redraws one at
a time, ``PACE_MS`` apart and the first ``PACE_MS`` after the request, so each redraw and the
paint it causes have a turn of their own (the first one's is not shared with the paints of
whatever put the result on display: the live plot, the labels), and input and timers get in
between.

A redraw is requested by its view: requesting it again while it waits keeps its
place and does not draw twice; the redraw reads the document when it runs, so an incumbent that
arrived meanwhile is the one drawn and stale ones are skipped. A view that is read before its
turn draws at once (:meth:`DrawPacer.run_now`), so reading never sees an old drawing.
"""

from __future__ import annotations

from collections.abc import Callable

import shiboken6
from PySide6.QtCore import QObject, QTimer, Signal

__all__ = ["DrawPacer", "PACE_MS"]

PACE_MS = 8
"""The pause between two deferred redraws: long enough for the first one's paint (posted, and
on X11 grouped into the window's next update) to happen before the next redraw starts."""


class DrawPacer(QObject):
    """The queue of deferred redraws of one document's views (see module docstring).

    One pacer serves every view of a document: :meth:`of` finds it (a child of the document) or
    makes it. The first waiting redraw runs ``PACE_MS`` after it was requested, each further one
    ``PACE_MS`` after the previous.
    """

    drawn = Signal(object)
    """A waiting redraw ran in its turn (the view it drew)."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.setObjectName("draw_pacer")
        self._waiting: dict[QObject, Callable[[], None]] = {}
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self._on_timer_timeout)

    @classmethod
    def of(cls, document: QObject) -> DrawPacer:
        """The pacer of ``document``'s views (made on first use)."""
        pacer = document.findChild(cls, "draw_pacer")
        return pacer if pacer is not None else cls(document)

    def request(self, view: QObject, redraw: Callable[[], None]) -> None:
        """Run ``redraw`` (of ``view``) in a later turn; a redraw of ``view`` already waiting
        keeps its place (the newer callable replaces it). A view deleted meanwhile is skipped."""
        self._waiting[view] = redraw
        if not self._timer.isActive():
            self._timer.start(PACE_MS)

    def is_waiting(self, view: QObject) -> bool:
        """Whether a redraw of ``view`` has not run yet."""
        return view in self._waiting

    def run_now(self, view: QObject) -> None:
        """Run the redraw of ``view`` now (it is being read), if one waits."""
        redraw = self._waiting.pop(view, None)
        if redraw is not None:
            redraw()

    @property
    def waiting(self) -> int:
        """How many redraws wait."""
        return len(self._waiting)

    def _on_timer_timeout(self) -> None:
        if not self._waiting:
            return
        view = next(iter(self._waiting))
        redraw = self._waiting.pop(view)
        try:
            if shiboken6.isValid(view):
                redraw()
                self.drawn.emit(view)
        finally:
            if self._waiting:
                self._timer.start(PACE_MS)
