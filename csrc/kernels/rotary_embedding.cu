#include "rotary_embedding.h"
#include "type_utils.cuh"

#include <algorithm>
#include <type_traits>

namespace ttp
{
namespace
{

constexpr int kBLOCK = 256;

// Each inverse frequency rounded once to fp32 from double, each angle the fp32 product of the position and it (as
// Hugging Face's fp32 outer product), cos and sin rounded once from double: the table is exactly defined, so that a
// reference reproduces it (an fp32 angle's ulp grows with the position; its cos must not add more error).
__global__ void rotaryCacheKernel(float* __restrict__ cache, int64_t maxPosition, int64_t rotaryDim, double base)
{
    int64_t const half = rotaryDim / 2;
    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < maxPosition * half;
        idx += static_cast<int64_t>(gridDim.x) * blockDim.x)
    {
        int64_t const p = idx / half;
        int64_t const i = idx - p * half;
        auto const invFreq
            = static_cast<float>(1.0 / pow(base, static_cast<double>(2 * i) / static_cast<double>(rotaryDim)));
        float const angle = __fmul_rn(static_cast<float>(p), invFreq);
        cache[p * rotaryDim + i] = static_cast<float>(cos(static_cast<double>(angle)));
        cache[p * rotaryDim + half + i] = static_cast<float>(sin(static_cast<double>(angle)));
    }
}

template <typename P>
__device__ __forceinline__ int64_t positionOf(P const* positions, int64_t token, int64_t maxPosition)
{
    int64_t const p = static_cast<int64_t>(positions[token]);
    return p < 0 ? 0 : (p >= maxPosition ? maxPosition - 1 : p);
}

// One work item: VEC consecutive elements of one head of one token. Per head, the rotated part comes first (NeoX:
// half/VEC items, each rotating VEC elements of both halves; GPT-J: rotaryDim/VEC items of VEC/2 pairs), then the
// pass-through part ((headDim - rotaryDim)/VEC items).
template <typename T, typename P, int VEC, bool NEOX>
__global__ void __launch_bounds__(kBLOCK)
    rotaryKernel(T const* __restrict__ x, P const* __restrict__ positions, float const* __restrict__ cache,
        T* __restrict__ y, int64_t tokens, int64_t heads, int64_t headDim, int64_t rotaryDim, int64_t maxPosition)
{
    using V = Vec<T, VEC>;
    constexpr int kPAIRS = VEC < 2 ? 2 : VEC; // GPT-J: the elements of one item (whole pairs)
    int64_t const half = rotaryDim / 2;
    int64_t const rotated = NEOX ? half / VEC : rotaryDim / kPAIRS;
    int64_t const perHead = rotated + (headDim - rotaryDim) / VEC;
    int64_t const perToken = perHead * heads;
    waitForPrerequisites();
    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < tokens * perToken;
        idx += static_cast<int64_t>(gridDim.x) * blockDim.x)
    {
        int64_t const token = idx / perToken;
        int64_t const rest = idx - token * perToken;
        int64_t const head = rest / perHead;
        int64_t const item = rest - head * perHead;
        int64_t const base = (token * heads + head) * headDim;
        if (item >= rotated)
        {
            int64_t const e = rotaryDim + (item - rotated) * VEC;
            storeVec<CachePolicy::kEVICT_FIRST>(reinterpret_cast<V*>(y + base + e),
                loadVec<CachePolicy::kEVICT_FIRST>(reinterpret_cast<V const*>(x + base + e)));
            continue;
        }
        float const* row = cache + positionOf(positions, token, maxPosition) * rotaryDim;
        if constexpr (NEOX)
        {
            int64_t const j = item * VEC;
            V const a = loadVec<CachePolicy::kEVICT_FIRST>(reinterpret_cast<V const*>(x + base + j));
            V const b = loadVec<CachePolicy::kEVICT_FIRST>(reinterpret_cast<V const*>(x + base + half + j));
            V outA;
            V outB;
#pragma unroll
            for (int k = 0; k < VEC; ++k)
            {
                float const c = row[j + k];
                float const s = row[half + j + k];
                float const x1 = toFloat(a.v[k]);
                float const x2 = toFloat(b.v[k]);
                outA.v[k] = fromFloat<T>(x1 * c - x2 * s);
                outB.v[k] = fromFloat<T>(x2 * c + x1 * s);
            }
            storeVec<CachePolicy::kEVICT_FIRST>(reinterpret_cast<V*>(y + base + j), outA);
            storeVec<CachePolicy::kEVICT_FIRST>(reinterpret_cast<V*>(y + base + half + j), outB);
        }
        else
        {
            using W = Vec<T, kPAIRS>;
            int64_t const e = item * kPAIRS;
            W a;
            if constexpr (VEC >= 2)
            {
                a = loadVec<CachePolicy::kEVICT_FIRST>(reinterpret_cast<W const*>(x + base + e));
            }
            else
            {
                a.v[0] = x[base + e];
                a.v[1] = x[base + e + 1];
            }
            W out;
#pragma unroll
            for (int k = 0; k < kPAIRS; k += 2)
            {
                int64_t const m = (e + k) / 2;
                float const c = row[m];
                float const s = row[half + m];
                float const x1 = toFloat(a.v[k]);
                float const x2 = toFloat(a.v[k + 1]);
                out.v[k] = fromFloat<T>(x1 * c - x2 * s);
                out.v[k + 1] = fromFloat<T>(x2 * c + x1 * s);
            }
            if constexpr (VEC >= 2)
            {
                storeVec<CachePolicy::kEVICT_FIRST>(reinterpret_cast<W*>(y + base + e), out);
            }
            else
            {
                y[base + e] = out.v[0];
                y[base + e + 1] = out.v[1];
            }
        }
    }
    allowDependents();
}

