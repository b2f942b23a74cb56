"""CBC's root LP or CP-SAT on both cores: who gets the second core when the paper's model stalls.

Beside CBC on the paper's model, CP-SAT searches the interval model with one worker, and one
CP-SAT worker is its plain search alone: its neighbourhood searches (LNS) run only from two
workers on. That split pays where CBC proves: its root LP ends within 1-2.5 s of its start on
VGG16, SqueezeNet and the 100-node random graphs, and CBC then proves what CP-SAT cannot. On
the layer-level imports at 40 % (ConvNeXt-T, EfficientNet-B0, GoogLeNet, FCN-ResNet50,
ResNet-50: 74,000-106,000 columns, 216,000-358,000 rows) CBC had not finished its root LP
after 50 s, and the lone worker beside it did not improve the construction at all, where
CP-SAT with both cores came within 0.1-2.6 % of the bound (docs/solver.md, "When CBC's root
LP stalls").

So a :class:`RootWatch` follows the backend's log: when it has reported no bound of its own
within :func:`root_wait_s` of its first log line, the backend is stopped and CP-SAT gets both cores
for the rest of the time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from solver.optimize.backends._common import Cancel
from solver.status import Progress

__all__ = [
    "ROOT_WAIT_MAX_S",
    "ROOT_WAIT_MIN_S",
    "ROOT_WAIT_SHARE",
    "STALLED",
    "RootWatch",
    "root_wait_s",
]

ROOT_WAIT_MIN_S = 6.0
"""The backend has at least this long for its root LP (it took at most 2.5 s where it helped)."""
ROOT_WAIT_SHARE = 0.25
"""... or this share of the time limit, when that is longer (15 s of a minute). CBC's root LP
on ResNet-18 at 80 % of its GPU, one device, ended 10 s after its first line, and CBC then
proved the optimum; on the models where it stalled it had not ended after 50 s."""
ROOT_WAIT_MAX_S = 30.0
"""... but never longer than this: three times the slowest root LP that led anywhere. In a
300 s solve of FCN-ResNet50 at 40 % of its GPU a quarter was 75 s of CBC without a root,
after which CP-SAT on both cores took 20 s to its best schedule; the paper's model's LP
there (solved apart by HiGHS' interior point method in 31 s) is 9.435 ms, below the
relaxation's 9.442 that the solve already had at 1 s, so the root had nothing to give."""


STALLED = "had not solved its root LP"
"""The words of a result's message after a handover (:meth:`RootWatch.why`): the advice
reads them (:mod:`solver.optimize.advice`)."""


def root_wait_s(time_limit_s: float) -> float:
    """How long the backend may run without a bound before CP-SAT takes its core.

    >>> root_wait_s(10), root_wait_s(60), root_wait_s(300)
    (6.0, 15.0, 30.0)
    """
    return min(ROOT_WAIT_MAX_S, max(ROOT_WAIT_MIN_S, ROOT_WAIT_SHARE * time_limit_s))


class RootWatch:
    """Sets :attr:`stalled` when the backend's progress carries no bound ``wait_s`` after its
    first report (writing a model of 350,000 rows for CBC took 2-6 s on shared cores: not
    the root LP's time); ``done`` (the backend finished, or a cancel) ends the watch."""

    def __init__(self, wait_s: float, done: Cancel) -> None:
        self.wait_s = wait_s
        self.done = done
        self.began = threading.Event()
        self.rooted = threading.Event()
        self.stalled = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="xengine-root", daemon=True)

    def progress(self, forward: Callable[[Progress], None] | None) -> Callable[[Progress], None]:
        """A progress callback for the backend: notes its first bound, passes it on."""

        def report(progress: Progress) -> None:
            self.began.set()
            if progress.bound is not None:
                self.rooted.set()
            if forward is not None:
                forward(progress)

        return report

    def start(self) -> None:
        self._thread.start()

    def _watch(self) -> None:
        while not self.began.is_set():  # the clock starts at its first log line
            if self.done.is_set():
                return
            self.began.wait(0.25)
        until = time.monotonic() + self.wait_s
        while not self.rooted.is_set() and not self.done.is_set():
            left = until - time.monotonic()
            if left <= 0:
                self.stalled.set()
                return
            self.rooted.wait(min(left, 0.25))

    def why(self, backend: str) -> str:
        return f"{backend} {STALLED} {self.wait_s:.0f} s after it started; CP-SAT took both cores"
