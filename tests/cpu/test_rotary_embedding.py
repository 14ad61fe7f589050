"""rotary_embedding on the CPU, and shared resources (declare(resources=...)): the reference against Hugging Face's
formula, the fake kernel's checks, the declaration's resource and its generated tables, the errors of bad resource
declarations, plans and the plugin through the harness without a device."""

from __future__ import annotations

import fixtures
import pytest
import torch
from rope_cases import hf_rotary

import torchtrt_plugins as ttp
from torchtrt_plugins import SpecError, sdk
from torchtrt_plugins.converters import plan, plan_node, validate_node
from torchtrt_plugins.ops import LIBRARY, rotary_embedding
from torchtrt_plugins.testing import harness as H

SPEC = rotary_embedding.SPEC
ROPE = torch.ops.torchtrt.rotary_embedding


def test_declaration_names_and_resource():
    assert SPEC.creator_key == ("CachedRotaryEmbedding", "1", "torchtrt")
    assert [f.name for f in SPEC.fields] == ["rotary_dim", "max_position", "base", "is_neox"]
    (name, resource), *_ = rotary_embedding.ROTARY_EMBEDDING.resources.items()
    assert name == "cos_sin" and resource.key_fields == ("max_position", "rotary_dim", "base")


def test_reference_is_hugging_faces_formula():
    q = torch.randn(9, 4, 64)
    positions = torch.randint(0, 300, (9,))
    expected = hf_rotary(q, positions, 64, 10000.0)
    # Hugging Face's fp32 inverse frequencies are within an ulp of ours: at position p, angles within p * 2^-23.
    torch.testing.assert_close(ROPE(q, positions, 64, 300), expected, atol=1e-4, rtol=1e-4)


def test_partial_rotary_passes_the_rest_through_and_gptj_pairs_neighbours():
    x = torch.randn(5, 2, 48)
    positions = torch.arange(5)
    y = ROPE(x, positions, 32, 8)
    assert torch.equal(y[..., 32:], x[..., 32:])
    torch.testing.assert_close(
        y[..., :32], hf_rotary(x[..., :32].contiguous(), positions, 32, 10000.0), atol=1e-5, rtol=1e-5
    )
    # GPT-J: the pairs (2i, 2i+1) are NeoX's (i, i + d/2) after interleaving.
    order = torch.arange(32).view(2, 16).t().reshape(-1)  # 0, 16, 1, 17, ...
    gptj = ROPE(x[..., :32][..., order].contiguous(), positions, 32, 8, 10000.0, False)
    torch.testing.assert_close(gptj, y[..., :32][..., order])


def test_position_zero_is_the_identity():
    x = torch.randn(3, 4, 16, dtype=torch.bfloat16)
    assert torch.equal(ROPE(x, torch.zeros(3, dtype=torch.int32), 16, 1), x)


def test_fake_kernel_checks_name_op_and_argument():
    with pytest.raises(SpecError, match=r"torchtrt\.rotary_embedding: argument 'positions' must have the leading"):
        ROPE(torch.randn(4, 2, 8), torch.zeros(4, 1, dtype=torch.int64), 8, 16)
    with pytest.raises(SpecError, match=r"argument 'x' must be \(\.\.\., heads, head_dim\)"):
        ROPE(torch.randn(8), torch.zeros((), dtype=torch.int64), 8, 16)
    for rotary_dim in (7, 10):
        with pytest.raises(SpecError, match=r"argument 'rotary_dim' must be even and at most head_dim \(8\), got"):
            ROPE(torch.randn(4, 2, 8), torch.zeros(4, dtype=torch.int64), rotary_dim, 16)
    with pytest.raises(SpecError, match=r"argument 'max_position' must be an integer >= 1"):
        ROPE(torch.randn(4, 2, 8), torch.zeros(4, dtype=torch.int64), 8, 0)
    with pytest.raises(SpecError, match=r"argument 'base' must be a float > 0"):
        ROPE(torch.randn(4, 2, 8), torch.zeros(4, dtype=torch.int64), 8, 16, 0.0)
    with pytest.raises(SpecError, match=r"argument 'positions'.*int64, int32"):
        ROPE(torch.randn(4, 2, 8), torch.zeros(4), 8, 16)


