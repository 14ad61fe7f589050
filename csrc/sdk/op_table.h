// A declared op as its eager torch kernel needs it, generated from the declaration into the op library's launcher
// table (lib<name>_launchers.so, which links the CUDA runtime only: no torch, no TensorRT). The library hands it out
// through `ttp_sdk_eager_op`, and the generic eager kernel (csrc/sdk/eager.cpp, the one piece compiled against
// torch) registers one boxed torch kernel per op from it: the same declaration, shape rules and launchers as the
// plugin.
#pragma once

#include <cstdint>

#include "sdk/fields.h"
#include "sdk/resources.h"
#include "sdk/ttp_sdk.h"

namespace ttp::sdk
{

// Bumped whenever a field below changes: the eager kernel refuses a table of another version.
constexpr int32_t kEAGER_TABLE_VERSION = 5;

struct EagerInput
{
    char const* name;
    uint32_t dtypeMask;  // bit (1 << ttp::DType) per accepted dtype
    int32_t sameDtypeAs; // an earlier input whose dtype this one must share, or -1
    char const* dtypes;  // the accepted dtypes as the checks name them: "float32, float16"
};

// One declared launcher: the plugin's tactics and the eager kernel's (tactic 0 is the default launcher).
struct TacticDecl
{
    int32_t value; // 0: the default launcher (not advertised as a tactic)
    char const* launcherName;
    Launcher launch;
};

struct EagerOp;
// Per resource of `op`, its device table for the call's `scalars` on the current device (`tables`, nbResources
// entries): built once per key and device, then kept for the process.
using ResourceTables = cudaError_t (*)(EagerOp const& op, double const* scalars, void const** tables);
// The ResourceTables of every op library (csrc/sdk/launchers.cpp).
cudaError_t eagerResourceTables(EagerOp const& op, double const* scalars, void const** tables);

struct EagerOp
{
    int32_t version;   // kEAGER_TABLE_VERSION
    char const* op;    // "ns::name"
    char const* label; // "ns.name", how messages name the op
    // Per schema argument, in order: a tensor input's index (>= 0) or -(scalar index + 1).
    int32_t const* arguments;
    int32_t nbArguments;
    EagerInput const* inputs;
    int32_t nbInputs;
    int32_t nbOutputs;
    FieldDecl const* scalars; // the op's fields (sdk/fields.h): the plugin's table
    int32_t nbScalars;
    TacticDecl const* tactics; // tactic 0 first
    int32_t nbTactics;
    WorkspaceSize workspace; // may be null
    int32_t sizesFirst;      // the launcher takes kPHASE_SIZES then kPHASE_OUTPUTS
    int64_t const* programs; // as OpDecl::programs
    int32_t nbProgramTokens;
    // Per argument updated in place (Tensor(a!)), the input it is: the launcher gets one more output per entry, after
    // the size tensors, at that input's memory (the plugin's aliased outputs). The op does not return them.
    int32_t const* aliasedInputs;
    int32_t nbAliasedInputs;
    // The op's shared device tables (declare(resources=...)), passed to the launcher as LaunchArgs::resources.
    ResourceDecl const* resources;
    int32_t nbResources;
    ResourceTables resourceTables;
};

} // namespace ttp::sdk
