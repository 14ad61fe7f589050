// The two-pass form of a row norm over rows known when compiled, shared by add_rms_norm and rms_norm: a block per
// row of BLOCK * CHUNKS 16-byte vectors. Pass 1 issues every load of the row at once, keeping the lines in L1, and
// sums the squares (one barrier); pass 2 reads them again from L1, AHEAD chunks at a time, and stores. Only the loads
// are held in registers (MIN_BLOCKS rows per SM bound them), so more rows are resident per SM than with a kernel that
// keeps the row in registers through the reduction; inductor's generated Triton kernel for these norms has the same
// structure (a looped reduction, one row per program, specialized to the row's length).
#pragma once

#include "type_utils.cuh"

#include <cstddef>
#include <iterator>

namespace ttp
{

// Thread slots of an SM of the architecture being compiled, as ptxas (CUDA 13.0) bounds __launch_bounds__'s minimum
// blocks: 2048 on sm_80, 90, 100 and 103, 1024 below sm_80, 1536 on the others (sm_86, 87, 89, 110, 120, 121).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000                   \
    || __CUDA_ARCH__ == 1030
constexpr int kThreadsPerSm = 2048;
#elif __CUDA_ARCH__ < 800
constexpr int kThreadsPerSm = 1024;
#else
constexpr int kThreadsPerSm = 1536;
#endif

// MIN_BLOCKS rows of BLOCK threads per SM, as many as fit where fewer do (ptxas ignores a bound past the SM's slots).
template <int BLOCK, int MIN_BLOCKS>
constexpr int kResidentBlocks = MIN_BLOCKS * BLOCK <= kThreadsPerSm ? MIN_BLOCKS : kThreadsPerSm / BLOCK;

// One row of the two-pass form, through ROW, the op's view of its row at this thread's lane (its vector k of each
// array at k vectors from its bases):
//   ROW::V (the vector type), ROW::Loaded (what pass 1 holds per chunk), ROW::w (the weight's base),
//   template <CachePolicy P> Loaded load(int k): the inputs at vector k;
//   V value(Loaded): the vector whose squares are summed and which is normalized;
//   void storeValue(int k, V): a store pass 2 makes before the norm's (add_rms_norm's sum; nothing for rms_norm);
//   void storeNorm(int k, V value, V weight, float scale).
// AHEAD > 1 issues the loads of that many chunks, the weight's too, before their stores (inductor's order where its
// chunk holds several vectors a thread); AHEAD == 1 loads the weight after storeValue.
template <int BLOCK, int CHUNKS, int AHEAD, int HIDDEN, typename Row>
__device__ __forceinline__ void twoPassNormRow(Row const& row, float eps, float* partial)
{
    using V = typename Row::V;
    typename Row::Loaded a[CHUNKS];
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
    {
        a[c] = row.template load<CachePolicy::kKEEP_L1>(c * BLOCK);
    }
    float s = 0.F;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
    {
        s += sumSquares(row.value(a[c]));
    }
    float const scale = rsqrtf(blockSum<BLOCK, true>(s, partial) / static_cast<float>(HIDDEN) + eps);
    static_assert(CHUNKS % AHEAD == 0, "pass 2 takes AHEAD chunks at a time");
#pragma unroll
    for (int g = 0; g < CHUNKS; g += AHEAD)
    {
        V h[AHEAD];
        V wk[AHEAD];
#pragma unroll
        for (int k = 0; k < AHEAD; ++k)
        {
            h[k] = row.value(row.template load<CachePolicy::kLAST_READ>((g + k) * BLOCK));
            if constexpr (AHEAD > 1)
            {
                wk[k] = loadVec<CachePolicy::kKEEP_L1>(row.w + (g + k) * BLOCK);
            }
        }
#pragma unroll
        for (int k = 0; k < AHEAD; ++k)
        {
            row.storeValue((g + k) * BLOCK, h[k]);
            if constexpr (AHEAD == 1)
            {
                wk[k] = loadVec<CachePolicy::kKEEP_L1>(row.w + (g + k) * BLOCK);
            }
            row.storeNorm((g + k) * BLOCK, h[k], wk[k], scale);
        }
    }
}

// A two-pass kernel's split of a row: elements of elementBytes bytes, BLOCK threads, CHUNKS vectors each,
// MIN_BLOCKS rows per SM, pass 2 AHEAD chunks at a time.
struct TwoPassConfig
{
    int elementBytes;
    int block;
    int chunks;
    int minBlocks;
    int ahead = 1;
};

// The splits, one per compiled row length (4096, 8192, 12288 and 16384 elements), chosen for add_rms_norm (kernel
// lab at bf45c72, add_rms_placed, H200, graph timer, two placements, docs/results/2026-11-28i/ there): the fastest
// raced; forcing every thread slot of an SM costs where the row's loads then exceed the registers (fp32 16384 wide at
// 1024 x 4: 0.924). float32 rows of 8192 take 512 x 4 with pass 2 four chunks ahead at 2 rows an SM, inductor's kernel
// there (2026-11-28i/ahead4_fp32.log, against 1024 x 2: 16384x8192 1.004-1.010, inductor 0.995-0.998 of its speed;
// 4096x8192 1.005-1.009, inductor 0.993-0.994); one row an SM (71 registers) ran at 0.984.
constexpr TwoPassConfig kTwoPassConfigs[] = {{2, 512, 1, 4}, {2, 512, 2, 2}, {2, 768, 2, 1}, {2, 1024, 2, 2},
    {4, 1024, 1, 2}, {4, 512, 4, 2, 4}, {4, 768, 4, 1}, {4, 1024, 4, 1}};

// The two-pass kernel of KERNELS for rows of nvec vectors, and its block size; nullptr where no configuration has
// that length. KERNELS: kElementBytes, Pointer (the kernels' type) and
// template <int BLOCK, int CHUNKS, int MIN_BLOCKS, int AHEAD> static constexpr Pointer kernel (instantiated only for
// the configurations of its element size).
template <typename Kernels, size_t I = 0>
typename Kernels::Pointer twoPassKernelFor(int64_t nvec, int* block)
{
    if constexpr (I < std::size(kTwoPassConfigs))
    {
        constexpr TwoPassConfig kConfig = kTwoPassConfigs[I];
        if constexpr (kConfig.elementBytes == Kernels::kElementBytes)
        {
            if (nvec == kConfig.block * kConfig.chunks)
            {
                *block = kConfig.block;
                return Kernels::template kernel<kConfig.block, kConfig.chunks, kConfig.minBlocks, kConfig.ahead>;
            }
        }
        return twoPassKernelFor<Kernels, I + 1>(nvec, block);
    }
    else
    {
        return nullptr;
    }
}

// Whether rows of `hidden` elements of elementBytes bytes have a two-pass configuration (16-byte vectors).
constexpr bool hasTwoPassConfig(int elementBytes, int64_t hidden)
{
    for (TwoPassConfig const& config : kTwoPassConfigs)
    {
        if (config.elementBytes == elementBytes
            && hidden == int64_t{config.block} * config.chunks * (16 / elementBytes))
        {
            return true;
        }
    }
    return false;
}

} // namespace ttp
