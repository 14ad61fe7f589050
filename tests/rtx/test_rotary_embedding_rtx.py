"""Shared plugin resources (declare(resources=...)) against NVIDIA's own registry (TensorRT-RTX): the semantics the
conformance harness's registry reproduces and the declared plugins rely on (a clone registered on the first acquire
of a key, the same object for every later acquire, release() once, on the last release). NVIDIA's builder builds
the CachedRotaryEmbedding plugin in test_builder.py, and from ONNX in test_onnx_parser.py."""

from __future__ import annotations

from typing import Any

import pytest


class _Recording:
    """An IPluginResource class of the tensorrt_rtx module that records its clones and releases."""

    def __init__(self, trt: Any):
        events: list[tuple[str, str]] = []

        class Table(trt.IPluginResource):
            def __init__(self, tag: str):
                trt.IPluginResource.__init__(self)
                self.tag = tag

            def clone(self):
                events.append(("clone", self.tag))
                return Table(self.tag + " clone")  # the registry keeps it alive until it deletes it

            def release(self):
                events.append(("release", self.tag))

        self.table, self.events = Table, events


def test_registry_clones_once_and_releases_on_the_last_release(trt: Any):
    registry = trt.get_plugin_registry()
    if not hasattr(registry, "acquire_plugin_resource"):
        pytest.skip("this tensorrt_rtx has no acquire_plugin_resource")
    recording = _Recording(trt)
    events = recording.events
    key = "torchtrt-tests/cos_sin(4096,128,10000)@cuda:0"
    tags = [registry.acquire_plugin_resource(key, recording.table(name)).tag for name in ("first", "second")]
    assert events == [("clone", "first")]
    assert tags == ["first clone", "first clone"]  # the same registered object for both
    assert registry.release_plugin_resource(key) == 0
    assert events == [("clone", "first")]  # still held by the second
    registry.release_plugin_resource(key)
    assert events == [("clone", "first"), ("release", "first clone")]
    assert registry.release_plugin_resource(key) != 0  # no longer registered
    assert registry.acquire_plugin_resource(key, recording.table("third")).tag == "third clone"  # built again
    registry.release_plugin_resource(key)
    assert events[-2:] == [("clone", "third"), ("release", "third clone")]
