// One generic IPluginV3 for every declared op (torchtrt_plugins.declare), driven by data generated from the
// declaration when the library is built: plugin name/version/namespace, tensor inputs with their allowed types, the
// op's scalar arguments as fields (types, defaults, ranges), the launchers (one per tactic), the workspace function,
// and the op's shape rules: one shape program per combination of input ranks its fake kernel accepts (output types,
// output dims as IExprBuilder expressions over input dims and integer fields, size tensors for data-dependent
// sizes, and the equalities between input sizes the fake kernel checks; see torchtrt_plugins/_derive.py for the
// encoding). createPlugin takes the op's semantic fields only, like NVIDIA's plugins; an integer field holding the
// shape-input marker is read from the next shape input instead; a weight input given as a field is copied to the
// device once per plugin (onShapeChange, or the first enqueue) and reaches the launcher as an ordinary input; a
// declared resource (a table computed from fields) is acquired at the same points, shared through the registry.
#pragma once

#include "sdk/op_table.h"
#include "sdk/plugin_support.h"
#include "sdk/rules.h"
#include "sdk/ttp_sdk.h"

namespace ttp::sdk
{

struct InputDecl
{
    char const* name;
    uint32_t dtypeMask;  // bit (1 << nvinfer1::DataType) per accepted type
    int32_t sameDtypeAs; // an earlier input whose type this one must share, or -1
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
    FieldDecl const* fields; // the op's scalar arguments, schema order (sdk/fields.h): the eager kernel's table
    int32_t nbFields;
    TacticDecl const* tactics;
    int32_t nbTactics;
    WorkspaceSize workspace; // may be null
    // The shape programs, one per accepted combination of input ranks, each preceded by its token count.
    int64_t const* programs;
    int32_t nbProgramTokens;
    // The inputs the op updates in place (its Tensor(a!) arguments), by input index: each has one plugin output,
    // after the size tensors, of the input's type and dims, aliased to it (IPluginV3OneBuildV2::getAliasedInput).
    // Last, so that tables generated before it leave it empty.
    int32_t const* aliasedInputs;
    int32_t nbAliasedInputs;
    // The inputs a plugin may take as fields instead of network inputs (declare(weight_fields=...)), by input index.
    // Given as a field, an input is a constant baked into the plan: the field named after it holds its elements (the
    // PluginFieldType of its type) and `<name>_shape` its dims (INT64; 1-D when absent), and the plugin has one
    // network input fewer. Last, so that tables generated before it leave it empty.
    int32_t const* weightInputs;
    int32_t nbWeightInputs;
    // The op's shared device tables (declare(resources=...)): each built once per key (its fields' values) and device
    // and shared by every plugin instance through IPluginRegistry::acquirePluginResource (a table of its own per
    // instance where no registry is reachable). Last, so that tables generated before it leave it empty.
    ResourceDecl const* resources;
    int32_t nbResources;
};

// Registers a creator for `decl` with getCreators; `decl` must outlive the library (a static table).
struct DeclaredOpRegistration
{
    explicit DeclaredOpRegistration(OpDecl const& decl);
};

} // namespace ttp::sdk
