"""Plugins created through the converter's emit helpers in TensorRT-RTX's registry, valid and invalid fields."""

from __future__ import annotations

import re

import numpy as np
import pytest

from torchtrt_plugins import converters
from torchtrt_plugins import spec as spec_mod

create_plugin = converters.create_plugin
field_collection = converters.field_collection

PHASES = ("BUILD", "RUNTIME")
#: Printed by our library's log() only when TensorRT gave it no logger (csrc/sdk/plugin_support.cpp): a severity
#: follows; the Python package's own "[torchtrt_plugins] building ..." (a library's first build) is not it.
FALLBACK_LOG = re.compile(r"\[torchtrt_plugins\] (INTERNAL_ERROR|ERROR|WARNING|INFO|VERBOSE|LOG): ")


def test_field_collection_carries_the_planned_fields(trt, valid_case):
    call = valid_case.call()
    spec = valid_case.entry.spec
    collection = field_collection(call, trt)
    assert isinstance(collection, trt.PluginFieldCollection)
    got = [(collection[i].name, collection[i].type) for i in range(len(collection))]
    # The op's scalar arguments only: its shape rules are compiled into the plugin library.
    assert got == [(f.name, getattr(trt.PluginFieldType, f.type)) for f in spec.fields]
    for i, value in enumerate(call.fields):
        expected = np.asarray(value.value, dtype=spec_mod.FIELD_NUMPY_DTYPES[value.type]).reshape(-1)
        np.testing.assert_array_equal(np.asarray(collection[i].data), expected)
        assert collection[i].size == expected.size


@pytest.mark.parametrize("phase", PHASES)
def test_create_plugin_reports_spec_identity(trt, registry, trt_log, valid_case, phase, capfd):
    spec = valid_case.entry.spec
    call = valid_case.call()
    if valid_case.variant == "shape_inputs":
        sentinels = [f.shape_input_sentinel for f in spec.fields if f.shape_input]
        assert call.shape_inputs and sentinels == [call.field_value(f.name) for f in spec.fields if f.shape_input]
    with trt_log.capture() as records:
        plugin = create_plugin(call, getattr(trt.TensorRTPhase, phase), trt, registry)
    assert plugin is not None, f"{spec.plugin_name} rejected {call.fields}: {trt_log.errors(records)}"
    assert trt_log.errors(records) == []

    core = plugin.get_capability_interface(trt.PluginCapabilityType.CORE)
    assert (core.plugin_name, core.plugin_version, core.plugin_namespace) == spec.creator_key
    build = plugin.get_capability_interface(trt.PluginCapabilityType.BUILD)
    assert build.num_outputs == spec.num_plugin_outputs == call.num_outputs
    identity = spec.qualname if valid_case.entry.declaration else spec.plugin_name
    assert build.timing_cache_id.startswith(f"{identity}_v{spec.plugin_version}")
    runtime = plugin.get_capability_interface(trt.PluginCapabilityType.RUNTIME)
    # The v_1_0 interfaces, which TensorRT 10 and 11 both understand; a mutating op's build interface is v_2_0
    # (getAliasedInput, TensorRT 10.3 and later).
    kinds = [(cap.interface_info.kind, cap.interface_info.major) for cap in (core, build, runtime)]
    build_major = 2 if spec.mutated else 1
    assert kinds == [("PLUGIN_V3ONE_CORE", 1), ("PLUGIN_V3ONE_BUILD", build_major), ("PLUGIN_V3ONE_RUNTIME", 1)]
    assert not FALLBACK_LOG.search(capfd.readouterr().err)


def test_invalid_field_is_rejected_and_logged(trt, registry, trt_log, invalid_field, capfd):
    spec = invalid_field.entry.spec
    call = invalid_field.call()
    with trt_log.capture() as records:
        plugin = create_plugin(call, trt.TensorRTPhase.BUILD, trt, registry)
    assert plugin is None, f"{spec.plugin_name} accepted {invalid_field.id}: {call.fields}"
    logged = trt_log.errors(records)
    assert len(logged) == 1, records
    message = logged[0].message
    plugin = f"{spec.plugin_namespace}::{spec.plugin_name}"
    # The generic plugin of a declared op names the op first: "torchtrt::rms_norm (plugin torchtrt::RMSNorm) ...".
    prefix = (
        f"{spec.qualname} (plugin {plugin}) createPlugin:"
        if invalid_field.entry.declaration
        else f"{plugin} createPlugin:"
    )
    assert message.startswith(prefix), message
    assert f"'{invalid_field.field}'" in message, message
    # The message went through TensorRT's logger, not our stderr fallback.
    assert not FALLBACK_LOG.search(capfd.readouterr().err)
