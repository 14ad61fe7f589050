// The shared device tables of one declared-op plugin instance (OpDecl::resources): acquired from TensorRT's plugin
// registry (IPluginRegistry::acquirePluginResource, keyed by plugin, resource, key field values and device), so that
// every instance with the same key reads one table, built once by the registry's clone of an IPluginResource and
// freed by its release() when the last instance releases it. A library that links the CUDA runtime only reaches the
// registry through the process: the conformance harness's (loaded RTLD_GLOBAL), else TensorRT's getPluginRegistry
// from the libnvinfer the process has loaded, of the major version the library was compiled against (the registry's
// virtual table differs between TensorRT 10 and 11). With neither, each instance builds a table of its own (logged
// once per process).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sdk/plugin_support.h"
#include "sdk/resources.h"

namespace ttp::sdk
{

class SharedTables
{
public:
    SharedTables() = default;
    SharedTables(SharedTables const&) = delete; // a plugin's clone acquires its own (SharedTables{} in its copy)
    SharedTables& operator=(SharedTables const&) = delete;
    ~SharedTables();

    // Acquires every table of `resources` for `scalars` (the op's fields) on the current device, once; outside any
    // stream capture. Throws plugin::PluginError naming `owner` and the resource on failure.
    void acquire(char const* owner, ResourceDecl const* resources, int32_t nbResources, double const* scalars);
    bool acquired(int32_t nbResources) const noexcept
    {
        return static_cast<int32_t>(mPointers.size()) == nbResources;
    }
    // The tables' device pointers, in declaration order (LaunchArgs::resources).
    std::vector<void const*> const& pointers() const noexcept
    {
        return mPointers;
    }

private:
    struct Held
    {
        std::string key;
        nvinfer1::IPluginRegistry* registry; // null: `own` is this instance's table
        std::unique_ptr<nvinfer1::IPluginResource> own;
    };
    std::vector<Held> mHeld;
    std::vector<void const*> mPointers;
};

} // namespace ttp::sdk
