"""Undo commands: every edit of the graph, its devices and budgets is one of these.

Each command computes its target graph in ``__init__`` with the pure functions of
:mod:`solver.editing.edits`, so an invalid edit raises :class:`GraphFormatError` *before* it is
pushed and the undo stack only ever holds edits that worked. Graphs are frozen, so a command keeps
the old and the new graph and swaps them; it changes the document, never a view (style rule 13).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtGui import QUndoCommand

from solver.document.graph import Device, Graph, Node
from solver.document.training import build_training_graph
from solver.document.units import format_size
from solver.editing import device_edits, edits
from solver.errors import GraphFormatError

if TYPE_CHECKING:
    from app.document import Document

__all__ = [
    "GraphCommand",
    "AddNodeCommand",
    "ConnectCommand",
    "DeleteCommand",
    "SetNodePropertyCommand",
    "RenameNodeCommand",
    "SetGraphNameCommand",
    "SetEdgeTransferCommand",
    "BuildTrainingGraphCommand",
    "ReplaceGraphCommand",
    "SetMemoryLimitCommand",
    "AddDeviceCommand",
    "RemoveDeviceCommand",
    "RenameDeviceCommand",
    "SetLinkCommand",
    "DEFAULT_NODE_MEMORY",
]

DEFAULT_NODE_MEMORY = 1_000_000
"""Bytes of a node added by hand (1 MB), to be edited in the inspector."""
_KEEP = object()


def _graph_of(document: Document) -> Graph:
    if document.graph is None:
        raise GraphFormatError("there is no graph to edit", fix="open or create a graph first")
    return document.graph


class GraphCommand(QUndoCommand):
    """Swap the document's graph for ``graph``; undo swaps the old one back.

    ``select`` is the node selected after redo (``_KEEP``: leave the selection alone).
    """

    def __init__(self, document: Document, graph: Graph, text: str, select: object = _KEEP):
        super().__init__(text)
        self._document = document
        self._old = _graph_of(document)
        self._old_token = document.structure_token
        self._new = graph
        self._new_token: int | None = None
        self._select = select

    def redo(self) -> None:
        self._new_token = self._document.apply_graph(self._new, self._new_token)
        if self._select is not _KEEP:
            self._document.set_selection(self._select)

    def undo(self) -> None:
        self._document.apply_graph(self._old, self._old_token)


class AddNodeCommand(GraphCommand):
    """Add a node (by default a 1 MB forward node costing 1 ms on every device) and select it."""

    def __init__(self, document: Document, node: Node | None = None):
        graph = _graph_of(document)
        if node is None:
            node = Node(
                edits.next_node_id(graph),
                DEFAULT_NODE_MEMORY,
                {d.name: 1.0 for d in graph.devices},
                kind="forward",
            )
        super().__init__(document, edits.add_node(graph, node), f"Add node {node.id}", node.id)


class ConnectCommand(GraphCommand):
    """Add the edge ``source -> target``; refused (raises) when it would make a cycle."""

    def __init__(self, document: Document, source: str, target: str):
        graph = edits.add_edge(_graph_of(document), source, target)
        super().__init__(document, graph, f"Connect {source} \u2192 {target}")


class DeleteCommand(GraphCommand):
    """Delete nodes (with their edges) and edges."""

    def __init__(
        self,
        document: Document,
        node_ids: tuple[str, ...] = (),
        edges: tuple[tuple[str, str], ...] = (),
    ):
        graph = edits.remove_items(_graph_of(document), node_ids, edges)
        names = [*node_ids, *(f"{a} \u2192 {b}" for a, b in edges)]
        text = f"Delete {names[0]}" if len(names) == 1 else f"Delete {len(names)} items"
        super().__init__(document, graph, text)


class SetNodePropertyCommand(GraphCommand):
    """Set one field of a node: ``memory`` or ``workspace`` (bytes), ``cost`` (ms by device),
    ``kind`` or ``op``."""

    FIELDS = ("memory", "workspace", "cost", "kind", "op")
    SIZES = ("memory", "workspace")
    LABELS = {"memory": "output size"}
    """How the Edit menu names a field where its name alone would not say (a node's
    ``memory`` is its output, the inspector's "Output")."""

    def __init__(self, document: Document, node_id: str, field: str, value: object):
        if field not in self.FIELDS:
            raise ValueError(f"field must be one of {self.FIELDS}; got {field!r}")
        if field == "cost":
            value = dict(value)  # type: ignore[call-overload]
        graph = edits.set_node_fields(_graph_of(document), node_id, **{field: value})
        sized = field in self.SIZES
        label = self.LABELS.get(field, field)
        text = f"Set {label} of {node_id}" + (f" to {format_size(value)}" if sized else "")
        super().__init__(document, graph, text)


class RenameNodeCommand(GraphCommand):
    """Give a node a new id (its edges and ``of`` references follow); the selection follows it.

    Refused (raises) when the new id is empty or taken.
    """

    def __init__(self, document: Document, old: str, new: str):
        graph = edits.rename_node(_graph_of(document), old, new)
        super().__init__(document, graph, f"Rename node {old} to {new}", new)
        self._old_id = old
        self._reselect = document.selection == old

    def undo(self) -> None:
        super().undo()
        if self._reselect:
            self._document.set_selection(self._old_id)


class SetGraphNameCommand(GraphCommand):
    """Rename the graph. The structure is unchanged, so the result on display stays."""

    def __init__(self, document: Document, name: str):
        graph = edits.set_graph_name(_graph_of(document), name)
        super().__init__(document, graph, f"Rename graph to {name}")
        self._new_token = self._old_token


class SetEdgeTransferCommand(GraphCommand):
    """Set an edge's transfer-time overrides; an empty mapping returns to the link model."""

    def __init__(self, document: Document, source: str, target: str, transfer_ms: dict[str, float]):
        graph = edits.set_edge_transfer(_graph_of(document), source, target, transfer_ms)
        super().__init__(document, graph, f"Set transfer times of {source} \u2192 {target}")


class BuildTrainingGraphCommand(GraphCommand):
    """Replace a forward graph by its training graph (forward, loss, backward)."""

    def __init__(self, document: Document):
        graph = _graph_of(document)
        if not graph.nodes:
            raise GraphFormatError("the graph has no nodes", fix="add forward nodes first")
        done = [n.id for n in graph.nodes if n.kind in ("loss", "backward")]
        if done:
            raise GraphFormatError(
                f"node '{done[0]}' is a {graph.node(done[0]).kind} node",
                where="Build training graph",
                fix="start from a forward graph (no loss or backward nodes)",
            )
        super().__init__(document, build_training_graph(graph), "Build training graph")


class ReplaceGraphCommand(GraphCommand):
    """Replace the whole graph (e.g. an imported graph file), undoably."""

    def __init__(self, document: Document, graph: Graph, text: str = "Replace graph"):
        super().__init__(document, graph, text, None)


class SetMemoryLimitCommand(QUndoCommand):
    """Set one device's memory limit (bytes, fixed memory included).

    A slider drag previews memory limits live through ``document.set_memory_limits`` and pushes
    one of these on release with ``old`` = the value at the press, so the drag is one undo entry.
    """

    def __init__(self, document: Document, device: str, memory: int, old: int | None = None):
        graph = _graph_of(document)
        if device not in graph.device_index:
            raise GraphFormatError(f"unknown device {device!r}", where="budgets")
        if memory < 0:
            raise GraphFormatError(f"{memory} is negative", where=f"device '{device}'")
        super().__init__(f"Set {device} memory to {format_size(memory)}")
        self._document = document
        self._device = device
        self._new = int(memory)
        self._old = int(graph.device(device).memory_limit if old is None else old)

    def redo(self) -> None:
        self._document.set_memory_limits({self._device: self._new})

    def undo(self) -> None:
        self._document.set_memory_limits({self._device: self._old})


class AddDeviceCommand(GraphCommand):
    """Add a device (runs every node at the first device's cost, linked to all others)."""

    def __init__(self, document: Document, name: str, kind: str = "gpu", memory: int = 1024**3):
        graph = device_edits.add_device(_graph_of(document), Device(name, kind, memory))
        super().__init__(document, graph, f"Add device {name}")


class RemoveDeviceCommand(GraphCommand):
    """Remove a device with its costs, links and overrides (refused if a node needs it)."""

    def __init__(self, document: Document, name: str):
        super().__init__(
            document, device_edits.remove_device(_graph_of(document), name), f"Remove device {name}"
        )


class RenameDeviceCommand(GraphCommand):
    """Rename a device everywhere, including a solver method that names it."""

    def __init__(self, document: Document, old: str, new: str):
        graph = device_edits.rename_device(_graph_of(document), old, new)
        super().__init__(document, graph, f"Rename device {old} to {new}")
        self._old_settings = document.settings
        method, _, device = self._old_settings.method.partition(":")
        renamed = f"{method}:{new}" if device == old else self._old_settings.method
        self._new_settings = replace(self._old_settings, method=renamed)

    def redo(self) -> None:
        super().redo()
        self._document.set_settings(self._new_settings)

    def undo(self) -> None:
        super().undo()
        self._document.set_settings(self._old_settings)


class SetLinkCommand(GraphCommand):
    """Set the bandwidth (bytes/s) and latency (ms) of the link ``source -> target``."""

    def __init__(
        self, document: Document, source: str, target: str, bandwidth: float, latency_ms: float
    ):
        graph = device_edits.set_link(_graph_of(document), source, target, bandwidth, latency_ms)
        super().__init__(document, graph, f"Set link {source} \u2192 {target}")
