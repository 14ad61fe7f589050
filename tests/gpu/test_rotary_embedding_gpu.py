"""rotary_embedding on the GPU: the CUDA op against the reference (every dtype, both pairings, partial rotary, odd
shapes, unaligned views, int32/int64 positions) and against Hugging Face's formula; opcheck, torch.compile and CUDA
graph capture; the Python launch path; the eager cache kept per key; and the plugin's shared cos/sin cache through
the harness: several instances alive together read one table built once, which is released and freed with the last
(and, where no plugin registry is reachable, each instance builds its own)."""

from __future__ import annotations

import ctypes
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from rope_cases import hf_rotary

import torchtrt_plugins
from torchtrt_plugins import sdk
from torchtrt_plugins.converters import plan
from torchtrt_plugins.ops import rotary_embedding
from torchtrt_plugins.testing import check_op
from torchtrt_plugins.testing import harness as H

SPEC = rotary_embedding.SPEC
DECLARATION = rotary_embedding.ROTARY_EMBEDDING
ROPE = torch.ops.torchtrt.rotary_embedding
DTYPES = [torch.float32, torch.float16, torch.bfloat16]

# (x shape (..., heads, head_dim), rotary_dim): decode, prefill, GQA keys, partial rotary (GPT-NeoX, ChatGLM),
# head_dim not a multiple of a vector, batch x sequence token dims, no tokens.
SHAPES = [
    ((1, 32, 128), 128),
    ((4097, 32, 128), 128),
    ((3000, 8, 64), 64),
    ((77, 16, 80), 64),
    ((5, 3, 96), 24),
    ((9, 2, 33), 32),
    ((2, 37, 4, 64), 64),
    ((0, 4, 64), 64),
]


def _inputs(shape, dtype, max_position=8192, positions_dtype=torch.int64):
    g = torch.Generator().manual_seed(hash(shape) % 2**31)
    x = torch.randn(shape, generator=g).to(dtype).cuda()
    positions = torch.randint(0, max_position, shape[:-2], generator=g).to(positions_dtype).cuda()
    return x, positions


def _check(y, x, positions, rotary_dim, max_position, base=10000.0, is_neox=True):
    tol = SPEC.tolerance(x.dtype)
    expected = rotary_embedding.reference(x, positions, rotary_dim, max_position, base, is_neox)
    assert y.shape == x.shape and y.dtype == x.dtype
    torch.testing.assert_close(y, expected, atol=tol.atol, rtol=tol.rtol)


@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "rotary_dim"), SHAPES, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v)
)
def test_matches_reference(shape, rotary_dim, dtype, is_neox):
    x, positions = _inputs(shape, dtype)
    _check(ROPE(x, positions, rotary_dim, 8192, 500000.0, is_neox), x, positions, rotary_dim, 8192, 500000.0, is_neox)


@pytest.mark.parametrize("positions_dtype", [torch.int32, torch.int64])
def test_int32_positions_and_unaligned_views(positions_dtype):
    base, positions = _inputs((64, 8, 129), torch.float16, 4096, positions_dtype)
    x = base[..., 1:]  # non-contiguous, misaligned heads
    _check(ROPE(x, positions, 128, 4096), x, positions, 128, 4096)
    flat = torch.randn(64 * 8 * 128 + 1, device="cuda", dtype=torch.bfloat16)[1:].view(64, 8, 128)  # unaligned base
    _check(ROPE(flat, positions, 128, 4096, 10000.0, False), flat, positions, 128, 4096, 10000.0, False)


def test_matches_hugging_face_in_fp32():
    x, positions = _inputs((300, 8, 128), torch.float32, 4096)
    # Hugging Face's fp32 inverse frequencies are within an ulp of ours: at position p, angles within p * 2^-23.
    expected = hf_rotary(x.cpu(), positions.cpu(), 128, 10000.0).cuda()
    torch.testing.assert_close(ROPE(x, positions, 128, 4096), expected, atol=2e-3, rtol=2e-3)


def test_opcheck_and_compile():
    x, positions = _inputs((33, 4, 64), torch.bfloat16, 512)
    torch.library.opcheck(torch.ops.torchtrt.rotary_embedding.default, (x, positions, 64, 512, 10000.0, True))
    compiled = torch.compile(lambda a, p: ROPE(a, p, 64, 512) * 2, fullgraph=True)
    torch.testing.assert_close(compiled(x, positions), ROPE(x, positions, 64, 512) * 2)


def test_captured_in_a_cuda_graph_after_its_cache_is_built():
    x, positions = _inputs((128, 8, 64), torch.float16, 2048)
    expected = ROPE(x, positions, 64, 2048)  # builds the cache for this key (outside the capture)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        ROPE(x, positions, 64, 2048)
        with torch.cuda.graph(graph, stream=stream):
            y = ROPE(x, positions, 64, 2048)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    _check(y, x, positions, 64, 2048)
    assert not torch.equal(y, expected)


def test_python_launch_path_matches_the_cxx_eager_kernel():
    x, positions = _inputs((257, 4, 96), torch.bfloat16, 1000)
    args = (x, positions, 64, 1000, 10000.0, False)
    torch.testing.assert_close(sdk.launch(DECLARATION, *args), ROPE(*args), atol=0, rtol=0)


