#include "services.h"

#include <algorithm>
#include <cstring>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdexcept>

namespace ttp::harness
{

char const* severityName(nvinfer1::ILogger::Severity severity) noexcept
{
    using S = nvinfer1::ILogger::Severity;
    switch (severity)
    {
    case S::kINTERNAL_ERROR: return "INTERNAL_ERROR";
    case S::kERROR: return "ERROR";
    case S::kWARNING: return "WARNING";
    case S::kINFO: return "INFO";
    case S::kVERBOSE: return "VERBOSE";
    }
    return "UNKNOWN";
}

void CapturingLogger::log(Severity severity, nvinfer1::AsciiChar const* msg) noexcept
{
    try
    {
        std::lock_guard<std::mutex> lock(mMutex);
        if (mSink != nullptr)
        {
            mSink->push_back({severity, msg != nullptr ? msg : "(null)", mDuring});
        }
    }
    catch (...)
    {
        // Logging must never throw into the plugin.
    }
}

void CapturingLogger::begin(std::vector<LogLine>* sink)
{
    std::lock_guard<std::mutex> lock(mMutex);
    mSink = sink;
    mDuring.clear();
}

void CapturingLogger::end()
{
    std::lock_guard<std::mutex> lock(mMutex);
    mSink = nullptr;
}

void CapturingLogger::setDuring(std::string during)
{
    std::lock_guard<std::mutex> lock(mMutex);
    mDuring = std::move(during);
}

HarnessLoggerFinder& loggerFinder()
{
    // Never destroyed: plugin libraries keep the pointer for the life of the process.
    static auto* finder = new HarnessLoggerFinder();
    return *finder;
}

void* openPluginLibrary(std::string const& path)
{
    static std::mutex mutex;
    static std::map<std::string, void*> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    void*& handle = loaded[path];
    if (handle == nullptr)
    {
        handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr)
        {
            char const* why = dlerror();
            loaded.erase(path);
            throw std::runtime_error("dlopen(" + path + ") failed: " + (why != nullptr ? why : "(no reason)"));
        }
    }
    return handle;
}

// ------------------------------------------------------------------------------------------ registry

HarnessPluginRegistry::~HarnessPluginRegistry() noexcept = default;

void HarnessPluginRegistry::setCreators(std::vector<nvinfer1::IPluginCreatorInterface*> creators)
{
    std::lock_guard<std::mutex> lock(mMutex);
    mCreators = std::move(creators);
}

std::map<std::string, int32_t> HarnessPluginRegistry::heldResources() const
{
    std::lock_guard<std::mutex> lock(mMutex);
    std::map<std::string, int32_t> out;
    for (auto const& [key, held] : mResources)
    {
        out[key] = held.count;
    }
    return out;
}

void HarnessPluginRegistry::setErrorRecorder(nvinfer1::IErrorRecorder* const recorder) noexcept
{
    mRecorder = recorder;
}

nvinfer1::IErrorRecorder* HarnessPluginRegistry::getErrorRecorder() const noexcept
{
    return mRecorder;
}

nvinfer1::IPluginRegistry::PluginLibraryHandle HarnessPluginRegistry::loadLibrary(
    nvinfer1::AsciiChar const* /*pluginPath*/) noexcept
{
    loggerFinder().logger().log(nvinfer1::ILogger::Severity::kERROR,
        "harness plugin registry: loadLibrary is not supported from inside a plugin");
    return nullptr;
}

void HarnessPluginRegistry::deregisterLibrary(PluginLibraryHandle /*handle*/) noexcept
{
}

bool HarnessPluginRegistry::registerCreator(
    nvinfer1::IPluginCreatorInterface& creator, nvinfer1::AsciiChar const* const /*pluginNamespace*/) noexcept
{
    try
    {
        std::lock_guard<std::mutex> lock(mMutex);
        mCreators.push_back(&creator);
        return true;
    }
    catch (...)
    {
        return false;
    }
}

nvinfer1::IPluginCreatorInterface* const* HarnessPluginRegistry::getAllCreators(
    int32_t* const numCreators) const noexcept
{
    if (numCreators != nullptr)
    {
        *numCreators = static_cast<int32_t>(mCreators.size());
    }
    return mCreators.empty() ? nullptr : mCreators.data();
}

nvinfer1::IPluginCreatorInterface* HarnessPluginRegistry::getCreator(nvinfer1::AsciiChar const* const pluginName,
    nvinfer1::AsciiChar const* const pluginVersion, nvinfer1::AsciiChar const* const pluginNamespace) noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    for (nvinfer1::IPluginCreatorInterface* creator : mCreators)
    {
        if (std::strcmp(creator->getInterfaceInfo().kind, "PLUGIN CREATOR_V3ONE") != 0)
        {
            continue;
        }
        auto* v3 = static_cast<nvinfer1::IPluginCreatorV3One*>(creator);
        char const* ns = pluginNamespace != nullptr ? pluginNamespace : "";
        if (std::strcmp(v3->getPluginName(), pluginName) == 0 && std::strcmp(v3->getPluginVersion(), pluginVersion) == 0
            && std::strcmp(v3->getPluginNamespace(), ns) == 0)
        {
            return creator;
        }
    }
    return nullptr;
}

bool HarnessPluginRegistry::deregisterCreator(nvinfer1::IPluginCreatorInterface const& creator) noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    for (auto it = mCreators.begin(); it != mCreators.end(); ++it)
    {
        if (*it == &creator)
        {
            mCreators.erase(it);
            return true;
        }
    }
    return false;
}

