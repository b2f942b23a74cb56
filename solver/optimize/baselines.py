"""Single-device baselines (docs/model.md §5): checkpoint-all and Chen et al.'s sqrt(n) and greedy.

Each baseline fixes *which tensors are kept* between stages; the operations of every stage are
then the least recomputation that makes the frontier node's inputs available (as Checkmate
derives ``R`` from a fixed ``S``). The simulator decides whether the result fits a budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import networkx as nx
import numpy as np

from solver.document.graph import Graph
from solver.document.schedule import Operation, Schedule, SolverInfo, Stage
from solver.errors import ScheduleViolation
from solver.execution.simulate import Timeline, simulate
from solver.optimize.bounds import no_remat_peak

__all__ = [
    "schedule_with_checkpoints",
    "checkpoint_all",
    "checkpoint_all_where_it_fits",
    "chen_candidates",
    "chen_sqrtn",
    "chen_greedy",
    "chen_greedy_candidates",
    "BaselineResult",
    "best_fitting",
]

KeepRule = Callable[[int, int, bool], bool]
"""``keep(i, t, recomputed)``: whether tensor ``i`` stays resident after stage ``t``;
``recomputed`` says that the copy on hand was recomputed (not the first computation)."""


def schedule_with_checkpoints(
    graph: Graph, device: str | Sequence[str], keep: KeepRule, method: str
) -> Schedule:
    """Build the schedule that keeps what ``keep`` says and recomputes the rest.

    In stage ``t`` the frontier node and, recursively, every input that is not resident are
    computed (ascending order); a tensor with no later user is never kept. ``device`` is one
    device for all nodes, or a placement (a device name per node): a tensor then lives on its
    node's device and is copied to consumers placed elsewhere. A node computed once
    (``Node.recomputable`` False) is kept until its last use whatever ``keep`` says: it
    cannot be recomputed.
    """
    placement = [device] * graph.n if isinstance(device, str) else list(device)
    once = set(graph.once)
    resident: set[int] = set()
    remade: set[int] = set()  # resident tensors that were recomputed at some point
    stages = []
    last_use = [max(users, default=-1) for users in graph.users]
    for t in range(graph.n):
        computed = _closure(graph, t, resident)
        remade = (remade & resident) | (computed - {t})
        available = resident | computed
        kept = {i for i in available if last_use[i] > t and (i in once or keep(i, t, i in remade))}
        ops = tuple(_operation(graph, k, placement) for k in sorted(computed))
        keep_by_device: dict[str, set[str]] = {}
        for i in kept:
            keep_by_device.setdefault(placement[i], set()).add(graph.nodes[i].id)
        stages.append(Stage(ops, {d: frozenset(ids) for d, ids in keep_by_device.items()}))
        resident = kept
    return Schedule(graph.name, graph.memory_limits, tuple(stages), SolverInfo(method=method))


def _operation(graph: Graph, k: int, placement: list[str]) -> Operation:
    remote = {
        graph.nodes[i].id: placement[i] for i in graph.inputs[k] if placement[i] != placement[k]
    }
    return Operation(graph.nodes[k].id, placement[k], remote)


def _closure(graph: Graph, t: int, resident: set[int]) -> set[int]:
    needed, stack = {t}, [t]
    while stack:
        for i in graph.inputs[stack.pop()]:
            if i not in resident and i not in needed:
                needed.add(i)
                stack.append(i)
    return needed


def checkpoint_all(graph: Graph, device: str) -> Schedule:
    """Keep every tensor until its last use: no recomputation, the no-remat peak of memory.

    Examples
    --------
    >>> from solver.document.generators import unit_chain
    >>> from solver.execution.simulate import simulate
    >>> t = simulate(unit_chain(3), checkpoint_all(unit_chain(3), "cpu"))
    >>> t.valid, t.total_ms, t.recomputations
    (True, 7.0, 0)
    """
    return _keep_everything(graph, device, f"checkpoint-all:{device}")


def _keep_everything(graph: Graph, device: str, method: str) -> Schedule:
    """:func:`schedule_with_checkpoints` for the rule "keep everything", in set operations.

    A stage of a 5,107-operation graph keeps about 900 tensors: asking the rule about each
    one took 3 of the 9 s this schedule took to build. Here each stage keeps what the stage
    before kept, less the tensors it reads last, plus what it computes that is read later.
    """
    last_use = [max(users, default=-1) for users in graph.users]
    read_last: list[set[int]] = [set() for _ in range(graph.n)]
    for i, t in enumerate(last_use):
        if t >= 0:
            read_last[t].add(i)
    names = [node.id for node in graph.nodes]
    placement = [device] * graph.n
    resident: set[int] = set()
    kept_names: set[str] = set()
    stages = []
    for t in range(graph.n):
        computed = _closure(graph, t, resident)
        new = {i for i in computed if last_use[i] > t}
        resident = (resident - read_last[t]) | new
        kept_names.difference_update(names[i] for i in read_last[t])
        kept_names.update(names[i] for i in new)
        ops = tuple(_operation(graph, k, placement) for k in sorted(computed))
        stages.append(Stage(ops, {device: frozenset(kept_names)} if kept_names else {}))
    return Schedule(graph.name, graph.memory_limits, tuple(stages), SolverInfo(method=method))


def checkpoint_all_where_it_fits(graph: Graph) -> tuple[Schedule, Timeline] | None:
    """Checkpoint-all on the fastest device whose budget holds the no-remat peak, replayed.

    The schedule a solve can show within seconds on any size of graph, before the
    construction (17 s on 5,107 operations) or a model: building and replaying it is linear
    in the graph but for the resident sets (2.5 s at 5,107 operations). ``None`` when no
    device can run every node and hold the peak.
    """
    peak = no_remat_peak(graph)
    fitting = [
        d
        for d, device in enumerate(graph.devices)
        if device.activation_budget >= peak and not np.isnan(graph.cost[d]).any()
    ]
    if not fitting:
        return None
    with np.errstate(over="ignore"):  # a cost of 1e308 sums to inf: slowest, not an error
        fastest = min(fitting, key=lambda d: float(graph.cost[d].sum()))
    schedule = checkpoint_all(graph, graph.devices[fastest].name)
    timeline = simulate(graph, schedule)
    return (schedule, timeline) if timeline.valid else None


def chen_candidates(graph: Graph) -> list[int]:
    """Forward nodes whose output separates the forward graph (articulation points, in order).

    Chen et al. checkpoint only such nodes, so that a segment between two checkpoints can be
    recomputed from its start alone. Without ``forward`` kinds, every node counts as forward.
    """
    forward = [i for i, node in enumerate(graph.nodes) if node.kind == "forward"]
    forward = forward or list(range(graph.n))
    undirected = nx.Graph()
    undirected.add_nodes_from(forward)
    undirected.add_edges_from(
        (i, k) for i, k in graph.edge_pairs if i in undirected and k in undirected
    )
    points = set(nx.articulation_points(undirected))
    return [i for i in forward if i in points or i == forward[-1]]


def _segment_rule(graph: Graph, checkpoints: set[int]) -> KeepRule:
    """Chen's policy: forward tensors stay while a forward op still needs them; afterwards only
    checkpoints stay, and a recomputed segment is kept until its backward use."""
    forward = {i for i, node in enumerate(graph.nodes) if node.kind == "forward"}
    last_forward_use = [
        max((k for k in graph.users[i] if k in forward), default=-1) for i in range(graph.n)
    ]

    def keep(i: int, t: int, recomputed: bool) -> bool:
        return i in checkpoints or i not in forward or last_forward_use[i] > t or recomputed

    return keep


def chen_sqrtn(graph: Graph, device: str) -> Schedule:
    """Chen et al.'s sqrt(n) strategy: every ``ceil(sqrt(c))``-th candidate is a checkpoint."""
    candidates = chen_candidates(graph)
    step = max(1, math.ceil(math.sqrt(len(candidates))))
    checkpoints = set(candidates[step - 1 :: step])
    return schedule_with_checkpoints(
        graph, device, _segment_rule(graph, checkpoints), f"chen-sqrtn:{device}"
    )