def test_compiled_shape_rules_cover_every_token_rank():
    # x of rank 2 to 8, positions of rank 0 to 6.
    assert len(rotary_embedding.ROTARY_EMBEDDING.compiled_programs) == 7


class _Attention(torch.nn.Module):
    def forward(self, q, k, positions):
        return ROPE(q, positions, 64, 4096) + ROPE(k, positions, 64, 4096)


def test_plan_from_exported_graph_carries_the_cache_fields():
    tokens = torch.export.Dim("tokens", min=1, max=512)
    q = torch.randn(6, 4, 64)
    ep = torch.export.export(
        _Attention(), (q, q.clone(), torch.arange(6)), dynamic_shapes=({0: tokens}, {0: tokens}, {0: tokens})
    )
    nodes = [n for n in ep.graph_module.graph.nodes if "rotary_embedding" in str(n.target)]
    assert len(nodes) == 2
    calls = [plan_node(n) for n in nodes]
    for call, node in zip(calls, nodes, strict=True):
        assert call.creator_key == SPEC.creator_key and validate_node(node)
        assert [(f.name, f.value) for f in call.fields] == [
            ("rotary_dim", 64),
            ("max_position", 4096),
            ("base", 10000.0),
            ("is_neox", True),
        ]
        assert call.shape_inputs == []


def test_generated_tables_carry_the_resource():
    text = sdk.generate_op_tables([rotary_embedding.ROTARY_EMBEDDING])
    # key fields by scalar index: max_position (1), rotary_dim (0), base (2)
    assert "int32_t const kResourceKeys0_0[] = {1, 0, 2};" in text
    assert (
        '{"cos_sin", kResourceKeys0_0, 3, &ttp::launchers::rotaryCacheBytes, &ttp::launchers::rotaryCache, '
        '"ttp::launchers::rotaryCache"}' in text
    )
    assert text.rstrip().splitlines()[-3].endswith("kResources0, 1};")
    assert "size_t rotaryCacheBytes(::ttp::sdk::LaunchArgs const& args);" in text
    eager = sdk.generate_launcher_table([rotary_embedding.ROTARY_EMBEDDING])
    assert "kResources0, 1, &::ttp::sdk::eagerResourceTables};" in eager
    # An op without resources has an empty table.
    assert "nullptr, 0, &::ttp::sdk::eagerResourceTables};" in sdk.generate_launcher_table(
        [ttp.get("rms_norm").declaration]
    )


