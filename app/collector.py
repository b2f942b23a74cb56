"""The cyclic garbage collector kept away from the window's big, long-lived object sets.

A full collection walks every tracked object and holds the GIL: after a 5,000-node graph was
drawn, two of them took 270-370 ms of its 700-800 ms first draw (``bench/draw.py --cpu``), and
later ones stall the event loop at random. The window's objects are freed by reference
counting when a graph or result is replaced; the collector only needs to find cycles, and the
items, graphs and timelines made here form none worth waiting for.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["long_lived"]


@contextmanager
def long_lived() -> Iterator[None]:
    """Pause the collector while making many objects that will live on, then move everything
    alive out of its reach (``gc.freeze``), as the window does at startup."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
