"""Colours of the memory-per-tensor bands: by layer, lighter and hatched when recomputed,
dotted for a running node's workspace.

A backward node shares its forward node's hue, so one layer reads as one colour from the
forward pass to its gradient; neighbouring layers step around the hue circle by the golden
ratio so that they differ. Brushes are made once per (layer, origin) and shared by every band.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor

from app.theme import Colors
from solver.document.graph import Graph

__all__ = ["BandBrushes", "layer_colour"]


_SATURATION = (0.62, 0.42, 0.80)
_VALUE = (0.88, 0.70, 0.80, 0.60, 0.95)


def layer_colour(layer: int, recomputed: bool = False) -> QColor:
    """The colour of the ``layer``-th layer: hues step around the circle by the golden ratio
    (neighbours differ), and saturation and brightness cycle through 3 and 5 levels, so that
    ResNet-50's 145 layers get 145 distinct colours (the hue alone gave near-twins a few
    layers apart). A recomputation is the same hue, paler.

    >>> len({layer_colour(k).name() for k in range(145)})
    145
    """
    hue = (layer * 0.61803398875) % 1.0
    saturation = _SATURATION[layer % 3]
    value = _VALUE[(layer // 3) % 5]
    return QColor.fromHsvF(hue, saturation * (0.45 if recomputed else 1.0), value)


class BandBrushes:
    """Brushes by (layer, origin) and pens by origin, made once per redraw and shared."""

    def __init__(self, graph: Graph, colors: Colors) -> None:
        layers = [
            n.of if n.kind == "backward" and n.of in graph.index else n.id for n in graph.nodes
        ]
        order = {name: j for j, name in enumerate(dict.fromkeys(layers))}
        self._layer = [order[name] for name in layers]
        self._count = max(len(order), 1)
        self._cache: dict[tuple[int, int], QBrush] = {}
        self._pens = [
            pg.mkPen(QColor(colors.background), width=0.5),
            pg.mkPen(QColor(colors.background), width=0.5),
            colors.pen(colors.transfer, 1.6),
            colors.pen(QColor(colors.transfer).darker(150), 1.6, dashed=True),
            pg.mkPen(QColor(colors.foreground), width=1.0, style=Qt.PenStyle.DotLine),
        ]

    def brush(self, node: int, origin: int) -> QBrush:
        key = (self._layer[node], origin)
        if key not in self._cache:
            color = layer_colour(key[0], recomputed=origin == 1)
            style = {
                1: Qt.BrushStyle.Dense4Pattern,
                3: Qt.BrushStyle.DiagCrossPattern,
                4: Qt.BrushStyle.Dense6Pattern,  # a workspace: sparse dots, no tensor
            }.get(origin, Qt.BrushStyle.SolidPattern)
            self._cache[key] = QBrush(color, style)
        return self._cache[key]

    def pen(self, origin: int):
        return self._pens[origin]
