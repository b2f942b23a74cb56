"""The model zoo matches the published networks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from solver.importers.zoo_models import ZOO  # noqa: E402

PUBLISHED = {
    "vgg16": 138_357_544,
    "vgg19": 143_667_240,
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "mobilenetv2": 3_504_872,
    "unet": 31_037_698,
    "transformer": 3_152_384,  # = nn.TransformerEncoderLayer(512, 8, 2048)
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_zoo_parameter_count_is_published(name):
    with torch.device("meta"):
        model = ZOO[name][0]()
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED[name]


def test_transformer_block_has_the_parameters_of_torchs_encoder_layer():
    with torch.device("meta"):
        ours = ZOO["transformer"][0](512, 8, 2048)
        theirs = torch.nn.TransformerEncoderLayer(512, 8, 2048)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_zoo_modules_are_distinct_instances(name):
    with torch.device("meta"):
        model = ZOO[name][0]()
    every = list(model.named_modules(remove_duplicate=False))
    assert len({id(m) for _, m in every}) == len(every)


def test_zoo_model_runs_a_real_forward_pass():
    model = ZOO["resnet18"][0]().train()
    out = model(torch.randn(2, 3, 64, 64))
    assert tuple(out.shape) == (2, 1000)
