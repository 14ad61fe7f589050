#include "rms_norm.h"
#include "type_utils.cuh"

namespace ttp
{
namespace
{

constexpr int kBlockThreads = 256;
constexpr int kWarpsPerBlock = 8;

// Per-thread register cache, in vectors, for the block-per-row tactic. A row of up to
// kMaxCachedVectors * kBlockThreads vectors is read from memory once; longer rows take two passes.
constexpr int kMaxCachedVectors = 16;

template <typename T, int VEC>
__device__ __forceinline__ float sumSquares(Vec<T, VEC> const& v)
{
    float s = 0.F;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
    {
        float const f = toFloat(v.v[k]);
        s += f * f;
    }
    return s;
}

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> scaleVec(Vec<T, VEC> const& x, Vec<T, VEC> const& w, float scale)
{
    Vec<T, VEC> out;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
    {
        out.v[k] = fromFloat<T>(toFloat(x.v[k]) * scale * toFloat(w.v[k]));
    }
    return out;
}

// One warp per row: no shared memory, no block barrier; best when a row is a few hundred elements.
template <typename T, int VEC>
__global__ void rmsNormWarpKernel(
    T const* __restrict__ x, T const* __restrict__ w, T* __restrict__ y, int64_t rows, int64_t hidden, float eps)
{
    using V = Vec<T, VEC>;
    int const lane = threadIdx.x % kWarpSize;
    int64_t const nvec = hidden / VEC;
    V const* wv = reinterpret_cast<V const*>(w);
    for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize; row < rows;
         row += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock)
    {
        V const* xv = reinterpret_cast<V const*>(x + row * hidden);
        V* yv = reinterpret_cast<V*>(y + row * hidden);
        float s = 0.F;
        for (int64_t i = lane; i < nvec; i += kWarpSize)
        {
            s += sumSquares(xv[i]);
        }
        s = warpSum(s);
        float const scale = rsqrtf(s / static_cast<float>(hidden) + eps);
        for (int64_t i = lane; i < nvec; i += kWarpSize)
        {
            yv[i] = scaleVec(xv[i], wv[i], scale);
        }
    }
}

// One block per row. CACHED > 0 keeps the row in registers between the reduction and the write.
template <typename T, int VEC, int CACHED>
__global__ void __launch_bounds__(kBlockThreads) rmsNormBlockKernel(
    T const* __restrict__ x, T const* __restrict__ w, T* __restrict__ y, int64_t rows, int64_t hidden, float eps)
{
    using V = Vec<T, VEC>;
    __shared__ float partial[kBlockThreads / kWarpSize];
    int64_t const nvec = hidden / VEC;
    V const* wv = reinterpret_cast<V const*>(w);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)
    {
        V const* xv = reinterpret_cast<V const*>(x + row * hidden);
        V* yv = reinterpret_cast<V*>(y + row * hidden);
        float s = 0.F;
        if constexpr (CACHED > 0)
        {
            V cache[CACHED];
#pragma unroll
            for (int k = 0; k < CACHED; ++k)
            {
                int64_t const i = threadIdx.x + static_cast<int64_t>(k) * kBlockThreads;
                if (i < nvec)
                {
                    cache[k] = xv[i];
                    s += sumSquares(cache[k]);
                }
            }
            float const scale = rsqrtf(blockSum<kBlockThreads>(s, partial) / static_cast<float>(hidden) + eps);
#pragma unroll
            for (int k = 0; k < CACHED; ++k)
            {
                int64_t const i = threadIdx.x + static_cast<int64_t>(k) * kBlockThreads;
                if (i < nvec)
                {
                    yv[i] = scaleVec(cache[k], wv[i], scale);
                }
            }
        }
        else
        {
            for (int64_t i = threadIdx.x; i < nvec; i += kBlockThreads)
            {
                s += sumSquares(xv[i]);
            }
            float const scale = rsqrtf(blockSum<kBlockThreads>(s, partial) / static_cast<float>(hidden) + eps);
            for (int64_t i = threadIdx.x; i < nvec; i += kBlockThreads)
            {
                yv[i] = scaleVec(xv[i], wv[i], scale);
            }
        }
    }
}

template <typename T, int VEC>
cudaError_t launchWarp(
    T const* x, T const* w, T* y, int64_t rows, int64_t hidden, float eps, int maxBlocks, cudaStream_t stream)
{
    int64_t const blocks = std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, maxBlocks);
    rmsNormWarpKernel<T, VEC>
        <<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarpSize, 0, stream>>>(x, w, y, rows, hidden, eps);
    return cudaGetLastError();
}

