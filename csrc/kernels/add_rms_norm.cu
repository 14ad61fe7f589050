#include "add_rms_norm.h"
#include "norm_two_pass.cuh"
#include "type_utils.cuh"

#include <iterator>
#include <type_traits>

namespace ttp
{
namespace
{

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> addVec(Vec<T, VEC> const& a, Vec<T, VEC> const& b)
{
    Vec<T, VEC> out;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
    {
        out.v[k] = fromFloat<T>(toFloat(a.v[k]) + toFloat(b.v[k]));
    }
    return out;
}

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> normVec(Vec<T, VEC> const& h, Vec<T, VEC> const& w, float scale)
{
    Vec<T, VEC> out;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
    {
        out.v[k] = fromFloat<T>(toFloat(h.v[k]) * scale * toFloat(w.v[k]));
    }
    return out;
}

// GROUP threads per row (GROUP <= 32: a slice of a warp, shuffles only; GROUP == BLOCK: the whole block), each
// holding C vectors of the row in registers between the sum and the norm: x, residual and weight are read once,
// residual and y written once. Launched as a programmatic dependent launch where the device takes one.
// residual and residualOut may be the same buffer (hence no __restrict__ on them). PREFETCH_W: the weight is loaded
// with the row (one memory round trip) rather than after the sum (fewer registers: wide blocks keep more resident).
// The sum is stored as soon as it is made, so its writes drain during the reduction (kernel lab at bf45c72,
// H100, graph timer: fp32 1024x2048 6.60 against 8.19 us, fp32 128x4096 3.55 against 4.04, bf16 4096x12288 139.0
// against 141.7; within 1% elsewhere).
// STORE: the cache policy of the norm's store, and of the sum's unless SUM_STORE names another; LOAD_X: x's load.
template <typename T, int VEC, int GROUP, int C, int BLOCK, bool PREFETCH_W = true,
    CachePolicy STORE = CachePolicy::kDEFAULT, CachePolicy SUM_STORE = STORE,
    CachePolicy LOAD_X = CachePolicy::kEVICT_FIRST>
__global__ void __launch_bounds__(BLOCK) addRmsNormKernel(T const* __restrict__ x, T const* residual,
    T const* __restrict__ w, T* residualOut, T* __restrict__ y, int64_t rows, int hidden, float eps)
{
    static_assert(GROUP <= kWarpSize || GROUP == BLOCK, "a row is a warp slice or the whole block");
    using V = Vec<T, VEC>;
    __shared__ float partial[BLOCK / kWarpSize];
    allowDependents();
    waitForPrerequisites();
    // An unsigned lane and per-thread bases put vector c of a thread at a constant offset from them: one address
    // per array and immediate offsets, and the compiler then issues the weight's loads first (kernel lab at
    // bf45c72, add_rms_placed, H200, eight placements, docs/results/2026-11-28g/ there: bf16 4096x4096 0.6-1.2% faster
    // than the kernel indexing from the row's base, fp16 0.1-0.4% slower, 16-bit 2048x12288 and 4096x12288 within
    // 0.2%).
    int const lane = static_cast<int>(threadIdx.x % GROUP);
    int64_t const row = static_cast<int64_t>(blockIdx.x) * (BLOCK / GROUP) + threadIdx.x / GROUP;
    bool const valid = GROUP == BLOCK || row < rows; // a block of one row is launched only for rows that exist
    int const nvec = hidden / VEC;
    int64_t const offset = (valid ? row : 0) * hidden;
    V const* xv = reinterpret_cast<V const*>(x + offset) + lane;
    V const* rv = reinterpret_cast<V const*>(residual + offset) + lane;
    V const* wv = reinterpret_cast<V const*>(w) + lane;
    V* ov = reinterpret_cast<V*>(residualOut + offset) + lane;
    V sum[C];
    V weight[C];
    V res[C];
    // Every load before the first store: residualOut may alias residual, so a load after a store could not be
    // moved ahead of it.
#pragma unroll
    for (int c = 0; c < C; ++c)
    {
        int const i = lane + c * GROUP;
        if (valid && i < nvec)
        {
            sum[c] = loadVec<LOAD_X>(xv + c * GROUP);
            res[c] = rv[c * GROUP];
            if constexpr (PREFETCH_W)
            {
                weight[c] = wv[c * GROUP];
            }
        }
    }
    float s = 0.F;
#pragma unroll
    for (int c = 0; c < C; ++c)
    {
        int const i = lane + c * GROUP;
        if (valid && i < nvec)
        {
            sum[c] = addVec(sum[c], res[c]);
            storeVec<SUM_STORE>(ov + c * GROUP, sum[c]);
            s += sumSquares(sum[c]);
        }
    }
    if constexpr (GROUP <= kWarpSize)
    {
        s = groupSum<GROUP>(s);
    }
    else
    {
        s = blockSum<BLOCK>(s, partial);
    }
    float const scale = rsqrtf(s / static_cast<float>(hidden) + eps);
    V* yv = reinterpret_cast<V*>(y + offset) + lane;
#pragma unroll
    for (int c = 0; c < C; ++c)
    {
        int const i = lane + c * GROUP;
        if (valid && i < nvec)
        {
            storeVec<STORE>(yv + c * GROUP, normVec(sum[c], PREFETCH_W ? weight[c] : wv[c * GROUP], scale));
        }
    }
}

// Rows too long for registers: the sum goes to residualOut on the first pass and is read back on the second.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) addRmsNormLongKernel(T const* __restrict__ x, T const* residual,
    T const* __restrict__ w, T* residualOut, T* __restrict__ y, int64_t rows, int64_t hidden, float eps)
{
    __shared__ float partial[BLOCK / kWarpSize];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)
    {
        int64_t const offset = row * hidden;
        float s = 0.F;
        for (int64_t i = threadIdx.x; i < hidden; i += BLOCK)
        {
            T const h = fromFloat<T>(toFloat(x[offset + i]) + toFloat(residual[offset + i]));
            residualOut[offset + i] = h;
            float const f = toFloat(h);
            s += f * f;
        }
        float const scale = rsqrtf(blockSum<BLOCK>(s, partial) / static_cast<float>(hidden) + eps);
        for (int64_t i = threadIdx.x; i < hidden; i += BLOCK)
        {
            y[offset + i] = fromFloat<T>(toFloat(residualOut[offset + i]) * scale * toFloat(w[i]));
        }
    }
}