_LIB = torch.library.Library("resource_test", "DEF")
_LIB.define("cached(Tensor x, int n, SymInt m, float scale=1.0) -> Tensor")
torch.library.register_fake("resource_test::cached", lambda x, n, m, scale=1.0: torch.empty_like(x), lib=_LIB)
OP = "resource_test::cached"
GOOD = ttp.Resource(key_fields=("n",), size="ns::bytes", init="ns::build")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"resources": {"t": GOOD}}, r"resource_test::cached: resources=\['t'\] need a library"),
        (
            {"resources": {"t": ttp.Resource(("nn",), "ns::bytes", "ns::build")}},
            r"resource_test::cached: resources\['t'\]: key_fields names argument 'nn', which is not a scalar argument"
            r".*\['n', 'm', 'scale'\]",
        ),
        (
            {"resources": {"t": ttp.Resource(("x",), "ns::bytes", "ns::build")}},
            r"resources\['t'\]: key_fields names argument 'x', which is not a scalar argument",
        ),
        (
            {"resources": {"t": ttp.Resource(("m",), "ns::bytes", "ns::build")}},
            r"resources\['t'\]: key_fields names argument 'm', a SymInt .*shape input",
        ),
        ({"resources": {"t": ttp.Resource((), "ns::bytes", "ns::build")}}, r"resources\['t'\]: key_fields is empty"),
        (
            {"resources": {"t": ttp.Resource(("n", "n"), "ns::bytes", "ns::build")}},
            r"resources\['t'\]: key_fields \['n', 'n'\] names an argument twice",
        ),
        (
            {"resources": {"t": ttp.Resource(("n",), "not a symbol", "ns::build")}},
            r"resources\['t'\]: size must be a C\+\+ function name.*got 'not a symbol'",
        ),
        (
            {"resources": {"t": ttp.Resource(("n",), "ns::bytes", None)}},
            r"resources\['t'\]: init must be a C\+\+ function name",
        ),
        ({"resources": {"cos sin": GOOD}}, r"resource_test::cached: resource names must be identifiers, got 'cos sin'"),
        ({"resources": {"t": ("n",)}}, r"resources\['t'\] must be a torchtrt_plugins.Resource, got tuple"),
    ],
)
def test_bad_resource_declarations_name_op_and_argument(options, message):
    library = None if "need a library" in message else LIBRARY
    with pytest.raises(ttp.DeclarationError, match=message):
        ttp.Declaration(OP, library=library, launcher="ns::launch", **options)


def test_a_resource_key_field_given_as_a_string_is_one_field():
    declaration = ttp.Declaration(
        OP, library=LIBRARY, launcher="ns::launch", resources={"t": ttp.Resource("n", "ns::bytes", "ns::build")}
    )
    assert declaration.resources["t"].key_fields == ("n",)


def test_the_plugin_passes_the_harness_without_a_device(build):
    result = H.run_call(
        plan(SPEC, (H.TensorArg((5, 4, 64), torch.float16), H.TensorArg((5,), torch.int64), 64, 128), {}),
        H.TensorArg((5, 4, 64), torch.float16),
        H.TensorArg((5,), torch.int64),
        library=build.library,
        instances=2,
    )
    result.assert_conformant()
    if result.enqueue_skipped:  # no device: the tables are acquired at onShapeChange, which has none to build on
        assert result.resources == {}


def test_the_harness_reports_resources_shared_by_instances_alive_together(build):
    # ScaleUsesResource acquires its resource in attachToContext: no device needed.
    result = H.run_plugin(
        fixtures.broken_plugins(build),
        "ScaleUsesResource",
        fields=[("scale", "FLOAT32", 0.5)],
        inputs=[H.TensorArg((3, 4))],
        instances=3,
        enqueue=False,
    )
    result.assert_conformant()
    (stats,) = result.resources.values()
    assert stats["peak"] == 3  # three runtime instances held it at once
    assert stats["builds"] == stats["releases"] and stats["held"] == 0
    assert stats["acquires"] > stats["builds"]


def test_benchmark_providers_agree_with_the_reference_on_cpu():
    from torchtrt_plugins.benchmarks import bench_rotary_embedding as bench
    from torchtrt_plugins.benchmarks import common

    case = bench.make_case((16, 4, 64), torch.float32, torch.device("cpu"))
    assert case.nbytes == 2 * 16 * 4 * 64 * 4 + 16 * 8
    ctx = common.RunContext(torch.device("cpu"), quick=True)
    reasons = {p.name: common.unmet(p.requires, ctx) for p in bench.BENCHMARK.providers}
    assert reasons["eager_composite"] is None and reasons["torchtrt"] is None
    assert "CUDA" in reasons["liger"] and "CUDA GPU" in reasons["plugin_enqueue"]
    results = common.run(bench.BENCHMARK, ctx, providers=["eager*", "torchtrt"])
    assert {r.status for r in results} == {"ok"}, [(r.provider, r.status, r.reason) for r in results]
