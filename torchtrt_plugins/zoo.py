"""The detector zoo (issue 45): public detection model classes from tiny configs (random weights, nothing
downloaded), exported with ``torch.export`` and partitioned by Torch-TensorRT, with and without us.

``MODELS`` names each model's builder; :func:`export` exports one (torchvision's within
:func:`torchtrt_plugins.vision.exportable`, postprocessing included, Mask R-CNN's mask pasting too);
:func:`partition` runs Torch-TensorRT's own pipeline up to the partition (``dryrun``) and counts engines and what
falls back; :func:`table` is what ``torchtrt-plugins zoo`` prints; :func:`converted` is the exported graph with our
lowering applied, as a module (what ``torchtrt-plugins zoo --time`` times against eager, and the gpu tier runs through
the harness). Needs torchvision and transformers, and Torch-TensorRT for :func:`partition`.

"Without us" runs the same pipeline with every op that has a converter of ours (ours and declared ones, e.g.
``torchvision::nms``) in ``torch_executed_ops``, the lowering pass and our ATen converters
(``converters.aten_fallbacks``) off: what Torch-TensorRT does with the graph
when ``torchtrt_plugins`` adds nothing. ``inductor=True`` runs "with us" with the Inductor plugins' switch on
(``torchtrt_plugins.inductor_plugins``: each segment left to PyTorch becomes one plugin layer of generated kernels).
``full_tensorrt=True`` partitions as full TensorRT would: Torch-TensorRT
registers its boolean ``aten.index.Tensor`` converter for full TensorRT only (``index_nonbool_validator``
reads ``ENABLED_FEATURES.tensorrt_rtx``), so the partition is run with that feature flag off.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from . import lowering, registry, vision
from .converters import aten_fallbacks

__all__ = ["MODELS", "Partition", "ZooModel", "converted", "export", "partition", "table"]

#: Targets that are no computation (their fallback is not an op that fell back).
_PLUMBING = ("<built-in function getitem>", "_operator.getitem")


@dataclass(frozen=True)
class ZooModel:
    name: str
    #: ``() -> (module, example inputs)``, module in eval mode.
    build: Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]
    #: What the exported program leaves out, and why.
    note: str = ""


class _FirstImage(torch.nn.Module):
    """A torchvision detector called as export takes it: a batch tensor in, the first image's outputs out."""

    def __init__(self, model: torch.nn.Module, keys: tuple[str, ...]):
        super().__init__()
        self.model, self.keys = model, keys

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        detections = self.model(list(images))[0]
        return tuple(detections[key] for key in self.keys)


_BOXES = ("boxes", "scores", "labels")
_MASKS = (*_BOXES, "masks")
_SIZE = 64
_DETECTOR = {"weights": None, "weights_backbone": None, "num_classes": 3}


def _image(size: int = _SIZE, seed: int = 0) -> torch.Tensor:
    return torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(seed))


def _torchvision(constructor: str, keys: tuple[str, ...] = _BOXES, **kwargs) -> Callable:
    def build():
        from torchvision.models import detection

        torch.manual_seed(0)
        model = getattr(detection, constructor)(**_DETECTOR, **kwargs).eval()
        return _FirstImage(model, keys).eval(), (_image(),)

    return build


_RCNN = {"min_size": _SIZE, "max_size": _SIZE, "rpn_pre_nms_top_n_test": 50, "rpn_post_nms_top_n_test": 20}
#: score_thresh: random weights score every anchor near the classification prior (0.01), below the defaults.
_ONE_STAGE = {
    "min_size": _SIZE,
    "max_size": _SIZE,
    "topk_candidates": 20,
    "detections_per_img": 10,
    "score_thresh": 0.001,
}


class DeformNet(torch.nn.Module):
    """A conv, then ``torchvision.ops.DeformConv2d`` with offsets (and a mask) predicted by convs."""

    def __init__(self, with_mask: bool):
        super().__init__()
        from torchvision.ops import DeformConv2d

        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.offset = torch.nn.Conv2d(8, 2 * 9, 3, padding=1)
        self.mask = torch.nn.Conv2d(8, 9, 3, padding=1) if with_mask else None
        self.deform = DeformConv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x).relu()
        mask = None if self.mask is None else self.mask(h).sigmoid()
        return self.deform(h, self.offset(h), mask).relu()


def _deform_net(with_mask: bool) -> Callable:
    def build():
        torch.manual_seed(0)
        return DeformNet(with_mask).eval(), (_image(16),)

    return build


