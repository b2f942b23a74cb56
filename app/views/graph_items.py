"""The graphics items of the graph editor: operator boxes and edge arrows.

A node box is coloured by kind (the theme's forward/loss/backward colours, as in the Gantt), its
height grows with the square root of its output size, and its second line shows op and memory.
During a step-through each box carries one chip per device, coloured by the status of its
tensor there (``solver.execution.explain``: resident, computing, transferred, freed).
"""

from __future__ import annotations

import functools
import html
import math
import re
from collections.abc import Callable, Mapping

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from app.theme import Colors
from solver.document.graph import Graph, Node
from solver.document.units import format_ms, format_size

__all__ = [
    "NodeItem",
    "EdgeItem",
    "NODE_WIDTH",
    "STATUS_LABELS",
    "box_lines",
    "fitted_name",
    "name_forms",
    "shape_text",
    "status_colour",
]

NODE_WIDTH = 118.0
MIN_HEIGHT = 40.0
MAX_HEIGHT = 58.0
CHIP_HEIGHT = 11.0
DASH = "\u2014"
_ELIDE = Qt.TextElideMode.ElideRight
_CENTRE = int(Qt.AlignmentFlag.AlignCenter)
_LEFT_MIDDLE = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
DETAIL_SCALE = 0.75
"""Below this zoom a box shows only its name (at :data:`TITLE_PIXELS`), not op and size."""
TITLE_PIXELS = 10
"""Height on screen of a zoomed-out box's name."""
TINY_PIXELS = 6
PLAIN_PIXELS = 40
"""A box narrower than this on screen is a filled, outlined rectangle without text (its
name would be "la…"; thousands of them, each with a font to measure, made a frame take
seconds); edges then are straight lines."""
"""A box narrower than this on screen is drawn as a plain rectangle (level of detail)."""
STATUS_LABELS = {
    "computing": "computing",
    "resident": "resident",
    "transferred": "copied in",
    "freed": "freed",
}


def status_colour(status: str, colors: Colors) -> QColor:
    """Chip fill for a residency status."""
    return QColor(
        {
            "computing": colors.cursor,
            "resident": colors.muted if colors.dark else "#4d4d4d",
            "transferred": colors.transfer,
            "freed": colors.background,
        }.get(status, colors.background)
    )


_NUMBERED = re.compile(r"^([A-Za-z])[A-Za-z]*_(\d+)$")


def name_forms(name: str) -> list[str]:
    """Ever shorter forms of a box's name that still say which it is: a collapsed block
    without its mark and count, a backward node without ``.grad`` (its colour says backward).

    >>> name_forms("\u25b8 layer1.grad (13)")
    ['\u25b8 layer1.grad (13)', 'layer1.grad (13)', 'layer1.grad', 'layer1']
    >>> name_forms("conv1.grad")
    ['conv1.grad', 'conv1']
    >>> name_forms("features_10.grad")  # VGG: the number tells the layers apart
    ['features_10.grad', 'features_10', 'f_10']
    """
    forms = [name]
    if name.startswith("\u25b8 "):
        forms.append(name[2:])
        if forms[-1].endswith(")") and " (" in forms[-1]:
            forms.append(forms[-1].rsplit(" (", 1)[0])
    if forms[-1].endswith(".grad"):
        forms.append(forms[-1].removesuffix(".grad"))
    numbered = _NUMBERED.match(forms[-1])
    if numbered:
        forms.append(f"{numbered[1]}_{numbered[2]}")
    return forms


def fitted_name(name: str, metrics: QFontMetricsF, width: float) -> str:
    """The longest form of ``name`` (:func:`name_forms`) that fits ``width``, else the
    shortest one cut at the end (its start names the layer; a cut middle did not)."""
    forms = name_forms(name)
    for form in forms:
        if metrics.horizontalAdvance(form) <= width:
            return form
    return metrics.elidedText(forms[-1], Qt.TextElideMode.ElideRight, width)


def shape_text(shape: object) -> str:
    """An output shape as boxes show it.

    >>> shape_text([8, 64, 112, 112]), shape_text(None), shape_text([])
    ('8×64×112×112', '', 'scalar')
    """
    if not isinstance(shape, (list, tuple)):
        return ""
    return "×".join(str(d) for d in shape) if shape else "scalar"


