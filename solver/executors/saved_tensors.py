"""What autograd saves during a torch.fx layer's forward, and how the step finds it again.

The torch.fx runtime (:mod:`solver.executors.fx_runtime`) runs a layer under
:func:`torch.autograd.graph.saved_tensors_hooks` from :meth:`SavedTensors.hooks`. So that the
step's memory is the graph's, every tensor autograd saves is sorted once the layer has run
(:meth:`SavedTensors.classify`):

* a parameter, a buffer or an input batch: **fixed** memory, kept as it is;
* (the storage of) a graph tensor the runtime holds, the layer's output or an input's output:
  a **reference**, unpacked from the runtime's resident copy on the backward's device;
* a reshaped copy of a view of an input (``aten::matmul`` saves its operands reshaped to 3-d,
  copying a transposed one): **derived**, dropped now and rebuilt from the resident input;
* dropout's scaled mask: kept as ``bool`` (as the fused GPU kernel keeps it) in the layer's
  bundle and rebuilt exactly as ``mask * scale``;
* anything else (BN's input, max-pool indices): a member of the layer's **bundle**, held,
  copied and freed with its output, as the graph's ``memory`` of the layer counts it; where the
  graph's backward does not read the layer (BN's statistics at op level), **held** by autograd's
  graph, counted on its device until the layer runs again.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any

from solver.executors.harness import geometry, storage_id

__all__ = ["SavedTensor", "SavedTensors", "derived_match", "mask_scale"]


class SavedTensor:
    """What autograd keeps for one saved tensor: the tensor itself (fixed memory, or until the
    forward ends), or a way to find it again in the runtime's resident tensors."""

    __slots__ = ("tensor", "part", "kind", "ref", "geometry", "dtype")

    def __init__(self, tensor: Any, part: str) -> None:
        self.tensor: Any = tensor
        self.part = part
        self.kind = "pending"
        self.ref: Any = None
        self.geometry: Any = None
        self.dtype: Any = None

    def point_at(self, kind: str, ref: Any, where: Any = None) -> None:
        """Find the tensor again as ``kind`` (``out``, ``in``, ``derived``, ``bundle``)."""
        self.kind, self.ref, self.geometry = kind, ref, where
        self.dtype = self.tensor.dtype
        self.tensor = None