// add_rms_norm's row in the two-pass form (norm_two_pass.cuh): thread `lane`'s bases in the row at `offset` elements of
// each array, in vectors V (its vector k at base + k); pass 1 holds x's and the residual's vectors, pass 2 stores the
// sum before the norm.
template <typename T>
struct AddRmsTwoPassRow
{
    using V = Vec<T, 16 / sizeof(T)>;
    struct Loaded
    {
        V x;
        V residual;
    };
    V const* x;
    V const* residual;
    V const* w;
    V* residualOut;
    V* y;

    __device__ __forceinline__ AddRmsTwoPassRow(
        T const* xt, T const* rt, T const* wt, T* rot, T* yt, int64_t offset, int lane)
        : x(reinterpret_cast<V const*>(xt + offset) + lane)
        , residual(reinterpret_cast<V const*>(rt + offset) + lane)
        , w(reinterpret_cast<V const*>(wt) + lane)
        , residualOut(reinterpret_cast<V*>(rot + offset) + lane)
        , y(reinterpret_cast<V*>(yt + offset) + lane)
    {
    }
    template <CachePolicy P>
    __device__ __forceinline__ Loaded load(int k) const
    {
        return {loadVec<P>(x + k), loadVec<P>(residual + k)};
    }
    __device__ __forceinline__ V value(Loaded const& l) const
    {
        return addVec(l.x, l.residual);
    }
    __device__ __forceinline__ void storeValue(int k, V const& h) const
    {
        residualOut[k] = h;
    }
    __device__ __forceinline__ void storeNorm(int k, V const& h, V const& weight, float scale) const
    {
        y[k] = normVec(h, weight, scale);
    }
};

// For launches whose writes exceed the L2 (norm_two_pass.cuh): x and the residual are what pass 1 holds.
template <typename T, int BLOCK, int CHUNKS, int MIN_BLOCKS, int AHEAD = 1>
__global__ void __launch_bounds__(BLOCK, (kResidentBlocks<BLOCK, MIN_BLOCKS>)) addRmsNormTwoPassKernel(
    T const* __restrict__ x, T const* residual, T const* __restrict__ w, T* residualOut, T* __restrict__ y, float eps)
{
    constexpr int kHidden = BLOCK * CHUNKS * static_cast<int>(16 / sizeof(T));
    __shared__ float partial[BLOCK / kWarpSize];
    allowDependents();
    waitForPrerequisites();
    AddRmsTwoPassRow<T> const row(
        x, residual, w, residualOut, y, static_cast<int64_t>(blockIdx.x) * kHidden, static_cast<int>(threadIdx.x));
    twoPassNormRow<BLOCK, CHUNKS, AHEAD, kHidden>(row, eps, partial);
}

