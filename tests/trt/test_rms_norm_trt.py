"""rms_norm inside TensorRT engines built by Torch-TensorRT (needs a GPU with TensorRT)."""

import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from fixtures import assert_no_fallback, compile_trt

import torchtrt_plugins
from torchtrt_plugins.ops import rms_norm


class Block(torch.nn.Module):
    def __init__(self, hidden=512):
        super().__init__()
        self.proj = torch.nn.Linear(hidden, hidden)
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(hidden))

    def forward(self, x):
        return self.proj(torch.ops.torchtrt.rms_norm(x, self.weight, 1e-6)) + x


def _model(dtype):
    return Block().cuda().to(dtype).eval()


def _dynamic_input(dtype):
    import torch_tensorrt

    return torch_tensorrt.Input(min_shape=(1, 7, 512), opt_shape=(4, 7, 512), max_shape=(16, 7, 512), dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_torch_tensorrt_compile_dynamic_batch(dtype):
    model = _model(dtype)
    trt_module = compile_trt(model, [_dynamic_input(dtype)])
    assert_no_fallback(trt_module, "rms_norm")
    tol = rms_norm.SPEC.tolerance(dtype)
    for batch in (1, 5, 16):
        x = torch.randn(batch, 7, 512, device="cuda", dtype=dtype)
        torch.testing.assert_close(trt_module(x), model(x), atol=tol.atol * 10, rtol=tol.rtol * 10)


def test_torch_compile_backend_tensorrt():
    model = _model(torch.float16)
    compiled = torch.compile(model, backend="tensorrt", dynamic=False, options={"min_block_size": 1})
    x = torch.randn(4, 7, 512, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(compiled(x), model(x), atol=2e-2, rtol=2e-2)


def test_engine_saved_and_loaded_in_fresh_process(tmp_path):
    """Torch-TensorRT saves the engines but no plugin library: ``torchtrt_plugins.load_program`` registers our
    creators before it deserializes them."""
    import torch_tensorrt

    model = _model(torch.float16)
    x = torch.randn(4, 7, 512, device="cuda", dtype=torch.float16)
    trt_module = torch_tensorrt.compile(model, ir="dynamo", inputs=[x], min_block_size=1)
    path = tmp_path / "block.ep"
    torch_tensorrt.save(trt_module, str(path), inputs=[x])
    torch.save({"x": x.cpu(), "y": model(x).cpu()}, tmp_path / "io.pt")
    script = textwrap.dedent(
        f"""
        import torch
        import torchtrt_plugins
        io = torch.load({str(tmp_path / "io.pt")!r})
        module = torchtrt_plugins.load_program({str(path)!r}).module()
        y = module(io["x"].cuda())
        torch.testing.assert_close(y.cpu(), io["y"], atol=2e-2, rtol=2e-2)
        print("fresh-process-ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert "fresh-process-ok" in result.stdout, result.stderr[-4000:]


def _build_plan(path, serialize_library: bool, version_compatible: bool | None = None, allow_refusal: bool = False):
    """A plain TensorRT plan holding one RMSNorm plugin layer (dynamic rows, hidden 256, fp16).

    ``serialize_library`` puts our library in ``plugins_to_serialize``; TensorRT serializes plugin libraries
    only into version-compatible plans (``IBuilderConfig::setPluginsToSerialize``), so it also sets
    ``BuilderFlag.VERSION_COMPATIBLE`` unless ``version_compatible`` says otherwise. Such a plan also carries
    TensorRT's lean runtime (``EXCLUDE_LEAN_RUNTIME`` unset) and needs ``engine_host_code_allowed`` to load."""
    import tensorrt as trt

    from torchtrt_plugins.converters import create_plugin, plan

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    library = str(torchtrt_plugins.load_plugins())
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x = network.add_input("x", trt.float16, (-1, 256))
    w = network.add_input("w", trt.float16, (256,))
    plugin = create_plugin(plan(rms_norm.SPEC, ("x", "w", 1e-6), {}))
    layer = network.add_plugin_v3([x, w], [], plugin)
    network.mark_output(layer.get_output(0))
    config = builder.create_builder_config()
    if serialize_library:
        config.plugins_to_serialize = [library]
        if version_compatible is None or version_compatible:
            config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 256), (8, 256), (64, 256))
    config.add_optimization_profile(profile)
    plan_bytes = builder.build_serialized_network(network, config)
    if plan_bytes is None and not allow_refusal:
        raise AssertionError("build_serialized_network returned None; see the TensorRT log")
    if plan_bytes is not None:
        path.write_bytes(bytes(plan_bytes))
    return library


def test_trtexec_runs_the_plan_with_dynamic_plugins(tmp_path):
    """Python-free deployment: trtexec loads our library with --dynamicPlugins and runs the engine."""
    trtexec = shutil.which("trtexec")
    if trtexec is None:
        pytest.skip("trt tier: trtexec is not on PATH")
    library = _build_plan(tmp_path / "rms.plan", serialize_library=False)
    result = subprocess.run(
        [trtexec, f"--loadEngine={tmp_path / 'rms.plan'}", f"--dynamicPlugins={library}", "--shapes=x:8x256"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and "PASSED" in result.stdout, (result.stdout + result.stderr)[-4000:]


_RUN_PLAN_WITHOUT_OUR_LOADER = """
import sys, tensorrt as trt, torch
logger = trt.Logger(trt.Logger.WARNING)
runtime = trt.Runtime(logger)
runtime.engine_host_code_allowed = True  # the plan carries host code: our library and the lean runtime
engine = runtime.deserialize_cuda_engine(open(sys.argv[1], "rb").read())
if engine is None:
    print("no-engine")
    raise SystemExit(0)
ctx = engine.create_execution_context()
x = torch.randn(8, 256, device="cuda", dtype=torch.float16)
w = torch.ones(256, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
ctx.set_input_shape("x", tuple(x.shape))
for name, t in (("x", x), ("w", w), (engine.get_tensor_name(2), y)):
    ctx.set_tensor_address(name, t.data_ptr())
assert ctx.execute_async_v3(torch.cuda.current_stream().cuda_stream)
torch.cuda.synchronize()
ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).half()
torch.testing.assert_close(y, ref, atol=2e-3, rtol=2e-3)
print("plan-ok")
"""


def test_plugins_to_serialize_makes_version_compatible_plan_self_contained(tmp_path):
    """A version-compatible plan with our library in plugins_to_serialize runs in a process that never loads it."""
    _build_plan(tmp_path / "rms.plan", serialize_library=True)
    result = subprocess.run(
        [sys.executable, "-c", _RUN_PLAN_WITHOUT_OUR_LOADER, str(tmp_path / "rms.plan")], capture_output=True, text=True
    )
    assert "plan-ok" in result.stdout, result.stderr[-4000:]


def test_plugins_to_serialize_is_ignored_without_version_compatible(tmp_path):
    """Without VERSION_COMPATIBLE the library is not serialized: TensorRT refuses the build, or the plan does not
    deserialize in a process that never loads our library."""
    _build_plan(tmp_path / "rms.plan", serialize_library=True, version_compatible=False, allow_refusal=True)
    if not (tmp_path / "rms.plan").exists():
        return
    result = subprocess.run(
        [sys.executable, "-c", _RUN_PLAN_WITHOUT_OUR_LOADER, str(tmp_path / "rms.plan")], capture_output=True, text=True
    )
    assert "no-engine" in result.stdout, (result.stdout + result.stderr)[-4000:]
