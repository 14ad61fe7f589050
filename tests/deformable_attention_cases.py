"""Multi-scale deformable attention as models compute it, for the op's tests and the lowering's: random inputs, the
pure-PyTorch ``MultiScaleDeformableAttention`` of each transformers model that defines one (imported as where
torchvision is absent), a module calling it as its model does, and the tiny zoo models holding it."""

from __future__ import annotations

import contextlib
import importlib
import sys

import pytest
import torch

#: transformers' model folders with a ``MultiScaleDeformableAttention`` class of their own.
MODELING = ("deformable_detr", "rt_detr", "grounding_dino")
#: Zoo models (``torchtrt_plugins.zoo``) whose attention is that class, or RT-DETRv2's.
ZOO_MODELS = ("DeformableDetrModel", "RTDetrModel", "RTDetrV2Model", "GroundingDinoModel")
MAPS = [(5, 7), (3, 4), (1, 2)]
ATTENTION_CLASS = "MultiScaleDeformableAttention"
#: The module classes holding the attention: transformers' shared one and RT-DETRv2's.
ATTENTION_CLASSES = (ATTENTION_CLASS, "RTDetrV2MultiscaleDeformableAttention")


def random_inputs(
    batch=2, queries=6, heads=3, channels=8, points=4, maps=MAPS, dtype=torch.float32, spread=0.7, seed=0, device="cpu"
):
    """``(value, spatial_shapes, level_start_index, locations, weights)``; the locations centred on the maps, with
    ``spread`` > 1 putting some outside [0, 1] (padding)."""
    g = torch.Generator().manual_seed(seed)
    sizes = [h * w for h, w in maps]
    shapes = torch.tensor(maps)
    starts = torch.tensor([sum(sizes[:i]) for i in range(len(sizes))])
    value = torch.randn(batch, sum(sizes), heads, channels, generator=g).to(dtype)
    locations = (0.5 + spread * (torch.rand(batch, queries, heads, len(maps), points, 2, generator=g) - 0.5)).to(dtype)
    weights = torch.rand(batch, queries, heads, len(maps), points, generator=g).to(dtype)
    return tuple(t.to(device) for t in (value, shapes, starts, locations, weights))


@contextlib.contextmanager
def _without_unloadable_torchvision():
    # Never `import torchvision` here: where it was put on the path after torchtrt_plugins.vision stood in for its
    # ops, its import fails half-way, after its fake kernels replaced ours (torch.compile of nms then asserts).
    from torchtrt_plugins import vision

    with pytest.MonkeyPatch.context() as patch:
        if not vision.TORCHVISION_IMPORTABLE:
            patch.setitem(sys.modules, "torchvision", None)
        yield


def modeling(name: str):
    """transformers' ``models.<name>.modeling_<name>`` (skips without transformers)."""
    pytest.importorskip("transformers")
    with _without_unloadable_torchvision():
        return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


class AttentionCall(torch.nn.Module):
    """A model's ``MultiScaleDeformableAttention`` called as the model calls it: the maps' sizes as a Python list
    (static in the exported graph), weights from a softmax over levels and points."""

    def __init__(self, attention: torch.nn.Module, maps=MAPS):
        super().__init__()
        self.attention, self.maps = attention, list(maps)

    def forward(self, value, shapes, starts, locations, weights):
        batch, queries, heads, levels, points = weights.shape
        weights = weights.view(batch, queries, heads, -1).softmax(-1).view(batch, queries, heads, levels, points)
        return self.attention(value, shapes, self.maps, starts, locations, weights, 64)


def attention_call(name: str, maps=MAPS) -> AttentionCall:
    return AttentionCall(getattr(modeling(name), ATTENTION_CLASS)(), maps).eval()


class AttentionV2Call(torch.nn.Module):
    """RT-DETRv2's ``multi_scale_deformable_attention_v2`` called as its model calls it: locations (B, Q, H, L*P, 2)
    and weights (B, Q, H, L*P) (the op's inputs, flattened), a softmax over the levels' points, ``points`` per level
    and ``method`` ("default" or "discrete")."""

    def __init__(self, points=(4, 4, 4), method="default", maps=MAPS):
        super().__init__()
        self.points, self.method, self.maps = list(points), method, list(maps)
        self.function = modeling("rt_detr_v2").multi_scale_deformable_attention_v2

    def forward(self, value, locations, weights):
        weights = weights.softmax(-1)
        return self.function(value, self.maps, locations, weights, self.points, self.method)


