"""The collector is paused while the window makes big object sets, then restored."""

from __future__ import annotations

import gc

from app.collector import long_lived


def test_long_lived_pauses_the_collector_and_freezes_what_it_made():
    gc.enable()
    frozen = gc.get_freeze_count()
    with long_lived():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(made)


def test_long_lived_leaves_a_paused_collector_paused():
    gc.disable()
    try:
        with long_lived():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
