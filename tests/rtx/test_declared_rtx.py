"""Declared-op plugins (tests/sdk_ops, built with the SDK) inside NVIDIA's own registry (tensorrt_rtx): creators
advertise the op's scalar arguments only, createPlugin in both phases from them (the shape rules are compiled in),
and a field from before (``shape_program``) rejected."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import importlib  # noqa: E402

import sdk_ops  # noqa: E402
import torch  # noqa: E402

from torchtrt_plugins import converters  # noqa: E402
from torchtrt_plugins import plan as planning  # noqa: E402


def test_tensorrt_rtx_registry_creates_the_declared_plugins():
    trt = importlib.import_module("tensorrt_rtx")
    registry = trt.get_plugin_registry()
    registry.load_library(str(sdk_ops.LIBRARY.plugin_path()))
    calls = [
        converters.plan(sdk_ops.SHAPES.spec, (torch.zeros(6, 5), torch.zeros(5), 9, 3)),
        converters.plan(sdk_ops.NONZERO_COUNT.spec, (torch.zeros(4, 3),)),
    ]
    for call in calls:
        creator = registry.get_creator(*call.creator_key)
        assert creator is not None, call.creator_key
        weights = [name for w in call_spec(call).weight_fields for name in (w, f"{w}_shape")]
        assert [f.name for f in creator.field_names] == [f.name for f in call.fields] + weights
        fields = converters.field_collection(call, trt)
        assert [f.name for f in call.fields] == [f.name for f in call_spec(call).fields]
        for phase in (trt.TensorRTPhase.BUILD, trt.TensorRTPhase.RUNTIME):
            assert creator.create_plugin(call.plugin_name, fields, phase) is not None
        legacy = planning.FieldValue("shape_program", "INT64", [1, 2, 3])
        bad = converters.PluginCall(**{**call.__dict__, "fields": [*call.fields, legacy]})
        assert (
            creator.create_plugin(call.plugin_name, converters.field_collection(bad, trt), trt.TensorRTPhase.BUILD)
            is None
        )


def call_spec(call):
    return next(d.spec for d in (sdk_ops.SHAPES, sdk_ops.NONZERO_COUNT) if d.spec.creator_key == call.creator_key)


def test_load_plugins_loads_declared_libraries():
    trt = importlib.import_module("tensorrt_rtx")
    import torchtrt_plugins

    registry = trt.get_plugin_registry()
    torchtrt_plugins.load_plugins(registry)
    keys = {(c.name, c.plugin_version, c.plugin_namespace) for c in registry.all_creators}
    assert sdk_ops.SHAPES.spec.creator_key in keys and sdk_ops.BROKEN.spec.creator_key in keys
    torchtrt_plugins.load_plugins(registry)  # idempotent