nvinfer1::IPluginResource* HarnessPluginRegistry::acquirePluginResource(
    nvinfer1::AsciiChar const* key, nvinfer1::IPluginResource* resource) noexcept
{
    if (key == nullptr || resource == nullptr)
    {
        return nullptr;
    }
    try
    {
        std::lock_guard<std::mutex> lock(mMutex);
        ++mAcquires;
        ResourceStats& stats = mStats[key];
        ++stats.acquires;
        auto found = mResources.find(key);
        if (found != mResources.end())
        {
            ++found->second.count;
            stats.peak = std::max(stats.peak, found->second.count);
            return found->second.resource;
        }
        // Like TensorRT: only a clone is registered; the caller's object need not outlive this call.
        nvinfer1::IPluginResource* clone = resource->clone();
        if (clone == nullptr)
        {
            return nullptr;
        }
        mResources.emplace(key, Held{clone, 1});
        ++stats.clones;
        stats.peak = std::max(stats.peak, 1);
        return clone;
    }
    catch (...)
    {
        return nullptr;
    }
}

int32_t HarnessPluginRegistry::releasePluginResource(nvinfer1::AsciiChar const* key) noexcept
{
    if (key == nullptr)
    {
        return 1;
    }
    nvinfer1::IPluginResource* toDelete = nullptr;
    {
        std::lock_guard<std::mutex> lock(mMutex);
        auto found = mResources.find(key);
        if (found == mResources.end())
        {
            return 1;
        }
        if (--found->second.count == 0)
        {
            toDelete = found->second.resource;
            mResources.erase(found);
        }
    }
    if (toDelete != nullptr)
    {
        int32_t const status = toDelete->release();
        delete toDelete;
        std::lock_guard<std::mutex> lock(mMutex);
        ResourceStats& stats = mStats[key];
        ++stats.releases;
        stats.failedReleases += status != 0 ? 1 : 0;
        return status;
    }
    return 0;
}

std::map<std::string, HarnessPluginRegistry::ResourceStats> HarnessPluginRegistry::resourceStats() const
{
    std::lock_guard<std::mutex> lock(mMutex);
    return mStats;
}

void HarnessPluginRegistry::resetPeaks()
{
    std::lock_guard<std::mutex> lock(mMutex);
    for (auto& [key, stats] : mStats)
    {
        auto const held = mResources.find(key);
        stats.peak = held != mResources.end() ? held->second.count : 0;
    }
}

nvinfer1::IPluginCreatorInterface* const* HarnessPluginRegistry::getAllCreatorsRecursive(
    int32_t* const numCreators) noexcept
{
    return getAllCreators(numCreators);
}

HarnessPluginRegistry& pluginRegistry()
{
    static auto* registry = new HarnessPluginRegistry();
    return *registry;
}

// ------------------------------------------------------------------------------------------ resource context

int32_t HarnessErrorRecorder::getNbErrors() const noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    return static_cast<int32_t>(mErrors.size());
}

nvinfer1::ErrorCode HarnessErrorRecorder::getErrorCode(int32_t errorIdx) const noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    return errorIdx >= 0 && errorIdx < static_cast<int32_t>(mErrors.size()) ? mErrors[errorIdx].first
                                                                            : nvinfer1::ErrorCode::kINVALID_ARGUMENT;
}

nvinfer1::IErrorRecorder::ErrorDesc HarnessErrorRecorder::getErrorDesc(int32_t errorIdx) const noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    return errorIdx >= 0 && errorIdx < static_cast<int32_t>(mErrors.size()) ? mErrors[errorIdx].second.c_str() : "";
}

void HarnessErrorRecorder::clear() noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    mErrors.clear();
}

bool HarnessErrorRecorder::reportError(nvinfer1::ErrorCode val, ErrorDesc desc) noexcept
{
    try
    {
        {
            std::lock_guard<std::mutex> lock(mMutex);
            mErrors.emplace_back(val, desc != nullptr ? desc : "");
        }
        loggerFinder().logger().log(nvinfer1::ILogger::Severity::kERROR,
            (std::string("error recorder: ") + (desc != nullptr ? desc : "")).c_str());
    }
    catch (...)
    {
    }
    return false;
}

void* HarnessGpuAllocator::allocate(
    uint64_t const size, uint64_t const /*alignment*/, nvinfer1::AllocatorFlags const /*flags*/) noexcept
{
    void* memory = nullptr;
    if (cudaMalloc(&memory, size) != cudaSuccess)
    {
        return nullptr;
    }
    ++mOutstanding;
    return memory;
}

bool HarnessGpuAllocator::deallocate(void* const memory) noexcept
{
    if (memory == nullptr)
    {
        return true;
    }
    --mOutstanding;
    return cudaFree(memory) == cudaSuccess;
}

} // namespace ttp::harness

// How a plugin reaches the harness's registry: TensorRT's `getPluginRegistry` is not available in a harness
// process, so a plugin (or plugin_support) may fall back to dlsym(RTLD_DEFAULT, "ttp_harness_plugin_registry").
// The Python API loads the harness with RTLD_GLOBAL so that the symbol is visible.
extern "C" __attribute__((visibility("default"))) nvinfer1::IPluginRegistry* ttp_harness_plugin_registry() noexcept
{
    return &ttp::harness::pluginRegistry();
}