// How a launch asks L2 to treat its lines (16-byte vectors only): x is read once, the norm is read by the next
// kernel, the sum by the next residual add, after the layer's GEMMs.
enum class CacheHints
{
    kDEFAULT,  // x read evict-first, both stores with the default policy
    kKEEP_SUM, // the writes fit in an eighth of the L2: x read evict-first, the sum stored evict-last
    kLARGE,    // the writes exceed the L2: x read with the default policy, the sum stored evict-last, the norm
               // evict-first
};

// kKEEP_SUM: the sum is the residual stream, read again by the next residual add after the layer's GEMMs have
// streamed their weights through the L2; written with the default policy it is gone by then (ncu, H200, compiled
// decoder block 1x128x2048: that add read 524 KB from DRAM, 0-3 KB with the sum kept). Compiled block with our pass
// against inductor alone, three processes each on one lease (docs/results/2026-11-28d/ at bf45c72): 0.9932-0.9936 with
// it, 1.0000-1.0039 without; add_rms_norm alone at 1-128 x 4096 3-7% faster.

// kLARGE: the kernel lab's peers_lab.py add_rms (H200, graph timer, beside Liger and inductor in one process; lab
// and logs at bf45c72, docs/results/2026-11-28e/): against x read evict-first with both stores evict-first, 3-4.5%
// faster at 4096x12288 and 4096x4096 in every dtype (bf16 4096x12288 98.7 against 101.7 us, Liger 98.7). Reading x
// evict-first cost 1-2%; storing the sum evict-first rather than evict-last 1.5-4%; the norm's policy moved it by under
// 1%. A GEMM reading the norm right after (4096x12288 @ 12288x1024 bf16) ran no slower for the sum kept. (Those rows
// take addRmsNormTwoPassKernel; kLARGE serves launches past the L2 at other row lengths.) The hints of a launch writing
// `writes` bytes (the sum and the norm) on a device of `l2` bytes of L2.
inline CacheHints hintsFor(int64_t writes, int64_t l2)
{
    return writes > l2 ? CacheHints::kLARGE : fitsL2Share(writes, l2) ? CacheHints::kKEEP_SUM : CacheHints::kDEFAULT;
}

template <typename T, int VEC, int GROUP, int C, int BLOCK, bool PREFETCH_W = true>
cudaError_t launchConfig(T const* x, T const* r, T const* w, T* ro, T* y, int64_t rows, int64_t hidden, float eps,
    CacheHints hints, cudaStream_t stream)
{
    constexpr int64_t kRowsPerBlock = BLOCK / GROUP;
    int64_t const blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    if (blocks > 0x7fffffff)
    {
        return cudaErrorInvalidConfiguration;
    }
    auto* kernel = addRmsNormKernel<T, VEC, GROUP, C, BLOCK, PREFETCH_W>;
    if constexpr (sizeof(T) * VEC == 16) // narrower accesses take the default policy whatever is asked
    {
        if (hints == CacheHints::kLARGE)
        {
            kernel = addRmsNormKernel<T, VEC, GROUP, C, BLOCK, PREFETCH_W, CachePolicy::kEVICT_FIRST,
                CachePolicy::kEVICT_LAST, CachePolicy::kDEFAULT>;
        }
        else if (hints == CacheHints::kKEEP_SUM)
        {
            kernel = addRmsNormKernel<T, VEC, GROUP, C, BLOCK, PREFETCH_W, CachePolicy::kDEFAULT,
                CachePolicy::kEVICT_LAST>;
        }
    }
    return launchKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(BLOCK), stream, pdlSupported(), x, r, w, ro,
        y, rows, static_cast<int>(hidden), eps);
}

// GROUP threads per row, C vectors each, BLOCK threads per block: rows of up to GROUP * C vectors.
struct RowConfig
{
    int group;
    int c;
    int block;
    bool lateWeightBf16 = false; // bf16 with many rows: the weight loaded after the sum (PREFETCH_W false)
    int onlyElementBytes = 0;    // taken only by 16-byte vectors of elements of this size (0: by every launch)
    bool onlyManyRows = false;   // taken only by launches of at least kManyRows rows
};