class AttentionOnMaps(torch.nn.Module):
    """Deformable attention over feature maps (B, H*D, H_l, W_l) given as inputs after the locations and weights,
    flattened into the value as the models do, the level sizes read from the maps' shapes (symbolic where the maps'
    sizes are dynamic); the attention is model ``name``'s class, or RT-DETRv2's function for "rt_detr_v2" (locations
    and weights flat)."""

    def __init__(self, name: str, heads: int = 3):
        super().__init__()
        self.name, self.heads = name, heads
        self.call = AttentionV2Call() if name == "rt_detr_v2" else attention_call(name)

    def forward(self, locations, weights, *maps: torch.Tensor):
        batch, channels = maps[0].shape[:2]
        value = torch.cat([m.flatten(2).transpose(1, 2) for m in maps], 1).view(
            batch, -1, self.heads, channels // self.heads
        )
        self.call.maps = [tuple(m.shape[-2:]) for m in maps]
        if self.name == "rt_detr_v2":
            return self.call(value, locations, weights)
        return self.call(value, None, None, locations, weights)

    @staticmethod
    def inputs(name: str, maps=MAPS, seed=0) -> tuple:
        if name == "rt_detr_v2":
            value, locations, weights = v2_inputs(maps=maps, seed=seed, spread=1.4)
        else:
            value, _, _, locations, weights = random_inputs(maps=maps, seed=seed, spread=1.4)
        batch, _, heads, channels = value.shape
        levels = value.split([h * w for h, w in maps], dim=1)
        return (
            locations,
            weights,
            *[
                level.flatten(2).transpose(1, 2).reshape(batch, heads * channels, h, w)
                for level, (h, w) in zip(levels, maps)
            ],
        )


def v2_inputs(points=(4, 4, 4), **kwargs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(value, locations, weights)`` for ``AttentionV2Call``: ``random_inputs``' with the levels' points flat (as
    many per level as the most, the first ``points[l]`` of level ``l`` kept)."""
    value, _, _, locations, weights = random_inputs(points=max(points), **kwargs)
    keep = [level * max(points) + p for level, n in enumerate(points) for p in range(n)]
    return value, locations.flatten(3, 4)[:, :, :, keep], weights.flatten(3)[..., keep]


def zoo_model(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """``(model, inputs)`` of zoo model ``name`` (tiny config, random weights)."""
    pytest.importorskip("transformers")
    from torchtrt_plugins import zoo

    with _without_unloadable_torchvision():
        return zoo.MODELS[name].build()


def attention_modules(model: torch.nn.Module) -> int:
    return sum(type(m).__name__ in ATTENTION_CLASSES for m in model.modules())


def tiny_deformable_detr(**config) -> torch.nn.Module:
    """A Deformable DETR of one encoder and one decoder layer, two feature levels, random weights (``config``
    overrides DeformableDetrConfig's arguments)."""
    transformers = pytest.importorskip("transformers")
    sizes = dict(
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_queries=7,
        num_feature_levels=2,
        encoder_n_points=2,
        decoder_n_points=2,
    )
    with _without_unloadable_torchvision():
        config = transformers.DeformableDetrConfig(
            **{**sizes, **config},
            use_timm_backbone=False,
            backbone_config={
                "model_type": "resnet",
                "depths": [1, 1, 1, 1],
                "hidden_sizes": [8, 8, 8, 8],
                "embedding_size": 8,
                "out_features": ["stage3", "stage4"],
            },
            use_pretrained_backbone=False,
        )
        torch.manual_seed(0)
        return transformers.DeformableDetrModel(config).eval()


class DeformableDetrEncoder(torch.nn.Module):
    """A tiny Deformable DETR's encoder on flattened features of fixed maps (what its model feeds it)."""

    def __init__(self, maps=((8, 10), (4, 5))):
        super().__init__()
        self.encoder = tiny_deformable_detr().encoder
        self.maps = [tuple(m) for m in maps]
        sizes = [h * w for h, w in self.maps]
        self.register_buffer("shapes", torch.tensor(self.maps), persistent=False)
        self.register_buffer("starts", torch.tensor([sum(sizes[:i]) for i in range(len(sizes))]), persistent=False)
        self.register_buffer("ratios", torch.ones(1, len(self.maps), 2), persistent=False)

    def forward(self, features, positions):
        return self.encoder(
            inputs_embeds=features,
            attention_mask=torch.ones(features.shape[:2], dtype=torch.bool, device=features.device),
            spatial_position_embeddings=positions,
            spatial_shapes=self.shapes,
            spatial_shapes_list=self.maps,
            level_start_index=self.starts,
            valid_ratios=self.ratios.expand(features.shape[0], -1, -1),
        ).last_hidden_state

    def example_inputs(self, batch: int = 2, seed: int = 0, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        rows = sum(h * w for h, w in self.maps)
        return tuple(torch.randn(batch, rows, 32, generator=g).to(device) for _ in range(2))
