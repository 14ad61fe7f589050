#include "shared_tables.h"

#include <NvInferVersion.h>

#include <atomic>
#include <dlfcn.h>
#include <new>

namespace ttp::sdk
{
namespace
{
using plugin::concat;
using plugin::PluginError;
using plugin::Severity;

// The registry keeps a clone of the prototype an instance hands it: the clone builds the table, its release() frees
// it (the registry deletes it afterwards).
class SharedTable final : public nvinfer1::IPluginResource
{
public:
    SharedTable(ResourceDecl const& decl, std::vector<double> keys)
        : mDecl(decl)
        , mKeys(std::move(keys))
    {
    }
    SharedTable(SharedTable const&) = delete;
    SharedTable& operator=(SharedTable const&) = delete;
    ~SharedTable() override
    {
        release();
    }

    int32_t release() noexcept override
    {
        cudaError_t const err = mTable != nullptr ? cudaFree(mTable) : cudaSuccess;
        mTable = nullptr;
        return err == cudaSuccess ? 0 : 1;
    }

    nvinfer1::IPluginResource* clone() noexcept override
    {
        std::unique_ptr<SharedTable> copy(new (std::nothrow) SharedTable(mDecl, mKeys));
        return copy != nullptr && copy->build() ? copy.release() : nullptr;
    }

    bool build() noexcept
    {
        try
        {
            size_t bytes = 0;
            if (buildResourceTable(mDecl, mKeys, &mTable, &bytes, mError) == cudaSuccess)
            {
                return true;
            }
            mError = concat("building table '", mDecl.name, "' (", bytes, " bytes): ", mError);
            plugin::log(Severity::kERROR, mError);
        }
        catch (...)
        {
        }
        return false;
    }

    void const* table() const noexcept
    {
        return mTable;
    }

private:
    ResourceDecl const& mDecl;
    std::vector<double> mKeys;
    void* mTable{nullptr};
    std::string mError;
};

using GetRegistry = nvinfer1::IPluginRegistry* (*)();
using GetVersion = int32_t (*)();

nvinfer1::IPluginRegistry* tensorrtRegistry(void* handle)
{
    auto const get = reinterpret_cast<GetRegistry>(dlsym(handle, "getPluginRegistry"));
    auto const version = reinterpret_cast<GetVersion>(dlsym(handle, "getInferLibVersion"));
    // getInferLibVersion is major * 10000 + minor * 100 + patch; TensorRT-RTX's (1.x) registry is not TensorRT's.
    return get != nullptr && version != nullptr && version() / 10000 == NV_TENSORRT_MAJOR ? get() : nullptr;
}

nvinfer1::IPluginRegistry* findRegistry()
{
    if (auto const harness = reinterpret_cast<GetRegistry>(dlsym(RTLD_DEFAULT, "ttp_harness_plugin_registry")))
    {
        return harness();
    }
    if (nvinfer1::IPluginRegistry* global = tensorrtRegistry(RTLD_DEFAULT))
    {
        return global; // a program linked with libnvinfer (trtexec)
    }
    // Python's tensorrt loads libnvinfer with RTLD_LOCAL: find it among the loaded libraries (RTLD_NOLOAD loads none).
    std::string const name = concat("libnvinfer.so.", NV_TENSORRT_MAJOR);
    void* handle = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    nvinfer1::IPluginRegistry* registry = handle != nullptr ? tensorrtRegistry(handle) : nullptr;
    if (handle != nullptr)
    {
        dlclose(handle);
    }
    return registry;
}

} // namespace

SharedTables::~SharedTables()
{
    for (auto& held : mHeld)
    {
        if (held.registry != nullptr)
        {
            held.registry->releasePluginResource(held.key.c_str());
        }
    }
}

void SharedTables::acquire(char const* owner, ResourceDecl const* resources, int32_t nbResources, double const* scalars)
{
    if (acquired(nbResources))
    {
        return;
    }
    int32_t device = 0;
    cudaError_t const err = cudaGetDevice(&device);
    if (err != cudaSuccess)
    {
        throw PluginError(concat("shared tables: no CUDA device: ", cudaGetErrorName(err)));
    }
    nvinfer1::IPluginRegistry* registry = findRegistry();
    if (registry == nullptr)
    {
        static std::atomic<bool> noted{false};
        if (!noted.exchange(true))
        {
            plugin::log(Severity::kWARNING, concat(owner, ": no TensorRT ", NV_TENSORRT_MAJOR,
                                                ".x plugin registry in this process; each plugin "
                                                "instance builds its own shared tables (declare(resources=...))"));
        }
    }
    for (auto r = static_cast<int32_t>(mPointers.size()); r < nbResources; ++r)
    {
        ResourceDecl const& decl = resources[r];
        std::vector<double> keys = resourceKeyValues(decl, scalars);
        Held held{resourceKey(owner, decl, keys, device), registry, nullptr};
        SharedTable prototype(decl, std::move(keys)); // holds no table: only the registry's clone builds one
        SharedTable const* table = nullptr;
        if (registry != nullptr)
        {
            table = static_cast<SharedTable const*>(registry->acquirePluginResource(held.key.c_str(), &prototype));
        }
        else
        {
            table = static_cast<SharedTable const*>(prototype.clone());
            held.own.reset(const_cast<SharedTable*>(table));
        }
        if (table == nullptr || table->table() == nullptr)
        {
            if (registry != nullptr && table != nullptr)
            {
                registry->releasePluginResource(held.key.c_str());
            }
            throw PluginError(concat(
                "could not acquire shared table '", held.key, "' (built by '", decl.initName, "'; see the log)"));
        }
        mPointers.push_back(table->table());
        mHeld.push_back(std::move(held));
    }
}

} // namespace ttp::sdk
