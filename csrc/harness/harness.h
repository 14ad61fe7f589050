// The conformance harness: drives one IPluginV3 from a plugin library through the lifecycle TensorRT uses
// (creators, fields, capability interfaces, output types and shapes, format negotiation, configuration, tactics,
// clone, enqueue, serialization, runtime re-creation, attachToContext, enqueue again), checks the rules along the
// way and reports outputs, tables, captured log lines and violations as JSON.
//
// Request (JSON object):
//   library                      path of the plugin library (exports getCreators, setLoggerFinder)
//   plugin {name, version, namespace}
//   fields                       [{name, type ("FLOAT32", ...), data (number | [numbers] | string | null; a float
//                                  that is not finite: "NaN", "Infinity" or "-Infinity"),
//                                  hex (raw bytes), length (overrides the element count)}]
//   inputs                       [{dtype ("FLOAT", ...), dims, min, opt, max (profile; default dims),
//                                  ptr (device address of contiguous data; omitted: shapes only)}]
//   shape_inputs                 [{values, min, opt, max}]
//   tactics                      [ints] (default: 0 and every tactic the plugin advertises)
//   invalid_fields               [[fields...], ...]: each set must be rejected by createPlugin
//   enqueue                      bool (default true; without a device the execution phase is skipped)
//   compare_runtime_outputs      bool (default true): the re-created plugin must reproduce the build outputs
//   gate_timeout_s               seconds the stream gate waits before giving up (default 2)
//   enqueue_syncs_host           bool (default false): the op declares that enqueue reads back to the host
//   bench {tactic, iters, warmup} (bench mode only)
// See torchtrt_plugins/testing/harness.py for the result's fields.
#pragma once

#include <cstdint>
#include <string>

#include "json_io.h"

namespace ttp::harness
{

// Allocates `bytes` of device memory owned by the caller; returns nullptr on failure.
using AllocateFn = void* (*)(void* user, uint64_t bytes);

Json runConformance(JsonReader const& request, AllocateFn allocate, void* user);
Json runBench(JsonReader const& request);

} // namespace ttp::harness
