"""Helpers shared by the importer tests (imported by name: pytest puts this folder on the path)."""

from __future__ import annotations

import functools


@functools.cache
def traced(name: str, shape: tuple[int, ...]):
    """The op list of a zoo network at ``shape`` (tracing is deterministic, so cache it)."""
    from solver.importers.torch_fx import trace_ops
    from solver.importers.zoo_models import ZOO

    return trace_ops(ZOO[name][0], shape, name=name)
