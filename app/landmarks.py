"""The memory landmarks of a graph (docs/model.md §4), computed once per graph structure.

The no-rematerialization peak and each device's lower bound depend on the nodes' sizes and on
which device can run which node, never on the memory limits. Views ask for them on every
slider step and every incumbent of a solve (1.8 ms for the peak alone on ResNet-50), so the
document keeps one :class:`Landmarks` per structure token (``Document.landmarks``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solver.document.graph import Graph
from solver.optimize.bounds import no_remat_peak, node_requirement

__all__ = ["Landmarks", "compute_landmarks"]


@dataclass(frozen=True)
class Landmarks:
    """The landmarks of one graph structure.

    Attributes
    ----------
    peak
        ``no_remat_peak(graph)``: at or above it nothing is recomputed.
    lower
        ``lower_bound(graph, device)`` by device name: below it the device cannot run all the
        nodes it is able to run.
    requirements
        Bytes each node needs on one device (its output and inputs), in node order.
    """

    peak: int
    lower: dict[str, int]
    requirements: np.ndarray

    def too_big_for(self, graph: Graph, device: str) -> list[str]:
        """Nodes ``device`` could run but that do not fit its current activation budget."""
        d = graph.device_index[device]
        budget = graph.devices[d].activation_budget
        able = ~np.isnan(np.asarray(graph.cost[d], dtype=float))
        return [graph.nodes[k].id for k in np.flatnonzero(able & (self.requirements > budget))]

    def unplaceable(self, graph: Graph) -> list[str]:
        """Nodes that fit no device able to run them: then no schedule exists at all (the
        necessary condition of :func:`solver.optimize.bounds.explain_infeasible`)."""
        budgets = np.array([d.activation_budget for d in graph.devices], dtype=np.int64)
        able = ~np.isnan(np.asarray(graph.cost, dtype=float))
        fits = able & (self.requirements[None, :] <= budgets[:, None])
        return [graph.nodes[k].id for k in np.flatnonzero(~fits.any(axis=0))]


def compute_landmarks(graph: Graph) -> Landmarks:
    """The landmarks of ``graph`` (one pass over its nodes per device).

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> marks = compute_landmarks(unit_chain(4))
    >>> marks.peak, sorted(marks.lower.values())
    (6, [3])
    """
    requirements = np.array([node_requirement(graph, k) for k in range(graph.n)], dtype=np.int64)
    lower = {}
    for d, device in enumerate(graph.devices):
        able = [k for k in range(graph.n) if not math.isnan(graph.cost[d, k])]
        lower[device.name] = int(max((requirements[k] for k in able), default=0))
    return Landmarks(no_remat_peak(graph), lower, requirements)
