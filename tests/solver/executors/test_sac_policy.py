"""The exported selective-checkpointing policy recomputes exactly what the schedule does."""

from __future__ import annotations

import collections
import copy
import importlib.util

import pytest

torch = pytest.importorskip("torch")

from test_aten_runtime import scheduled  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.checkpoint import (  # noqa: E402
    checkpoint,
    create_selective_checkpoint_contexts,
    set_checkpoint_early_stop,
)

from solver.errors import XEngineError  # noqa: E402
from solver.executors.sac_policy import (  # noqa: E402
    forward_ops,
    policy_source,
    random_positions,
    recomputed_nodes,
    storage_owners,
    write_policy,
)
from solver.importers.aten_capture import loss_of  # noqa: E402
from solver.importers.zoo_composite import COMPOSITE  # noqa: E402

SHAPES = {"encoder": (2, 32, 64), "attention": (2, 32, 256)}


class CountOps(TorchDispatchMode):
    """Counts the ATen ops that really run (SAC answers saved ones from its cache)."""

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func) != "aten.detach.default":  # autograd's own bookkeeping
            self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


def load(path):
    spec = importlib.util.spec_from_file_location("exported_policy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["encoder", "attention"])
def test_sac_policy_recomputes_exactly_the_schedules_nodes(name, tmp_path):
    plan, graph, result = scheduled(name, "chen-greedy:gpu")
    recompute = recomputed_nodes(graph, result.schedule)
    assert recompute  # the plan rematerializes
    write_policy(tmp_path / "policy.py", plan, graph, result.schedule)
    policy = load(tmp_path / "policy.py")
    # what the policy recomputes: every op of the recomputed nodes (by position in the
    # forward), and the views of their outputs, except dropout's mask, which SAC must save
    owners = storage_owners(plan)
    planned = {
        i
        for i, (_, owner) in enumerate(forward_ops(plan))
        if (owner if owner is not None else owners[i]) in recompute
    }
    views = {i for i, (_, owner) in enumerate(forward_ops(plan)) if owner is None}
    assert planned & views  # views of recomputed outputs are recomputed with them
    masks = random_positions(plan)
    assert masks and policy.RECOMPUTE == planned - masks

    torch.manual_seed(0)
    plain = COMPOSITE[name][0]().train()
    checkpointed = copy.deepcopy(plain)
    x = torch.randn(SHAPES[name])
    torch.manual_seed(1)
    loss = loss_of(plain(x))
    with CountOps() as baseline:
        loss.backward()
    torch.manual_seed(1)
    # without early stopping, checkpointing reruns every recomputable op, not only those up to
    # the last tensor the backward needs: the count is then exactly the policy's
    with set_checkpoint_early_stop(False):
        out = checkpoint(
            checkpointed,
            x,
            use_reentrant=False,
            context_fn=lambda: create_selective_checkpoint_contexts(
                policy.make_policy(), allow_cache_entry_mutation=True
            ),
        )
    loss = loss_of(out)
    with CountOps() as with_policy:
        loss.backward()
    rerun = with_policy.counts - baseline.counts
    assert rerun == collections.Counter(policy.OPS[i] for i in policy.RECOMPUTE)
    assert baseline.counts - with_policy.counts == collections.Counter()
    for a, b in zip(plain.parameters(), checkpointed.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad)


def test_sac_policy_refuses_a_two_device_schedule():
    plan, graph, result = scheduled("encoder", "greedy")
    with pytest.raises(XEngineError, match="the schedule runs on 2 devices"):
        policy_source(plan, graph, result.schedule)


def test_a_lean_policy_also_recomputes_only_free_unread_ops_and_keeps_the_gradients(tmp_path):
    """``lean`` adds the FLOP-free forward ops whose outputs no backward op reads (SAC would
    cache them for the whole backward): none costs a FLOP, none is random, and the step's
    gradients are still torch's."""
    from solver.executors.sac_policy import unread_free_positions
    from solver.importers.aten_groups import op_flops

    plan, graph, result = scheduled("encoder", "chen-greedy:gpu")
    (tmp_path / "lean.py").write_text(policy_source(plan, graph, result.schedule, lean=True))
    write_policy(tmp_path / "plain.py", plan, graph, result.schedule)
    lean, plain = load(tmp_path / "lean.py"), load(tmp_path / "plain.py")
    extra = lean.RECOMPUTE - plain.RECOMPUTE
    assert extra and plain.RECOMPUTE <= lean.RECOMPUTE
    assert extra <= unread_free_positions(plan) and not extra & random_positions(plan)
    nodes = [n for n in plan.capture.gm.graph.nodes if n.op == "call_function"]
    by_name = {str(n.target): n for n in nodes}
    assert all(op_flops(by_name[lean.OPS[i]]) == 0 for i in extra)
    torch.manual_seed(0)
    plain_model = COMPOSITE["encoder"][0]().train()
    checkpointed = copy.deepcopy(plain_model)
    x = torch.randn(SHAPES["encoder"])
    torch.manual_seed(1)
    loss_of(plain_model(x)).backward()
    torch.manual_seed(1)
    out = checkpoint(checkpointed, x, use_reentrant=False, context_fn=lean.context_fn)
    loss_of(out).backward()
    for a, b in zip(plain_model.parameters(), checkpointed.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_sac_policy_runs_hugging_face_models_whose_mask_check_reads_values(name):
    """Hugging Face reads ``padding_mask.sum() == numel`` eagerly and skips the read when
    traced (fake tensors), so the run has ops the capture has not; the policy lets such a
    check pass and still matches every captured op (gradients equal a plain backward)."""
    pytest.importorskip("transformers")
    import solver
    from solver.importers.aten_capture import example_inputs
    from solver.importers.corpus import CORPUS

    spec = CORPUS[name]
    torch.manual_seed(0)
    model = spec.factory().train()
    xs = example_inputs(torch, spec.inputs)
    imported = solver.import_model(model, tuple(xs))
    plan = imported.solve(gpu=None, cpu=None, method="chen-greedy:cpu")
    checkpointed = copy.deepcopy(model)
    torch.manual_seed(1)
    loss_of(model(*xs)).backward()
    torch.manual_seed(1)
    out = checkpoint(checkpointed, *xs, use_reentrant=False, context_fn=plan.context_fn(lean=True))
    loss_of(out).backward()
    for a, b in zip(model.parameters(), checkpointed.parameters(), strict=True):
        if a.grad is not None:
            torch.testing.assert_close(a.grad, b.grad)
