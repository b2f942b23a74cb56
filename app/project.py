"""Project files: a graph, its budgets, the solver settings and the last schedule, in one JSON.

A project is what the window needs to come back exactly as it was saved. The graph part is the
graph document of docs/formats.md verbatim and the schedule part a schedule document, so both can
be cut out and used by the command line. The schedule is replayed by the simulator on load (its
derived numbers are never trusted). Writes are atomic.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace
from typing import Any

from solver.document.graph import Graph
from solver.document.graph_io import GRAPH_FORMAT, graph_from_dict, graph_to_dict
from solver.document.json_io import read_json, write_json
from solver.document.schedule import Schedule, SolverInfo
from solver.document.schedule_io import SCHEDULE_FORMAT, schedule_from_dict, schedule_to_dict
from solver.document.units import parse_size
from solver.errors import GraphFormatError
from solver.execution.simulate import effective_graph, simulate
from solver.optimize.backends import available_backends
from solver.optimize.intervals import DEFAULT_RUNS, MAX_RUNS
from solver.optimize.solve import SolveOptions, SolveResult
from solver.status import SolveStatus

__all__ = [
    "PROJECT_FORMAT",
    "SolverSettings",
    "Project",
    "result_from_schedule",
    "project_to_dict",
    "project_from_dict",
    "save_project",
    "load_project",
    "load_any",
]

PROJECT_FORMAT = "xengine-project"


@dataclass(frozen=True)
class SolverSettings:
    """What the Solve button runs: a ``solver.optimize.methods`` name, a backend and its limits."""

    method: str = "xengine"
    backend: str = "cbc"
    time_limit_s: float = 60.0
    gap_rel: float = 1e-4
    auto_solve: bool = False
    offload: bool = False
    """Allow offloading copies (:mod:`solver.optimize.offload`); off: the paper's model."""
    runs: int = DEFAULT_RUNS
    """The interval model's ``C`` (``solve --runs``): computations per node and device."""

    def checked(self) -> SolverSettings:
        """Return a copy with out-of-range values replaced by defaults (files are hand-edited)."""
        default = SolverSettings()
        fixes: dict[str, Any] = {}
        if self.backend not in available_backends():
            fixes["backend"] = default.backend
        if not (math.isfinite(self.time_limit_s) and self.time_limit_s > 0):
            fixes["time_limit_s"] = default.time_limit_s
        if not (math.isfinite(self.gap_rel) and self.gap_rel >= 0):
            fixes["gap_rel"] = default.gap_rel
        if not 1 <= self.runs <= MAX_RUNS:
            fixes["runs"] = default.runs
        return replace(self, **fixes)

    @property
    def offloads(self) -> bool:
        """Whether the Solve button solves with offloading: it is an option of XEngine's model
        over all devices only (as ``solve --offload``); single-device methods ignore it."""
        return self.offload and self.method == "xengine"

    def solve_options(self, offload: bool | None = None) -> SolveOptions:
        """The options every solve of the window uses (Solve, auto-solve, comparison, sweep).

        ``offload`` (default: :attr:`offloads`) is turned off by the comparison and the
        explorer, which run the paper's models of several methods with one set of options.
        """
        return SolveOptions(
            backend=self.backend,
            time_limit_s=self.time_limit_s,
            gap_rel=self.gap_rel,
            offload=self.offloads if offload is None else offload,
            runs=self.runs,
        )


@dataclass(frozen=True)
class Project:
    """Everything a project file holds; ``result`` is the replayed last schedule, if any."""

    graph: Graph
    settings: SolverSettings = SolverSettings()
    result: SolveResult | None = None


def result_from_schedule(graph: Graph, schedule: Schedule) -> SolveResult:
    """Replay a schedule read from a file and wrap it as a result for display.

    The status and numbers come from the schedule's ``solver`` block when present; the timeline
    always comes from the simulator, and an invalid replay is reported in ``message``.
    """
    timeline = simulate(effective_graph(graph, schedule), schedule)
    info = schedule.solver or SolverInfo(
        "imported", status=SolveStatus.FEASIBLE, objective=timeline.total_ms
    )
    return SolveResult(
        method=info.method or "imported",
        status=info.status if timeline.valid else SolveStatus.ERROR,
        schedule=schedule,
        timeline=timeline,
        objective=info.objective,
        bound=info.bound,
        gap=info.gap,
        seconds=info.seconds,
        variables=info.variables,
        constraints=info.constraints,
        backend=info.backend,
        message="" if timeline.valid else f"the schedule does not replay: {timeline.violation}",
    )


