#include "norm_two_pass.cuh"
#include "quantize.cuh"
#include "rms_norm.h"

#include <iterator>

namespace ttp
{
namespace
{

constexpr int kMaxBlockThreads = 256;
constexpr int kWarpsPerBlock = 8;
constexpr int64_t kMaxGridBlocks = 0x7fffffff; // grid-stride loops cover anything beyond

// Launches of at most this many rows are latency-bound (a fraction of one wave).
constexpr int64_t kFewRows = 1024;

// The weight offset is added in fp32: (1 + w) formed in a half dtype would round twice (Gemma's norm does not). The
// fp32 result goes to the output through Q (quantize.cuh): rounded to the input's type, or quantized.
template <typename T, int VEC, typename Q>
__device__ __forceinline__ Vec<typename Q::Elem, VEC> normVec(
    Vec<T, VEC> const& x, Vec<T, VEC> const& w, float scale, float weightOffset, Q const& q)
{
    Vec<typename Q::Elem, VEC> out;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
    {
        out.v[k] = q(toFloat(x.v[k]) * scale * (toFloat(w.v[k]) + weightOffset));
    }
    return out;
}

// Rows of at most 32 * C vectors: a group of LANES threads (a whole warp or a slice of one) per row, no shared
// memory, no block barrier. Each lane keeps its C vectors of the weight in registers for the whole launch and
// has U rows in flight (all loads before the first reduction). Every lane of a warp runs the same iterations so
// the group shuffles stay converged even on the last, partial set of rows.
template <typename T, typename Q, int VEC, int LANES, int C, int U, CachePolicy LOAD = CachePolicy::kDEFAULT,
    CachePolicy STORE = CachePolicy::kDEFAULT, int WARPS = kWarpsPerBlock>
__global__ void __launch_bounds__(WARPS* kWarpSize) rmsNormWarpKernel(T const* __restrict__ x, T const* __restrict__ w,
    typename Q::Elem* __restrict__ y, int64_t rows, int64_t hidden, float eps, float weightOffset, Q quant)
{
    // A programmatic dependent launch (few rows) waits here for the previous kernel's writes; otherwise no-ops.
    allowDependents();
    waitForPrerequisites();
    Q const q = quant.ready();
    using V = Vec<T, VEC>;
    using OV = Vec<typename Q::Elem, VEC>;
    constexpr int kGroupsPerWarp = kWarpSize / LANES;
    int const lane = threadIdx.x % LANES;
    int64_t const nvec = hidden / VEC;
    V const* wv = reinterpret_cast<V const*>(w);
    if constexpr (C == 0)
    {
        // Rows of any length: lanes stride over the row, twice (sum, then scale).
        int64_t const warpId = static_cast<int64_t>(blockIdx.x) * WARPS + threadIdx.x / kWarpSize;
        int64_t const stride = static_cast<int64_t>(gridDim.x) * WARPS * kGroupsPerWarp;
        for (int64_t base = warpId * kGroupsPerWarp; base < rows; base += stride)
        {
            int64_t const row = base + (threadIdx.x % kWarpSize) / LANES;
            bool const valid = row < rows;
            V const* xv = reinterpret_cast<V const*>(x + (valid ? row : 0) * hidden);
            OV* yv = reinterpret_cast<OV*>(y + (valid ? row : 0) * hidden);
            float s = 0.F;
            for (int64_t i = lane; valid && i < nvec; i += LANES)
            {
                s += sumSquares(xv[i]);
            }
            float const scale = rsqrtf(groupSum<LANES>(s) / static_cast<float>(hidden) + eps);
            for (int64_t i = lane; valid && i < nvec; i += LANES)
            {
                yv[i] = normVec(xv[i], wv[i], scale, weightOffset, q);
            }
        }
        return;
    }
    constexpr int kC = C > 0 ? C : 1;
    V weight[kC];
#pragma unroll
    for (int c = 0; c < C; ++c)
    {
        int const i = lane + c * LANES;
        if (i < nvec)
        {
            weight[c] = wv[i];
        }
    }
    int64_t const group = (static_cast<int64_t>(blockIdx.x) * WARPS + threadIdx.x / kWarpSize) * kGroupsPerWarp
                          + (threadIdx.x % kWarpSize) / LANES;
    int64_t const groups = static_cast<int64_t>(gridDim.x) * WARPS * kGroupsPerWarp;
    float const invHidden = 1.F / static_cast<float>(hidden);
    // Whole warps leave together: the bound is the warp's first group's, so no lane skips a shuffle.
    int64_t const warpFirstGroup = group - (threadIdx.x % kWarpSize) / LANES;
    for (int64_t base = group, warpBase = warpFirstGroup; warpBase < rows; base += groups * U, warpBase += groups * U)
    {
        V cache[U][kC];
        float s[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
        {
            int64_t const row = base + u * groups;
            s[u] = 0.F;
#pragma unroll
            for (int c = 0; c < C; ++c)
            {
                int const i = lane + c * LANES;
                if (row < rows && i < nvec)
                {
                    cache[u][c] = loadVec<LOAD>(reinterpret_cast<V const*>(x + row * hidden) + i);
                    s[u] += sumSquares(cache[u][c]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
        {
            int64_t const row = base + u * groups;
            float const scale = rsqrtf(groupSum<LANES>(s[u]) * invHidden + eps);
#pragma unroll
            for (int c = 0; c < C; ++c)
            {
                int const i = lane + c * LANES;
                if (row < rows && i < nvec)
                {
                    storeVec<STORE>(reinterpret_cast<OV*>(y + row * hidden) + i,
                        normVec(cache[u][c], weight[c], scale, weightOffset, q));
                }
            }
        }
    }
}

// One block per row. CACHED > 0 keeps the row in registers between the reduction and the write; PREFETCH_W also
// loads the row's weight before the reduction, so that a short launch waits for one memory round trip, not two.
template <typename T, typename Q, int VEC, int CACHED, int BLOCK, bool PREFETCH_W,
    CachePolicy LOAD = CachePolicy::kDEFAULT, CachePolicy STORE = CachePolicy::kDEFAULT>
__global__ void __launch_bounds__(BLOCK) rmsNormBlockKernel(T const* __restrict__ x, T const* __restrict__ w,
    typename Q::Elem* __restrict__ y, int64_t rows, int64_t hidden, float eps, float weightOffset, Q quant)
{
    Q const q = quant.ready();
    using V = Vec<T, VEC>;
    using OV = Vec<typename Q::Elem, VEC>;
    __shared__ float partial[BLOCK / kWarpSize];
    int64_t const nvec = hidden / VEC;
    V const* wv = reinterpret_cast<V const*>(w);
    float const invHidden = 1.F / static_cast<float>(hidden);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)
    {
        V const* xv = reinterpret_cast<V const*>(x + row * hidden);
        OV* yv = reinterpret_cast<OV*>(y + row * hidden);
        float s = 0.F;
        if constexpr (CACHED > 0)
        {
            V cache[CACHED];
            V weight[PREFETCH_W ? CACHED : 1];
#pragma unroll
            for (int k = 0; k < CACHED; ++k)
            {
                int64_t const i = threadIdx.x + static_cast<int64_t>(k) * BLOCK;
                if (i < nvec)
                {
                    cache[k] = loadVec<LOAD>(xv + i);
                    if constexpr (PREFETCH_W)
                    {
                        weight[k] = wv[i];
                    }
                }
            }
#pragma unroll
            for (int k = 0; k < CACHED; ++k)
            {
                if (threadIdx.x + static_cast<int64_t>(k) * BLOCK < nvec)
                {
                    s += sumSquares(cache[k]);
                }
            }
            float const scale = rsqrtf(blockSum<BLOCK>(s, partial) * invHidden + eps);
#pragma unroll
            for (int k = 0; k < CACHED; ++k)
            {
                int64_t const i = threadIdx.x + static_cast<int64_t>(k) * BLOCK;
                if (i < nvec)
                {
                    if constexpr (PREFETCH_W)
                    {
                        storeVec<STORE>(yv + i, normVec(cache[k], weight[k], scale, weightOffset, q));
                    }
                    else
                    {
                        storeVec<STORE>(yv + i, normVec(cache[k], wv[i], scale, weightOffset, q));
                    }
                }
            }
        }
        else
        {
            for (int64_t i = threadIdx.x; i < nvec; i += BLOCK)
            {
                s += sumSquares(xv[i]);
            }
            float const scale = rsqrtf(blockSum<BLOCK>(s, partial) * invHidden + eps);
            for (int64_t i = threadIdx.x; i < nvec; i += BLOCK)
            {
                yv[i] = normVec(xv[i], wv[i], scale, weightOffset, q);
            }
        }
    }
}

// Few rows of at most C * BLOCK vectors: one block per row and nothing else, so the launch is one memory round trip
// (row and weight loaded together), a block reduction with one barrier, and the stores. PDL: launched as a
// programmatic dependent launch (waits for the previous kernel's memory before touching any; lets the next one
// launch at once).
template <typename T, typename Q, int VEC, int C, int BLOCK, bool PDL>
__global__ void __launch_bounds__(BLOCK) rmsNormRowKernel(T const* __restrict__ x, T const* __restrict__ w,
    typename Q::Elem* __restrict__ y, int hidden, float eps, float weightOffset, Q quant)
{
    using V = Vec<T, VEC>;
    using OV = Vec<typename Q::Elem, VEC>;
    constexpr int kWarps = BLOCK / kWarpSize;
    __shared__ float partial[kWarps];
    if constexpr (PDL)
    {
        allowDependents();
        waitForPrerequisites();
    }
    Q const q = quant.ready(); // after the wait: the scale may be the previous kernel's output
    int const nvec = hidden / VEC;
    int64_t const offset = static_cast<int64_t>(blockIdx.x) * hidden;
    V const* xv = reinterpret_cast<V const*>(x + offset);
    V const* wv = reinterpret_cast<V const*>(w);
    V cache[C];
    V weight[C];
#pragma unroll
    for (int k = 0; k < C; ++k)
    {
        int const i = static_cast<int>(threadIdx.x) + k * BLOCK;
        if (i < nvec)
        {
            cache[k] = xv[i];
            weight[k] = wv[i];
        }
    }
    float s = 0.F;
#pragma unroll
    for (int k = 0; k < C; ++k)
    {
        if (static_cast<int>(threadIdx.x) + k * BLOCK < nvec)
        {
            s += sumSquares(cache[k]);
        }
    }
    s = warpSum(s);
    if constexpr (kWarps > 1)
    {
        if (threadIdx.x % kWarpSize == 0)
        {
            partial[threadIdx.x / kWarpSize] = s;
        }
        __syncthreads();
        s = 0.F;
#pragma unroll
        for (int i = 0; i < kWarps; ++i)
        {
            s += partial[i];
        }
    }
    float const scale = rsqrtf(s / static_cast<float>(hidden) + eps);
    OV* yv = reinterpret_cast<OV*>(y + offset);
#pragma unroll
    for (int k = 0; k < C; ++k)
    {
        int const i = static_cast<int>(threadIdx.x) + k * BLOCK;
        if (i < nvec)
        {
            yv[i] = normVec(cache[k], weight[k], scale, weightOffset, q);
        }
    }
}

template <typename T, typename Q, int VEC, int C, int BLOCK, bool PDL>
cudaError_t launchRowConfig(T const* x, T const* w, typename Q::Elem* y, int64_t rows, int64_t hidden, float eps,
    float weightOffset, Q q, cudaStream_t stream)
{
    return launchKernel(rmsNormRowKernel<T, Q, VEC, C, BLOCK, PDL>, dim3(static_cast<unsigned>(rows)), dim3(BLOCK),
        stream, PDL && pdlSupported(), x, w, y, static_cast<int>(hidden), eps, weightOffset, q);
}

// residentPerSm > 0 caps the grid at that many blocks per SM (a persistent grid walks the rest); 0: a block for
// every kRowsPerBlock rows.
template <typename T, typename Q, int VEC, int LANES, int C, int U, CachePolicy LOAD = CachePolicy::kDEFAULT,
    CachePolicy STORE = CachePolicy::kDEFAULT, int WARPS = kWarpsPerBlock>
cudaError_t launchWarpConfig(T const* x, T const* w, typename Q::Elem* y, int64_t rows, int64_t hidden, float eps,
    float weightOffset, Q q, cudaStream_t stream, int residentPerSm = 0)
{
    constexpr int64_t kRowsPerBlock = int64_t{WARPS} * (kWarpSize / LANES) * U;
    int64_t blocks = std::min<int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, kMaxGridBlocks);
    if (residentPerSm > 0)
    {
        int resident = 0;
        if (cudaError_t err = maxResidentBlocks(&resident, residentPerSm); err != cudaSuccess)
        {
            return err;
        }
        blocks = std::min<int64_t>(blocks, resident);
    }
    // Few rows (QK-norm at decode: heads x head_dim): a programmatic dependent launch, as the row kernel's below.
    bool const pdl = rows <= kFewRows && pdlSupported();
    return launchKernel(rmsNormWarpKernel<T, Q, VEC, LANES, C, U, LOAD, STORE, WARPS>,
        dim3(static_cast<unsigned>(blocks)), dim3(WARPS * kWarpSize), stream, pdl, x, w, y, rows, hidden, eps,
        weightOffset, q);
}

template <typename T, typename Q, int VEC>
cudaError_t launchWarp(T const* x, T const* w, typename Q::Elem* y, int64_t rows, int64_t hidden, float eps,
    float weightOffset, Q q, cudaStream_t stream)
{
    // Fewest lanes per row that still give each lane at most one vector (never fewer than 4); longer rows take a
    // whole warp with up to 8 vectors a lane in registers, and beyond that stride over the row twice.
    int64_t const nvec = hidden / VEC;
    // Rows in flight per group: 2 for groups of up to 8 lanes, 1 above (kernel lab at bf45c72, H100: 1000000x64 bf16
    // 118% of copy with 2 vs 106% with 4; 100000x128 bf16 115% with 1 vs 101% with 4). x is read once, so its lines go
    // first when L2 must evict (peer lab, H100, 100000x128 bf16 in the graph timer: 16.4 us vs 19.7 with the
    // default policy; inductor 17.3, Liger 17.8).
    constexpr CachePolicy kX = CachePolicy::kEVICT_FIRST;
    constexpr CachePolicy kY = CachePolicy::kDEFAULT;
    if (nvec <= 4)
        return launchWarpConfig<T, Q, VEC, 4, 1, 2, kX, kY>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
    if (nvec <= 8)
        return launchWarpConfig<T, Q, VEC, 8, 1, 2, kX, kY>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
    if (nvec <= 16)
        return launchWarpConfig<T, Q, VEC, 16, 1, 1, kX, kY>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
    if (nvec <= kWarpSize)
        return launchWarpConfig<T, Q, VEC, kWarpSize, 1, 1, kX, kY>(
            x, w, y, rows, hidden, eps, weightOffset, q, stream);
    if (nvec <= 2 * kWarpSize)
        return launchWarpConfig<T, Q, VEC, kWarpSize, 2, 1, kX, kY>(
            x, w, y, rows, hidden, eps, weightOffset, q, stream);
    if (nvec <= 4 * kWarpSize)
        return launchWarpConfig<T, Q, VEC, kWarpSize, 4, 1, kX, kY>(
            x, w, y, rows, hidden, eps, weightOffset, q, stream);
    if (nvec <= 8 * kWarpSize)
        return launchWarpConfig<T, Q, VEC, kWarpSize, 8, 1, kX, kY>(
            x, w, y, rows, hidden, eps, weightOffset, q, stream);
    return launchWarpConfig<T, Q, VEC, kWarpSize, 0, 1>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
}

template <typename T, typename Q, int VEC, int CACHED, int BLOCK, bool PREFETCH_W,
    CachePolicy LOAD = CachePolicy::kDEFAULT, CachePolicy STORE = CachePolicy::kDEFAULT>
cudaError_t launchBlockConfig(T const* x, T const* w, typename Q::Elem* y, int64_t rows, int64_t hidden, float eps,
    float weightOffset, Q q, cudaStream_t stream)
{
    // One block per row and no cap below the hardware's: the block scheduler balances the tail better
    // than a grid-stride loop over a device-sized grid (measured: +3% of copy rate at 65536x4096).
    int64_t const blocks = std::min<int64_t>(rows, kMaxGridBlocks);
    rmsNormBlockKernel<T, Q, VEC, CACHED, BLOCK, PREFETCH_W, LOAD, STORE>
        <<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(x, w, y, rows, hidden, eps, weightOffset, q);
    return cudaGetLastError();
}

template <typename T, typename Q, int VEC>
cudaError_t launchBlock(T const* x, T const* w, typename Q::Elem* y, int64_t rows, int64_t hidden, float eps,
    float weightOffset, Q q, cudaStream_t stream)
{
    int64_t const nvec = hidden / VEC;
    if constexpr (VEC > 1)
    {
        // One block per row, row and weight loaded together, a one-barrier reduction, launched as a programmatic
        // dependent launch: its launch overlaps the previous kernel's tail. Few rows: the launch is one memory round
        // trip long and its launch latency is as long again (peer lab, H100, graph timer, bf16: 1x4096 1.31 us vs
        // 1.93 without the dependent launch and 2.03 for the block kernel below; Liger 1.91; 128x4096 1.74 vs 2.37;
        // 1024x2048 2.53 vs 3.22; fp32 1x4096 1.39 vs 2.01). Many rows of 257-1536 vectors (the widths measured):
        // the tail of one kernel and the start of the next overlap (peer lab, rounds in rotated order, graph timer:
        // 4096x4096 bf16 23.5 us vs 24.3 for the block kernel; fp32 45.8 vs 47.0; 4096x12288 bf16 68.1 vs 68.6;
        // 65536x4096 level; on the same buffers at six placements, 2.7% faster at fp32 4096x4096, 3.2% at bf16).
        bool const rowKernel = rows <= kMaxGridBlocks && (rows <= kFewRows || (nvec > 256 && nvec <= 1536));
        if (rowKernel)
        {
            if (nvec <= 128)
                return launchRowConfig<T, Q, VEC, 1, 128, true>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
            if (nvec <= 256)
                return launchRowConfig<T, Q, VEC, 2, 128, true>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
            if (nvec <= 512)
                return launchRowConfig<T, Q, VEC, 2, 256, true>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
            if (nvec <= 1024)
                return launchRowConfig<T, Q, VEC, 4, 256, true>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
            if (nvec <= 1536)
                return launchRowConfig<T, Q, VEC, 6, 256, true>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
            if (nvec <= 2048)
                return launchRowConfig<T, Q, VEC, 8, 256, true>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
        }
        // Many rows of up to 256 or more than 1536 vectors: the block kernels, as measured before (weight loaded first:
        // kernel lab at bf45c72, H100, rows of 4096 bf16, 99.5% of copy with, 93% without).
        if (nvec <= 128)
        {
            return launchBlockConfig<T, Q, VEC, 1, 128, true>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
        }
        if (nvec <= 256)
        {
            return launchBlockConfig<T, Q, VEC, 1, 256, true>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
        }
        if (nvec <= 512 * 4)
        {
            return launchBlockConfig<T, Q, VEC, 4, 512, false>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
        }
        if (nvec <= 1024 * 4)
        {
            return launchBlockConfig<T, Q, VEC, 4, 1024, false>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
        }
    }
    return launchBlockConfig<T, Q, VEC, 0, kMaxBlockThreads, false>(
        x, w, y, rows, hidden, eps, weightOffset, q, stream);
}

// rms_norm's row in the two-pass form (norm_two_pass.cuh): thread `lane`'s bases in the row at `offset` elements of
// x and y, in vectors (its vector k at base + k); pass 1 holds x's vectors, pass 2 stores only the norm.
template <typename T, typename Q>
struct RmsTwoPassRow
{
    using V = Vec<T, 16 / sizeof(T)>;
    using OV = Vec<typename Q::Elem, 16 / sizeof(T)>;
    using Loaded = V;
    V const* x;
    V const* w;
    OV* y;
    float weightOffset;
    Q q;

    template <CachePolicy P>
    __device__ __forceinline__ V load(int k) const
    {
        return loadVec<P>(x + k);
    }
    __device__ __forceinline__ V value(V const& v) const
    {
        return v;
    }
    __device__ __forceinline__ void storeValue(int, V const&) const
    {
    }
    __device__ __forceinline__ void storeNorm(int k, V const& h, V const& weight, float scale) const
    {
        y[k] = normVec(h, weight, scale, weightOffset, q);
    }
};

// Tactic 3 for launches whose x exceeds the L2, at the row lengths norm_two_pass.cuh compiles: a block per row, split
// as add_rms_norm's (kTwoPassConfigs, raced for add_rms_norm; not raced for this kernel yet).
template <typename T, typename Q, int BLOCK, int CHUNKS, int MIN_BLOCKS, int AHEAD>
__global__ void __launch_bounds__(BLOCK, (kResidentBlocks<BLOCK, MIN_BLOCKS>))
    rmsNormTwoPassKernel(T const* __restrict__ x, T const* __restrict__ w, typename Q::Elem* __restrict__ y, float eps,
        float weightOffset, Q quant)
{
    using Row = RmsTwoPassRow<T, Q>;
    constexpr int kHidden = BLOCK * CHUNKS * static_cast<int>(16 / sizeof(T));
    __shared__ float partial[BLOCK / kWarpSize];
    allowDependents();
    waitForPrerequisites();
    int64_t const offset = static_cast<int64_t>(blockIdx.x) * kHidden;
    int const lane = static_cast<int>(threadIdx.x);
    Row const row{reinterpret_cast<typename Row::V const*>(x + offset) + lane,
        reinterpret_cast<typename Row::V const*>(w) + lane, reinterpret_cast<typename Row::OV*>(y + offset) + lane,
        weightOffset, quant.ready()};
    twoPassNormRow<BLOCK, CHUNKS, AHEAD, kHidden>(row, eps, partial);
}

template <typename T, typename Q>
struct RmsTwoPassKernels
{
    static constexpr int kElementBytes = sizeof(T);
    using Pointer = void (*)(T const*, T const*, typename Q::Elem*, float, float, Q);
    template <int BLOCK, int CHUNKS, int MIN_BLOCKS, int AHEAD>
    static constexpr Pointer kernel = rmsNormTwoPassKernel<T, Q, BLOCK, CHUNKS, MIN_BLOCKS, AHEAD>;
};

// Rows of at most 1024 elements laid out as inductor's persistent reduction lays them (torch 2.13,
// _persistent_reduction_configs for an inner reduction of R elements, without max-autotune): R of 256-1024, a
// program of 1024 / R rows in one warp; R below 256, programs of up to 32 rows (XBLOCK 1, 8 or 32, autotuned; here
// 32) in two warps. A thread then holds 4 vectors (16-bit) or 8 (fp32) from R = 256, and R / 16 (16-bit) or R / 8
// (fp32) below (a group of lanes per row, U rows in flight), where tactic 1 holds one vector of one row (tactic 2,
// from 1 KiB rows: one vector of a row in a block of 128 threads). Rows of up to maxVectors vectors of
// elementBytes-byte elements take rmsNormWarpKernel with LANES lanes a row, C vectors and U rows a lane, WARPS warps a
// block; ordered by the rows they take.
struct ShortRowConfig
{
    int elementBytes;
    int maxVectors;
    int lanes;
    int c;
    int u;
    int warps;
};

constexpr ShortRowConfig kShortRowConfigs[]
    = {{2, 16, 16, 1, 8, 2}, {2, 32, 32, 1, 4, 1}, {2, 64, 32, 2, 2, 1}, {2, 128, 32, 4, 1, 1}, {4, 16, 16, 1, 8, 2},
        {4, 32, 32, 1, 16, 2}, {4, 64, 32, 2, 4, 1}, {4, 128, 32, 4, 2, 1}, {4, 256, 32, 8, 1, 1}};

// The first configuration from kShortRowConfigs[I] on that holds rows of 16-byte vectors; rows no configuration
// holds (shortRows() keeps them out) take tactic 1's kernels.
template <typename T, typename Q, size_t I = 0>
cudaError_t launchShortRows(T const* x, T const* w, typename Q::Elem* y, int64_t rows, int64_t hidden, float eps,
    float weightOffset, Q q, cudaStream_t stream)
{
    constexpr int kVec = 16 / sizeof(T);
    if constexpr (I < std::size(kShortRowConfigs))
    {
        constexpr ShortRowConfig kConfig = kShortRowConfigs[I];
        if constexpr (kConfig.elementBytes == sizeof(T))
        {
            if (hidden / kVec <= kConfig.maxVectors)
            {
                return launchWarpConfig<T, Q, kVec, kConfig.lanes, kConfig.c, kConfig.u, CachePolicy::kEVICT_FIRST,
                    CachePolicy::kDEFAULT, kConfig.warps>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
            }
        }
        return launchShortRows<T, Q, I + 1>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
    }
    else
    {
        return launchWarp<T, Q, kVec>(x, w, y, rows, hidden, eps, weightOffset, q, stream);
    }
}

// Rows tactic 3 lays out as inductor does (launchShortRows): 16-byte vectors, at least 16 of them, up to 1024
// elements (rows under 16 vectors keep tactic 1's groups of 4-8 lanes).
constexpr bool shortRows(int64_t hidden, int64_t elementBytes)
{
    return hidden % (16 / elementBytes) == 0 && hidden / (16 / elementBytes) >= 16 && hidden <= 1024;
}

// The shortest row the heuristic hands to the two-pass kernels (rmsNormHeuristic says why).
constexpr int64_t kTwoPassRowBytes = 32 * 1024;

// What the heuristic picks among tactics 1 and 2, and what tactic 3 runs where it has no form of its own (data not
// 16-byte aligned, rows neither short nor of a compiled length, launches within the L2).
RmsNormTactic rowTactic(int64_t hidden, int64_t elementBytes)
{
    // Measured on H100: below 1 KiB per row warp groups win; from 1 KiB a
    // whole block per row keeps more loads in flight and wins.
    return hidden * elementBytes < 1024 ? RmsNormTactic::kWARP_PER_ROW : RmsNormTactic::kBLOCK_PER_ROW;
}

template <typename T, typename Q>
cudaError_t dispatch(void const* x, void const* w, void* y, int64_t rows, int64_t hidden, float eps, float weightOffset,
    Q q, RmsNormTactic tactic, cudaStream_t stream)
{
    constexpr int kVec = 16 / sizeof(T);
    auto const* xt = static_cast<T const*>(x);
    auto const* wt = static_cast<T const*>(w);
    auto* yt = static_cast<typename Q::Elem*>(y);
    bool const vectorized
        = hidden % kVec == 0 && isAligned(x, 16) && isAligned(w, 16) && isAligned(y, sizeof(typename Q::Elem) * kVec);
    if (tactic == RmsNormTactic::kLARGE)
    {
        if (vectorized && rows * hidden * static_cast<int64_t>(sizeof(T)) > l2CacheBytes() && rows <= kMaxGridBlocks)
        {
            int block = 0;
            if (auto const kernel = twoPassKernelFor<RmsTwoPassKernels<T, Q>>(hidden / kVec, &block); kernel != nullptr)
            {
                return launchKernel(kernel, dim3(static_cast<unsigned>(rows)), dim3(block), stream, pdlSupported(), xt,
                    wt, yt, eps, weightOffset, q);
            }
        }
        if (vectorized && shortRows(hidden, sizeof(T)))
        {
            return launchShortRows<T, Q>(xt, wt, yt, rows, hidden, eps, weightOffset, q, stream);
        }
        tactic = rowTactic(hidden, sizeof(T));
    }
    if (tactic == RmsNormTactic::kWARP_PER_ROW)
    {
        return vectorized ? launchWarp<T, Q, kVec>(xt, wt, yt, rows, hidden, eps, weightOffset, q, stream)
                          : launchWarp<T, Q, 1>(xt, wt, yt, rows, hidden, eps, weightOffset, q, stream);
    }
    return vectorized ? launchBlock<T, Q, kVec>(xt, wt, yt, rows, hidden, eps, weightOffset, q, stream)
                      : launchBlock<T, Q, 1>(xt, wt, yt, rows, hidden, eps, weightOffset, q, stream);
}

} // namespace

RmsNormTactic rmsNormHeuristic(int64_t rows, int64_t hidden, DType dtype)
{
    // Tactic 3's two-pass form where x is past the L2 and a row holds at least 32 KiB at a compiled length; elsewhere
    // tactics 1 and 2. Measured on the H200 (docs/results.md, rms_norm, 2026-12-02, do_bench % of copy): two-pass
    // wins at fp32 8192 and 12288 (100 against block per row's 97 and 96), ties at 16-bit 8192 (99 / 99), loses at
    // 16-bit 12288 (95 / 98) and at 4096 (bf16 88 / 96, fp32 72 / 97); tactic 3's short-row layout lost to tactics
    // 1 and 2 at every short shape measured (bf16 32768x1024 87 / 103, 100000x128 84 / 106), so 0 never takes it.
    int64_t const elementBytes = dtypeSize(dtype);
    if (hasTwoPassConfig(static_cast<int>(elementBytes), hidden) && hidden * elementBytes >= kTwoPassRowBytes
        && rows * hidden * elementBytes > l2CacheBytes())
    {
        return RmsNormTactic::kLARGE;
    }
    return rowTactic(hidden, elementBytes);
}

namespace
{

// What rmsNorm and rmsNormQuant share: the checks, the tactic, and the kernels for the output Q makes.
template <typename MakeQ>
cudaError_t launchNorm(void const* x, void const* weight, void* y, int64_t rows, int64_t hidden, float eps,
    float weightOffset, DType dtype, RmsNormTactic tactic, cudaStream_t stream, MakeQ&& makeQ)
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
    if (tactic != RmsNormTactic::kWARP_PER_ROW && tactic != RmsNormTactic::kBLOCK_PER_ROW
        && tactic != RmsNormTactic::kLARGE)
    {
        return cudaErrorInvalidValue;
    }
    return withFloatType(dtype,
        [&](auto t)
        {
            using T = decltype(t);
            return makeQ(t,
                [&](auto q) { return dispatch<T>(x, weight, y, rows, hidden, eps, weightOffset, q, tactic, stream); });
        });
}

} // namespace

cudaError_t rmsNorm(void const* x, void const* weight, void* y, int64_t rows, int64_t hidden, float eps,
    float weightOffset, DType dtype, RmsNormTactic tactic, cudaStream_t stream)
{
    return launchNorm(x, weight, y, rows, hidden, eps, weightOffset, dtype, tactic, stream,
        [](auto t, auto&& run) { return run(RoundTo<decltype(t)>{}); });
}

cudaError_t rmsNormQuant(void const* x, void const* weight, float const* scale, void* y, int64_t rows, int64_t hidden,
    float eps, float weightOffset, DType dtype, DType outDtype, RmsNormTactic tactic, cudaStream_t stream)
{
    if (scale == nullptr && rows != 0 && hidden != 0)
    {
        return cudaErrorInvalidValue;
    }
    return launchNorm(x, weight, y, rows, hidden, eps, weightOffset, dtype, tactic, stream,
        [&](auto, auto&& run) -> cudaError_t
        {
            switch (outDtype)
            {
            case DType::kFLOAT8_E4M3: return run(QuantizeFp8E4M3{scale});
            case DType::kINT8: return run(QuantizeInt8{scale});
            default: return cudaErrorInvalidValue;
            }
        });
}

} // namespace ttp