def box_lines(node: Node, op_level: bool = False) -> tuple[str, str, str]:
    """A box's three lines: what it is (op type, or a folded module's name), its output
    (shape and size, or what the module holds), and its name (``""`` when the first line
    already is it). Netron's boxes say the op; the name is the third line and the tooltip."""
    extra = node.extra or {}
    if "members" in extra:
        return (
            str(extra.get("module", node.id)),
            f"{extra['members']} ops · {format_size(int(extra.get('total_bytes', 0)))}",
            "",
        )
    shape = shape_text(extra.get("shape"))
    detail = " · ".join(p for p in (shape, format_size(node.memory)) if p)
    # a node of an op-level import is its op, as in Netron; a layer (conv1, a fused
    # "conv+batch_norm+relu") or a hand-made node is its name, with the op on the third line
    if node.op and op_level:
        return node.op, detail, node.id
    return node.id, detail, node.op


@functools.lru_cache(maxsize=1)
def _TEXT_FONTS() -> tuple[QFont, QFont]:  # a constant, made once a QApplication exists
    """The detailed box text's fonts: the first line's and the smaller ones'."""
    title = QFont()
    title.setPointSizeF(8.5)
    title.setBold(True)
    small = QFont()
    small.setPointSizeF(7.0)
    return title, small


@functools.lru_cache(maxsize=64)
def _fill(kind: int, background: int, amount: float) -> QColor:
    """A box's fill: its kind's colour ``amount`` of the way to the background (cached)."""
    return _mix(QColor(kind), QColor(background), amount)


@functools.lru_cache(maxsize=64)
def _title_font(pixels: int) -> QFont:
    font = QFont()
    font.setPixelSize(pixels)
    font.setBold(True)
    return font


@functools.lru_cache(maxsize=64)
def _accent(height: float) -> QPainterPath:
    """The kind's bar down a box's left edge, rounded like the box (made once per height:
    intersecting two paths in every paint of thousands of boxes cost a frame)."""
    box = QRectF(-NODE_WIDTH / 2, -height / 2, NODE_WIDTH, height)
    accent = QPainterPath()
    accent.addRoundedRect(QRectF(box.left(), box.top(), 10, box.height()), 6, 6)
    clip = QPainterPath()
    clip.addRect(QRectF(box.left(), box.top(), 5, box.height()))
    return accent.intersected(clip)


def _mix(a: QColor, b: QColor, amount: float) -> QColor:
    return QColor(
        round(a.red() + (b.red() - a.red()) * amount),
        round(a.green() + (b.green() - a.green()) * amount),
        round(a.blue() + (b.blue() - a.blue()) * amount),
    )


class LazyTip:
    """A tooltip written when the mouse reaches the item, not when the item is made.

    Describing every node and edge up front cost a second on a 5,000-node graph (and every
    node again on each step of the cursor); ``tip_source`` is called on hover enter instead,
    and by :meth:`toolTip` for readers that ask directly.
    """

    tip_source: Callable[[], str] | None = None

    def refresh_tip(self) -> None:
        if self.tip_source is not None:
            QGraphicsItem.setToolTip(self, self.tip_source())  # type: ignore[arg-type]

    def toolTip(self) -> str:  # Qt name, for Python readers
        self.refresh_tip()
        return QGraphicsItem.toolTip(self)  # type: ignore[arg-type]


