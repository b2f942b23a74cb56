"""One object per formulation: how to build it, read its answers and encode a schedule.

The solve loop (:mod:`solver.optimize.solve`), the incumbents (:mod:`~solver.optimize.incumbents`)
and the neighbourhood search (:mod:`~solver.optimize.lns`) work on any linear formulation of
XEngine's problem through this one interface, with no test of which model they hold:

- :data:`PAPER`: the paper's MIQP as solved (:mod:`solver.optimize.miqp`), stages x nodes;
- :data:`OFFLOADING`: the same with offloading copies (:mod:`solver.optimize.offload`).

A built model carries its formulation (``model.formulation``), so whoever holds a model can
decode a backend's values, encode a schedule as a start, or ask which stage and node each
column belongs to. The retention-interval model (:mod:`solver.optimize.intervals`) is not a
linear program and has a solve of its own (:mod:`solver.optimize.interval_solve`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from solver.document.schedule import Schedule, SolverInfo
from solver.execution.simulate import Timeline

if TYPE_CHECKING:
    from solver.document.graph import Graph
    from solver.optimize.backends._common import Cancel
    from solver.optimize.miqp import ArrayModel

__all__ = ["ColumnRoles", "Formulation", "OFFLOADING", "PAPER", "column_roles"]


@dataclass(frozen=True)
class ColumnRoles:
    """What each column of a model is about, for choosing neighbourhoods.

    ``stage[j]`` and ``node[j]`` place column ``j`` (``node`` -1 where none); ``other[j]`` is
    the consumer of a transfer or free (-1 where none); ``state[j]`` marks continuous memory
    columns, which follow from the rest and are always left free.
    """

    stage: np.ndarray
    node: np.ndarray
    other: np.ndarray
    state: np.ndarray


@dataclass(frozen=True)
class Formulation:
    """A linear formulation of XEngine's problem (see the module docstring).

    ``build(graph, rounding=..., deadline=..., cancel=..., upper_bound=...)`` builds it;
    ``decode(model, values, info)`` reads a backend's values as a schedule;
    ``encode(model, schedule, timeline)`` gives a valid schedule's column values (``None``
    where the model cannot express it); ``roles(model)`` places each column.
    """

    key: str
    label: str
    method: str
    """The method name a result of this formulation reports."""
    build: Callable[..., ArrayModel]
    decode: Callable[[Any, np.ndarray, SolverInfo], Schedule]
    encode: Callable[[Any, Schedule, Timeline], np.ndarray | None]
    roles: Callable[[Any], ColumnRoles]

    def make(
        self,
        graph: Graph,
        *,
        rounding: str = "relaxed",
        deadline: float | None = None,
        cancel: Cancel | None = None,
        upper_bound: float | None = None,
    ) -> ArrayModel:
        """Build the model (its builder marks it as this formulation's)."""
        return self.build(
            graph, rounding=rounding, deadline=deadline, cancel=cancel, upper_bound=upper_bound
        )


def column_roles(model: ArrayModel, extra: dict[str, dict] | None = None) -> ColumnRoles:
    """Roles of the paper's families ``R, S, F, X, U``; ``extra`` adds a formulation's own:
    ``{"stage-node": family keyed (..., t, i), "state": family keyed (..., t, _)}``."""
    g = model.graph
    cols = model.program.num_cols
    stage = np.zeros(cols, dtype=np.int64)
    node = np.full(cols, -1, dtype=np.int64)
    other = np.full(cols, -1, dtype=np.int64)
    state = np.zeros(cols, dtype=bool)
    for family in (model.R, model.S):
        for (_, t, i), col in family.items():
            stage[col], node[col] = t, i
    for (_, t, e), col in model.F.items():
        stage[col] = t
        node[col], other[col] = g.edge_pairs[e]
    for (_, _, t, e), col in model.X.items():
        stage[col] = t
        node[col], other[col] = g.edge_pairs[e]
    for (_, t, _), col in model.U.items():
        stage[col], state[col] = t, True
    for kind, family in (extra or {}).items():
        for key, col in family.items():
            stage[col] = key[-2]
            if kind == "state":
                state[col] = True
            else:
                node[col] = key[-1]
    return ColumnRoles(stage, node, other, state)


def _paper() -> Formulation:
    from solver.optimize.miqp import build_array_model
    from solver.optimize.miqp_schedule import schedule_from_values, values_from_schedule

    return Formulation(
        key="stages",
        label="XEngine's MIQP",
        method="xengine",
        build=build_array_model,
        decode=schedule_from_values,
        encode=values_from_schedule,
        roles=column_roles,
    )


def _offloading() -> Formulation:
    from solver.optimize import offload

    return Formulation(
        key="stages+offload",
        label="XEngine's MIQP with offloading",
        method=offload.OFFLOAD_METHOD,
        build=lambda graph, **kw: offload.build_offload_model(graph, **kw),
        decode=offload.schedule_from_offload_values,
        encode=offload.values_from_offload_schedule,
        roles=offload.offload_roles,
    )


PAPER = _paper()
OFFLOADING = _offloading()
