// See cubin_launch.h. Only this file sees the driver API's types (<cuda.h>, a header of the toolkit; nothing links
// libcuda: its entry points come through the runtime).
#include "sdk/cubin_launch.h"

#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ttp::sdk
{
namespace
{

thread_local std::string tLastError;

template <typename... Parts>
cudaError_t failWith(cudaError_t status, CubinKernel const& kernel, Parts const&... parts)
{
    std::string message = std::string(kernel.op) + ": kernel '" + kernel.kernel + "': ";
    (message.append(parts), ...);
    tLastError = message;
    return status;
}

// The driver functions we call, resolved once through the runtime (CUDA 12.0 ABI versions of each).
struct Driver
{
    decltype(&cuCtxGetCurrent) ctxGetCurrent{};
    decltype(&cuCtxGetId) ctxGetId{};
    decltype(&cuCtxGetDevice) ctxGetDevice{};
    decltype(&cuDeviceGetAttribute) deviceGetAttribute{};
    decltype(&cuModuleLoadData) moduleLoadData{};
    decltype(&cuModuleGetFunction) moduleGetFunction{};
    decltype(&cuFuncSetAttribute) funcSetAttribute{};
    decltype(&cuLaunchKernelEx) launchKernelEx{};
    decltype(&cuGetErrorString) getErrorString{};
    std::string missing;

    template <typename F>
    void resolve(char const* symbol, F& function)
    {
        void* address = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found) != cudaSuccess
            || found != cudaDriverEntryPointSuccess || address == nullptr)
        {
            missing += missing.empty() ? symbol : std::string(", ") + symbol;
            return;
        }
        function = reinterpret_cast<F>(address);
    }

    Driver()
    {
        resolve("cuCtxGetCurrent", ctxGetCurrent);
        resolve("cuCtxGetId", ctxGetId);
        resolve("cuCtxGetDevice", ctxGetDevice);
        resolve("cuDeviceGetAttribute", deviceGetAttribute);
        resolve("cuModuleLoadData", moduleLoadData);
        resolve("cuModuleGetFunction", moduleGetFunction);
        resolve("cuFuncSetAttribute", funcSetAttribute);
        resolve("cuLaunchKernelEx", launchKernelEx);
        resolve("cuGetErrorString", getErrorString);
    }

    std::string describe(CUresult result) const
    {
        char const* text = nullptr;
        if (getErrorString != nullptr)
        {
            getErrorString(result, &text);
        }
        return text != nullptr ? text : "CUDA driver error " + std::to_string(static_cast<int>(result));
    }
};

Driver const& driver()
{
    static Driver const instance;
    return instance;
}

std::string archList(CubinKernel const& kernel)
{
    std::string out;
    for (int32_t i = 0; i < kernel.nbImages; ++i)
    {
        CubinImage const& image = kernel.images[i];
        out += (i ? ", sm_" : "sm_") + std::to_string(image.arch) + (image.exact ? "a" : "")
               + (image.kind == ImageKind::kPTX ? " PTX" : " cubin");
    }
    return out;
}

// The ".version X.Y" line of a PTX image ("PTX ISA X.Y"), for messages.
std::string ptxVersion(CubinImage const& image)
{
    std::string const text(reinterpret_cast<char const*>(image.data), image.size);
    size_t const at = text.find(".version ");
    if (at == std::string::npos)
    {
        return "PTX ISA version unknown";
    }
    size_t const begin = at + std::strlen(".version ");
    size_t const end = text.find_first_of(" \t\r\n", begin);
    return "PTX ISA " + text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

struct Key
{
    CubinKernel const* kernel;
    unsigned long long context;
    bool operator==(Key const& other) const noexcept
    {
        return kernel == other.kernel && context == other.context;
    }
};

struct KeyHash
{
    size_t operator()(Key const& key) const noexcept
    {
        return std::hash<void const*>()(key.kernel) ^ (std::hash<unsigned long long>()(key.context) * 31);
    }
};

std::mutex gMutex;
// (kernel, context id) -> its function in that context. Modules stay loaded for the life of their context.
std::unordered_map<Key, CUfunction, KeyHash> gFunctions;

cudaError_t functionFor(CubinKernel const& kernel, CUfunction& function)
{
    Driver const& d = driver();
    if (!d.missing.empty())
    {
        return failWith(cudaErrorCallRequiresNewerDriver, kernel, "the CUDA driver lacks ", d.missing);
    }
    CUcontext context = nullptr;
    if (d.ctxGetCurrent(&context) != CUDA_SUCCESS || context == nullptr)
    {
        cudaFree(nullptr); // no current context yet: the runtime makes its device's primary context current
        if (d.ctxGetCurrent(&context) != CUDA_SUCCESS || context == nullptr)
        {
            return failWith(cudaErrorDeviceUninitialized, kernel, "no current CUDA context");
        }
    }
    unsigned long long id = 0;
    if (d.ctxGetId(context, &id) != CUDA_SUCCESS)
    {
        return failWith(cudaErrorDeviceUninitialized, kernel, "cannot identify the current CUDA context");
    }
    std::lock_guard<std::mutex> lock(gMutex);
    auto found = gFunctions.find(Key{&kernel, id});
    if (found != gFunctions.end())
    {
        function = found->second;
        return cudaSuccess;
    }
    CUdevice device = 0;
    int major = 0;
    int minor = 0;
    if (d.ctxGetDevice(&device) != CUDA_SUCCESS
        || d.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) != CUDA_SUCCESS
        || d.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) != CUDA_SUCCESS)
    {
        return failWith(cudaErrorInvalidDevice, kernel, "cannot read the device's compute capability");
    }
    int32_t const arch = major * 10 + minor;
    bool const onlyPtx = forcePtx();
    CubinImage const* image = pickImage(kernel.images, kernel.nbImages, arch, onlyPtx);
    if (image == nullptr)
    {
        return failWith(cudaErrorNoKernelImageForDevice, kernel, "no image for this device (sm_", std::to_string(arch),
            onlyPtx ? ", TORCHTRT_PLUGINS_FORCE_PTX=1" : "", "); the library holds ", archList(kernel),
            " (build it for this architecture: TORCHTRT_PLUGINS_CUDA_ARCHS)");
    }
    CUmodule module = nullptr;
    CUresult result = d.moduleLoadData(&module, image->data);
    if (result == CUDA_SUCCESS)
    {
        result = d.moduleGetFunction(&function, module, kernel.function);
    }
    if (result == CUDA_SUCCESS && kernel.sharedBytes > 48 * 1024)
    {
        result = d.funcSetAttribute(
            function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(kernel.sharedBytes));
    }
    char const* what = image->kind == ImageKind::kPTX ? " PTX" : " cubin";
    if (result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    {
        return failWith(cudaErrorUnsupportedPtxVersion, kernel, "the CUDA driver cannot JIT-compile its sm_",
            std::to_string(image->arch), " PTX (", ptxVersion(*image),
            "): the driver is older than the compiler that wrote it; update the driver, or build the library for "
            "this architecture (TORCHTRT_PLUGINS_CUDA_ARCHS) so that a cubin serves it");
    }
    if (result != CUDA_SUCCESS)
    {
        return failWith(cudaErrorInvalidKernelImage, kernel, "loading its sm_", std::to_string(image->arch), what,
            " (function '", kernel.function, "') failed: ", d.describe(result));
    }
    gFunctions.emplace(Key{&kernel, id}, function);
    return cudaSuccess;
}