class NodeItem(LazyTip, QGraphicsItem):
    """One operator: a rounded box centred on its position, with chips in step mode."""

    def __init__(self, node: Node, height: float, colors: Colors, op_level: bool = False):
        super().__init__()
        self.node = node
        self._op_level = op_level
        """The graph is an op-level import: the box's first line is its op type."""
        self.node_id = node.id
        self._height = height
        self._box = QRectF(-NODE_WIDTH / 2, -height / 2, NODE_WIDTH, height)
        self._colors = colors
        self._text_rows: list | None = None
        """The detailed text as (font, metrics, line, colour) rows, made at the first paint."""
        self._titles: dict[int, str] = {}
        """The zoomed-out name, fitted, per font pixel size."""
        self._selected = False
        self._hovered = False
        self.on_hover = None
        """Called with the node id on hover enter and ``None`` on leave (set by the view)."""
        self._drop_target = False
        self._residency: Mapping[str, str] | None = None
        self._devices: tuple[str, ...] = ()
        self.setAcceptHoverEvents(True)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setZValue(2)

    # ----- state ---------------------------------------------------------------------------------
    def set_selected(self, selected: bool) -> None:
        if selected != self._selected:
            self._selected = selected
            self.update()

    def set_drop_target(self, on: bool) -> None:
        if on != self._drop_target:
            self._drop_target = on
            self.update()

    def set_residency(self, devices: tuple[str, ...], residency: Mapping[str, str] | None) -> None:
        """Device statuses of this node's tensor (``None``: not stepping)."""
        if devices == self._devices and residency == self._residency:
            return  # most nodes at a step of the cursor: nothing to repaint
        if (residency is None) != (self._residency is None):
            self.prepareGeometryChange()  # the chips row comes or goes
        self._devices = devices
        self._residency = residency
        self.update()

    @property
    def is_selected(self) -> bool:
        return self._selected

    @property
    def residency(self) -> Mapping[str, str] | None:
        """Device statuses shown on the chips (``None`` when not stepping)."""
        return self._residency

    @property
    def box(self) -> QRectF:
        return QRectF(self._box)

    def half_height(self, bottom: bool) -> float:
        """From the box's centre to its top edge, or to its bottom one below the chips (where
        an arrow meets it, in scene units)."""
        return self._height / 2 + (self._chips_height() if bottom else 0.0)

    def _chips_height(self) -> float:
        return CHIP_HEIGHT + 3 if self._residency is not None else 0.0

    # ----- QGraphicsItem ------------------------------------------------------------------------
    def boundingRect(self) -> QRectF:
        return self.box.adjusted(-4, -4, 4, 4 + self._chips_height())

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRoundedRect(self.box.adjusted(0, 0, 0, self._chips_height()), 6, 6)
        return path

    def set_hovered(self, hovered: bool) -> None:
        """Highlight lightly (the node is under the mouse here or in another view)."""
        if hovered != self._hovered:
            self._hovered = hovered
            self.update()

    @property
    def is_hovered(self) -> bool:
        return self._hovered

    def hoverEnterEvent(self, event) -> None:
        self.refresh_tip()
        self.set_hovered(True)
        if self.on_hover is not None:
            self.on_hover(self.node_id)

    def hoverLeaveEvent(self, event) -> None:
        self.set_hovered(False)
        if self.on_hover is not None:
            self.on_hover(None)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        colors = self._colors
        kind = colors.kind(self.node.kind)
        background = QColor(colors.background)
        faded = self._residency is not None and not any(
            s in ("resident", "computing", "transferred") for s in self._residency.values()
        )
        box = self.box
        scale = option.levelOfDetailFromTransform(painter.worldTransform())
        if box.width() * scale < TINY_PIXELS:
            self._paint_tiny(painter, box, kind, faded)
            return
        if box.width() * scale < PLAIN_PIXELS:
            self._paint_plain(painter, box, kind, faded)
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setOpacity(0.4 if faded else 1.0)
        fill = _fill(kind.rgb(), background.rgb(), 0.82 if not self._hovered else 0.7)
        if self._selected or self._drop_target:
            glow = QColor(colors.selection if self._selected else colors.transfer)
            glow.setAlpha(60)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(glow)
            painter.drawRoundedRect(box.adjusted(-4, -4, 4, 4), 9, 9)
        outline = QColor(colors.selection) if self._selected else kind
        painter.setPen(QPen(outline, 2.2 if self._selected else 1.0))
        painter.setBrush(fill)
        painter.drawRoundedRect(box, 6, 6)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(kind)
        painter.drawPath(_accent(self._height))
        if scale >= DETAIL_SCALE:
            self._paint_text(painter, box)
        else:
            self._paint_title(painter, box, scale)
        if self._residency is not None:
            painter.setOpacity(1.0)
            self._paint_chips(painter, box)

    def _paint_plain(self, painter: QPainter, box: QRectF, kind: QColor, faded: bool) -> None:
        """Some pixels on screen (a big graph at Fit): the box filled and outlined, its kind's
        bar at the left, its chips; no text, no rounding, no antialiasing."""
        colors = self._colors
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        painter.setOpacity(0.4 if faded else 1.0)
        fill = _fill(
            kind.rgb(), QColor(colors.background).rgb(), 0.82 if not self._hovered else 0.6
        )
        outline = QColor(colors.selection) if self._selected else kind
        painter.setPen(QPen(outline, 2.0 if self._selected else 0.0))
        painter.setBrush(fill)
        painter.drawRect(box)
        painter.fillRect(QRectF(box.left(), box.top(), 5, box.height()), kind)
        if self._residency is not None:
            painter.setOpacity(1.0)
            self._paint_tiny_chips(painter, box)

    def _paint_tiny(self, painter: QPainter, box: QRectF, kind: QColor, faded: bool) -> None:
        """A few pixels on screen (thousands of nodes at Fit): a plain box in the kind's
        colour, its chips as plain bars; no outline, text or rounding to draw."""
        painter.setOpacity(0.4 if faded else 1.0)
        colour = QColor(self._colors.selection) if self._selected or self._hovered else kind
        painter.fillRect(box, colour)
        if self._residency is None:
            return
        painter.setOpacity(1.0)
        self._paint_tiny_chips(painter, box)

    def _paint_tiny_chips(self, painter: QPainter, box: QRectF) -> None:
        count = max(len(self._devices), 1)
        width = box.width() / count
        for i, device in enumerate(self._devices):
            status = self._residency.get(device, "")
            if status not in ("", "freed"):
                rect = QRectF(box.left() + i * width, box.bottom() + 3, width, CHIP_HEIGHT)
                painter.fillRect(rect, status_colour(status, self._colors))

    def _paint_title(self, painter: QPainter, box: QRectF, scale: float) -> None:
        """Zoomed out (level of detail): the name alone, at a readable size on screen.

        At Fit a big network's boxes are a few dozen pixels wide; the two lines drawn at
        scene size would be 2-3 px tall. The name is drawn at :data:`TITLE_PIXELS` on screen
        instead, elided to the box (the tooltip has the rest); below a few pixels per box
        nothing is written.
        """
        if box.width() * scale < 14:
            return
        pixels = max(1, round(TITLE_PIXELS / max(scale, 1e-3)))
        font = _title_font(pixels)
        painter.setFont(font)
        painter.setPen(QColor(self._colors.foreground))
        text_box = box.adjusted(6, 0, -2, 0)
        name = self._titles.get(pixels)
        if name is None:
            title = box_lines(self.node, self._op_level)[0]
            name = self._titles[pixels] = fitted_name(title, QFontMetricsF(font), text_box.width())
        painter.drawText(text_box, _CENTRE, name)

    def _paint_text(self, painter: QPainter, box: QRectF) -> None:
        if self._text_rows is None:
            self._text_rows = self._lay_out_text(box)
        for font, rect, text, colour in self._text_rows:
            painter.setFont(font)
            painter.setPen(colour)
            painter.drawText(rect, _LEFT_MIDDLE, text)

    def _lay_out_text(self, box: QRectF) -> list:
        """The box's lines fitted once (fonts, elisions and places never change for a box)."""
        colors = self._colors
        text_box = box.adjusted(10, 3, -5, -3)
        first, second, third = box_lines(self.node, self._op_level)
        title, small = _TEXT_FONTS()
        metrics, small_metrics = QFontMetricsF(title), QFontMetricsF(small)
        width = text_box.width()
        foreground, muted = QColor(colors.foreground), QColor(colors.muted)
        rows = [(title, metrics, fitted_name(first, metrics, width), foreground)]
        rows.append((small, small_metrics, small_metrics.elidedText(second, _ELIDE, width), muted))
        if third and text_box.height() >= metrics.height() + 2 * small_metrics.height():
            rows.append((small, small_metrics, fitted_name(third, small_metrics, width), muted))
        total = sum(m.height() for _, m, _, _ in rows)
        top = text_box.center().y() - total / 2
        placed = []
        for font, font_metrics, text, colour in rows:
            placed.append(
                (font, QRectF(text_box.left(), top, width, font_metrics.height()), text, colour)
            )
            top += font_metrics.height()
        return placed

    def _paint_chips(self, painter: QPainter, box: QRectF) -> None:
        colors = self._colors
        count = max(len(self._devices), 1)
        gap = 3.0
        width = (box.width() - gap * (count - 1)) / count
        font = QFont()
        font.setPointSizeF(6.5)
        painter.setFont(font)
        for i, device in enumerate(self._devices):
            status = self._residency.get(device, "")
            rect = QRectF(box.left() + i * (width + gap), box.bottom() + 3, width, CHIP_HEIGHT)
            fill = status_colour(status, colors)
            if status in ("", "freed"):
                pen = QPen(QColor(colors.muted), 0.8)
                if status == "freed":
                    pen.setStyle(Qt.PenStyle.DashLine)
                painter.setPen(pen)
                painter.setBrush(QColor(colors.background))
                text = QColor(colors.muted)
            else:
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(fill)
                text = QColor("#ffffff")
            painter.drawRoundedRect(rect, 3, 3)
            painter.setPen(text)
            painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), device)

    # ----- tooltip --------------------------------------------------------------------------------
    def describe(self, graph: Graph) -> str:
        """Rich-text tooltip: op, kind, memory, per-device cost, inputs, and residency."""
        node = self.node
        rows = [
            f"<b>{html.escape(node.id)}</b> &nbsp;<i>{html.escape(node.kind)}</i>",
            f"op: {html.escape(node.op or DASH)}",
            f"memory: {format_size(node.memory)} ({node.memory:,} B)",
        ]
        costs = []
        for device in graph.devices:
            ms = node.cost.get(device.name)
            costs.append(
                f"{html.escape(device.name)} {format_ms(ms) if ms is not None else 'cannot run'}"
            )
        rows.append("cost: " + ", ".join(costs))
        k = graph.index[node.id]
        inputs = [graph.nodes[i].id for i in graph.inputs[k]]
        if inputs:
            rows.append("inputs: " + html.escape(", ".join(inputs)))
        if self._residency is not None:
            where = [
                f"{html.escape(d)}: {STATUS_LABELS.get(s, s)}" for d, s in self._residency.items()
            ]
            rows.append("now: " + (", ".join(where) if where else "not computed yet"))
        return "<br>".join(rows)


