"""A graph of the zoo run through our graph runner (``torchtrt_plugins.testing.run_graph``: each plugin node through
the harness, the rest eagerly), for the tt tier (each TensorRT segment) and the gpu tier (the whole converted graph)."""

from __future__ import annotations

import torch


def run_through_plugins(graph: torch.fx.GraphModule, *args):
    """``run_graph(graph, *args)`` with the plugin library of the graph's declared ops (torchvision's have their
    creators in a library of their own; a graph here holds one library's ops), checked conformant."""
    from torchtrt_plugins.converters import entry_for_target
    from torchtrt_plugins.testing import run_graph

    nodes = [node for node in graph.graph.nodes if node.op == "call_function"]
    libraries = {entry.library for node in nodes if (entry := entry_for_target(node.target)) is not None}
    assert len(libraries) <= 1, f"plugins of several libraries in one graph: {libraries}"
    library = next(iter(libraries), None)
    result = run_graph(graph, *args, library=library() if library is not None else None)
    result.assert_conformant()
    return result


def plugin_nodes(graph: torch.fx.GraphModule) -> int:
    """How many nodes of ``graph`` are declared ops (the runner runs each through the harness)."""
    from torchtrt_plugins.converters import entry_for_target

    return sum(node.op == "call_function" and entry_for_target(node.target) is not None for node in graph.graph.nodes)
