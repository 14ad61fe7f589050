// A declared op's shared device tables (torchtrt_plugins.declare(resources=...)): a table computed once from some of
// the op's fields (its key), e.g. a rotary embedding's cos/sin cache from (max_position, rotary_dim, base), and read
// by every call whose fields give the same key. The plugin shares one table per key and device among all its
// instances through TensorRT's IPluginRegistry::acquirePluginResource (declared_plugin.cpp); the eager kernels keep
// one per key and device for the process (launchers.cpp). Both build it with the same two launcher-ABI functions:
//
//   size_t tableBytes(ttp::sdk::LaunchArgs const& args);     // scalars: the key fields' values, in declared order
//   cudaError_t buildTable(ttp::sdk::LaunchArgs const& args); // the same scalars; outputs[0]: the table (kINT8 bytes)
#pragma once

#include <string>
#include <vector>

#include "sdk/ttp_sdk.h"

namespace ttp::sdk
{

struct ResourceDecl
{
    char const* name;         // "cos_sin"
    int32_t const* keyFields; // the op's scalar arguments the table is computed from, by scalar index
    int32_t nbKeyFields;
    WorkspaceSize size; // the table's bytes
    Launcher init;      // writes the table
    char const* initName;
};

// The key fields' values of `decl` among an op's scalars.
std::vector<double> resourceKeyValues(ResourceDecl const& decl, double const* scalars);

// The registry key of a table: who owns it, the resource, its key values (exactly) and the device it lives on.
std::string resourceKey(char const* owner, ResourceDecl const& decl, std::vector<double> const& keys, int32_t device);

// Allocates the table (cudaMalloc) and builds it with `decl.init` on a stream of its own, waiting for it: called
// outside any stream capture, once per key. On failure `*table` is null and `why` says what failed.
cudaError_t buildResourceTable(
    ResourceDecl const& decl, std::vector<double> const& keys, void** table, size_t* bytes, std::string& why);

} // namespace ttp::sdk
