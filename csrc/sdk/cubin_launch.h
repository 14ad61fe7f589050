// Launching a kernel compiled ahead of time to cubin (a Triton kernel, CUDA source compiled with NVRTC) from C++,
// through the CUDA driver API, with no Python: what the launchers that torchtrt_plugins.kernels_aot generates for a
// declared op call. The driver's entry points come from the CUDA runtime (cudaGetDriverEntryPointByVersion), so the
// libraries link the CUDA runtime only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

namespace ttp::sdk
{

// What an image of a kernel holds.
enum class ImageKind : int32_t
{
    kCUBIN = 0, // SASS for one architecture
    kPTX = 1,   // PTX text (nul-terminated), which the driver JIT-compiles for the device (and caches)
};

// One architecture's image of a kernel: its cubin, or its PTX.
struct CubinImage
{
    int32_t arch; // compute capability * 10 + minor, e.g. 90
    bool exact;   // an arch-specific image (sm_90a, sm_100a): runs on that compute capability only
    ImageKind kind;
    unsigned char const* data;
    size_t size;
};

// The image to load on a device of compute capability `arch` (major * 10 + minor), or nullptr when none fits:
// a cubin of exactly `arch`; else the newest cubin of the same major version, older than the device and not
// arch-specific; else the PTX of the newest arch not newer than the device (an arch-specific PTX only on its own
// arch). `forcePtx` (TORCHTRT_PLUGINS_FORCE_PTX=1) skips the cubins. Pure: no driver call.
inline CubinImage const* pickImage(CubinImage const* images, int32_t nbImages, int32_t arch, bool forcePtx) noexcept
{
    CubinImage const* cubin = nullptr;
    CubinImage const* ptx = nullptr;
    for (int32_t i = 0; i < nbImages; ++i)
    {
        CubinImage const& image = images[i];
        bool const fits = image.arch == arch || (!image.exact && image.arch < arch);
        if (!fits)
        {
            continue;
        }
        if (image.kind == ImageKind::kPTX)
        {
            ptx = ptx == nullptr || image.arch > ptx->arch ? &image : ptx;
        }
        else if (!forcePtx && (image.arch == arch || image.arch / 10 == arch / 10))
        {
            cubin = cubin == nullptr || image.arch > cubin->arch ? &image : cubin;
        }
    }
    return cubin != nullptr ? cubin : ptx;
}

// A kernel compiled for several architectures; the launcher picks the image for the current device.
struct CubinKernel
{
    char const* op;       // the declared op, for messages
    char const* kernel;   // the user's kernel (e.g. its Python name), for messages
    char const* function; // the function's name in the cubin
    CubinImage const* images;
    int32_t nbImages;
    uint32_t blockDim[3];
    uint32_t sharedBytes; // dynamic shared memory
    uint32_t clusterX;    // Triton's num_ctas: 1 for none
};

// Whether TORCHTRT_PLUGINS_FORCE_PTX=1 is set (read once): the loader then takes a kernel's PTX even where a cubin
// fits the device.
bool forcePtx() noexcept;

// Launch `kernel` on `grid` with the kernel parameters `params` (an array of pointers to the values, as
// cuLaunchKernel takes them) on `stream`, in the current context. Loads the image for the current device on the
// first launch in each context. A grid with a zero dimension launches nothing. Returns cudaErrorNoKernelImageForDevice
// when no image fits the device (cubinLaunchError says which), a driver failure as cudaErrorLaunchFailure.
cudaError_t launchCubin(CubinKernel const& kernel, uint64_t const grid[3], void** params, cudaStream_t stream) noexcept;

// Makes `kernel` (a static table of its library) known to loadCubinKernels; the generated launchers define one next
// to each CubinKernel.
struct CubinKernelRegistration
{
    explicit CubinKernelRegistration(CubinKernel const& kernel) noexcept;
};

// Loads, in the current context, the image of every registered kernel of `op` (the declared op's "ns::name") as its
// first launch would (cuModuleLoadData, then cuModuleGetFunction, which loads the function under lazy loading too),
// so that no launch of them loads a module: the plugin calls it outside any capture (onShapeChange), so that its
// first enqueue can be captured in a CUDA graph. Returns the first failure (cubinLaunchError says which).
cudaError_t loadCubinKernels(char const* op) noexcept;

// The last failure of launchCubin or launchFailure on this thread, naming the op, the kernel and why ("" when
// none).
char const* cubinLaunchError() noexcept;

// For a generated launcher that cannot launch: records "<op>: kernel '<kernel>': <why>" and returns `status`.
cudaError_t launchFailure(cudaError_t status, char const* op, char const* kernel, char const* why) noexcept;

// Floor and ceil division of sizes as the generated launchers evaluate grids and parameters: 0 for a zero divisor
// (a grid over an empty dimension).
inline int64_t sizeFloorDiv(int64_t a, int64_t b) noexcept
{
    if (b == 0)
    {
        return 0;
    }
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

inline int64_t sizeCeilDiv(int64_t a, int64_t b) noexcept
{
    return b == 0 ? 0 : -sizeFloorDiv(-a, b);
}

} // namespace ttp::sdk