def project_to_dict(project: Project) -> dict[str, Any]:
    """The project as a JSON-ready document."""
    graph = project.graph
    result = project.result
    return {
        "format": PROJECT_FORMAT,
        "version": 1,
        "graph": graph_to_dict(graph),
        "budgets": dict(graph.memory_limits),
        "solver": asdict(project.settings),
        "schedule": schedule_to_dict(result.schedule) if result and result.schedule else None,
    }


def project_from_dict(doc: Any, path: str | os.PathLike | None = None) -> Project:
    """Read a project document; every part is checked by the core's readers.

    Raises
    ------
    GraphFormatError
        Naming the file and the place, for the graph, the budgets or the schedule.
    """
    where = str(path) if path is not None else None
    if not isinstance(doc, dict) or doc.get("format") != PROJECT_FORMAT:
        raise GraphFormatError(
            "not a project file", path=where, fix=f'a project says "format": "{PROJECT_FORMAT}"'
        )
    graph = graph_from_dict(doc.get("graph"), path)
    budgets = doc.get("budgets") or {}
    if not isinstance(budgets, dict):
        raise GraphFormatError("'budgets' is not an object", path=where, where="budgets")
    try:
        sizes = {name: parse_size(value) for name, value in budgets.items()}
    except ValueError as exc:
        raise GraphFormatError(str(exc), path=where, where="budgets") from None
    graph = graph.with_memory_limits(sizes)
    settings = _settings_from_dict(doc.get("solver") or {}, where)
    result = None
    if doc.get("schedule") is not None:
        schedule = schedule_from_dict(doc["schedule"], graph, path)
        result = result_from_schedule(graph, schedule)
    return Project(graph, settings, result)


def _settings_from_dict(raw: Any, path: str | None) -> SolverSettings:
    if not isinstance(raw, dict):
        raise GraphFormatError("'solver' is not an object", path=path, where="solver")
    default = SolverSettings()
    try:
        settings = SolverSettings(
            method=str(raw.get("method", default.method)),
            backend=str(raw.get("backend", default.backend)),
            time_limit_s=float(raw.get("time_limit_s", default.time_limit_s)),
            gap_rel=float(raw.get("gap_rel", default.gap_rel)),
            auto_solve=bool(raw.get("auto_solve", default.auto_solve)),
            offload=bool(raw.get("offload", default.offload)),
            runs=int(raw.get("runs", default.runs)),
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise GraphFormatError(f"bad solver setting: {exc}", path=path, where="solver") from None
    return settings.checked()


def save_project(project: Project, path: str | os.PathLike) -> None:
    """Write the project atomically (a crash never leaves half a file)."""
    write_json(project_to_dict(project), path)  # atomic; refuses NaN/Infinity


def load_project(path: str | os.PathLike) -> Project:
    """Read a project file; raises :class:`GraphFormatError` naming the problem."""
    return project_from_dict(read_json(path), path)


def load_any(path: str | os.PathLike) -> tuple[Project, bool]:
    """Open a project file or a bare graph file (told apart by their ``format`` field).

    Returns the project and whether the file was a project (a graph file is not saved back).
    """
    doc = read_json(path)
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt == PROJECT_FORMAT:
        return project_from_dict(doc, path), True
    if fmt == SCHEDULE_FORMAT:
        raise GraphFormatError(
            "this is a schedule file",
            path=str(path),
            fix="open its graph first, then use File > Import Schedule",
        )
    if fmt != GRAPH_FORMAT and fmt is not None:
        raise GraphFormatError(
            f"'format' is {fmt!r}",
            path=str(path),
            where="top level",
            fix=f'open a graph ("{GRAPH_FORMAT}") or a project ("{PROJECT_FORMAT}")',
        )
    return Project(graph_from_dict(doc, path)), False