def test_eager_cache_is_one_table_per_key_and_device():
    lib = DECLARATION.library.launchers()

    def table(*scalars):
        out = (ctypes.c_void_p * 1)()
        assert lib.ttp_sdk_resource_tables(b"torchtrt::rotary_embedding", (ctypes.c_double * 4)(*scalars), out) == 0
        return out[0]

    # scalars in schema order: rotary_dim, max_position, base, is_neox (not a key field)
    first = table(64, 4096, 10000.0, 1)
    assert table(64, 4096, 10000.0, 0) == first
    assert table(64, 4096, 500000.0, 1) != first
    assert table(32, 4096, 10000.0, 1) != first


def test_check_op():
    x, positions = _inputs((19, 4, 64), torch.float16, 256)
    report = check_op(ROPE, [(x, positions, 64, 256), (x.float(), positions.int(), 32, 256, 500000.0, False)])
    assert "harness" in report.passed, report


def _harness_run(build, x, positions, rotary_dim, max_position, **kwargs):
    call = plan(SPEC, (x, positions, rotary_dim, max_position), {})
    return H.run_call(call, x, positions, library=build.library, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_plugin_instances_share_one_cache_released_with_the_last(build, dtype):
    x, positions = _inputs((300, 8, 128), dtype, 4096)
    result = _harness_run(build, x, positions, 128, 4096, instances=3)
    result.assert_conformant()  # graph capture and replay of enqueue included
    assert result.enqueue_skipped is None
    (key, stats), *others = result.resources.items()
    assert others == [], result.resources
    assert key == "torchtrt::CachedRotaryEmbedding v1/cos_sin(4096,128,10000)@cuda:0"
    assert stats["peak"] == 3  # the three runtime instances held it at once
    assert stats["acquires"] > stats["builds"] >= 1  # acquired by each instance, built only when none held it
    assert stats["releases"] == stats["builds"] and stats["held"] == 0
    expected = rotary_embedding.reference(x, positions, 128, 4096)
    tol = SPEC.tolerance(dtype)
    instances = [r for r in result.runs if r.phase == "instance"]
    assert len(instances) == 2
    for record in [result.run(0, "build"), result.run(0, "runtime"), *instances]:
        torch.testing.assert_close(record.outputs[0], expected, atol=tol.atol, rtol=tol.rtol)


def test_plugin_cache_memory_is_freed_with_the_last_instance(build):
    # The device's free memory is shared with the other test workers (pytest-xdist), whose allocations come and go
    # while this runs: the table is the largest the op allows (2 GiB) and the free memory is read again a few times,
    # since a leak stays and another worker's allocation does not.
    max_position = 1 << 22
    x, positions = _inputs((16, 2, 128), torch.bfloat16, max_position)
    table_bytes = max_position * 128 * 4
    gc.collect()
    torch.cuda.empty_cache()
    free_before, _ = torch.cuda.mem_get_info()
    result = _harness_run(build, x, positions, 128, max_position, instances=2)
    result.assert_conformant()
    assert list(result.resources.values())[0]["held"] == 0
    del result
    gc.collect()
    torch.cuda.empty_cache()
    seen = []
    for _ in range(10):
        seen.append(torch.cuda.mem_get_info()[0])
        if free_before - seen[-1] < table_bytes // 4:
            break
        time.sleep(0.2)
    assert free_before - seen[-1] < table_bytes // 4, (free_before, seen)


_NO_REGISTRY = r"""
import ctypes, json
import torch
from torchtrt_plugins.converters import plan
from torchtrt_plugins.ops import rotary_embedding
from torchtrt_plugins.testing import harness as H

# The harness loaded without RTLD_GLOBAL: plugins cannot see its registry, as in a process without TensorRT.
build = H._build()
H._handles[str(build.harness)] = lib = ctypes.CDLL(str(build.harness))
lib.ttp_harness_run.argtypes = [ctypes.c_char_p, H._ALLOCATE, ctypes.c_void_p]
lib.ttp_harness_run.restype = ctypes.c_void_p
lib.ttp_harness_free.argtypes = [ctypes.c_void_p]
lib.ttp_harness_free.restype = None
x = torch.randn(40, 4, 64, device="cuda", dtype=torch.float16)
positions = torch.randint(0, 512, (40,), device="cuda")
call = plan(rotary_embedding.SPEC, (x, positions, 64, 512), {})
result = H.run_call(call, x, positions, library=build.library, harness=build.harness, instances=2)
expected = rotary_embedding.reference(x, positions, 64, 512)
close = all(torch.allclose(r.outputs[0], expected, atol=2e-3, rtol=2e-3) for r in result.runs)
print(json.dumps({"violations": [str(v) for v in result.violations], "resources": result.resources,
                  "close": close, "runs": len(result.runs), "log": result.log_text()}))
"""


def test_without_a_registry_each_instance_builds_its_own_table():
    package_root = str(Path(torchtrt_plugins.__file__).resolve().parents[1])  # this checkout's, in the child too
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", _NO_REGISTRY], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["violations"] == [] and report["resources"] == {}
    assert report["close"] and report["runs"] >= 3
    assert "no TensorRT 11.x plugin registry in this process" in report["log"]