// Rows from which a launch is bandwidth-bound rather than latency-bound (the weight may then come late).
constexpr int64_t kManyRows = 1024;

// Short rows share a warp; longer ones take a block whose threads hold 1-4 vectors each, the block sized so that
// they hold about as many as the row has: vector slots a thread keeps but the row does not fill cost bandwidth, most
// in bf16 (kernel lab at bf45c72, add_rms_lab.cu, H100, graph timer, % of a copy of the same bytes: bf16 4096x12288
// 94.4% with 512 threads x 3 against 72.7% with 512 x 4; 2048x16384 83.0% with 1024 x 2 against 76.5% with 512 x 4;
// 1024x2048 144% with 256 x 1 against 130% with 128 x 2; fp32 4096x12288 97.2% with 1024 x 3 against 90.0% with
// 1024 x 4). In bf16 with many rows, 2 vectors per thread in blocks of 512-1024 keep more blocks resident with the
// weight loaded after the sum (4096x8192 97.2% against 93.3%, 2048x16384 93.7% against 82.7%); few rows and the other
// dtypes lose with it (1x4096 bf16 46% against 58%). float32 rows of 2049-3072 vectors take 512 threads x 6 (Liger's
// split; benchmarks' graph timer, H100: 2048x12288 136.7 against 138.0 us with 1024 x 3, 4096x12288 270.3 against
// 271.2, 4096x10240 227.6 against 229.0; 384 x 8 and 512 x 6 with the weight loaded late measured between the two).
// 16-bit rows of 257-512 vectors take 128 x 4, and float32 rows of 769-1024 vectors 1024 x 1 where there are many
// (kernel lab at bf45c72, add_rms, H200, kLARGE hints, / the faster of Liger and inductor at 4096x4096: bf16 1.001
// and 1.005 against 1.005 and 1.003 with 256 x 2 in two runs, fp16 1.013 and 0.996 against 1.015 and 1.012, fp32 0.996
// against 1.005 with 512 x 2; the benchmark at 128x4096 fp32: 1024 x 1 took 3.42 us, 7% behind Liger). Ordered by the
// rows they take.
constexpr RowConfig kRowConfigs[]
    = {{4, 1, 256}, {8, 1, 256}, {16, 1, 256}, {32, 1, 256}, {32, 2, 256}, {128, 1, 128}, {256, 1, 256},
        {128, 4, 128, false, 2}, {256, 2, 256}, {256, 3, 256}, {1024, 1, 1024, false, 4, true}, {512, 2, 512, true},
        {512, 3, 512}, {1024, 2, 1024, true}, {512, 6, 512, false, 4}, {1024, 3, 1024}, {1024, 4, 1024}};

// The first configuration from kRowConfigs[I] on that holds the row; past the last, addRmsNormLongKernel.
template <typename T, int VEC, size_t I = 0>
cudaError_t launch(T const* x, T const* r, T const* w, T* ro, T* y, int64_t rows, int64_t hidden, float eps,
    CacheHints hints, cudaStream_t stream)
{
    if constexpr (I < std::size(kRowConfigs))
    {
        constexpr RowConfig kConfig = kRowConfigs[I];
        if constexpr (kConfig.onlyElementBytes != 0 && (kConfig.onlyElementBytes != sizeof(T) || VEC * sizeof(T) != 16))
        {
            return launch<T, VEC, I + 1>(x, r, w, ro, y, rows, hidden, eps, hints, stream);
        }
        else if (hidden / VEC <= kConfig.group * kConfig.c && (!kConfig.onlyManyRows || rows >= kManyRows))
        {
            if constexpr (kConfig.lateWeightBf16 && std::is_same_v<T, __nv_bfloat16>)
            {
                if (rows >= kManyRows)
                {
                    return launchConfig<T, VEC, kConfig.group, kConfig.c, kConfig.block, false>(
                        x, r, w, ro, y, rows, hidden, eps, hints, stream);
                }
            }
            return launchConfig<T, VEC, kConfig.group, kConfig.c, kConfig.block>(
                x, r, w, ro, y, rows, hidden, eps, hints, stream);
        }
        return launch<T, VEC, I + 1>(x, r, w, ro, y, rows, hidden, eps, hints, stream);
    }
    else
    {
        int resident = 0;
        if (cudaError_t err = maxResidentBlocks(&resident, 4); err != cudaSuccess)
        {
            return err;
        }
        addRmsNormLongKernel<T, 512><<<static_cast<unsigned>(std::min<int64_t>(rows, resident)), 512, 0, stream>>>(
            x, r, w, ro, y, rows, hidden, eps);
        return cudaGetLastError();
    }
}

