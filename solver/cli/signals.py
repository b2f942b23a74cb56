"""Ctrl-C, SIGTERM and SIGHUP cancel a running solve or sweep instead of killing the program.

Killed, the program would orphan CBC and lose the incumbent; cancelled, the solver stops CBC
and keeps its best schedule, and a sweep keeps every finished row.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["CANCEL_SIGNALS", "cancel_on_signals"]

CANCEL_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""Signals that cancel a running solve (it stops and keeps its incumbent), like Ctrl-C."""


@contextlib.contextmanager
def cancel_on_signals() -> Iterator[threading.Event]:
    """An Event that :data:`CANCEL_SIGNALS` set while the block runs; the handlers are put
    back after it (the command line also runs inside tests and the window's import child).

    Off the main thread Python cannot install handlers: the Event is then never set.
    """
    cancel = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return
    saved = {sig: signal.getsignal(sig) for sig in CANCEL_SIGNALS}
    for sig in CANCEL_SIGNALS:
        signal.signal(sig, lambda *_: cancel.set())
    try:
        yield cancel
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
