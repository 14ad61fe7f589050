// Device helpers shared by the kernels: element conversion, vector loads, reductions, launch bounds.
#pragma once

#include "sdk/dtypes.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <iterator>
#include <utility>

namespace ttp
{

constexpr int kWarpSize = 32;

__device__ __forceinline__ float toFloat(float v)
{
    return v;
}
__device__ __forceinline__ float toFloat(__half v)
{
    return __half2float(v);
}
__device__ __forceinline__ float toFloat(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v)
{
    return v;
}
template <>
__device__ __forceinline__ __half fromFloat<__half>(float v)
{
    return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

// VEC elements moved as one aligned load/store.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec
{
    T v[VEC];
};

// Sum of the squares of a vector's elements, in fp32.
template <typename T, int VEC>
__device__ __forceinline__ float sumSquares(Vec<T, VEC> const& v)
{
    // Two chains, not one: the reduction is on the critical path of a latency-bound launch.
    float s[2] = {0.F, 0.F};
#pragma unroll
    for (int k = 0; k < VEC; ++k)
    {
        float const f = toFloat(v.v[k]);
        s[k % 2] += f * f;
    }
    return s[0] + s[1];
}

// Sum over aligned groups of LANES consecutive lanes (LANES a power of two <= 32); all 32 lanes must call.
template <int LANES>
__device__ __forceinline__ float groupSum(float v)
{
#pragma unroll
    for (int offset = LANES / 2; offset > 0; offset >>= 1)
    {
        v += __shfl_xor_sync(0xffffffffU, v, offset);
    }
    return v;
}

__device__ __forceinline__ float warpSum(float v)
{
    return groupSum<kWarpSize>(v);
}

// Sum over the block; `partial` holds one float per warp. Safe to call repeatedly with the same buffer, unless ONCE:
// then the block calls it once per `partial` and skips the barrier that waits for the previous call's readers.
template <int BLOCK, bool ONCE = false>
__device__ __forceinline__ float blockSum(float v, float* partial)
{
    constexpr int kWarps = BLOCK / kWarpSize;
    int const lane = threadIdx.x % kWarpSize;
    int const warp = threadIdx.x / kWarpSize;
    v = warpSum(v);
    if constexpr (!ONCE)
    {
        __syncthreads(); // the previous call's readers are done with `partial`
    }
    if (lane == 0)
    {
        partial[warp] = v;
    }
    __syncthreads();
    float total = 0.F;
#pragma unroll
    for (int i = 0; i < kWarps; ++i)
    {
        total += partial[i];
    }
    return total;
}

// Where a 16-byte access asks L2 to keep its line: kDEFAULT (normal priority), kEVICT_LAST (keep: data read again
// soon), kEVICT_FIRST (streaming: read or written once). Other sizes always take the default.
enum class CachePolicy
{
    kDEFAULT,
    kEVICT_LAST,
    kEVICT_FIRST,
    // Loads only: the coherent path (ld.global) instead of the read-only one the compiler picks for a const
    // __restrict__ pointer (ld.global.nc), normal priority; stores take the default.
    kCOHERENT,
    // Loads only, coherent: kKEEP_L1 keeps the line in L1 and L2 (evict_last in both: the block reads it again soon),
    // kLAST_READ lets it go from both (evict_first). Triton's loads with eviction_policy evict_last and evict_first.
    kKEEP_L1,
    kLAST_READ,
};

// A 16-byte load of p into uint4 r: INSTR (an ld) with .L2::cache_hint under the L2 policy POLICY (evict_last or
// evict_first) covering the whole access.
#define TTP_LOAD_L2_HINTED(INSTR, POLICY)                                                                              \
    do                                                                                                                 \
    {                                                                                                                  \
        uint64_t policy = 0;                                                                                           \
        asm("createpolicy.fractional.L2::" POLICY ".b64 %0, 1.0;" : "=l"(policy));                                     \
        asm volatile(INSTR ".L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"                                        \
            : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)                                                               \
            : "l"(p), "l"(policy));                                                                                    \
    } while (false)

template <CachePolicy P, typename V>
__device__ __forceinline__ V loadVec(V const* p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (P != CachePolicy::kDEFAULT && sizeof(V) == 16)
    {
        uint4 r;
        if constexpr (P == CachePolicy::kCOHERENT)
        {
            asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                : "l"(p));
        }
        else if constexpr (P == CachePolicy::kEVICT_LAST)
        {
            TTP_LOAD_L2_HINTED("ld.global.nc.L1::no_allocate", "evict_last");
        }
        else if constexpr (P == CachePolicy::kKEEP_L1)
        {
            TTP_LOAD_L2_HINTED("ld.global.L1::evict_last", "evict_last");
        }
        else if constexpr (P == CachePolicy::kLAST_READ)
        {
            TTP_LOAD_L2_HINTED("ld.global.L1::evict_first", "evict_first");
        }
        else
        {
            r = __ldcs(reinterpret_cast<uint4 const*>(p));
        }
        V v;
        std::memcpy(&v, &r, sizeof(v));
        return v;
    }
#endif
    return *p;
}

