"""Shared plugin resources (declare(resources=...)) against NVIDIA's own registry (TensorRT-RTX): the semantics the
conformance harness's registry reproduces and the declared plugins rely on (a clone registered on the first acquire
of a key, the same object for every later acquire, release() once, on the last release). NVIDIA's builder builds
the CachedRotaryEmbedding plugin in test_builder.py, and from ONNX in test_onnx_parser.py."""

from __future__ import annotations

from typing import Any

import pytest


def test_registry_clones_once_and_releases_on_the_last_release(trt: Any):
    if not hasattr(trt.get_plugin_registry(), "acquire_plugin_resource"):
        pytest.skip("this tensorrt_rtx has no acquire_plugin_resource")
    events: list[tuple[str, str]] = []
    kept: list[Any] = []

    class Table(trt.IPluginResource):
        def __init__(self, tag: str):
            trt.IPluginResource.__init__(self)
            self.tag = tag

        def clone(self):
            events.append(("clone", self.tag))
            copy = Table(self.tag + " clone")
            kept.append(copy)  # the registry holds the C++ side only
            return copy

        def release(self):
            events.append(("release", self.tag))

    registry = trt.get_plugin_registry()
    key = "torchtrt-tests/cos_sin(4096,128,10000)@cuda:0"
    first = registry.acquire_plugin_resource(key, Table("first"))
    second = registry.acquire_plugin_resource(key, Table("second"))
    assert events == [("clone", "first")]
    assert first.tag == second.tag == "first clone"
    assert registry.release_plugin_resource(key) == 0
    assert events == [("clone", "first")]  # still held by the second
    registry.release_plugin_resource(key)
    assert events == [("clone", "first"), ("release", "first clone")]
    assert registry.release_plugin_resource(key) != 0  # no longer registered
    third = registry.acquire_plugin_resource(key, Table("third"))  # built again after the release
    assert third.tag == "third clone" and events[-1] == ("clone", "third")
    registry.release_plugin_resource(key)
