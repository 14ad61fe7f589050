// Fuzzing a plugin library's trust boundary: random PluginFieldCollections (names known, unknown, null and
// duplicated; every PluginFieldType; lengths 0, negative, wrong and large; null data; NaN, infinities and extreme
// integers), built from the creator's getFieldNames and from valid field sets given as seeds, go through createPlugin
// of every IPluginCreatorV3One the libraries' getCreators return; every plugin created goes through clone and the
// serialization round trip (getFieldsToSerialize, to bytes and back, createPlugin(kRUNTIME), the same fields again).
//
// Field data sits at the end of a readable window before a PROT_NONE page, so a read past a field's end faults even
// without AddressSanitizer; crashes, escaping exceptions and such faults are trapped and reported. A generated set with
// a defect that no field table can make valid (a duplicated, unknown or nameless field, a type that is neither the
// advertised one nor the one TensorRT's ONNX parser delivers for it, a scalar of another length or without data,
// a non-finite float, an INT64 beyond +-2^53) must be refused, with an error logged that names the
// plugin.
//
// Request: {"libraries": [paths], "seed": n, "count": iterations per creator, "first": first iteration (default 0),
//           "seeds": [{"plugin": {"name", "version", "namespace"}, "fields": [harness field JSON]}],
//           "max_length": the largest length generated (default 4096)}
// Report:  {"creators": [{"plugin", "library", "attempts", "created", "rejected", "must_reject", "round_trips",
//                          "violations"}],
//           "violations": [{"plugin", "iteration", "rule", "detail", "fields"}] (the first 10 of each creator),
//           "violation_count": n}
// Iteration i of a creator depends only on (seed, plugin, i): {"first": i, "count": 1} replays it.
#pragma once

#include "json_io.h"

namespace ttp::harness
{

Json runFieldFuzz(JsonReader const& request);

} // namespace ttp::harness