#undef TTP_LOAD_L2_HINTED

template <CachePolicy P, typename V>
__device__ __forceinline__ void storeVec(V* p, V const& v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr ((P == CachePolicy::kEVICT_LAST || P == CachePolicy::kEVICT_FIRST) && sizeof(V) == 16)
    {
        uint4 r;
        std::memcpy(&r, &v, sizeof(r));
        if constexpr (P == CachePolicy::kEVICT_LAST)
        {
            uint64_t policy = 0;
            asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
            asm volatile("st.global.L1::no_allocate.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p),
                "r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w), "l"(policy)
                : "memory");
        }
        else
        {
            __stcs(reinterpret_cast<uint4*>(p), r);
        }
        return;
    }
#endif
    *p = v;
}

// Programmatic dependent launch (Hopper and later; no-ops below): a kernel launched with launchKernel(pdl = true)
// may start while the previous kernel of its stream still runs. It must call waitForPrerequisites() before it
// touches global memory; allowDependents() lets the next such kernel start its own launch early.
__device__ __forceinline__ void waitForPrerequisites()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allowDependents()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// `attribute` of the current device: asked of the runtime once per device and attribute, then read from a cache.
// Launchers ask on every call, and an eager call pays each query in host time (launch_lab.cu of the kernel lab at
// bf45c72).
inline cudaError_t currentDeviceAttribute(cudaDeviceAttr attribute, int* value)
{
    constexpr int kDEVICES = 64;
    constexpr cudaDeviceAttr kCACHED[]
        = {cudaDevAttrComputeCapabilityMajor, cudaDevAttrMultiProcessorCount, cudaDevAttrL2CacheSize};
    constexpr int kSLOTS = static_cast<int>(std::size(kCACHED));
    static std::atomic<int> cache[kSLOTS][kDEVICES]{}; // 0: not asked yet (each cached attribute is positive)
    int device = 0;
    if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    {
        return err;
    }
    int slot = 0;
    while (slot < kSLOTS && kCACHED[slot] != attribute)
    {
        ++slot;
    }
    if (slot == kSLOTS || device < 0 || device >= kDEVICES)
    {
        return cudaDeviceGetAttribute(value, attribute, device);
    }
    int cached = cache[slot][device].load(std::memory_order_relaxed);
    if (cached <= 0)
    {
        if (cudaError_t err = cudaDeviceGetAttribute(&cached, attribute, device); err != cudaSuccess)
        {
            return err;
        }
        cache[slot][device].store(cached, std::memory_order_relaxed);
    }
    *value = cached;
    return cudaSuccess;
}

// Whether our kernels launch as programmatic dependent launches: the current device takes them (compute capability
// 9.0 and later) and TORCHTRT_PLUGINS_PDL is not 0 in the environment (read once per process).
inline bool pdlSupported()
{
    static bool const enabled = []
    {
        char const* value = std::getenv("TORCHTRT_PLUGINS_PDL");
        return value == nullptr || std::strcmp(value, "0") != 0;
    }();
    int major = 0;
    return enabled && currentDeviceAttribute(cudaDevAttrComputeCapabilityMajor, &major) == cudaSuccess && major >= 9;
}

// kernel<<<grid, block, 0, stream>>>(args...), as a programmatic dependent launch when `pdl` is set.
template <typename... Params, typename... Args>
cudaError_t launchKernel(
    void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, bool pdl, Args&&... args)
{
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.stream = stream;
    config.attrs = pdl ? &attribute : nullptr;
    config.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// f(T{}) with T the floating-point type `dtype` names (float, __half or __nv_bfloat16); other dtypes are invalid.
template <typename F>
cudaError_t withFloatType(DType dtype, F&& f)
{
    switch (dtype)
    {
    case DType::kFLOAT32: return f(float{});
    case DType::kFLOAT16: return f(__half{});
    case DType::kBFLOAT16: return f(__nv_bfloat16{});
    default: return cudaErrorInvalidValue;
    }
}

// The current device's L2 cache in bytes; the largest int64 where it cannot be asked.
inline int64_t l2CacheBytes()
{
    int bytes = 0;
    bool const known = currentDeviceAttribute(cudaDevAttrL2CacheSize, &bytes) == cudaSuccess && bytes > 0;
    return known ? bytes : INT64_MAX;
}

// Whether a launch may ask L2 to keep `bytes` it writes or reads (evict-last): at most an eighth of the device's L2
// (`l2`, from l2CacheBytes()), so that what it keeps leaves the rest to the kernels between it and the next reader.
inline bool fitsL2Share(int64_t bytes, int64_t l2)
{
    return l2 != INT64_MAX && bytes <= l2 / 8;
}

inline bool isAligned(void const* p, uintptr_t bytes)
{
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Enough blocks to fill the current device; grid-stride loops cover the rest.
inline cudaError_t maxResidentBlocks(int* blocks, int blocksPerSm = 32)
{
    int sms = 0;
    cudaError_t const err = currentDeviceAttribute(cudaDevAttrMultiProcessorCount, &sms);
    *blocks = std::max(1, sms * blocksPerSm);
    return err;
}

} // namespace ttp
