"""Fixtures shared by the executors' GPU-path tests (ATen and torch.fx), which run without a GPU."""

from __future__ import annotations

import pytest


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda as a GPU machine would answer; the calls the executor makes are recorded."""
    torch = pytest.importorskip("torch")
    calls: list[tuple[str, str]] = []
    cuda = torch.cuda
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(
        cuda, "synchronize", lambda device=None: calls.append(("sync", str(device)))
    )
    monkeypatch.setattr(
        cuda, "reset_peak_memory_stats", lambda device=None: calls.append(("reset", str(device)))
    )
    monkeypatch.setattr(cuda, "max_memory_allocated", lambda device=None: 12345)
    monkeypatch.setattr(cuda, "get_rng_state_all", lambda: [])
    monkeypatch.setattr(cuda, "set_rng_state_all", lambda states: None)
    return calls