class EdgeItem(LazyTip, QGraphicsItem):
    """A curved arrow from the source box to the target box.

    Its curve is kept as eight floats and made a ``QPainterPath`` only when first painted or
    hit-tested: at Fit a big graph draws as the overview and most arrows never need one, and
    making 8,000 paths cost more than half of a 5,000-node graph's first draw.
    """

    ARROW = 7.0
    _MARGIN = ARROW + 3.0
    """Bounds beyond the curve's control points: the arrow head and the thickest pen."""

    def __init__(
        self,
        source: NodeItem,
        target: NodeItem,
        colors: Colors,
        places: tuple[float, float, float, float] | None = None,
    ):
        """``places``: the source's and the target's positions (x, y, x, y) when the caller
        has them (5,000 arrows asked their boxes four times each)."""
        super().__init__()
        self.source = source
        self.target = target
        self.key = (source.node_id, target.node_id)
        self._colors = colors
        self._emphasis = 0  # 0 normal, 1 touches the selected node, 2 selected edge
        self._curve = (0.0,) * 8
        """start, first and second control point, end (x, y each), in scene units."""
        self._bounds = QRectF()
        self._path: QPainterPath | None = None
        self._head: QPolygonF | None = None
        self.setZValue(1)
        self.setAcceptHoverEvents(True)  # its tooltip is written on hover enter
        self.update_path(places)

    def hoverEnterEvent(self, event) -> None:
        self.refresh_tip()
        super().hoverEnterEvent(event)

    def set_emphasis(self, level: int) -> None:
        if level != self._emphasis:
            self._emphasis = level
            self.setZValue(1 + level)
            self.update()

    def update_path(self, places: tuple[float, float, float, float] | None = None) -> None:
        """Route by relative position: side to side when apart, else bottom to top."""
        if places is None:
            a, b = self.source.pos(), self.target.pos()
            places = (a.x(), a.y(), b.x(), b.y())
        ax, ay, bx, by = places
        if abs(bx - ax) >= NODE_WIDTH:
            sign = 1.0 if bx > ax else -1.0
            sx, sy = ax + sign * NODE_WIDTH / 2, ay
            ex, ey = bx - sign * NODE_WIDTH / 2, by
            bend = sign * max(abs(ex - sx) * 0.45, 24.0)
            curve = (sx, sy, sx + bend, sy, ex - bend, ey, ex, ey)
        else:
            down = by >= ay
            sign = 1.0 if down else -1.0
            sx, sy = ax, ay + sign * self.source.half_height(down)
            ex, ey = bx, by - sign * self.target.half_height(not down)
            bend = sign * max(abs(ey - sy) * 0.45, 18.0)
            curve = (sx, sy, sx, sy + bend, ex, ey - bend, ex, ey)
        if curve == self._curve:
            return
        self.prepareGeometryChange()
        self._curve = curve
        xs, ys = curve[0::2], curve[1::2]  # a cubic lies inside its control points' hull
        m = self._MARGIN
        left, top = min(xs) - m, min(ys) - m
        self._bounds = QRectF(left, top, max(xs) + m - left, max(ys) + m - top)
        self._path = self._head = None

    def endpoints(self) -> tuple[QPointF, QPointF]:
        """Where the arrow leaves its source and meets its target (scene units)."""
        sx, sy, *_, ex, ey = self._curve
        return QPointF(sx, sy), QPointF(ex, ey)

    def path(self) -> QPainterPath:
        """The curve (made on first use, see the class docstring)."""
        if self._path is None:
            sx, sy, ax, ay, bx, by, ex, ey = self._curve
            self._path = QPainterPath(QPointF(sx, sy))
            self._path.cubicTo(ax, ay, bx, by, ex, ey)
        return self._path

    def _arrow_head(self) -> QPolygonF:
        if self._head is None:
            *_, bx, by, ex, ey = self._curve
            angle = math.atan2(ey - by, ex - bx)
            arrow, end = self.ARROW, QPointF(ex, ey)
            left = end - QPointF(arrow * math.cos(angle - 0.42), arrow * math.sin(angle - 0.42))
            right = end - QPointF(arrow * math.cos(angle + 0.42), arrow * math.sin(angle + 0.42))
            self._head = QPolygonF([end, left, right])
        return self._head

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        stroker = QPainterPathStroker()
        stroker.setWidth(9)
        return stroker.createStroke(self.path())

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        colors = self._colors
        colour = QColor(colors.muted) if self._emphasis == 0 else QColor(colors.selection)
        if self._emphasis == 0:
            colour.setAlpha(170)
        width = (1.1, 1.6, 2.6)[self._emphasis]
        painter.setOpacity(1.0)  # the canvas does not save painter state between items
        scale = option.levelOfDetailFromTransform(painter.worldTransform())
        if NODE_WIDTH * scale < PLAIN_PIXELS:  # boxes are plain rectangles: a plain line
            pen = QPen(colour, 0 if self._emphasis == 0 else 2)  # cosmetic
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
            painter.setPen(pen)
            painter.drawLine(*self.endpoints())
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(colour, width))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self.path())
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QBrush(colour))
        painter.drawPolygon(self._arrow_head())

    def describe(self, graph: Graph) -> str:
        """Tooltip: transfer time per device pair (override or link model)."""
        source, target = self.key
        edge = next(e for e in graph.edges if (e.source, e.target) == self.key)
        rows = [f"<b>{html.escape(source)} \u2192 {html.escape(target)}</b>"]
        for a in graph.devices:
            for b in graph.devices:
                if a.name == b.name:
                    continue
                ms = graph.transfer_ms(source, target, a.name, b.name)
                pair = f"{a.name}->{b.name}"
                how = "override" if pair in edge.transfer_ms else "link"
                shown = format_ms(ms) if math.isfinite(ms) else "not allowed"
                label = f"{a.name} \u2192 {b.name}"
                rows.append(f"{html.escape(label)}: {shown} <i>({how})</i>")
        return "<br>".join(rows)
