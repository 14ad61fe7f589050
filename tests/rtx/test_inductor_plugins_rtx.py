"""NVIDIA's builder (TensorRT-RTX, on CPU) builds a plan holding a generated op's plugin: Inductor's kernels for a
segment (``tests/inductor_cases.py``), embedded as cubins in a plugin library of its own, with static shapes and with
a dynamic batch over one profile (output shapes as the plugin's shape expressions, the workspace at the profile's
maximum); saved beside a program, that library registers its creator in a fresh process that never generated the
op."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import pytest  # noqa: E402
import torch  # noqa: E402
from inductor_cases import (  # noqa: E402
    BATCH_MAX,
    BATCH_MIN,
    BATCH_OPT,
    WithIntermediates,
    batch_dim,
    exported,
    replaced_dynamic_unsupported,
    replaced_unsupported,
)
from test_builder import BuilderCase, NetworkInput, _build  # noqa: E402

from torchtrt_plugins import inductor_plugins  # noqa: E402
from torchtrt_plugins.inductor_plugins import generated_op  # noqa: E402


@pytest.fixture(scope="module")
def declaration():
    _, report, _ = replaced_unsupported()
    (qualname,) = report["replaced"]
    return generated_op._DECLARED[qualname]


def test_nvidia_builder_builds_a_plan_with_a_generated_plugin(trt, trt_log, registry, declaration):
    registry.load_library(str(declaration.library.plugin_path()))
    static = ((8, 32),) * 3
    case = BuilderCase(
        "generated_segment",
        declaration.qualname,
        (NetworkInput("x", torch.float32, static), NetworkInput("weight", torch.float32, ((32,),) * 3)),
        outputs=(0, 1),
    )
    with trt_log.capture() as records:
        plan, network = _build(trt, trt_log, registry, case)
    errors = [f"{r.severity}: {r.message}" for r in trt_log.errors(records)]
    assert plan is not None and plan.nbytes > 0 and not errors, errors
    outputs = [network.get_output(i) for i in range(network.num_outputs)]
    assert [o.dtype for o in outputs] == [trt.float32, trt.int64]
    assert [tuple(o.shape) for o in outputs] == [(8, 32), (8, 32)]
    assert declaration.spec.plugin_name.encode() in bytes(plan)


def _build_checked(trt, trt_log, registry, case):
    with trt_log.capture() as records:
        plan, network = _build(trt, trt_log, registry, case)
    errors = [f"{r.severity}: {r.message}" for r in trt_log.errors(records)]
    assert plan is not None and plan.nbytes > 0 and not errors, errors
    return plan, network


def test_nvidia_builder_builds_a_dynamic_profile_over_a_generated_plugin(trt, trt_log, registry):
    _, report, _ = replaced_dynamic_unsupported()
    (qualname,) = report["replaced"]
    declaration = generated_op._DECLARED[qualname]
    registry.load_library(str(declaration.library.plugin_path()))
    batch = ((BATCH_MIN, 32), (BATCH_OPT, 32), (BATCH_MAX, 32))
    case = BuilderCase(
        "generated_segment_dynamic_batch",
        qualname,
        (NetworkInput("x", torch.float32, batch), NetworkInput("weight", torch.float32, ((32,),) * 3)),
        outputs=(0, 1),
    )
    plan, network = _build_checked(trt, trt_log, registry, case)
    outputs = [network.get_output(i) for i in range(network.num_outputs)]
    # The batch stays symbolic through the plugin: its output shapes are expressions of the input's, not constants.
    assert [tuple(o.shape) for o in outputs] == [(-1, 32), (-1, 32)]
    assert declaration.spec.plugin_name.encode() in bytes(plan)


def test_nvidia_builder_builds_a_generated_plugin_with_intermediates_over_the_batch(trt, trt_log, registry):
    gm = exported(WithIntermediates(), torch.randn(16, 64), dynamic_shapes=({0: batch_dim()},))
    (qualname,) = inductor_plugins.replace_segments(gm, lambda n: False)["replaced"]
    declaration = generated_op._DECLARED[qualname]
    assert declaration.compiled_segment.intermediates[0] != 0
    registry.load_library(str(declaration.library.plugin_path()))
    batch = ((BATCH_MIN, 64), (BATCH_OPT, 64), (BATCH_MAX, 64))
    case = BuilderCase("generated_segment_workspace", qualname, (NetworkInput("x", torch.float32, batch),))
    plan, network = _build_checked(trt, trt_log, registry, case)
    assert tuple(network.get_output(0).shape) == (-1,)


#: A fresh process (no op generated): the libraries saved beside the program into NVIDIA's registry; prints the
#: creators registered then.
_LOAD_SAVED = """
import json, sys
import tensorrt_rtx as trt
from torchtrt_plugins import native
logger = trt.Logger(trt.Logger.WARNING)
runtime = trt.Runtime(logger)
registry = trt.get_plugin_registry()
loaded = native.load_saved_libraries(sys.argv[1], registry)
creators = [[c.name, c.plugin_version, c.plugin_namespace] for c in registry.all_creators]
print(json.dumps({"loaded": [p.name for p in loaded], "creators": creators}))
"""


def test_saved_plugin_libraries_load_in_a_fresh_process(tmp_path, declaration):
    from torchtrt_plugins import inductor_plugins

    program = tmp_path / "model.ep"  # where torch_tensorrt.save wrote the program
    saved = inductor_plugins.save_plugin_libraries(program)
    assert declaration.library.plugin_path().name in [p.name for p in saved]
    env = {**os.environ, "TORCHTRT_PLUGINS_TENSORRT": "tensorrt_rtx"}
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_SAVED, str(program)], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["loaded"] == sorted(p.name for p in saved)
    assert list(declaration.spec.creator_key) in report["creators"], report["creators"]
