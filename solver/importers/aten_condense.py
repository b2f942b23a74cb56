"""Make a grouping of ATen ops schedulable: cycles condensed, groups in a schedule order.

Grouping ops into nodes (:mod:`solver.importers.aten_groups`) is a heuristic: by module, by the
autograd node an op differentiates, gradient sums by who reads them. The op graph is a DAG, but
a grouping of it need not be: two groups whose ops interleave (A's op, then B's, then A's again,
each reading the one before) read each other, and no schedule can run either first. Whatever
the heuristics did, every strongly connected component of the group graph becomes one group
here; the quotient of a graph by its strongly connected components is always acyclic, and a
merged group still runs its ops in the capture's topological order, so the executor can run it.

The merged group keeps a readable id: ``loss`` if the loss is in it (the loss node stays one
node), otherwise its first member's id with the number of others, ``gru.add_1+2.grad`` (a
backward group keeps the ``.grad`` suffix and the ``of`` of its first member).

:func:`schedule_order` then lists the groups in a topological order that keeps the grouping's
order where it can, the order a schedule that follows the graph runs them in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from solver.document.training import LOSS_ID

__all__ = ["Condensed", "condense_cycles", "schedule_order"]

logger = logging.getLogger(__name__)

_GRAD = ".grad"


@dataclass(frozen=True)
class Condensed:
    """What :func:`condense_cycles` merged: old group id -> new id, and the new ids' ``of``."""

    rename: dict[str, str]
    of: dict[str, str]

    def __bool__(self) -> bool:
        return bool(self.rename)


def condense_cycles(
    reads: Mapping[str, Iterable[str]], order: Iterable[str], taken: Iterable[str] = ()
) -> Condensed:
    """Merge every cycle of the group graph into one group.

    Parameters
    ----------
    reads
        Group id -> the ids of the groups it reads values of (its inputs; itself ignored).
    order
        Every group id, in the order of its first op (forward groups first): a merged group
        is named after its earliest member.
    taken
        Further ids the new names must not collide with.

    Returns
    -------
    Condensed
        Empty when the graph is already a DAG (nothing is renamed).
    """
    rank = {gid: j for j, gid in enumerate(order)}
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(rank)
    for target, sources in reads.items():
        graph.add_edges_from((s, target) for s in sources if s != target)
    components = [
        sorted(c, key=lambda g: rank.get(g, len(rank)))
        for c in nx.strongly_connected_components(graph)
        if len(c) > 1
    ]
    used = set(rank) | set(taken)
    rename: dict[str, str] = {}
    of: dict[str, str] = {}
    for members in sorted(components, key=lambda c: rank.get(c[0], len(rank))):
        new = _name(members, used)
        used.add(new)
        for gid in members:
            rename[gid] = new
        if new.endswith(_GRAD):
            first = next(g for g in members if g.endswith(_GRAD))
            of[new] = first.removesuffix(_GRAD)
        logger.debug("groups %s read each other (a cycle); merged into %s", members, new)
    if components:
        first = sorted(components, key=lambda c: rank.get(c[0], len(rank)))[0]
        logger.warning(
            "%d cycle(s) of groups that read each other merged into one node each (%s -> %s)",
            len(components),
            ", ".join(first),
            rename[first[0]],
        )
    return Condensed(rename, of)


def _name(members: list[str], used: set[str]) -> str:
    """``loss`` if the loss is a member, else the first member's id and the others' count."""
    if LOSS_ID in members:
        return LOSS_ID
    backward = [g for g in members if g.endswith(_GRAD)]
    first = (backward or members)[0]
    stem = first.removesuffix(_GRAD) if backward else first
    suffix = _GRAD if backward else ""
    candidate = f"{stem}+{len(members) - 1}{suffix}"
    k = 2
    while candidate in used:
        candidate = f"{stem}+{len(members) - 1}#{k}{suffix}"
        k += 1
    return candidate


def schedule_order(order: Sequence[str], reads: Mapping[str, Iterable[str]]) -> list[str]:
    """A topological order of the groups that keeps ``order`` where it can (among the groups
    ready to run, the earliest in ``order`` first).

    A node's transient bytes are its ``workspace`` (docs/spec-notes.md, "Workspace memory"),
    not a node of their own, so nothing needs to be glued to its node here any more.
    """
    position = {gid: j for j, gid in enumerate(order)}
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(position)
    for target, sources in reads.items():
        if target in position:
            graph.add_edges_from((s, target) for s in sources if s in position and s != target)
    return list(nx.lexicographical_topological_sort(graph, key=position.__getitem__))
