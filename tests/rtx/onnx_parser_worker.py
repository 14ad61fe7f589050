"""Run by test_onnx_parser.py in a fresh process: TensorRT-RTX's OnnxParser and builder on exported models.

Usage: python onnx_parser_worker.py JOB.json. JOB: {"library": plugin library, "libraries": [declared ops' plugin
libraries, loaded into the registry too], "models": [{"id", "path", "profile": {input: [min, opt, max]}}]}. Prints
one JSON object: per model id, whether it parsed (and the parser's errors), the plugin layers and their tensors,
whether a plan was built (and its size), and what TensorRT logged as errors. The process must start with a folder
holding ``libtensorrt_rtx.so`` on LD_LIBRARY_PATH: the parser dlopens that unversioned name when it meets a plugin
node.
"""

from __future__ import annotations

import json
import os
import sys


def main(job: dict) -> dict:
    os.environ["TORCHTRT_PLUGINS_TENSORRT"] = "tensorrt_rtx"
    os.environ["TORCHTRT_PLUGINS_LIBRARY"] = job["library"]
    import tensorrt_rtx as trt

    import torchtrt_plugins

    class ErrorLog(trt.ILogger):
        """Keeps what TensorRT (the parser, the builder, our plugins) logs as an error."""

        def __init__(self) -> None:
            super().__init__()
            self.errors: list[str] = []

        def log(self, severity, msg) -> None:
            if severity in (trt.ILogger.ERROR, trt.ILogger.INTERNAL_ERROR):
                self.errors.append(msg)

    logger = ErrorLog()
    builder = trt.Builder(logger)  # the first logger becomes the registry's and our plugins'
    torchtrt_plugins.load_plugins(trt.get_plugin_registry())
    for library in job.get("libraries", []):
        assert trt.get_plugin_registry().load_library(library) is not None, library
    report: dict = {"tensorrt_rtx": trt.__version__, "models": {}}
    if "field_probe" in job:
        report["field_probe"] = _probe_fields(trt, builder, logger, job["field_probe"])
    for model in job["models"]:
        start = len(logger.errors)
        result: dict = {}
        report["models"][model["id"]] = result
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, logger)
        result["parsed"] = bool(parser.parse_from_file(model["path"]))
        result["parser_errors"] = [str(parser.get_error(i).desc()) for i in range(parser.num_errors)]
        result["plugin_layers"] = [
            {
                "name": layer.name,
                "inputs": [_tensor(layer.get_input(i)) for i in range(layer.num_inputs)],
                "outputs": [_tensor(layer.get_output(i)) for i in range(layer.num_outputs)],
            }
            for layer in (network.get_layer(i) for i in range(network.num_layers))
            if layer.type == trt.LayerType.PLUGIN_V3
        ]
        if result["parsed"]:
            config = builder.create_builder_config()
            if model.get("aliased_io"):
                config.set_preview_feature(trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03, True)
            profile = builder.create_optimization_profile()
            for i in range(network.num_inputs):
                tensor = network.get_input(i)
                if tensor.name in model["profile"]:  # a static input needs none
                    profile.set_shape(tensor.name, *model["profile"][tensor.name])
            config.add_optimization_profile(profile)
            plan = builder.build_serialized_network(network, config)
            result["plan_bytes"] = 0 if plan is None else plan.nbytes
        result["errors"] = logger.errors[start:]
    return report


def _probe_fields(trt, builder, logger, probe: dict) -> dict:
    """Parse a one-node model whose plugin creator (Python, registered here) records the PluginFields the parser
    hands it: {field name: [PluginFieldType name, number of elements]}, and the parser's errors."""
    name, version, namespace = probe["plugin"]
    seen: dict[str, list] = {}

    class FieldProbe(trt.IPluginCreatorV3One):
        def __init__(self) -> None:
            super().__init__()
            self.name, self.plugin_version, self.plugin_namespace = name, version, namespace
            # The parser only reads attributes named in getFieldNames; the collection points into these.
            self.declared = [trt.PluginField(field) for field in probe["fields"]]
            self.field_names = trt.PluginFieldCollection(self.declared)

        def create_plugin(self, plugin_name, fields, phase):
            for field in fields:
                seen[field.name] = [field.type.name, field.size]
            return None  # the node then fails to import; only the fields matter here

    creator = FieldProbe()
    trt.get_plugin_registry().register_creator(creator, namespace)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    parser.parse_from_file(probe["model"])
    return {"fields": seen, "parser_errors": [str(parser.get_error(i).desc()) for i in range(parser.num_errors)]}


def _tensor(tensor) -> dict | None:
    if tensor is None:
        return None
    return {"name": tensor.name, "shape": list(tensor.shape), "dtype": tensor.dtype.name}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(main(json.load(f))))