def _greedy_checkpoints(graph: Graph, candidates: list[int], segment_bytes: float) -> set[int]:
    chosen, running = set(), 0
    forward = [i for i, node in enumerate(graph.nodes) if node.kind == "forward"] or candidates
    candidate_set = set(candidates)
    for i in forward:
        running += int(graph.output_bytes[i])
        if running > segment_bytes and i in candidate_set:
            chosen.add(i)
            running = 0
    return chosen


class BaselineResult:
    """A baseline's schedule with its replay (``None`` fields when nothing fits; then
    ``violations`` holds each candidate's first broken rule)."""

    def __init__(
        self,
        schedule: Schedule | None,
        timeline: Timeline | None,
        reason: str = "",
        violations: tuple[ScheduleViolation, ...] = (),
    ):
        self.schedule, self.timeline, self.reason = schedule, timeline, reason
        self.violations = violations


def best_fitting(graph: Graph, schedules: list[Schedule]) -> BaselineResult:
    """The cheapest schedule among ``schedules`` that replays within the budgets."""
    best: BaselineResult | None = None
    best_ms = 0.0
    violations: list[ScheduleViolation] = []
    for schedule in schedules:
        timeline = simulate(graph, schedule)
        if timeline.valid and (best is None or timeline.total_ms < best_ms):
            best, best_ms = BaselineResult(schedule, timeline), timeline.total_ms
        elif timeline.violation is not None:
            violations.append(timeline.violation)
    if best is None:
        reason = str(violations[0]) if violations else "no candidate schedule"
        return BaselineResult(None, None, reason, tuple(violations))
    return best


def chen_greedy_candidates(
    graph: Graph, device: str | Sequence[str], tries: int = 24, method: str | None = None
) -> list[Schedule]:
    """The schedules Chen et al.'s greedy strategy tries, one per distinct segment size.

    Segment sizes are tried on a geometric grid between the smallest tensor and the whole
    forward pass; each candidate is replayed under the budget. ``device`` may be a placement
    (a device per node), as in :func:`schedule_with_checkpoints`.
    """
    method = method or f"chen-greedy:{device}"
    candidates = chen_candidates(graph)
    total = float(sum(int(graph.output_bytes[i]) for i in candidates)) or 1.0
    smallest = float(
        min((int(graph.output_bytes[i]) for i in candidates if graph.output_bytes[i]), default=1)
    )
    schedules, seen = [], set()
    for j in range(tries):
        size = smallest * (total / smallest) ** (j / max(tries - 1, 1))
        checkpoints = frozenset(_greedy_checkpoints(graph, candidates, size))
        if checkpoints in seen:
            continue
        seen.add(checkpoints)
        rule = _segment_rule(graph, set(checkpoints))
        schedules.append(schedule_with_checkpoints(graph, device, rule, method))
    return schedules


def chen_greedy(
    graph: Graph, device: str | Sequence[str], tries: int = 24, method: str | None = None
) -> BaselineResult:
    """Chen et al.'s greedy strategy: the fastest fitting of :func:`chen_greedy_candidates`."""
    return best_fitting(graph, chen_greedy_candidates(graph, device, tries, method))
