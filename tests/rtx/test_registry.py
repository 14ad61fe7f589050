"""The plugin library in TensorRT-RTX's registry: loading, creators, field names, idempotent loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchtrt_plugins import _compat, native, registry

EXPECTED_KEYS = sorted(list(entry.spec.creator_key) for entry in registry.all_ops())


def _attempted_loads(records) -> list:
    """Log lines of the registry starting a load_library (records: LogRecords, or [severity, message] pairs)."""
    return [r for r in records if "attempting to load library" in (r.message if hasattr(r, "message") else r[1])]


@pytest.fixture(scope="module")
def fresh(plugin_library: Path) -> dict:
    """The steps of fresh_registry.py, run in a new process against the same library file."""
    script = Path(__file__).with_name("fresh_registry.py")
    env = {k: v for k, v in os.environ.items() if k != "TORCHTRT_PLUGINS_TENSORRT"}
    result = subprocess.run(
        [sys.executable, str(script), str(plugin_library)], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, f"fresh_registry.py failed ({result.returncode}):\n{result.stderr[-4000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_load_library_registers_every_creator(fresh):
    step = fresh["load_library"]
    assert step["result"] is True, f"load_library returned None; log: {step['log']}"
    assert errors_in(step) == []
    assert step["creators"] == EXPECTED_KEYS


def test_deregister_library_removes_our_creators(fresh):
    assert fresh["deregister_library"]["creators"] == []


def test_first_load_plugins_loads_once_and_logs_no_error(fresh, plugin_library):
    step = fresh["load_plugins"]
    assert step["result"] == str(plugin_library)
    assert step["creators"] == EXPECTED_KEYS
    # Looking creators up with get_creator before loading would log one ERROR per op.
    assert errors_in(step) == []
    assert len(_attempted_loads(step["log"])) == 1, step["log"]


def test_second_load_plugins_does_not_load_again(fresh, plugin_library):
    step = fresh["load_plugins_again"]
    assert step["result"] == str(plugin_library)
    assert _attempted_loads(step["log"]) == [] and errors_in(step) == []
    assert step["creators"] == EXPECTED_KEYS


def test_second_load_library_returns_none_and_names_the_creator(fresh):
    step = fresh["load_library_again"]
    assert step["result"] is False
    messages = [message for _, message in errors_in(step)]
    assert any(key[0] in message and "exists already" in message for key in EXPECTED_KEYS for message in messages), (
        messages
    )
    assert step["creators"] == EXPECTED_KEYS


def test_load_plugins_after_a_refused_load_library_is_fine(fresh, plugin_library):
    step = fresh["load_plugins_after"]
    assert step["result"] == str(plugin_library)
    assert errors_in(step) == []


def errors_in(step: dict) -> list:
    return [record for record in step["log"] if record[0] in ("ERROR", "INTERNAL_ERROR")]


# ---------------------------------------------------------------------------------------- in process


def test_our_namespace_holds_exactly_the_specs(our_creators):
    assert our_creators() == EXPECTED_KEYS


def test_creator_matches_spec(trt, registry, entry):
    spec = entry.spec
    creator = registry.get_creator(*spec.creator_key)
    assert creator is not None
    assert isinstance(creator, trt.IPluginCreatorV3One)
    assert (creator.name, creator.plugin_version, creator.plugin_namespace) == spec.creator_key
    info = creator.interface_info
    assert (info.kind, info.major) == ("PLUGIN CREATOR_V3ONE", 1)


def test_field_names_match_spec(trt, registry, entry):
    creator = registry.get_creator(*entry.spec.creator_key)
    advertised = [(field.name, field.type) for field in creator.field_names]
    expected = [(f.name, getattr(trt.PluginFieldType, f.type)) for f in entry.spec.fields]
    assert len({name for name, _ in advertised}) == len(advertised), advertised
    weights = {}
    for name in entry.spec.weight_fields:  # no one type: any its input takes
        weights.update({name: trt.PluginFieldType.UNKNOWN, f"{name}_shape": trt.PluginFieldType.INT64})
    assert dict(advertised) == dict(expected) | weights


@pytest.fixture
def only_our_library(monkeypatch):
    """Our library alone: a declared op's library (torchtrt_plugins.vision's, where a test imported it) cannot be
    built without the TensorRT headers (the wheel's run), and these tests are about ours."""
    libraries = native._libraries
    monkeypatch.setattr(
        native, "_libraries", lambda: {k: v for k, v in libraries().items() if k is native.plugin_library_path}
    )


def test_load_plugins_is_idempotent(registry, trt_log, plugin_library, only_our_library):
    with trt_log.capture() as records:
        assert native.load_plugins(registry) == plugin_library
        assert native.load_plugins(registry) == plugin_library
    assert trt_log.errors(records) == [] and _attempted_loads(records) == []


def test_load_plugins_survives_a_refused_load_library(
    registry, trt_log, plugin_library, our_creators, only_our_library
):
    with trt_log.capture() as records:
        assert registry.load_library(str(plugin_library)) is None
    assert trt_log.errors(records), "TensorRT-RTX accepted the library twice"
    with trt_log.capture() as records:
        assert native.load_plugins(registry) == plugin_library
    assert trt_log.errors(records) == []
    assert our_creators() == EXPECTED_KEYS


def test_load_plugins_defaults_to_the_forced_flavour(trt, registry, plugin_library, monkeypatch, only_our_library):
    monkeypatch.setenv("TORCHTRT_PLUGINS_TENSORRT", "tensorrt_rtx")
    assert _compat.tensorrt() is trt
    assert native.load_plugins() == plugin_library


_CHECK_OP_WITHOUT_A_LOGGER = """
import torch
from torchtrt_plugins.ops import rms_norm
from torchtrt_plugins.testing import check_op

check_op(torch.ops.torchtrt.rms_norm, [(torch.randn(3, 16), torch.randn(16), 1e-5)], checks=("rtx",))
print("passed")
"""


def test_a_passing_check_op_prints_no_error_where_no_logger_is_installed(plugin_library):
    """check_op's rtx check provokes a createPlugin rejection on purpose; with no TensorRT logger installed (a fresh
    process), the plugin library prints errors to stderr. Before: `[torchtrt_plugins] ERROR: ... field 'eps' must be a
    float > 0` on every passing run."""
    env = {**os.environ, "TORCHTRT_PLUGINS_TENSORRT": "tensorrt_rtx", "TORCHTRT_PLUGINS_LIBRARY": str(plugin_library)}
    result = subprocess.run(
        [sys.executable, "-c", _CHECK_OP_WITHOUT_A_LOGGER], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0 and result.stdout.strip() == "passed", result.stderr[-4000:]
    assert "[torchtrt_plugins] ERROR" not in result.stderr, result.stderr[-4000:]