// The library's registered kernels; a function's static so that registrations of other translation units may run
// before this one's.
std::vector<CubinKernel const*>& registeredKernels()
{
    static std::vector<CubinKernel const*> kernels;
    return kernels;
}

} // namespace

bool forcePtx() noexcept
{
    static bool const value = []
    {
        char const* setting = std::getenv("TORCHTRT_PLUGINS_FORCE_PTX");
        return setting != nullptr && std::strcmp(setting, "1") == 0;
    }();
    return value;
}

CubinKernelRegistration::CubinKernelRegistration(CubinKernel const& kernel) noexcept
{
    try
    {
        registeredKernels().push_back(&kernel);
    }
    catch (...) // std::bad_alloc: the kernel still loads on its first launch
    {
    }
}

cudaError_t loadCubinKernels(char const* op) noexcept
{
    try
    {
        tLastError.clear();
        for (CubinKernel const* kernel : registeredKernels())
        {
            CUfunction function = nullptr;
            cudaError_t const status = std::strcmp(kernel->op, op) == 0 ? functionFor(*kernel, function) : cudaSuccess;
            if (status != cudaSuccess)
            {
                return status;
            }
        }
        return cudaSuccess;
    }
    catch (...) // std::bad_alloc: nothing may leave the SDK
    {
        return cudaErrorMemoryAllocation;
    }
}

cudaError_t launchCubin(CubinKernel const& kernel, uint64_t const grid[3], void** params, cudaStream_t stream) noexcept
{
    try
    {
        tLastError.clear();
        if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
        {
            return cudaSuccess;
        }
        uint64_t const gridX = grid[0] * kernel.clusterX;
        if (gridX > 0x7fffffffu || grid[1] > 65535 || grid[2] > 65535)
        {
            return failWith(cudaErrorInvalidConfiguration, kernel, "grid (", std::to_string(grid[0]), ", ",
                std::to_string(grid[1]), ", ", std::to_string(grid[2]), ") exceeds CUDA's limits");
        }
        CUfunction function = nullptr;
        cudaError_t status = functionFor(kernel, function);
        if (status != cudaSuccess)
        {
            return status;
        }
        CUlaunchAttribute attributes[1]{};
        CUlaunchConfig config{};
        config.gridDimX = static_cast<unsigned>(gridX);
        config.gridDimY = static_cast<unsigned>(grid[1]);
        config.gridDimZ = static_cast<unsigned>(grid[2]);
        config.blockDimX = kernel.blockDim[0];
        config.blockDimY = kernel.blockDim[1];
        config.blockDimZ = kernel.blockDim[2];
        config.sharedMemBytes = kernel.sharedBytes;
        config.hStream = reinterpret_cast<CUstream>(stream);
        config.attrs = attributes;
        if (kernel.clusterX > 1)
        {
            attributes[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attributes[0].value.clusterDim.x = kernel.clusterX;
            attributes[0].value.clusterDim.y = 1;
            attributes[0].value.clusterDim.z = 1;
            config.numAttrs = 1;
        }
        CUresult result = driver().launchKernelEx(&config, function, params, nullptr);
        if (result != CUDA_SUCCESS)
        {
            return failWith(cudaErrorLaunchFailure, kernel, "cuLaunchKernelEx failed: ", driver().describe(result));
        }
        return cudaSuccess;
    }
    catch (...) // std::bad_alloc: nothing may leave a launcher
    {
        return cudaErrorMemoryAllocation;
    }
}

cudaError_t launchFailure(cudaError_t status, char const* op, char const* kernel, char const* why) noexcept
{
    try
    {
        tLastError = std::string(op) + ": kernel '" + kernel + "': " + why;
    }
    catch (...) // std::bad_alloc: the status still says it failed
    {
    }
    return status;
}

char const* cubinLaunchError() noexcept
{
    return tLastError.c_str();
}

} // namespace ttp::sdk
