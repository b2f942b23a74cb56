"""Dropout masks as booleans: one byte per element where eager CPU dropout keeps four.

Eager dropout on the CPU (what ``make_fx`` captures and what PyTorch's selective
checkpointing runs) draws its mask into a float tensor, ``empty_like`` + ``bernoulli_`` +
``div_(1 - p)``, and every reader multiplies by it: the forward's ``mul(x, mask)`` and the
backward's ``mul(grad, mask)``. A mask held for the backward is four bytes per element.
PyTorch's partitioner (``torch.compile``) decomposes dropout instead and saves a **bool** mask,
one byte per element (bench/README.md measures both on a two-dropout MLP).

:func:`bool_masks` rewrites the captured joint graph the same way while keeping the very draw:
after ``bernoulli_`` (the same generator, the same values, so the step still matches eager
``loss.backward()``) the mask becomes ``ne(draw, 0)``, a bool tensor, and each reader
``mul(a, mask)`` becomes ``native_dropout_backward(a, bool_mask, 1 / (1 - p))``, ATen's own
``a * mask * scale`` (equal to eager to a rounding of the scale). The float draw then lives
only until ``ne`` reads it. A graph rewritten so differs from what eager runs op by op, so it
cannot export a selective-checkpointing policy (:func:`solver.executors.sac_policy.policy_source`
says so); the schedule executor runs it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["bool_masks", "BOOL_MASKS"]

BOOL_MASKS = "bool"
"""``JointCapture.meta["dropout_masks"]`` of a rewritten capture."""


def bool_masks(gm: Any) -> int:
    """Rewrite every eager dropout mask of captured graph ``gm`` in place as a bool tensor;
    the number of masks rewritten. A mask read by anything but ``mul`` is left as it is."""
    import torch

    aten = torch.ops.aten
    count = 0
    for scale_node in list(gm.graph.nodes):
        draw = _dropout_draw(aten, scale_node)
        if draw is None:
            continue
        readers = list(scale_node.users)
        if not readers or any(u.target is not aten.mul.Tensor for u in readers):
            continue
        keep = float(scale_node.args[1])  # the div_ by 1 - p
        with gm.graph.inserting_after(scale_node):
            mask = gm.graph.call_function(aten.ne.Scalar, (draw, 0))
        _copy_meta(mask, scale_node, _bool_like(torch, scale_node.meta["val"]))
        for reader in readers:
            other = reader.args[1] if reader.args[0] is scale_node else reader.args[0]
            with gm.graph.inserting_before(reader):
                scaled = gm.graph.call_function(
                    aten.native_dropout_backward.default, (other, mask, 1.0 / keep)
                )
            _copy_meta(scaled, reader, reader.meta["val"])
            reader.replace_all_uses_with(scaled)
            gm.graph.erase_node(reader)
        gm.graph.erase_node(scale_node)  # the in-place scaling of the draw: no reader left
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def _dropout_draw(aten: Any, node: Any) -> Any:
    """The ``bernoulli_`` node that ``node`` scales, if ``node`` is eager dropout's
    ``div_(bernoulli_(empty_like(x)), 1 - p)`` read by nothing else; else ``None``."""
    if node.op != "call_function" or node.target is not aten.div_.Scalar:
        return None
    draw = node.args[0]
    if getattr(draw, "target", None) is not aten.bernoulli_.float or len(draw.users) != 1:
        return None
    source = draw.args[0]
    if getattr(source, "target", None) is not aten.empty_like.default or len(source.users) != 1:
        return None
    if not isinstance(node.args[1], int | float) or node.args[1] <= 0:
        return None
    return draw


def _bool_like(torch: Any, val: Any) -> Any:
    """A fake bool tensor of ``val``'s shape and strides, in ``val``'s fake mode."""
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return torch.empty_strided(val.shape, val.stride(), dtype=torch.bool)
    with mode:
        return torch.empty_strided(val.shape, val.stride(), dtype=torch.bool)


def _copy_meta(node: Any, like: Any, val: Any) -> None:
    """``like``'s tags (module, phase, stack trace) on the new ``node``, with its own value."""
    node.meta = {k: v for k, v in like.meta.items() if k != "val"}
    node.meta["val"] = val
