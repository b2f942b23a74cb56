"""An executed checkpointing policy holds, when the backward starts, exactly the bytes the
model says it saves (``Timeline.saved_bytes``), dropout masks included."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils.checkpoint import checkpoint  # noqa: E402

import solver  # noqa: E402
from solver.errors import XEngineError  # noqa: E402
from solver.importers.aten_capture import loss_of  # noqa: E402

MASK = 16 * 256 * 4  # one dropout mask: 16 x 256 floats


class TwoDropouts(torch.nn.Module):
    """Linear-ReLU-dropout twice, then a head: two masks of 16 KiB at batch 16."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (
            torch.nn.Linear(64, 256),
            torch.nn.Linear(256, 256),
            torch.nn.Linear(256, 8),
        )
        self.d, self.d2 = torch.nn.Dropout(0.5), torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.c(self.d2(torch.relu(self.b(self.d(torch.relu(self.a(x)))))))


def cached_bytes(model, x, context) -> int:
    """Bytes of the distinct storages SAC's cache holds when the forward ends (weights and
    the input excluded), as bench/vs_torch.py measures them."""
    fixed = {t.untyped_storage().data_ptr() for t in (*model.parameters(), x)}
    caches = []

    def recording():
        pair = context()
        caches.append(pair[0])
        return pair

    out = checkpoint(model, x, use_reentrant=False, context_fn=recording)
    seen = {}
    for entries in caches[-1].storage.values():
        for wrapped in entries.values():
            value = getattr(wrapped, "val", wrapped)
            for t in value if isinstance(value, tuple | list) else (value,):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in fixed:
                    seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    loss_of(out).backward()
    return sum(seen.values())


def test_least_saved_plan_measures_what_the_model_says():
    """At the least saved bytes (the two masks: everything else is recomputed) the model and
    the policy's cache agree to the byte; a model that could recompute a mask would plan
    fewer bytes than the cache then holds (its saved-bytes limit could be below the masks)."""
    torch.manual_seed(0)
    model = TwoDropouts().train()
    x = torch.randn(16, 64)
    imported = solver.import_model(model, (x,), level="op")
    with pytest.raises(XEngineError, match="no schedule"):
        imported.solve(gpu=None, method="checkmate:cpu", cpu=None, saved={"cpu": 2 * MASK - 1})
    plan = imported.solve(gpu=None, method="checkmate:cpu", cpu=None, saved={"cpu": 2 * MASK})
    assert plan.timeline.saved_bytes["cpu"] == 2 * MASK
    assert cached_bytes(model, x, plan.context_fn(lean=True)) == 2 * MASK
