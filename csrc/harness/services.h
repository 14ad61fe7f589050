// What TensorRT provides to a plugin, provided by the harness instead: the logger (reached through
// setLoggerFinder; every line is captured for the caller), a plugin registry with shared resources, and the
// per-context resource context (GPU allocator, error recorder).
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ttp::harness
{

struct LogLine
{
    nvinfer1::ILogger::Severity severity;
    std::string message;
    std::string during; // the plugin method being called when it was logged
};

char const* severityName(nvinfer1::ILogger::Severity severity) noexcept;

// The process-wide logger handed to plugin libraries; lines go to whichever capture is active.
class CapturingLogger final : public nvinfer1::ILogger
{
public:
    void log(Severity severity, nvinfer1::AsciiChar const* msg) noexcept override;

    void begin(std::vector<LogLine>* sink);
    void end();
    void setDuring(std::string during);

private:
    std::mutex mMutex;
    std::vector<LogLine>* mSink{nullptr};
    std::string mDuring;
};

class HarnessLoggerFinder final : public nvinfer1::ILoggerFinder
{
public:
    nvinfer1::ILogger* findLogger() override
    {
        return &mLogger;
    }
    CapturingLogger& logger() noexcept
    {
        return mLogger;
    }

private:
    CapturingLogger mLogger;
};

HarnessLoggerFinder& loggerFinder();

// The entry points of a plugin library.
using GetCreatorsFn = nvinfer1::IPluginCreatorInterface* const* (*)(int32_t&);
using SetLoggerFinderFn = void (*)(nvinfer1::ILoggerFinder*);

// dlopen(path), once per process: libraries stay loaded, since plugins keep static state and registered CUDA modules
// for the process lifetime. Throws std::runtime_error with dlerror()'s reason.
void* openPluginLibrary(std::string const& path);

// Enough of IPluginRegistry for plugins: creators of the loaded library and shared resources with reference counts.
class HarnessPluginRegistry final : public nvinfer1::IPluginRegistry
{
public:
    HarnessPluginRegistry() = default;
    ~HarnessPluginRegistry() noexcept override;

    void setCreators(std::vector<nvinfer1::IPluginCreatorInterface*> creators);
    // Reference counts of the resources held now.
    std::map<std::string, int32_t> heldResources() const;
    // What happened to each key since the process started (a key stays after its resource is released): a run
    // reports the difference from its start, and the peak of references since resetPeaks().
    struct ResourceStats
    {
        int64_t acquires{0};
        int64_t clones{0};         // resources built: the registry clones the caller's object on a first acquire
        int64_t releases{0};       // release() calls (the last reference dropped)
        int64_t failedReleases{0}; // release() returned non-zero
        int32_t peak{0};           // the most references held at once
    };
    std::map<std::string, ResourceStats> resourceStats() const;
    void resetPeaks();
    int64_t acquireCount() const noexcept
    {
        return mAcquires;
    }

    void setErrorRecorder(nvinfer1::IErrorRecorder* const recorder) noexcept override;
    nvinfer1::IErrorRecorder* getErrorRecorder() const noexcept override;
    bool isParentSearchEnabled() const override
    {
        return false;
    }
    void setParentSearchEnabled(bool const) override
    {
    }
    PluginLibraryHandle loadLibrary(nvinfer1::AsciiChar const* pluginPath) noexcept override;
    void deregisterLibrary(PluginLibraryHandle handle) noexcept override;
    bool registerCreator(
        nvinfer1::IPluginCreatorInterface& creator, nvinfer1::AsciiChar const* const pluginNamespace) noexcept override;
    nvinfer1::IPluginCreatorInterface* const* getAllCreators(int32_t* const numCreators) const noexcept override;
    nvinfer1::IPluginCreatorInterface* getCreator(nvinfer1::AsciiChar const* const pluginName,
        nvinfer1::AsciiChar const* const pluginVersion,
        nvinfer1::AsciiChar const* const pluginNamespace = "") noexcept override;
    bool deregisterCreator(nvinfer1::IPluginCreatorInterface const& creator) noexcept override;
    nvinfer1::IPluginResource* acquirePluginResource(
        nvinfer1::AsciiChar const* key, nvinfer1::IPluginResource* resource) noexcept override;
    int32_t releasePluginResource(nvinfer1::AsciiChar const* key) noexcept override;
    nvinfer1::IPluginCreatorInterface* const* getAllCreatorsRecursive(int32_t* const numCreators) noexcept override;

private:
    struct Held
    {
        nvinfer1::IPluginResource* resource;
        int32_t count;
    };
    mutable std::mutex mMutex;
    std::vector<nvinfer1::IPluginCreatorInterface*> mCreators;
    std::map<std::string, Held> mResources;
    std::map<std::string, ResourceStats> mStats;
    nvinfer1::IErrorRecorder* mRecorder{nullptr};
    int64_t mAcquires{0};
};

HarnessPluginRegistry& pluginRegistry();

class HarnessErrorRecorder final : public nvinfer1::IErrorRecorder
{
public:
    int32_t getNbErrors() const noexcept override;
    nvinfer1::ErrorCode getErrorCode(int32_t errorIdx) const noexcept override;
    ErrorDesc getErrorDesc(int32_t errorIdx) const noexcept override;
    bool hasOverflowed() const noexcept override
    {
        return false;
    }
    void clear() noexcept override;
    bool reportError(nvinfer1::ErrorCode val, ErrorDesc desc) noexcept override;
    RefCount incRefCount() noexcept override
    {
        return ++mRefs;
    }
    RefCount decRefCount() noexcept override
    {
        return --mRefs;
    }

private:
    mutable std::mutex mMutex;
    std::vector<std::pair<nvinfer1::ErrorCode, std::string>> mErrors;
    RefCount mRefs{0};
};

// cudaMalloc/cudaFree; counts what is outstanding so leaks can be reported.
class HarnessGpuAllocator final : public nvinfer1::IGpuAllocator
{
public:
    void* allocate(
        uint64_t const size, uint64_t const alignment, nvinfer1::AllocatorFlags const flags) noexcept override;
    bool deallocate(void* const memory) noexcept override;
    int64_t outstanding() const noexcept
    {
        return mOutstanding;
    }

private:
    int64_t mOutstanding{0};
};

class HarnessResourceContext final : public nvinfer1::IPluginResourceContext
{
public:
    nvinfer1::IGpuAllocator* getGpuAllocator() const noexcept override
    {
        return &mAllocator;
    }
    nvinfer1::IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return &mRecorder;
    }
    HarnessErrorRecorder& recorder() noexcept
    {
        return mRecorder;
    }

private:
    mutable HarnessGpuAllocator mAllocator;
    mutable HarnessErrorRecorder mRecorder;
};

} // namespace ttp::harness
