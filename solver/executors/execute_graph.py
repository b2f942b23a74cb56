"""Execute a schedule on the model an imported graph names (the window's Execute action).

A graph imported from PyTorch carries its model in ``meta``: ``source`` (``module:Class``),
``input_shape``, ``level`` and ``importer``. :func:`execute_graph` imports the model again the
same way (ATen joint graph, or torch.fx for the zoo's bundled networks), refuses a graph that
is no longer that import (edited, or imported differently), and runs the schedule
(:mod:`solver.executors.aten_runtime` or :mod:`solver.executors.fx_runtime`).
"""

from __future__ import annotations

from collections.abc import Mapping

from solver.document.graph import Graph
from solver.document.schedule import Schedule
from solver.errors import XEngineError
from solver.executors.harness import StepReport

__all__ = ["MODEL_KEYS", "executable_reason", "execute_graph", "is_fx_import"]

#: What a graph's meta must name for its model to be run.
MODEL_KEYS = ("source", "input_shape")


def is_fx_import(graph: Graph) -> bool:
    """Whether the graph came from the torch.fx importer (the bundled zoo networks)."""
    return str(graph.meta.get("importer", "")).startswith("torch.fx")


def executable_reason(graph: Graph) -> str:
    """Why the graph cannot be executed, in one line; empty when it can."""
    if all(key in graph.meta for key in MODEL_KEYS):
        return ""
    return (
        f"graph '{graph.name}' is synthetic (its meta names no model: 'source', "
        "'input_shape'), so there is nothing to run; open a graph imported from PyTorch "
        "(vgg16, resnet18, encoder-aten, ... or main.py import-torch -o FILE)"
    )


def execute_graph(
    graph: Graph, schedule: Schedule, device_map: Mapping[str, str], *, seed: int = 0
) -> StepReport:
    """Import ``graph``'s model again and run ``schedule`` on it.

    Raises
    ------
    XEngineError
        If the graph names no model, or is no longer the import of its model.
    """
    from solver.importers.aten import structure_hash

    reason = executable_reason(graph)
    if reason:
        raise XEngineError(reason)
    meta = graph.meta
    source, shape = str(meta["source"]), tuple(meta["input_shape"])
    level = str(meta.get("level", "layer"))
    if is_fx_import(graph):
        from solver.executors.fx_runtime import execute_fx_schedule, plan_fx

        fx = plan_fx(source, shape, level)
        _check(structure_hash(fx.graph), structure_hash(graph), graph, source)
        return execute_fx_schedule(fx, graph, schedule, device_map, seed=seed)
    from solver.executors.aten_runtime import execute_schedule
    from solver.importers.aten import capture_model, graph_from_plan
    from solver.importers.aten_capture import inputs_from_meta
    from solver.importers.aten_groups import plan_groups
    from solver.importers.hardware import make_platform

    masks = str(meta.get("dropout_masks", "float"))  # imported with bool masks: again so
    plan = plan_groups(capture_model(source, inputs_from_meta(meta), dropout_masks=masks), level)
    _check(
        structure_hash(graph_from_plan(plan, make_platform())), structure_hash(graph), graph, source
    )
    return execute_schedule(plan, graph, schedule, device_map, seed=seed)


def _check(ours: str, theirs: str, graph: Graph, source: str) -> None:
    if ours != theirs:
        raise XEngineError(
            f"graph '{graph.name}' is no longer the import of {source} (edited or imported "
            "differently); import it again and solve"
        )
