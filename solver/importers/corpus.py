"""The ecosystem's model builders, at small sizes: what import-torch is judged on.

Each :class:`CorpusModel` builds a network people train, from the library that defines it,
with random weights (nothing is downloaded) and small inputs: torchvision's classification,
segmentation and video families (loaded by :mod:`solver.importers.torchvision_models`) and
Hugging Face ``transformers`` decoders, encoders, encoder-decoders and vision transformers from
small configs. A Hugging Face model is wrapped in a module whose ``forward`` takes the token ids
(and an attention mask, or the decoder's ids) positionally and returns the logits, as a training
loop would compute its loss from. Both libraries are optional test extras
(``scripts/setup.sh test``); a builder raises ``ModuleNotFoundError`` without its library.

``tests/solver/importers/test_corpus.py`` imports, solves and executes every model (the
``fast`` ones in the default run), and ``bench/vs_torch.py`` measures some of them against
PyTorch's own memory-budget partitioner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from solver.importers.aten_capture import InputSpec

__all__ = ["CORPUS", "CorpusModel"]


@dataclass(frozen=True)
class CorpusModel:
    """One model builder of the corpus and the inputs it is imported with."""

    name: str
    family: str
    factory: Callable[[], Any]
    inputs: tuple[InputSpec, ...]
    fast: bool = False
    """In the default test run (a few seconds from import to executed step)."""


def _tv(builder: str, **kwargs: Any) -> Callable[[], Any]:
    """A torchvision builder by name, random weights (``weights=None``)."""

    def build() -> Any:
        from solver.importers.torchvision_models import import_torchvision

        models = import_torchvision("torchvision.models")
        return models.get_model(builder, weights=None, **kwargs)

    build.__name__ = builder
    build.__qualname__ = builder
    return build


def _quiet_transformers() -> Any:
    from solver.importers.torchvision_models import prepare_torchvision

    prepare_torchvision()  # transformers imports torchvision where it is installed
    import transformers

    transformers.logging.set_verbosity_error()  # no config warnings for tiny vocabularies
    return transformers


def _hf(kind: str, config: str, **fields: Any) -> Callable[[], Any]:
    """A Hugging Face model class ``kind`` from config class ``config`` with ``fields``."""

    def build() -> Any:
        import torch

        transformers = _quiet_transformers()
        settings = {"use_cache": False, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
        cfg = getattr(transformers, config)(**{**settings, **fields})
        model = getattr(transformers, kind)(cfg)

        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *tensors: Any) -> Any:
                names = _ARGUMENTS[kind]
                out = self.model(**dict(zip(names, tensors, strict=True)))
                return out.logits if hasattr(out, "logits") else out.last_hidden_state

        Wrapped.__name__ = Wrapped.__qualname__ = kind
        return Wrapped()

    build.__name__ = build.__qualname__ = kind.lower()
    return build


#: What the wrapped model's forward takes, in order.
_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "GPT2LMHeadModel": ("input_ids", "attention_mask"),
    "LlamaForCausalLM": ("input_ids", "attention_mask"),
    "MistralForCausalLM": ("input_ids",),
    "Qwen2ForCausalLM": ("input_ids",),
    "GPTNeoXForCausalLM": ("input_ids",),
    "OPTForCausalLM": ("input_ids", "attention_mask"),
    "PhiForCausalLM": ("input_ids",),
    "BertForMaskedLM": ("input_ids", "attention_mask"),
    "RobertaForMaskedLM": ("input_ids",),
    "DistilBertForMaskedLM": ("input_ids", "attention_mask"),
    "AlbertForMaskedLM": ("input_ids",),
    "ElectraForMaskedLM": ("input_ids",),
    "T5ForConditionalGeneration": ("input_ids", "decoder_input_ids"),
    "BartForConditionalGeneration": ("input_ids", "decoder_input_ids"),
    "ViTForImageClassification": ("pixel_values",),
    "DeiTForImageClassification": ("pixel_values",),
    "SwinForImageClassification": ("pixel_values",),
    "ConvNextForImageClassification": ("pixel_values",),
}

_TOKENS = (InputSpec((2, 16), "int64"),)
_MASKED = (InputSpec((2, 16), "int64"), InputSpec((2, 16), "int64"))
_SEQ2SEQ = (InputSpec((2, 16), "int64"), InputSpec((2, 8), "int64"))
_IMAGE = (InputSpec((1, 3, 64, 64)),)
_PIXELS = (InputSpec((1, 3, 32, 32)),)
_CLIP = (InputSpec((1, 3, 4, 32, 32)),)

_DECODER = {"vocab_size": 128, "max_position_embeddings": 64}
_LLAMA = {
    **_DECODER,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
_ENCODER = {
    "vocab_size": 128,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "max_position_embeddings": 64,
}
_VISION = {
    "image_size": 32,
    "patch_size": 8,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "num_labels": 10,
}


def _models() -> list[CorpusModel]:
    tv, hf = "torchvision", "transformers"
    return [
        # torchvision: classification
        CorpusModel("resnet18", f"{tv} classification", _tv("resnet18"), _IMAGE, fast=True),
        CorpusModel("resnet50", f"{tv} classification", _tv("resnet50"), _IMAGE),
        CorpusModel("resnext50_32x4d", f"{tv} classification", _tv("resnext50_32x4d"), _IMAGE),
        CorpusModel("wide_resnet50_2", f"{tv} classification", _tv("wide_resnet50_2"), _IMAGE),
        CorpusModel("vgg11_bn", f"{tv} classification", _tv("vgg11_bn"), _IMAGE),
        CorpusModel("alexnet", f"{tv} classification", _tv("alexnet"), _IMAGE),
        CorpusModel("squeezenet1_1", f"{tv} classification", _tv("squeezenet1_1"), _IMAGE),
        CorpusModel("densenet121", f"{tv} classification", _tv("densenet121"), _IMAGE),
        CorpusModel(
            "googlenet", f"{tv} classification", _tv("googlenet", init_weights=True), _IMAGE
        ),
        CorpusModel(
            "inception_v3",
            f"{tv} classification",
            _tv("inception_v3", init_weights=True),
            # its auxiliary head needs 17x17 at 1/16, and pools that to 1x1 before a batch
            # norm, which in training needs more than one value per channel: batch 2
            (InputSpec((2, 3, 299, 299)),),
        ),
        CorpusModel("mobilenet_v2", f"{tv} classification", _tv("mobilenet_v2"), _IMAGE),
        CorpusModel(
            "mobilenet_v3_small", f"{tv} classification", _tv("mobilenet_v3_small"), _IMAGE
        ),
        CorpusModel("mnasnet0_5", f"{tv} classification", _tv("mnasnet0_5"), _IMAGE),
        CorpusModel(
            "shufflenet_v2_x0_5", f"{tv} classification", _tv("shufflenet_v2_x0_5"), _IMAGE
        ),
        CorpusModel("efficientnet_b0", f"{tv} classification", _tv("efficientnet_b0"), _IMAGE),
        CorpusModel("efficientnet_v2_s", f"{tv} classification", _tv("efficientnet_v2_s"), _IMAGE),
        CorpusModel("regnet_y_400mf", f"{tv} classification", _tv("regnet_y_400mf"), _IMAGE),
        CorpusModel("regnet_x_400mf", f"{tv} classification", _tv("regnet_x_400mf"), _IMAGE),
        CorpusModel("convnext_tiny", f"{tv} classification", _tv("convnext_tiny"), _IMAGE),
        CorpusModel("swin_t", f"{tv} classification", _tv("swin_t"), _IMAGE),
        CorpusModel("swin_v2_t", f"{tv} classification", _tv("swin_v2_t"), _IMAGE),
        CorpusModel("vit_b_32", f"{tv} classification", _tv("vit_b_32", image_size=64), _IMAGE),
        CorpusModel(
            "maxvit_t", f"{tv} classification", _tv("maxvit_t"), (InputSpec((1, 3, 224, 224)),)
        ),
        # torchvision: segmentation
        CorpusModel(
            "fcn_resnet50",
            f"{tv} segmentation",
            _tv("fcn_resnet50", weights_backbone=None),
            _IMAGE,
        ),
        CorpusModel(
            "deeplabv3_mobilenet_v3_large",
            f"{tv} segmentation",
            _tv("deeplabv3_mobilenet_v3_large", weights_backbone=None),
            (InputSpec((2, 3, 64, 64)),),  # batch norm after global pooling needs batch 2
        ),
        CorpusModel(
            "lraspp_mobilenet_v3_large",
            f"{tv} segmentation",
            _tv("lraspp_mobilenet_v3_large", weights_backbone=None),
            _IMAGE,
        ),
        # torchvision: video
        CorpusModel("r3d_18", f"{tv} video", _tv("r3d_18"), _CLIP),
        CorpusModel("mc3_18", f"{tv} video", _tv("mc3_18"), _CLIP),
        CorpusModel("r2plus1d_18", f"{tv} video", _tv("r2plus1d_18"), _CLIP),
        CorpusModel(  # its head pools 2x7x7 at 1/8 in time, 1/32 in space: 16 frames of 224
            "s3d", f"{tv} video", _tv("s3d"), (InputSpec((1, 3, 16, 224, 224)),)
        ),
        CorpusModel("swin3d_t", f"{tv} video", _tv("swin3d_t"), (InputSpec((1, 3, 4, 64, 64)),)),
        # Hugging Face: decoders
        CorpusModel(
            "gpt2",
            f"{hf} decoder",
            _hf(
                "GPT2LMHeadModel",
                "GPT2Config",
                vocab_size=128,
                n_positions=64,
                n_embd=64,
                n_layer=2,
                n_head=4,
            ),
            _MASKED,
            fast=True,
        ),
        CorpusModel(
            "llama", f"{hf} decoder", _hf("LlamaForCausalLM", "LlamaConfig", **_LLAMA), _MASKED
        ),
        CorpusModel(
            "mistral",
            f"{hf} decoder",
            _hf("MistralForCausalLM", "MistralConfig", **_LLAMA),
            _TOKENS,
        ),
        CorpusModel(
            "qwen2", f"{hf} decoder", _hf("Qwen2ForCausalLM", "Qwen2Config", **_LLAMA), _TOKENS
        ),
        CorpusModel(
            "gpt_neox",
            f"{hf} decoder",
            _hf(
                "GPTNeoXForCausalLM",
                "GPTNeoXConfig",
                **{k: v for k, v in _LLAMA.items() if k != "num_key_value_heads"},
            ),
            _TOKENS,
        ),
        CorpusModel(
            "opt",
            f"{hf} decoder",
            _hf(
                "OPTForCausalLM",
                "OPTConfig",
                vocab_size=128,
                hidden_size=64,
                num_hidden_layers=2,
                ffn_dim=128,
                num_attention_heads=4,
                max_position_embeddings=64,
                word_embed_proj_dim=64,
            ),
            _MASKED,
        ),
        CorpusModel(
            "phi",
            f"{hf} decoder",
            _hf(
                "PhiForCausalLM",
                "PhiConfig",
                **{k: v for k, v in _LLAMA.items() if k != "num_key_value_heads"},
            ),
            _TOKENS,
        ),
        # Hugging Face: encoders
        CorpusModel(
            "bert", f"{hf} encoder", _hf("BertForMaskedLM", "BertConfig", **_ENCODER), _MASKED
        ),
        CorpusModel(
            "roberta",
            f"{hf} encoder",
            _hf(
                "RobertaForMaskedLM", "RobertaConfig", **{**_ENCODER, "max_position_embeddings": 72}
            ),
            _TOKENS,
        ),
        CorpusModel(
            "distilbert",
            f"{hf} encoder",
            _hf(
                "DistilBertForMaskedLM",
                "DistilBertConfig",
                vocab_size=128,
                dim=64,
                n_layers=2,
                n_heads=4,
                hidden_dim=128,
                max_position_embeddings=64,
            ),
            _MASKED,
        ),
        CorpusModel(
            "albert",
            f"{hf} encoder",
            _hf("AlbertForMaskedLM", "AlbertConfig", **{**_ENCODER, "embedding_size": 32}),
            _TOKENS,
        ),
        CorpusModel(
            "electra",
            f"{hf} encoder",
            _hf("ElectraForMaskedLM", "ElectraConfig", **{**_ENCODER, "embedding_size": 32}),
            _TOKENS,
        ),
        # Hugging Face: encoder-decoders
        CorpusModel(
            "t5",
            f"{hf} encoder-decoder",
            _hf(
                "T5ForConditionalGeneration",
                "T5Config",
                vocab_size=128,
                d_model=64,
                d_ff=128,
                d_kv=16,
                num_layers=2,
                num_heads=4,
                decoder_start_token_id=0,
            ),
            _SEQ2SEQ,
        ),
        CorpusModel(
            "bart",
            f"{hf} encoder-decoder",
            _hf(
                "BartForConditionalGeneration",
                "BartConfig",
                vocab_size=128,
                d_model=64,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=4,
                decoder_attention_heads=4,
                encoder_ffn_dim=128,
                decoder_ffn_dim=128,
                max_position_embeddings=64,
            ),
            _SEQ2SEQ,
        ),
        # Hugging Face: vision transformers
        CorpusModel(
            "vit",
            f"{hf} vision",
            _hf("ViTForImageClassification", "ViTConfig", **_VISION),
            _PIXELS,
            fast=True,
        ),
        CorpusModel(
            "deit",
            f"{hf} vision",
            _hf("DeiTForImageClassification", "DeiTConfig", **_VISION),
            _PIXELS,
        ),
        CorpusModel(
            "swin",
            f"{hf} vision",
            _hf(
                "SwinForImageClassification",
                "SwinConfig",
                image_size=32,
                patch_size=4,
                embed_dim=32,
                depths=[1, 1],
                num_heads=[2, 4],
                window_size=4,
                num_labels=10,
            ),
            _PIXELS,
        ),
        CorpusModel(
            "convnext",
            f"{hf} vision",
            _hf(
                "ConvNextForImageClassification",
                "ConvNextConfig",
                hidden_sizes=[16, 32],
                depths=[1, 1],
                num_labels=10,
                num_stages=2,
            ),
            _PIXELS,
        ),
    ]


#: Every corpus model by name.
CORPUS: dict[str, CorpusModel] = {m.name: m for m in _models()}
