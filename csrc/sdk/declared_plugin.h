// One generic IPluginV3 for every declared op (torchtrt_plugins.declare), driven by data:
// - an OpDecl table, generated from the declaration at build time: plugin name/version/namespace, tensor inputs
//   with their allowed types, the op's scalar arguments as fields (types, defaults, ranges), the launchers
//   (one per tactic) and the workspace function;
// - a shape program, carried as the INT64 array field "shape_program" and derived in Python from the op's fake
//   kernel for the input ranks of each call: output types, output dims as IExprBuilder expressions, and size
//   tensors for data-dependent sizes, and the equalities between input sizes the fake kernel checks (verified in
//   configurePlugin and onShapeChange; see torchtrt_plugins/_derive.py for the encoding).
// createPlugin validates both (unknown fields, ranges, a malformed program) and logs what is wrong.
#pragma once

#include "plugins/plugin_common.h"
#include "sdk/ttp_sdk.h"

namespace ttp::sdk
{

struct InputDecl
{
    char const* name;
    uint32_t dtypeMask;  // bit (1 << nvinfer1::DataType) per accepted type
    int32_t sameDtypeAs; // an earlier input whose type this one must share, or -1
};

struct TacticDecl
{
    int32_t value; // 0: the default launcher (not advertised as a tactic)
    char const* launcherName;
    Launcher launch;
};

struct OpDecl
{
    char const* op; // "ns::name"
    char const* pluginName;
    char const* pluginVersion;
    char const* pluginNamespace;
    InputDecl const* inputs;
    int32_t nbInputs;
    char const* const* outputs;
    int32_t nbOutputs;
    plugin::FieldDesc const* fields; // the op's scalar arguments, schema order
    int32_t nbFields;
    TacticDecl const* tactics;
    int32_t nbTactics;
    WorkspaceSize workspace; // may be null
};

// The name of the field carrying the shape program.
constexpr char const* kSHAPE_PROGRAM_FIELD = "shape_program";

// Registers a creator for `decl` with getCreators; `decl` must outlive the library (a static table).
struct DeclaredOpRegistration
{
    explicit DeclaredOpRegistration(OpDecl const& decl);
};

} // namespace ttp::sdk