// Rows of a two-pass configuration (norm_two_pass.cuh), in launches writing more than the L2, take
// addRmsNormTwoPassKernel (kernel lab at bf45c72, add_rms_placed, H200, graph timer, two placements,
// docs/results/2026-11-28i/ there, speed against the launch before it, inductor's beside it; before: the register
// kernel, or at 16-bit 16384x8192 and 65536x4096 a two-pass kernel looping over a run-time row length): bf16
// 32768x16384 1.028-1.030 (inductor 1.032), fp16 1.013-1.017 (1.012-1.020), fp32 1.032-1.033 (1.007-1.012);
// 16384x8192 bf16 1.025-1.027 (1.004-1.005), fp16 1.000-1.001 (0.998), fp32 1.006-1.009 (1.010-1.012); 65536x4096
// bf16 1.003-1.007 (1.002-1.004), fp16 1.012-1.016 (1.005-1.010), fp32 1.027-1.034 (1.007-1.011); 4096x4096 bf16
// 1.018-1.026, fp16 1.028-1.029, fp32 1.001-1.015; 4096x12288 bf16 1.025-1.031, fp16 1.024-1.027, fp32 1.021-1.033;
// 2048x12288 16-bit 1.001-1.013.
template <typename T>
struct AddRmsTwoPassKernels
{
    static constexpr int kElementBytes = sizeof(T);
    using Pointer = void (*)(T const*, T const*, T const*, T*, T*, float);
    template <int BLOCK, int CHUNKS, int MIN_BLOCKS, int AHEAD>
    static constexpr Pointer kernel = addRmsNormTwoPassKernel<T, BLOCK, CHUNKS, MIN_BLOCKS, AHEAD>;
};

template <typename T>
cudaError_t dispatch(void const* x, void const* r, void const* w, void* ro, void* y, int64_t rows, int64_t hidden,
    float eps, cudaStream_t stream)
{
    constexpr int kVec = 16 / sizeof(T);
    auto const* xt = static_cast<T const*>(x);
    auto const* rt = static_cast<T const*>(r);
    auto const* wt = static_cast<T const*>(w);
    auto* rot = static_cast<T*>(ro);
    auto* yt = static_cast<T*>(y);
    bool const vectorized = hidden % kVec == 0 && isAligned(x, 16) && isAligned(r, 16) && isAligned(w, 16)
                            && isAligned(ro, 16) && isAligned(y, 16);
    int64_t const writes = 2 * rows * hidden * static_cast<int64_t>(sizeof(T));
    int64_t const l2 = l2CacheBytes();
    if (vectorized && writes > l2 && rows <= 0x7fffffff)
    {
        int block = 0;
        if (auto const kernel = twoPassKernelFor<AddRmsTwoPassKernels<T>>(hidden / kVec, &block); kernel != nullptr)
        {
            return launchKernel(kernel, dim3(static_cast<unsigned>(rows)), dim3(block), stream, pdlSupported(), xt, rt,
                wt, rot, yt, eps);
        }
    }
    CacheHints const hints = hintsFor(writes, l2);
    return vectorized ? launch<T, kVec>(xt, rt, wt, rot, yt, rows, hidden, eps, hints, stream)
                      : launch<T, 1>(xt, rt, wt, rot, yt, rows, hidden, eps, hints, stream);
}

} // namespace

cudaError_t addRmsNorm(void const* x, void const* residual, void const* weight, void* residualOut, void* y,
    int64_t rows, int64_t hidden, float eps, DType dtype, cudaStream_t stream)
{
    if (rows == 0 || hidden == 0)
    {
        return cudaSuccess;
    }
    if (rows < 0 || hidden < 0 || hidden > 0x7fffffff || x == nullptr || residual == nullptr || weight == nullptr
        || residualOut == nullptr || y == nullptr)
    {
        return cudaErrorInvalidValue;
    }
    return withFloatType(dtype,
        [&](auto t) { return dispatch<decltype(t)>(x, residual, weight, residualOut, y, rows, hidden, eps, stream); });
}

} // namespace ttp