class _Outputs(torch.nn.Module):
    """A Hugging Face model called with positional tensors (``names``), its output's tensors as a flat tuple."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        output = self.model(**dict(zip(self.names, inputs)))
        return tuple(v for v in torch.utils._pytree.tree_leaves(output.to_tuple()) if isinstance(v, torch.Tensor))


def _resnet(config_class: str = "ResNetConfig"):
    import transformers

    return getattr(transformers, config_class)(
        embedding_size=8,
        hidden_sizes=[8, 16, 16, 32],
        depths=[1, 1, 1, 1],
        layer_type="basic",
        out_features=["stage2", "stage3", "stage4"],
    )


def _swin(out_features: list[str]):
    import transformers

    return transformers.SwinConfig(
        embed_dim=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], window_size=2, out_features=out_features
    )


def _bert():
    import transformers

    return transformers.BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )


_DETR = {
    "d_model": 32,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 32,
    "decoder_ffn_dim": 32,
    "num_queries": 5,
}
_RT_DETR = {
    "encoder_hidden_dim": 16,
    "encoder_in_channels": (16, 16, 32),
    "encoder_ffn_dim": 32,
    "encoder_attention_heads": 2,
    "d_model": 16,
    "num_queries": 5,
    "decoder_in_channels": (16, 16, 16),
    "decoder_ffn_dim": 32,
    "decoder_layers": 1,
    "decoder_attention_heads": 2,
    "decoder_n_points": 2,
    "num_denoising": 0,
}
_TOKENS = (1, 5, 7, 2, 9, 3)


def _transformers(model_class: str, config: Callable[[], dict], text: bool = False) -> Callable:
    def build():
        import transformers

        config_class = getattr(transformers, model_class.replace("Model", "Config"))
        torch.manual_seed(0)
        model = getattr(transformers, model_class)(config_class(**config())).eval()
        inputs = (_image(),) + ((torch.tensor([_TOKENS]),) if text else ())
        return _Outputs(model, ("pixel_values", "input_ids")[: len(inputs)]).eval(), inputs

    return build


MODELS: dict[str, ZooModel] = {
    model.name: model
    for model in (
        ZooModel(
            "fasterrcnn_mobilenet_v3_large_320_fpn", _torchvision("fasterrcnn_mobilenet_v3_large_320_fpn", **_RCNN)
        ),
        ZooModel("maskrcnn_resnet50_fpn", _torchvision("maskrcnn_resnet50_fpn", _MASKS, **_RCNN)),
        ZooModel("retinanet_resnet50_fpn", _torchvision("retinanet_resnet50_fpn", **_ONE_STAGE)),
        ZooModel("fcos_resnet50_fpn", _torchvision("fcos_resnet50_fpn", **_ONE_STAGE)),
        ZooModel(
            "ssdlite320_mobilenet_v3_large",
            _torchvision("ssdlite320_mobilenet_v3_large", topk_candidates=20, detections_per_img=10),
        ),
        ZooModel("deform_conv2d", _deform_net(with_mask=False)),
        ZooModel("deform_conv2d_mask", _deform_net(with_mask=True)),
        ZooModel(
            "RTDetrModel",
            _transformers("RTDetrModel", lambda: {"backbone_config": _resnet("RTDetrResNetConfig"), **_RT_DETR}),
        ),
        ZooModel(
            "RTDetrV2Model",
            _transformers("RTDetrV2Model", lambda: {"backbone_config": _resnet("RTDetrResNetConfig"), **_RT_DETR}),
        ),
        ZooModel(
            "Mask2FormerModel",
            _transformers(
                "Mask2FormerModel",
                lambda: {
                    "backbone_config": _swin(["stage1", "stage2", "stage3", "stage4"]),
                    "feature_size": 32,
                    "mask_feature_size": 32,
                    "hidden_dim": 32,
                    "encoder_feedforward_dim": 32,
                    "encoder_layers": 1,
                    "decoder_layers": 2,
                    "num_attention_heads": 2,
                    "dim_feedforward": 32,
                    "num_queries": 5,
                },
            ),
        ),
        ZooModel(
            "GroundingDinoModel",
            _transformers(
                "GroundingDinoModel",
                lambda: {
                    **_DETR,
                    "backbone_config": _swin(["stage2", "stage3", "stage4"]),
                    "text_config": _bert(),
                    "num_feature_levels": 3,
                    "encoder_n_points": 2,
                    "decoder_n_points": 2,
                    "max_text_len": 8,
                },
                text=True,
            ),
        ),
        ZooModel(
            "ConditionalDetrModel",
            _transformers("ConditionalDetrModel", lambda: {"backbone_config": _resnet(), **_DETR}),
        ),
        ZooModel(
            "DeformableDetrModel",
            _transformers(
                "DeformableDetrModel",
                lambda: {
                    "backbone_config": _resnet(),
                    "num_feature_levels": 3,
                    "encoder_n_points": 2,
                    "decoder_n_points": 2,
                    **_DETR,
                },
            ),
        ),
        ZooModel("DetrModel", _transformers("DetrModel", lambda: {"backbone_config": _resnet(), **_DETR})),
    )
}


def export(
    name: str, device: str | torch.device = "cpu"
) -> tuple[torch.export.ExportedProgram, torch.nn.Module, tuple[torch.Tensor, ...]]:
    """``(exported program, eager module, example inputs)`` of zoo model ``name``, module and inputs on ``device``."""
    model, inputs = MODELS[name].build()
    model, inputs = model.to(device), tuple(t.to(device) for t in inputs)
    with vision.exportable(), torch.no_grad():
        return torch.export.export(model, inputs), model, inputs


def converted(program: torch.export.ExportedProgram) -> torch.fx.GraphModule:
    """The exported program with our lowering applied (what Torch-TensorRT's pipeline hands our converters, before
    it partitions): a module whose declared ops (ours and torchvision's) run their eager kernels when called, and
    their plugins under :func:`torchtrt_plugins.testing.run_graph`. The lowering's switch is respected
    (``lowering.set_enabled``), as Torch-TensorRT's pass respects it."""
    return lowering.lower(program.module())


@dataclass
class Partition:
    #: TensorRT segments (``_run_on_acc_*``).
    engines: int
    #: Call targets left to PyTorch (its segments and the top graph), with their counts.
    fallback: collections.Counter = field(default_factory=collections.Counter)
    module: torch.fx.GraphModule | None = None

    def fallback_text(self) -> str:
        return ", ".join(f"`{target}` ×{count}" for target, count in sorted(self.fallback.items())) or "—"


def _our_targets() -> set:
    targets = set()
    for entry in registry.registered_ops():
        packet = getattr(getattr(torch.ops, entry.spec.op_namespace), entry.spec.name)
        targets.update(getattr(packet, overload) for overload in packet.overloads())
    return targets


@contextlib.contextmanager
def _lowering_off(off: bool) -> Iterator[None]:
    if not off:
        yield
        return
    before = lowering.is_enabled()
    lowering.set_enabled(False)
    try:
        yield
    finally:
        lowering.set_enabled(before)


@contextlib.contextmanager
def _full_tensorrt_partitioning(enabled: bool) -> Iterator[None]:
    from torch_tensorrt.dynamo.conversion import aten_ops_converters

    features = aten_ops_converters.ENABLED_FEATURES
    if enabled:
        aten_ops_converters.ENABLED_FEATURES = features._replace(tensorrt_rtx=False)
    try:
        yield
    finally:
        aten_ops_converters.ENABLED_FEATURES = features


def count(partitioned: torch.fx.GraphModule) -> Partition:
    """Engines and fallback targets of a module Torch-TensorRT partitioned."""
    result = Partition(engines=0, module=partitioned)
    graphs = [("", partitioned)] + [(name, sub) for name, sub in partitioned.named_children()]
    for name, graph_module in graphs:
        if not isinstance(graph_module, torch.fx.GraphModule):
            continue
        if "_run_on_acc" in name:
            result.engines += 1
            continue
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and str(node.target) not in _PLUMBING:
                result.fallback[str(node.target)] += 1
    return result


def partition(
    program: torch.export.ExportedProgram,
    inputs: tuple[torch.Tensor, ...],
    *,
    ours: bool = True,
    full_tensorrt: bool = False,
    inductor: bool = False,
    **settings,
) -> Partition:
    """Torch-TensorRT's pipeline up to its partition (``dynamo.compile(..., dryrun=True)``), counted; ``inductor``:
    with the Inductor plugins' switch on (with us only)."""
    if inductor and not ours:
        raise ValueError("zoo.partition: inductor=True needs ours=True (the Inductor plugins are ours)")
    import torch_tensorrt

    from . import inductor_plugins

    options = {"min_block_size": 1, "offload_module_to_cpu": True, **settings}
    if not ours:
        options["torch_executed_ops"] = _our_targets() | set(options.get("torch_executed_ops", ()))
    ours_off = contextlib.nullcontext() if ours else aten_fallbacks.disabled()
    with (
        _lowering_off(not ours),
        ours_off,
        _full_tensorrt_partitioning(full_tensorrt),
        inductor_plugins.switched(inductor),
    ):
        partitioned = torch_tensorrt.dynamo.compile(program, arg_inputs=list(inputs), dryrun=True, **options)
    return count(partitioned)


def table(
    names: list[str] | None = None,
    *,
    full_tensorrt: bool = False,
    inductor: bool = False,
    log: Callable[[str], None] | None = None,
) -> str:
    """The zoo's table (markdown): engines without and with us, and what stays in PyTorch with us; ``inductor`` adds
    the engines with us and the Inductor plugins' switch on, and what stays in PyTorch then; ``log`` gets each line as
    soon as it is known (a model takes a minute or more on CPU)."""
    header = ["model", "engines without us", "with us", "still in PyTorch with us"]
    if inductor:
        header += ["with us and Inductor plugins", "still in PyTorch with Inductor plugins"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for line in lines:
        (log or _ignore)(line)
    for name in names or list(MODELS):
        program, _, inputs = export(name)
        without = partition(program, inputs, ours=False, full_tensorrt=full_tensorrt)
        with_us = partition(program, inputs, ours=True, full_tensorrt=full_tensorrt)
        note = f" ({MODELS[name].note})" if MODELS[name].note else ""
        cells = [f"`{name}`{note}", str(without.engines), str(with_us.engines), with_us.fallback_text()]
        if inductor:
            generated = partition(program, inputs, ours=True, full_tensorrt=full_tensorrt, inductor=True)
            cells += [str(generated.engines), generated.fallback_text()]
        lines.append("| " + " | ".join(cells) + " |")
        (log or _ignore)(lines[-1])
    return "\n".join(lines)


def _ignore(line: str) -> None:
    pass
