"""What nodes computed once force on a saved-bytes limit (docs/spec-notes.md, "Nodes computed
once").

A node computed once (``Node.recomputable`` False, a dropout mask) that the backward reads
cannot be recomputed there: it is resident somewhere when the backward starts. Its bytes are
therefore a floor under the saved bytes, and a limit below that floor admits no schedule.
:func:`explain_saved_floor` says so before any model is built, where the generic message
("raise a budget towards the no-rematerialization peak") would point at the wrong number.
"""

from __future__ import annotations

from solver.document.graph import Graph
from solver.document.units import format_size

__all__ = ["held_at_boundary", "explain_saved_floor"]


def held_at_boundary(graph: Graph) -> tuple[int, ...]:
    """Indices of the nodes computed once, before the boundary, that a node at or after the
    boundary reads: each is resident on some device when the backward starts.

    >>> from solver.document.generators import unit_chain
    >>> held_at_boundary(unit_chain(2))
    ()
    """
    t = graph.boundary
    if t is None:
        return ()
    return tuple(i for i in graph.once if i < t and any(k >= t for k in graph.users[i]))


def explain_saved_floor(graph: Graph) -> str | None:
    """Why the saved-bytes limits admit no schedule, when every device has one and together
    they are below the bytes of :func:`held_at_boundary`; ``None`` otherwise."""
    limits = graph.saved_limits
    if not limits or len(limits) < graph.num_devices:
        return None  # a device without a limit can hold them all
    held = held_at_boundary(graph)
    floor = sum(int(graph.output_bytes[i]) for i in held)
    allowed = sum(limits.values())
    if floor <= allowed:
        return None
    names = ", ".join(graph.nodes[i].id for i in held[:3]) + (" ..." if len(held) > 3 else "")
    return (
        f"no schedule can exist: {len(held)} {'node' if len(held) == 1 else 'nodes'} computed "
        f"once (random ops: {names}), read in the backward, hold {format_size(floor)} "
        f"({floor} bytes) when it starts, more than the saved-bytes limits allow ({allowed} "
        f"bytes); raise the limit to at least {floor} bytes"
    )
