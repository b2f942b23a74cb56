"""What both schedule executors do on a GPU so that a step there is measured and checked as on
the CPU: float32 without TF32, and copies timed by the clock that sees them end.

Shared by the ATen runtime (:mod:`solver.executors.aten_runtime`) and the torch.fx runtime
(:mod:`solver.executors.fx_runtime`) through the driver (:mod:`solver.executors.harness`);
docs/spec-notes.md, "The PyTorch executor".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["copy_timer", "full_float32"]


@contextlib.contextmanager
def full_float32(torch: Any, mapping: Mapping[str, Any]) -> Iterator[None]:
    """No TF32 in cuDNN and cuBLAS while a step runs on a GPU, the flags restored after.

    An Ampere GPU's convolutions use TF32 by default (10-bit mantissa); their gradients then
    differ from the float32 reference (``loss.backward()`` on the CPU) by about 1e-3, far
    beyond the comparison's ``rtol=1e-4``, and every schedule of a convolutional network would
    fail the check. The step's GPU times are float32 times. Nothing changes without a GPU in
    ``mapping`` (schedule device -> torch device).
    """
    if not any(d.type == "cuda" for d in mapping.values()):
        yield
        return
    backends = torch.backends
    before = backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32
    backends.cudnn.allow_tf32 = backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32 = before


def copy_timer(source: Any, target: Any) -> Any:
    """The torch device whose clock times a copy from ``source`` to ``target``: the target,
    unless it is the CPU and the source is not. A GPU's clock is wall clock after a
    synchronisation; a copy from a GPU to the host waits for the GPU, and the CPU's clock (this
    thread's CPU time) would count that wait only if the driver spins."""
    return source if target.type == "cpu" else target
