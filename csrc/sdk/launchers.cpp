// The eager side of a declared-op library (lib<name>_launchers.so): the torch adapter in Python calls the same
// launchers as the plugin through these C entry points (by name per call, or through the function pointers it looks
// up once). Links the CUDA runtime only; no TensorRT.
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "cubin_launch.h"
#include "op_table.h"
#include "ttp_sdk.h"

namespace ttp::sdk
{
// Generated from the declarations (torchtrt_plugins.sdk): every (op, tactic) -> launcher row, and each op's eager
// table.
LauncherEntry const* launcherTable(int32_t& count);
EagerOp const* const* eagerOpTable(int32_t& count);

// One table per key and device for the process, as an eager module keeps its cos/sin cache: built on the first call
// that needs it (outside any stream capture), freed at exit by the driver.
// A repeated call (the same op, key values and device as one of this thread's last few) finds its table here, with no
// key string and no lock: tables live as long as the process.
namespace
{
struct RecentTable
{
    EagerOp const* op{nullptr};
    int32_t resource{-1};
    int32_t device{-1};
    std::vector<double> keys;
    void const* table{nullptr};
};

void const* recentTable(EagerOp const& op, int32_t resource, int32_t device, double const* scalars,
    std::array<RecentTable, 4> const& recent)
{
    ResourceDecl const& decl = op.resources[resource];
    for (RecentTable const& r : recent)
    {
        if (r.op != &op || r.resource != resource || r.device != device)
        {
            continue;
        }
        bool same = true;
        for (int32_t k = 0; k < decl.nbKeyFields && same; ++k)
        {
            // Bitwise, as the registry key spells the values exactly.
            same = std::memcmp(&r.keys[static_cast<size_t>(k)], &scalars[decl.keyFields[k]], sizeof(double)) == 0;
        }
        if (same)
        {
            return r.table;
        }
    }
    return nullptr;
}
} // namespace

cudaError_t eagerResourceTables(EagerOp const& op, double const* scalars, void const** tables)
{
    static std::mutex mutex;
    static std::map<std::string, void*> built;
    thread_local std::array<RecentTable, 4> recent{};
    thread_local size_t nextRecent = 0;
    int32_t device = 0;
    cudaError_t err = cudaGetDevice(&device);
    for (int32_t r = 0; r < op.nbResources && err == cudaSuccess; ++r)
    {
        if (void const* table = recentTable(op, r, device, scalars, recent))
        {
            tables[r] = table;
            continue;
        }
        ResourceDecl const& decl = op.resources[r];
        std::vector<double> const keys = resourceKeyValues(decl, scalars);
        std::string const key = resourceKey(op.op, decl, keys, device);
        std::lock_guard<std::mutex> lock(mutex);
        auto found = built.find(key);
        if (found == built.end())
        {
            void* table = nullptr;
            size_t bytes = 0;
            std::string why;
            err = buildResourceTable(decl, keys, &table, &bytes, why);
            if (err != cudaSuccess)
            {
                break;
            }
            found = built.emplace(key, table).first;
        }
        tables[r] = found->second;
        recent[nextRecent++ % recent.size()] = RecentTable{&op, r, device, keys, found->second};
    }
    return err;
}
} // namespace ttp::sdk

namespace
{
ttp::sdk::LauncherEntry const* find(char const* op, int32_t tactic)
{
    int32_t count = 0;
    ttp::sdk::LauncherEntry const* table = ttp::sdk::launcherTable(count);
    for (int32_t i = 0; i < count; ++i)
    {
        if (std::strcmp(table[i].op, op) == 0 && table[i].tactic == tactic)
        {
            return &table[i];
        }
    }
    return nullptr;
}
} // namespace

// Returns the launcher's cudaError_t, or -1 when the library has no launcher for (op, tactic).
extern "C" __attribute__((visibility("default"))) int32_t ttp_sdk_launch(
    char const* op, int32_t tactic, ttp::sdk::LaunchArgs const* args)
{
    ttp::sdk::LauncherEntry const* entry = find(op, tactic);
    return entry == nullptr ? -1 : static_cast<int32_t>(entry->launch(*args));
}

// Workspace bytes the op's launchers need for `args` (data pointers null); 0 when it declares none.
extern "C" __attribute__((visibility("default"))) uint64_t ttp_sdk_workspace(
    char const* op, ttp::sdk::LaunchArgs const* args)
{
    ttp::sdk::LauncherEntry const* entry = find(op, 0);
    return entry == nullptr || entry->workspace == nullptr ? 0 : entry->workspace(*args);
}

// The launcher of (op, tactic) and the op's workspace function, for callers that cache them (null when absent).
extern "C" __attribute__((visibility("default"))) ttp::sdk::Launcher ttp_sdk_launcher(char const* op, int32_t tactic)
{
    ttp::sdk::LauncherEntry const* entry = find(op, tactic);
    return entry == nullptr ? nullptr : entry->launch;
}

extern "C" __attribute__((visibility("default"))) ttp::sdk::WorkspaceSize ttp_sdk_workspace_function(char const* op)
{
    ttp::sdk::LauncherEntry const* entry = find(op, 0);
    return entry == nullptr ? nullptr : entry->workspace;
}

// Why the last launch of a kernel compiled ahead of time failed on this thread ("" when none): names op and kernel.
extern "C" __attribute__((visibility("default"))) char const* ttp_sdk_last_error()
{
    return ttp::sdk::cubinLaunchError();
}

// The op's table for the generic eager kernel (csrc/sdk/op_table.h), or null when the library does not hold the op.
extern "C" __attribute__((visibility("default"))) ttp::sdk::EagerOp const* ttp_sdk_eager_op(char const* op)
{
    int32_t count = 0;
    ttp::sdk::EagerOp const* const* table = ttp::sdk::eagerOpTable(count);
    for (int32_t i = 0; i < count; ++i)
    {
        if (std::strcmp(table[i]->op, op) == 0)
        {
            return table[i];
        }
    }
    return nullptr;
}

// The op's shared tables for `scalars` (all its scalar arguments) on the current device: `tables` gets one device
// pointer per declared resource. Returns a cudaError_t, or -1 when the library does not hold the op.
extern "C" __attribute__((visibility("default"))) int32_t ttp_sdk_resource_tables(
    char const* op, double const* scalars, void const** tables)
{
    ttp::sdk::EagerOp const* entry = ttp_sdk_eager_op(op);
    return entry == nullptr ? -1 : static_cast<int32_t>(ttp::sdk::eagerResourceTables(*entry, scalars, tables));
}
