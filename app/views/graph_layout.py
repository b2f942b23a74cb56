"""Where to draw each node of a DAG: layers left to right, order within a layer by barycentre.

Layers are the longest-path layering (``networkx.topological_generations``). A training graph can
be *folded*: its backward nodes are drawn in a second band under the forward node they belong to
(``Node.of``), the loss at the turn, as in Checkmate's figures, which halves the width and puts
each forward tensor right above the backward node that reads it. No Qt here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx

from solver.document.graph import Graph

__all__ = [
    "Placement",
    "Spacing",
    "can_fold",
    "layout_graph",
    "resolution_levels",
    "scene_positions",
    "wrap_count",
]

SWEEPS = 4
"""Barycentre passes (down and up) used to reduce edge crossings."""


@dataclass(frozen=True)
class Placement:
    """Grid position of every node: ``column`` left to right, ``row`` top to bottom.

    ``band`` is 0 for the forward band and 1 for the folded backward band; rows count within
    the whole drawing (the backward band starts below the deepest forward row).
    """

    column: dict[str, int]
    row: dict[str, float]
    band: dict[str, int]
    columns: int
    rows: float
    folded: bool


def can_fold(graph: Graph) -> bool:
    """A graph folds when it has backward nodes and each names a forward node of the graph."""
    backward = [n for n in graph.nodes if n.kind == "backward"]
    return bool(backward) and all(n.of in graph.index for n in backward)


def layout_graph(graph: Graph, fold: bool = True) -> Placement:
    """Place the nodes of ``graph`` on a grid (see :class:`Placement`)."""
    dag = graph.to_networkx()
    if fold and can_fold(graph):
        return _folded(graph, dag)
    column = _layers(dag)
    rows = _order(dag, column)
    return Placement(
        column,
        rows,
        dict.fromkeys(column, 0),
        max(column.values(), default=-1) + 1,
        max(rows.values(), default=-1) + 1,
        False,
    )


def _layers(dag: nx.DiGraph) -> dict[str, int]:
    return {
        node: depth
        for depth, generation in enumerate(nx.topological_generations(dag))
        for node in generation
    }


def _order(dag: nx.DiGraph, column: dict[str, int]) -> dict[str, float]:
    """Rows within each column: barycentre of neighbours in the previous/next column."""
    by_column: dict[int, list[str]] = {}
    for node in dag.nodes:  # graph order: stable and usually sensible
        by_column.setdefault(column[node], []).append(node)
    row = {node: float(i) for nodes in by_column.values() for i, node in enumerate(nodes)}
    columns = sorted(by_column)
    # plain lists: networkx's adjacency views cost half of a 5,000-node layout in these sweeps
    above = {node: list(dag.predecessors(node)) for node in dag.nodes}
    below = {node: list(dag.successors(node)) for node in dag.nodes}
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        for c in columns if down else reversed(columns):
            neighbours = above if down else below
            nodes = by_column[c]

            def centre(node: str, neighbours=neighbours) -> float:
                near = neighbours[node]
                if not near:
                    return row[node]
                return sum([row[m] for m in near]) / len(near)

            nodes.sort(key=lambda n: (centre(n), row[n]))
            for i, node in enumerate(nodes):
                row[node] = float(i)
    return _centre_columns(by_column, row)


def _centre_columns(by_column: dict[int, list[str]], row: dict[str, float]) -> dict[str, float]:
    """Centre each column on the tallest one so that chains run straight through the middle."""
    tallest = max((len(nodes) for nodes in by_column.values()), default=0)
    return {
        node: row[node] + (tallest - len(nodes)) / 2
        for nodes in by_column.values()
        for node in nodes
    }


def _folded(graph: Graph, dag: nx.DiGraph) -> Placement:
    backward = {n.id for n in graph.nodes if n.kind == "backward"}
    losses = {n.id for n in graph.nodes if n.kind == "loss"}
    # a copy, not a view: the layering and the sweeps walk it tens of thousands of times
    top = dag.subgraph([n for n in dag.nodes if n not in backward and n not in losses]).copy()
    column = _layers(top)
    rows = _order(top, column)
    depth = max(column.values(), default=-1) + 1
    top_rows = max(rows.values(), default=-1) + 1
    for i, loss in enumerate(sorted(losses, key=graph.index.__getitem__)):
        column[loss] = depth
        rows[loss] = top_rows - 0.25 + i  # at the turn, between the two bands
    # Backward nodes sit under their forward node; several under one node stack downwards.
    band_rows: dict[str, float] = {}
    taken: dict[tuple[int, float], int] = {}
    for node in sorted(backward, key=graph.index.__getitem__):
        forward = graph.node(node).of
        column[node] = column[forward]
        slot = (column[node], rows[forward])
        extra = taken.get(slot, 0)
        taken[slot] = extra + 1
        band_rows[node] = top_rows + 0.5 + rows[forward] + extra * 0.5
    rows.update(band_rows)
    band = {n: (1 if n in backward else 0) for n in column}
    return Placement(
        column,
        rows,
        band,
        depth + (1 if losses else 0),
        max(rows.values(), default=-1) + 1,
        True,
    )


# ----- from grid to scene: wrapping a long network, and U-Net's U ------------------------------
@dataclass(frozen=True)
class Spacing:
    """Scene units between grid positions: columns, rows, wrapped lines, resolution levels."""

    column: float
    row: float
    line_gap: float
    level: float


def resolution_levels(graph: Graph) -> dict[str, int] | None:
    """Each forward node's depth in an encoder-decoder (halvings of its spatial size below the
    largest), when the network is one: its sizes go down and come back up, as U-Net's do.
    ``None`` for any other network (a classifier only goes down).

    Drawn with these as rows, U-Net looks like a U instead of a ribbon.
    """
    sizes: dict[str, int] = {}
    for node in graph.nodes:
        shape = node.extra.get("shape") if node.extra else None
        if node.kind == "forward" and isinstance(shape, list) and len(shape) == 4:
            sizes[node.id] = int(shape[-1])
    if len(sizes) < 6:
        return None
    top = max(sizes.values())
    levels = {n: max(round(math.log2(top / max(s, 1))), 0) for n, s in sizes.items()}
    order = [levels[n.id] for n in graph.nodes if n.id in levels]
    deepest = max(order)
    bottom = order.index(deepest)
    # an encoder-decoder: deep in the middle, back near the top at the end
    if deepest < 2 or bottom > 0.8 * len(order) or order[-1] > deepest / 2:
        return None
    return levels


def wrap_count(placement: Placement, spacing: Spacing, aspect: float) -> int:
    """Lines to cut the columns into so that the drawing's width over height is nearest to
    ``aspect`` (the view's): a 300-column network in a wide, short dock reads as text does,
    in lines, instead of as a ribbon a few pixels tall at Fit."""
    if placement.columns <= 1 or aspect <= 0:
        return 1
    height = (placement.rows + 0.5) * spacing.row
    best, best_error = 1, math.inf
    for lines in range(1, placement.columns + 1):
        per_line = math.ceil(placement.columns / lines)
        width = per_line * spacing.column
        total = lines * height + (lines - 1) * spacing.line_gap
        error = abs(math.log(width / total) - math.log(aspect))
        if error < best_error:
            best, best_error = lines, error
        elif width / total < aspect:
            break  # only narrower from here
    return best


def scene_positions(
    placement: Placement,
    spacing: Spacing,
    lines: int = 1,
    vertical: bool = False,
    levels: dict[str, int] | None = None,
    backward_of: dict[str, str] | None = None,
) -> dict[str, tuple[float, float]]:
    """Scene position of every node: columns cut into ``lines`` (one under the other; side by
    side when ``vertical``), with ``levels`` (:func:`resolution_levels`) moving forward nodes
    down and each backward node (``backward_of``: node -> its forward node) under its own."""
    per_line = math.ceil(max(placement.columns, 1) / max(lines, 1))
    line_height = (placement.rows + 0.5) * spacing.row + spacing.line_gap
    deepest = max(levels.values(), default=0) if levels else 0
    if levels:
        line_height += deepest * spacing.level
    positions: dict[str, tuple[float, float]] = {}
    for node, column in placement.column.items():
        line, along = divmod(column, per_line)
        across = placement.row[node] * spacing.row + line * line_height
        if levels:
            forward = (backward_of or {}).get(node, node)
            lift = levels.get(forward, _nearest_level(placement, levels, forward))
            across += lift * spacing.level
            if placement.band.get(node, 0):
                across += deepest * spacing.level  # the backward band under the deepest
        x = along * spacing.column
        positions[node] = (across, x) if vertical else (x, across)
    return positions


def _nearest_level(placement: Placement, levels: dict[str, int], node: str) -> int:
    """A node without a spatial size (the loss, a flatten) takes its column's neighbour's."""
    column = placement.column.get(node, 0)
    near = [
        (abs(placement.column[n] - column), level)
        for n, level in levels.items()
        if n in placement.column
    ]
    return min(near)[1] if near else 0