class SavedTensors:
    """The saved tensors of the running layer (``pending``), those autograd's graphs keep
    (``held``: node id -> (device, tensors)), and the hooks that pack and unpack them.

    ``rederive(name, context)`` evaluates fx node ``name`` (a view of the inputs) again from
    the inputs resident for the running backward, described by ``context`` (``device``,
    ``inputs``: input node id -> its tensors, ``self``: the layer's own tensors).
    """

    def __init__(
        self, torch: Any, fixed: set[int], rederive: Callable[[str, Mapping[str, Any]], Any]
    ) -> None:
        self.torch = torch
        self.fixed = fixed
        self._rederive = weakref.WeakMethod(rederive)
        self.pending: list[SavedTensor] = []
        self.held: dict[str, tuple[str, list[Any]]] = {}
        self.context: dict[str, Any] = {}
        self.derived: dict[str, Any] = {}  # views of the inputs made in the running layer
        self.input_storages: set[int] = set()
        self.part = ""
        self.part_is_dropout = False

    def hooks(self) -> Any:
        """The ``saved_tensors_hooks`` context for one layer's forward.

        Weakly bound: autograd's nodes hold the hooks, and a runtime holding those nodes
        through its records would be a cycle through C++ that the collector never frees.
        """
        me = weakref.ref(self)
        return self.torch.autograd.graph.saved_tensors_hooks(
            lambda t: me().pack(t),  # type: ignore[union-attr]
            lambda saved: me().unpack(saved),  # type: ignore[union-attr]
        )

    def begin(self, derived: dict[str, Any], input_storages: set[int]) -> None:
        """A layer's forward starts: its views of the inputs and its inputs' storages."""
        self.derived, self.input_storages, self.pending = derived, input_storages, []

    def end(self) -> None:
        """The layer's forward is classified: nothing pending."""
        self.pending, self.derived = [], {}

    def at_part(self, name: str, is_dropout: bool) -> None:
        """The fx node the layer runs now (a saved tensor belongs to it)."""
        self.part, self.part_is_dropout = name, is_dropout

    def pending_tensors(self) -> list[Any]:
        """The tensors saved so far in the running forward (counted in its peak)."""
        return [s.tensor for s in self.pending]

    def saves_storage_of(self, tensor: Any) -> bool:
        """Whether autograd saved (a view of) ``tensor``'s storage in the running forward."""
        sid = storage_id(tensor)
        return any(s.tensor is not None and storage_id(s.tensor) == sid for s in self.pending)

    # ----- the hooks -----------------------------------------------------------------------
    def pack(self, tensor: Any) -> SavedTensor:
        saved = SavedTensor(tensor, self.part)
        if storage_id(tensor) not in self.fixed | self.input_storages:
            name = derived_match(self.torch, tensor, self.derived)
            if name is not None:  # a reshaped copy of an input: dropped now, rebuilt later
                saved.point_at("derived", (name, tuple(tensor.shape)))
                self.pending.append(saved)
                return saved
        if self.part_is_dropout:
            scale = mask_scale(self.torch, tensor)
            if scale is not None and storage_id(tensor) not in self.fixed:
                # the mask as bool (as the fused GPU kernel keeps it) and its scale
                saved.kind, saved.dtype, saved.ref = "mask", tensor.dtype, scale
                saved.tensor = tensor != 0
        self.pending.append(saved)
        return saved

    def unpack(self, saved: SavedTensor) -> Any:
        if saved.kind in ("fixed", "pending", "held"):
            return saved.tensor
        ctx = self.context
        if saved.kind == "out":
            return ctx["self"]["out"].as_strided(*saved.geometry)
        if saved.kind == "in":
            return ctx["inputs"][saved.ref]["out"].as_strided(*saved.geometry)
        if saved.kind == "derived":
            name, shape = saved.ref
            rederive = self._rederive()
            assert rederive is not None, "the runtime is gone"
            return rederive(name, ctx).reshape(shape)
        if saved.kind == "mask":
            key, scale = saved.ref
            return ctx["self"][key].to(saved.dtype) * scale
        return ctx["self"][saved.ref]

    # ----- after the forward -----------------------------------------------------------------
    def classify(
        self,
        gid: str,
        device: str,
        result: dict[str, Any],
        out: Any,
        values: Mapping[str, Mapping[str, Any]],
        read_by_backward: bool,
    ) -> None:
        """Turn every tensor autograd saved during ``gid``'s forward into a reference, a fixed
        tensor, or a member of the layer's bundle (``result["s0"]``, ...); where the graph's
        backward does not read the layer (``read_by_backward`` false), the tensor stays with
        autograd's graph, counted on ``device`` until the layer runs again."""
        held: list[Any] = []
        out_id = storage_id(out)
        inputs = {storage_id(v["out"]): g for g, v in values.items()}
        for saved in self.pending:
            t = saved.tensor
            if saved.kind == "derived":
                continue
            sid = storage_id(t)
            if saved.kind == "mask":
                key = f"s{len(result) - 1}"
                result[key] = t
                saved.ref, saved.tensor = (key, saved.ref), None
            elif sid in self.fixed:
                saved.kind = "fixed"
            elif sid == out_id:
                saved.point_at("out", None, geometry(t))
            elif sid in inputs:
                saved.point_at("in", inputs[sid], geometry(t))
            elif read_by_backward:
                key = f"s{len(result) - 1}"
                result[key] = t
                saved.point_at("bundle", key)
            else:  # the graph's backward does not read this node: autograd's graph keeps it
                saved.kind = "held"
                held.append(t)
        self.held[gid] = (device, held)


def derived_match(torch: Any, tensor: Any, derived: Mapping[str, Any]) -> str | None:
    """The view of an input that ``tensor`` is a reshaped copy of (``aten::matmul`` saves its
    operands reshaped to 3-d, copying a transposed one), if any."""
    for name, value in derived.items():
        if (
            isinstance(value, torch.Tensor)
            and value.numel() == tensor.numel()
            and value.dtype == tensor.dtype
            and torch.equal(value.reshape(tensor.shape), tensor)
        ):
            return name
    return None


def mask_scale(torch: Any, tensor: Any) -> float | None:
    """``c`` if ``tensor`` holds only 0 and one value ``c`` (CPU dropout's scaled noise), else
    ``None``: such a tensor is kept as ``bool`` and rebuilt exactly as ``mask * c``."""
    if not tensor.is_floating_point() or tensor.numel() == 0:
        return None
    top = float(tensor.max())
    if top == 0 or not bool(((tensor == 0) | (tensor == top)).all()):
        return None
    return top
