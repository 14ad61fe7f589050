"""Hugging Face model classes built from tiny configs (no weights: nothing is downloaded), for the lowering tests
of the cpu and tt tiers (issue 25): the RMSNorms as the models' own code writes them, in whole decoders.

Each model brings a form of its own: ``llama`` (``LlamaRMSNorm``: upcast, cast back, then the weight), ``gemma``
(``GemmaRMSNorm``: ``x * (1 + w)`` in fp32, the op's ``weight_offset``), ``qwen3`` (``q_norm``/``k_norm`` over the
head dim of 4-D tensors too), ``diffllama`` (``nn.RMSNorm(elementwise_affine=False)`` in its attention: ones).
"""

from __future__ import annotations

import collections
import functools

import pytest
import torch

MODELS = ("llama", "gemma", "qwen3", "diffllama")
DTYPES = ("float32", "float16", "bfloat16")
VOCAB = 128
#: Export bounds of the dynamic batch and sequence dims, and the shapes the tests run at.
BATCH, SEQ = (1, 8), (2, 32)
EXPORT_SHAPE, RUN_SHAPE = (2, 9), (3, 11)


def require_transformers():
    return pytest.importorskip("transformers", reason="needs transformers (the test extra: pip install -e '.[test]')")


class Logits(torch.nn.Module):
    """``model(input_ids=ids).logits``: one tensor in, one out, as export and Torch-TensorRT take it."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits


def build(name: str, dtype: str = "float32", layers: int = 2) -> Logits:
    """A decoder of ``name`` from a tiny config, its norm weights randomized (not the init's ones or zeros)."""
    transformers = require_transformers()
    config = transformers.AutoConfig.for_model(
        name,
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
        use_cache=False,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for norm in norm_modules(model):
            if norm.weight is not None:
                norm.weight.add_(0.3 * torch.randn(norm.weight.shape, generator=generator))
    return Logits(model.to(getattr(torch, dtype))).eval()


def norm_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's RMSNorm modules: its own classes (``*RMSNorm``) and ``nn.RMSNorm``."""
    return [module for module in model.modules() if type(module).__name__.endswith("RMSNorm")]


def norm_kinds(model: torch.nn.Module) -> collections.Counter:
    """What each norm module should become: ``offset`` (Gemma's ``1 + w``), ``ones`` (no weight) or ``weight``."""
    kinds = collections.Counter()
    for module in norm_modules(model):
        if type(module).__name__.startswith("Gemma"):
            kinds["offset"] += 1
        elif module.weight is None:
            kinds["ones"] += 1
        else:
            kinds["weight"] += 1
    return kinds


def _is_ones(weight: torch.fx.Node) -> bool:
    """The ones the lowering adds (``aten.full``), or what Torch-TensorRT's constant folding made of them."""
    if weight.target == torch.ops.aten.full.default:
        return weight.args[1] == 1.0
    if weight.op != "get_attr":
        return False
    value = functools.reduce(getattr, weight.target.split("."), weight.graph.owning_module)
    return bool((value == 1).all())


def op_kinds(nodes: list[torch.fx.Node]) -> collections.Counter:
    """The same classification, read from ``torchtrt.rms_norm`` nodes."""
    kinds = collections.Counter()
    for node in nodes:
        if len(node.args) > 3 and node.args[3] == 1.0:
            kinds["offset"] += 1
        elif _is_ones(node.args[1]):
            kinds["ones"] += 1
        else:
            kinds["weight"] += 1
    return kinds


def input_ids(shape: tuple[int, int], seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(seed))


def dynamic_shapes() -> tuple[dict]:
    dim = torch.export.Dim
    return ({0: dim("batch", min=BATCH[0], max=BATCH[1]), 1: dim("seq", min=SEQ[0], max=SEQ[1])},)


def export(model: Logits, dynamic: bool) -> torch.export.ExportedProgram:
    return torch.export.export(model, (input_ids(EXPORT_SHAPE),), dynamic_shapes=dynamic_shapes() if dynamic else None)


def torch_tensorrt_inputs(dynamic: bool) -> list:
    """The inputs to give ``torch_tensorrt.dynamo.compile`` for ``export(model, dynamic)`` (tt tier only)."""
    if not dynamic:
        return [input_ids(EXPORT_SHAPE)]
    import torch_tensorrt

    low, high = (BATCH[0], SEQ[0]), (BATCH[1], SEQ[1])
    return [torch_tensorrt.Input(min_shape=low, opt_shape=EXPORT_SHAPE, max_shape=high, dtype=torch.int64)]


def tolerance(dtype: str) -> dict:
    """Logits against eager: the op rounds once where the models' norms may round twice (Llama's cast back before
    the weight), and those differences travel through the layers: four times the op's own tolerance."""
    from torchtrt_plugins.ops import rms_norm

    op = rms_norm.SPEC.tolerance(getattr(torch, dtype))
    return {"atol": 4 * op.atol, "rtol": 4 * op.rtol}