template <typename T, typename P, int VEC>
cudaError_t launchRotary(T const* x, P const* positions, float const* cache, T* y, int64_t tokens, int64_t heads,
    int64_t headDim, int64_t rotaryDim, int64_t maxPosition, bool isNeox, cudaStream_t stream)
{
    int64_t const rotated = isNeox ? rotaryDim / 2 / VEC : rotaryDim / (VEC < 2 ? 2 : VEC);
    int64_t const items = tokens * heads * (rotated + (headDim - rotaryDim) / VEC);
    int resident = 0;
    cudaError_t const err = maxResidentBlocks(&resident, 2048 / kBLOCK);
    if (err != cudaSuccess)
    {
        return err;
    }
    auto const blocks = static_cast<unsigned>(std::min<int64_t>((items + kBLOCK - 1) / kBLOCK, resident));
    auto* kernel = isNeox ? &rotaryKernel<T, P, VEC, true> : &rotaryKernel<T, P, VEC, false>;
    return launchKernel(kernel, dim3(blocks), dim3(kBLOCK), stream, pdlSupported(), x, positions, cache, y, tokens,
        heads, headDim, rotaryDim, maxPosition);
}

} // namespace

size_t rotaryCacheBytes(int64_t maxPosition, int64_t rotaryDim)
{
    return maxPosition > 0 && rotaryDim > 0 ? static_cast<size_t>(maxPosition) * static_cast<size_t>(rotaryDim) * 4 : 0;
}

cudaError_t rotaryCache(float* cache, int64_t maxPosition, int64_t rotaryDim, double base, cudaStream_t stream)
{
    if (cache == nullptr || maxPosition <= 0 || rotaryDim <= 0 || rotaryDim % 2 != 0)
    {
        return cudaErrorInvalidValue;
    }
    int64_t const items = maxPosition * (rotaryDim / 2);
    auto const blocks = static_cast<unsigned>(std::min<int64_t>((items + kBLOCK - 1) / kBLOCK, 65536));
    rotaryCacheKernel<<<blocks, kBLOCK, 0, stream>>>(cache, maxPosition, rotaryDim, base);
    return cudaGetLastError();
}

cudaError_t rotaryEmbedding(void const* x, void const* positions, DType positionsDtype, float const* cache, void* y,
    int64_t tokens, int64_t heads, int64_t headDim, int64_t rotaryDim, int64_t maxPosition, bool isNeox, DType dtype,
    cudaStream_t stream)
{
    if (rotaryDim <= 0 || rotaryDim % 2 != 0 || rotaryDim > headDim || maxPosition <= 0
        || (positionsDtype != DType::kINT32 && positionsDtype != DType::kINT64))
    {
        return cudaErrorInvalidValue;
    }
    if (tokens * heads * headDim == 0)
    {
        return cudaSuccess;
    }
    return withFloatType(dtype,
        [&](auto tag) -> cudaError_t
        {
            using T = decltype(tag);
            constexpr int kVEC = 16 / sizeof(T);
            // Vectors where every vector of a head stays inside one part (rotated halves, pass-through) and aligned.
            bool const vectorized = (isNeox ? rotaryDim / 2 : rotaryDim) % kVEC == 0 && headDim % kVEC == 0
                                    && isAligned(x, 16) && isAligned(y, 16);
            auto run = [&](auto const* pos) -> cudaError_t
            {
                using P = std::remove_cv_t<std::remove_pointer_t<decltype(pos)>>;
                auto const* in = static_cast<T const*>(x);
                auto* out = static_cast<T*>(y);
                return vectorized ? launchRotary<T, P, kVEC>(in, pos, cache, out, tokens, heads, headDim, rotaryDim,
                                        maxPosition, isNeox, stream)
                                  : launchRotary<T, P, 1>(in, pos, cache, out, tokens, heads, headDim, rotaryDim,
                                        maxPosition, isNeox, stream);
            };
            return positionsDtype == DType::kINT32 ? run(static_cast<int32_t const*>(positions))
                                                   : run(static_cast<int64_t const*>(positions));
        });
}

} // namespace ttp
