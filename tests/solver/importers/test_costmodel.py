"""Roofline costs against the device table; the cost-model interface."""

from __future__ import annotations

import pytest

from solver.errors import GraphFormatError
from solver.importers.costmodel import (
    LOSS_KEY,
    CostModel,
    MeasuredCpuCostModel,
    RooflineCostModel,
    resolve_cost_models,
)
from solver.importers.hardware import DEVICES, LINKS, make_platform
from solver.importers.ops import Op, OpGraph


def conv_op(**changes) -> Op:
    fields = dict(
        name="conv", kind="conv", inputs=("prev",), input_bytes=(32 * 64 * 56 * 56 * 4,),
        shape=(32, 64, 56, 56), itemsize=4, flops=2.0 * 32 * 64 * 56 * 56 * 64 * 9,
        params=64 * 64 * 9,
    )  # fmt: skip
    return Op(**{**fields, **changes})


def test_device_table_has_the_published_specs():
    assert DEVICES["rtx-3090"].peak_flops == 35.6e12
    assert DEVICES["rtx-3090"].mem_bandwidth == 936e9
    assert DEVICES["v100-sxm2"].peak_flops == 15.7e12
    assert DEVICES["a100-sxm4-40gb"].mem_bandwidth == 1555e9
    assert DEVICES["h100-sxm"].mem_bandwidth == 3.35e12
    assert DEVICES["h200-sxm"].mem_bandwidth == 4.8e12
    assert DEVICES["ryzen-9-7950x"].kind == "cpu"
    assert [LINKS[k].bandwidth for k in ("pcie3-x16", "pcie4-x16", "pcie5-x16")] == [
        15.75e9, 31.5e9, 63e9,
    ]  # fmt: skip


def test_roofline_conv_is_compute_bound_and_scales_with_efficiency():
    spec = DEVICES["rtx-3090"]
    op = conv_op()
    t = RooflineCostModel(spec).op_time(op)
    expected_ms = 1000 * op.flops / (35.6e12 * 0.6) + spec.launch_ms
    assert t.forward_ms == pytest.approx(expected_ms)
    assert t.backward_ms == pytest.approx(1000 * 2 * op.flops / (35.6e12 * 0.6) + spec.launch_ms)
    slower = RooflineCostModel(spec.with_efficiency(compute=0.3)).op_time(op)
    assert slower.forward_ms - spec.launch_ms == pytest.approx(2 * (expected_ms - spec.launch_ms))


def test_roofline_backward_ratio_depends_on_the_op():
    model = RooflineCostModel(DEVICES["v100-sxm2"])
    shape = (32, 64, 56, 56)
    size = 32 * 64 * 56 * 56 * 4
    ratios = {}
    for kind in ("conv", "relu", "max_pool", "batch_norm", "add"):
        op = conv_op(kind=kind, flops=conv_op().flops if kind == "conv" else 32 * 64 * 56 * 56,
                     params=0, input_bytes=(size,), shape=shape)  # fmt: skip
        t = model.op_time(op)
        ratios[kind] = t.backward_ms / t.forward_ms
    assert ratios["conv"] == pytest.approx(2.0, rel=0.01)
    assert ratios["add"] < 1.1 < 1.3 < ratios["relu"]  # relu reads its output back
    assert len({round(r, 2) for r in ratios.values()}) >= 4


def test_roofline_first_conv_backward_has_no_input_gradient():
    model = RooflineCostModel(DEVICES["rtx-3090"])
    first = model.op_time(conv_op(inputs=(None,)))
    assert first.backward_ms == pytest.approx(first.forward_ms, rel=0.01)


def test_roofline_estimate_covers_every_op_and_the_loss():
    ops = (conv_op(inputs=(None,)), conv_op(name="relu", kind="relu", inputs=("conv",)))
    graph = OpGraph("tiny", ops, (32, 64, 56, 56), 0)
    times = RooflineCostModel(DEVICES["h100-sxm"]).estimate(graph)
    assert set(times) == {"conv", "relu", LOSS_KEY}
    assert isinstance(RooflineCostModel(DEVICES["h100-sxm"]), CostModel)


def test_resolve_cost_models_measures_only_cpu_devices():
    platform = make_platform()
    models = resolve_cost_models("measured", platform)
    assert isinstance(models["cpu"], MeasuredCpuCostModel)
    assert isinstance(models["gpu"], RooflineCostModel)
    assert models["gpu"].spec.key == "rtx-3090"
    with pytest.raises(GraphFormatError, match="unknown cost model 'magic'"):
        resolve_cost_models("magic", platform)
    with pytest.raises(GraphFormatError, match="unknown device 'tpu'"):
        resolve_cost_models({"tpu": models["gpu"]}, platform)


def test_make_platform_links_every_pair_both_ways():
    platform = make_platform({"cpu": "ryzen-9-7950x", "a": "a100-sxm4-40gb", "h": "h200-sxm"},
                             "pcie5-x16")  # fmt: skip
    links = platform.graph_links()
    assert len(links) == 6
    assert all(link.bandwidth == 63e9 * 0.8 for link in links)
    with pytest.raises(GraphFormatError, match="unknown device 'rtx-9090'"):
        make_platform({"gpu": "rtx-9090"})


def test_zoo_step_times_match_the_note():
    """VGG16 at batch 32 ~ 156 ms on an RTX 3090, 332 ms on a V100."""
    pytest.importorskip("torch")
    from solver.importers.torch_fx import import_torch

    for gpu, expected in (("rtx-3090", 156), ("v100-sxm2", 332)):
        graph = import_torch("solver.importers.zoo_models:VGG16", (32, 3, 224, 224),
                             devices={"cpu": "ryzen-9-7950x", "gpu": gpu})  # fmt: skip
        total = sum(node.cost["gpu"] for node in graph.nodes)
        assert total == pytest.approx(expected, rel=0.03)
