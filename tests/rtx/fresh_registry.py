"""Run by test_registry.py in a fresh process: loading into a TensorRT-RTX registry that never saw the library.

Usage: python fresh_registry.py LIBRARY. Prints one JSON object: what each step returned and logged.
"""

from __future__ import annotations

import json
import os
import sys


def main(library: str) -> dict:
    os.environ["TORCHTRT_PLUGINS_TENSORRT"] = "tensorrt_rtx"
    os.environ["TORCHTRT_PLUGINS_LIBRARY"] = library
    import tensorrt_rtx as trt

    import torchtrt_plugins

    records: list[list[str]] = []

    class RecordingLogger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity, msg) -> None:
            records.append([severity.name, msg])

    logger = RecordingLogger()
    runtime = trt.Runtime(logger)  # noqa: F841 - installs the logger for the registry and plugin libraries
    registry = trt.get_plugin_registry()

    def ours() -> list[list[str]]:
        return sorted(
            [c.name, c.plugin_version, c.plugin_namespace]
            for c in registry.all_creators
            if c.plugin_namespace == torchtrt_plugins.NAMESPACE
        )

    def step(name: str, fn) -> None:
        start = len(records)
        result = fn()
        report[name] = {"result": result, "log": records[start:], "creators": ours()}

    report: dict = {"tensorrt_rtx": trt.__version__}
    handles = []
    step("load_library", lambda: handles.append(registry.load_library(library)) or handles[-1] is not None)
    step("deregister_library", lambda: registry.deregister_library(handles[-1]) is None)
    step("load_plugins", lambda: str(torchtrt_plugins.load_plugins()))
    step("load_plugins_again", lambda: str(torchtrt_plugins.load_plugins(registry)))
    step("load_library_again", lambda: registry.load_library(library) is not None)
    step("load_plugins_after", lambda: str(torchtrt_plugins.load_plugins(registry)))
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