template <typename T, int VEC, int CACHED>
cudaError_t launchBlockCached(
    T const* x, T const* w, T* y, int64_t rows, int64_t hidden, float eps, int maxBlocks, cudaStream_t stream)
{
    int64_t const blocks = std::min<int64_t>(rows, maxBlocks);
    rmsNormBlockKernel<T, VEC, CACHED>
        <<<static_cast<unsigned>(blocks), kBlockThreads, 0, stream>>>(x, w, y, rows, hidden, eps);
    return cudaGetLastError();
}

template <typename T, int VEC>
cudaError_t launchBlock(
    T const* x, T const* w, T* y, int64_t rows, int64_t hidden, float eps, int maxBlocks, cudaStream_t stream)
{
    int64_t const perThread = (hidden / VEC + kBlockThreads - 1) / kBlockThreads;
    if constexpr (VEC > 1)
    {
        if (perThread <= 1)
            return launchBlockCached<T, VEC, 1>(x, w, y, rows, hidden, eps, maxBlocks, stream);
        if (perThread <= 2)
            return launchBlockCached<T, VEC, 2>(x, w, y, rows, hidden, eps, maxBlocks, stream);
        if (perThread <= 4)
            return launchBlockCached<T, VEC, 4>(x, w, y, rows, hidden, eps, maxBlocks, stream);
        if (perThread <= 8)
            return launchBlockCached<T, VEC, 8>(x, w, y, rows, hidden, eps, maxBlocks, stream);
        if (perThread <= kMaxCachedVectors)
            return launchBlockCached<T, VEC, kMaxCachedVectors>(x, w, y, rows, hidden, eps, maxBlocks, stream);
    }
    return launchBlockCached<T, VEC, 0>(x, w, y, rows, hidden, eps, maxBlocks, stream);
}

template <typename T>
cudaError_t dispatch(void const* x, void const* w, void* y, int64_t rows, int64_t hidden, float eps,
    RmsNormTactic tactic, cudaStream_t stream)
{
    constexpr int kVec = 16 / sizeof(T);
    auto const* xt = static_cast<T const*>(x);
    auto const* wt = static_cast<T const*>(w);
    auto* yt = static_cast<T*>(y);
    int maxBlocks = 0;
    if (cudaError_t err = maxResidentBlocks(&maxBlocks); err != cudaSuccess)
    {
        return err;
    }
    bool const vectorized = hidden % kVec == 0 && isAligned(x, 16) && isAligned(w, 16) && isAligned(y, 16);
    if (tactic == RmsNormTactic::kWARP_PER_ROW)
    {
        return vectorized ? launchWarp<T, kVec>(xt, wt, yt, rows, hidden, eps, maxBlocks, stream)
                          : launchWarp<T, 1>(xt, wt, yt, rows, hidden, eps, maxBlocks, stream);
    }
    return vectorized ? launchBlock<T, kVec>(xt, wt, yt, rows, hidden, eps, maxBlocks, stream)
                      : launchBlock<T, 1>(xt, wt, yt, rows, hidden, eps, maxBlocks, stream);
}

} // namespace

RmsNormTactic rmsNormHeuristic(int64_t /*rows*/, int64_t hidden, DType dtype)
{
    // A warp moves 512 bytes per vector load; past a few of those per row a whole block keeps more
    // loads in flight per row and wins.
    return hidden * dtypeSize(dtype) <= 2048 ? RmsNormTactic::kWARP_PER_ROW : RmsNormTactic::kBLOCK_PER_ROW;
}

cudaError_t rmsNorm(void const* x, void const* weight, void* y, int64_t rows, int64_t hidden, float eps, DType dtype,
    RmsNormTactic tactic, cudaStream_t stream)
{
    if (rows == 0 || hidden == 0)
    {
        return cudaSuccess;
    }
    if (rows < 0 || hidden < 0 || x == nullptr || weight == nullptr || y == nullptr)
    {
        return cudaErrorInvalidValue;
    }
    if (tactic == RmsNormTactic::kAUTO)
    {
        tactic = rmsNormHeuristic(rows, hidden, dtype);
    }
    if (tactic != RmsNormTactic::kWARP_PER_ROW && tactic != RmsNormTactic::kBLOCK_PER_ROW)
    {
        return cudaErrorInvalidValue;
    }
    switch (dtype)
    {
    case DType::kFLOAT32: return dispatch<float>(x, weight, y, rows, hidden, eps, tactic, stream);
    case DType::kFLOAT16: return dispatch<__half>(x, weight, y, rows, hidden, eps, tactic, stream);
    case DType::kBFLOAT16: return dispatch<__nv_bfloat16>(x, weight, y, rows, hidden, eps, tactic, stream);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace ttp
