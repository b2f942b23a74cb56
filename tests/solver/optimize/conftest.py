"""Fixtures shared by the solver's tests."""

from __future__ import annotations

import pytest

from solver.optimize import exact_beside


@pytest.fixture
def no_exact_search(monkeypatch):
    """Without the exact search beside one-device solves: it proves the small graphs that
    test other parts of the solve (CBC's handover, CP-SAT's restrictions, a crashed CBC)
    before those parts have anything to do."""
    monkeypatch.setattr(exact_beside, "EXACT_SEARCH_NODES", 0)
