// rotary_embedding (NeoX, rotary_dim = head_dim, int64 positions drawn from [0, 32768), the benchmark's table) timed
// against a copy of the same bytes, as CUDA graphs of 20 calls on the same buffers (the benchmarks' graph timer), per
// dtype and shape: the production launcher ("auto", and its kernel without PDL or with one block per 256 items) beside
// candidate kernels, each checked against auto's output (at most 1 ulp apart: "ok").
//   pair  bB hH : a thread rotates B bytes of both halves of H heads of one token (heads g, g + G, ...: a warp's loads
//                 stay whole 128-byte lines), one position and one cos/sin row (B/sizeof(T) floats each, 16-byte loads)
//                 per thread, kept in registers for its H heads; one token per blockDim.x threads, no index division
//                 in a loop; x loads issued right after the position load, before the row's (ptxas does so whatever the
//                 PTX order; it also issues a second head's loads only after the first head's math: hence async).
//   sincos bB   : few tokens: no table; the row computed in the block (bit for bit the table's) while x is in flight.
//   async       : x through cp.async.cg into shared memory: all 2H vectors of a thread in flight before any wait.
//   shfl  bB hH : a thread loads B contiguous bytes of a head (a warp's loads: whole contiguous heads), the partner
//                 half arrives from lane ^ chunks by shuffle.
//   knobs       : ld-nc / ld-cs (evict-first, production) / ld-na (L1::no_allocate) / ld-na256 (+ L2::256B prefetch) /
//                 ld-naef (+ L2::evict_first); st-wb (default) / stores evict-first (st.global.cs, default here);
//                 trig-early (griddepcontrol.launch_dependents at the start, not the end: the next call's blocks
//                 launch early and wait in griddepcontrol.wait, which still waits for this grid to finish and flush);
//                 nopdl; splitN (a token's heads over N blocks); bN (threads per block); capN (grid-stride, N blocks
//                 per SM).
//   nvcc -std=c++17 -O3 -arch=sm_90 scripts/kernel_lab/rotary_lab.cu -o /tmp/rotary_lab && /tmp/rotary_lab
#include "../../csrc/kernels/rotary_embedding.cu"
#include "graph_timer.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace
{
using ttp::allowDependents;
using ttp::fromFloat;
using ttp::toFloat;
using ttp::waitForPrerequisites;

constexpr int kMAX_POSITION = 32768;
constexpr double kBASE = 500000.0;

// ---- loads and stores as ordered asm (volatile asm keeps the issue order the kernel states) ----

enum Ld
{
    kLD_NC,
    kLD_CS,
    kLD_NA,
    kLD_NA256,
    kLD_NAEF,
};

enum St
{
    kST_WB,
    kST_CS,
};

#define LAB_LD_POLICY(M)                                                                                               \
    if constexpr (LD == kLD_NC)                                                                                        \
    {                                                                                                                  \
        M(".nc");                                                                                                      \
    }                                                                                                                  \
    else if constexpr (LD == kLD_CS)                                                                                   \
    {                                                                                                                  \
        M(".cs");                                                                                                      \
    }                                                                                                                  \
    else if constexpr (LD == kLD_NA)                                                                                   \
    {                                                                                                                  \
        M(".nc.L1::no_allocate");                                                                                      \
    }                                                                                                                  \
    else if constexpr (LD == kLD_NA256)                                                                                \
    {                                                                                                                  \
        M(".nc.L1::no_allocate.L2::256B");                                                                             \
    }                                                                                                                  \
    else /* kLD_NAEF: 16-byte loads take the L2 hint through a cache policy (ldRaw(uint4&)), others no_allocate */     \
    {                                                                                                                  \
        M(".nc.L1::no_allocate");                                                                                      \
    }

template <int LD>
__device__ __forceinline__ void ldRaw(uint4& r, void const* p)
{
#define LAB_V4(Q)                                                                                                      \
    asm volatile("ld.global" Q ".v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p))
    if constexpr (LD == kLD_NAEF)
    {
        uint64_t policy = 0;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
        asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
            : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
            : "l"(p), "l"(policy));
    }
    else
    {
        LAB_LD_POLICY(LAB_V4)
    }
#undef LAB_V4
}

template <int LD>
__device__ __forceinline__ void ldRaw(uint2& r, void const* p)
{
#define LAB_V2(Q) asm volatile("ld.global" Q ".v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p))
    LAB_LD_POLICY(LAB_V2)
#undef LAB_V2
}

template <int LD>
__device__ __forceinline__ void ldRaw(uint32_t& r, void const* p)
{
#define LAB_V1(Q) asm volatile("ld.global" Q ".u32 %0, [%1];" : "=r"(r) : "l"(p))
    LAB_LD_POLICY(LAB_V1)
#undef LAB_V1
}
#undef LAB_LD_POLICY

template <int ST>
__device__ __forceinline__ void stRaw(void* p, uint4 const& r)
{
    if constexpr (ST == kST_CS)
    {
        asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w)
            : "memory");
    }
    else
    {
        asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w)
            : "memory");
    }
}

template <int ST>
__device__ __forceinline__ void stRaw(void* p, uint2 const& r)
{
    if constexpr (ST == kST_CS)
    {
        asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(r.x), "r"(r.y) : "memory");
    }
    else
    {
        asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(r.x), "r"(r.y) : "memory");
    }
}

template <int ST>
__device__ __forceinline__ void stRaw(void* p, uint32_t const& r)
{
    if constexpr (ST == kST_CS)
    {
        asm volatile("st.global.cs.u32 [%0], %1;" ::"l"(p), "r"(r) : "memory");
    }
    else
    {
        asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(r) : "memory");
    }
}

template <int BYTES>
using Raw = std::conditional_t<BYTES == 16, uint4, std::conditional_t<BYTES == 8, uint2, uint32_t>>;

__device__ __forceinline__ int64_t ldPosition(int64_t const* p, int maxPosition)
{
    int64_t v = 0;
    asm volatile("ld.global.nc.s64 %0, [%1];" : "=l"(v) : "l"(p));
    return v < 0 ? 0 : (v >= maxPosition ? maxPosition - 1 : v);
}

// N consecutive floats of a cache row: 16-byte loads where N allows (the row and j are multiples of 4 here).
template <int N>
__device__ __forceinline__ void ldRow(float const* p, float (&out)[N])
{
    if constexpr (N % 4 == 0)
    {
#pragma unroll
        for (int k = 0; k < N; k += 4)
        {
            asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];"
                : "=f"(out[k]), "=f"(out[k + 1]), "=f"(out[k + 2]), "=f"(out[k + 3])
                : "l"(p + k));
        }
    }
    else if constexpr (N == 2)
    {
        asm volatile("ld.global.nc.v2.f32 {%0, %1}, [%2];" : "=f"(out[0]), "=f"(out[1]) : "l"(p));
    }
    else
    {
        asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(out[0]) : "l"(p));
    }
}

// The production math, term for term: y1 = x1 c - x2 s, y2 = x2 c + x1 s.
template <typename T, int BYTES>
__device__ __forceinline__ void rotatePair(Raw<BYTES>& a, Raw<BYTES>& b, float const* c, float const* s)
{
    constexpr int kVEC = BYTES / sizeof(T);
    T ta[kVEC];
    T tb[kVEC];
    std::memcpy(ta, &a, BYTES);
    std::memcpy(tb, &b, BYTES);
#pragma unroll
    for (int k = 0; k < kVEC; ++k)
    {
        float const x1 = toFloat(ta[k]);
        float const x2 = toFloat(tb[k]);
        ta[k] = fromFloat<T>(x1 * c[k] - x2 * s[k]);
        tb[k] = fromFloat<T>(x2 * c[k] + x1 * s[k]);
    }
    std::memcpy(&a, ta, BYTES);
    std::memcpy(&b, tb, BYTES);
}

// ---- candidate kernels ----

// blockDim = (chunks * heads / gridDim.y / HPT, tokens per block); chunks = rotaryDim / 2 / VEC. ASYNC (16-byte
// vectors, at most kASYNC_THREADS threads): x comes through cp.async into shared memory, so that every load of the
// thread is in flight before the first wait (with register loads, ptxas issues the second head's loads only after the
// first head's math, whatever the PTX order).
constexpr int kASYNC_THREADS = 256;

template <typename T, int BYTES, int HPT, int LD, int ST, bool ASYNC, bool EARLY>
__global__ void pairKernel(T const* __restrict__ x, int64_t const* __restrict__ positions,
    float const* __restrict__ cache, T* __restrict__ y, int tokens, int heads, int headDim, int rotaryDim, int chunks,
    int maxPosition)
{
    constexpr int kVEC = BYTES / sizeof(T);
    int const half = rotaryDim / 2;
    int const l = static_cast<int>(threadIdx.x) % chunks;
    int const g = static_cast<int>(threadIdx.x) / chunks;
    int const headsHere = heads / static_cast<int>(gridDim.y);
    int const groups = headsHere / HPT;
    int const head0 = static_cast<int>(blockIdx.y) * headsHere + g;
    int const j = l * kVEC;
    if constexpr (EARLY)
    {
        allowDependents();
    }
    waitForPrerequisites();
    for (int token = blockIdx.x * blockDim.y + threadIdx.y; token < tokens; token += gridDim.x * blockDim.y)
    {
        int64_t const p = ldPosition(positions + token, maxPosition);
        int64_t const tokenHeads = static_cast<int64_t>(token) * heads + head0;
        Raw<BYTES> a[HPT];
        Raw<BYTES> b[HPT];
        float c[kVEC];
        float s[kVEC];
        float const* row = cache + p * rotaryDim + j;
        if constexpr (ASYNC)
        {
            static_assert(BYTES == 16, "cp.async.cg moves 16 bytes");
            __shared__ uint4 stage[2 * HPT][kASYNC_THREADS];
            int const tid = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
#pragma unroll
            for (int k = 0; k < HPT; ++k)
            {
                T const* at = x + (tokenHeads + k * groups) * headDim + j;
                auto const s0 = static_cast<uint32_t>(__cvta_generic_to_shared(&stage[2 * k][tid]));
                auto const s1 = static_cast<uint32_t>(__cvta_generic_to_shared(&stage[2 * k + 1][tid]));
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s0), "l"(at) : "memory");
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s1), "l"(at + half) : "memory");
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
            ldRow<kVEC>(row, c);
            ldRow<kVEC>(row + half, s);
            asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
            for (int k = 0; k < HPT; ++k)
            {
                a[k] = stage[2 * k][tid];
                b[k] = stage[2 * k + 1][tid];
            }
        }
        else
        {
#pragma unroll
            for (int k = 0; k < HPT; ++k)
            {
                T const* at = x + (tokenHeads + k * groups) * headDim + j;
                ldRaw<LD>(a[k], at);
                ldRaw<LD>(b[k], at + half);
            }
            ldRow<kVEC>(row, c);
            ldRow<kVEC>(row + half, s);
        }
#pragma unroll
        for (int k = 0; k < HPT; ++k)
        {
            rotatePair<T, BYTES>(a[k], b[k], c, s);
            T* at = y + (tokenHeads + k * groups) * headDim + j;
            stRaw<ST>(at, a[k]);
            stRaw<ST>(at + half, b[k]);
        }
    }
    if constexpr (!EARLY)
    {
        allowDependents();
    }
}

// blockDim = (2 * chunks * heads / gridDim.y / HPT, tokens per block), 2 * chunks a power of two <= 32; the token
// loop is uniform over the block (shuffles with the full mask).
template <typename T, int BYTES, int HPT, int LD, int ST, bool EARLY>
__global__ void shflKernel(T const* __restrict__ x, int64_t const* __restrict__ positions,
    float const* __restrict__ cache, T* __restrict__ y, int tokens, int heads, int headDim, int rotaryDim, int chunks,
    int maxPosition)
{
    constexpr int kVEC = BYTES / sizeof(T);
    constexpr int kWORDS = BYTES / 4;
    int const half = rotaryDim / 2;
    int const v = static_cast<int>(threadIdx.x) & (2 * chunks - 1);
    int const g = static_cast<int>(threadIdx.x) / (2 * chunks);
    bool const second = v >= chunks;
    int const j = (second ? v - chunks : v) * kVEC;
    int const headsHere = heads / static_cast<int>(gridDim.y);
    int const groups = headsHere / HPT;
    int const head0 = static_cast<int>(blockIdx.y) * headsHere + g;
    if constexpr (EARLY)
    {
        allowDependents();
    }
    waitForPrerequisites();
    for (int first = blockIdx.x * blockDim.y; first < tokens; first += gridDim.x * blockDim.y)
    {
        int const token = first + static_cast<int>(threadIdx.y);
        bool const valid = token < tokens;
        int64_t const tokenHeads = static_cast<int64_t>(token) * heads + head0;
        uint32_t self[HPT][kWORDS] = {};
        float c[kVEC] = {};
        float s[kVEC] = {};
        if (valid)
        {
            int64_t const p = ldPosition(positions + token, maxPosition);
#pragma unroll
            for (int k = 0; k < HPT; ++k)
            {
                Raw<BYTES> r;
                ldRaw<LD>(r, x + (tokenHeads + k * groups) * headDim + v * kVEC);
                std::memcpy(self[k], &r, BYTES);
            }
            float const* row = cache + p * rotaryDim + j;
            ldRow<kVEC>(row, c);
            ldRow<kVEC>(row + half, s);
        }
#pragma unroll
        for (int k = 0; k < HPT; ++k)
        {
            uint32_t other[kWORDS];
#pragma unroll
            for (int w = 0; w < kWORDS; ++w)
            {
                other[w] = __shfl_xor_sync(0xffffffffU, self[k][w], chunks);
            }
            if (valid)
            {
                Raw<BYTES> a;
                Raw<BYTES> b;
                std::memcpy(&a, second ? other : self[k], BYTES);
                std::memcpy(&b, second ? self[k] : other, BYTES);
                rotatePair<T, BYTES>(a, b, c, s);
                stRaw<ST>(y + (tokenHeads + k * groups) * headDim + v * kVEC, second ? b : a);
            }
        }
    }
    if constexpr (!EARLY)
    {
        allowDependents();
    }
}

// A block per token (and head split); no table: the block's first half threads compute the row as rotaryCacheKernel
// does (bit for bit: inverse frequency from double before griddepcontrol.wait, it is a constant; fp32 angle; cos and
// sin in double, rounded once) into shared memory, while the x loads are in flight: one memory round trip after the
// position instead of two. For few tokens only (every block recomputes its row).
constexpr int kMAX_HALF = 256;

template <typename T, int BYTES, int LD, int ST>
__global__ void sincosKernel(T const* __restrict__ x, int64_t const* __restrict__ positions, T* __restrict__ y,
    int tokens, int heads, int headDim, int rotaryDim, int chunks, int maxPosition, double base)
{
    constexpr int kVEC = BYTES / sizeof(T);
    __shared__ float row[2][kMAX_HALF];
    int const half = rotaryDim / 2;
    int const i = static_cast<int>(threadIdx.x);
    int const l = i % chunks;
    int const head = static_cast<int>(blockIdx.y) * (heads / static_cast<int>(gridDim.y)) + i / chunks;
    int const j = l * kVEC;
    float invFreq = 0.F;
    if (i < half)
    {
        invFreq = static_cast<float>(1.0 / pow(base, static_cast<double>(2 * i) / static_cast<double>(rotaryDim)));
    }
    waitForPrerequisites();
    for (int token = blockIdx.x; token < tokens; token += gridDim.x)
    {
        int64_t const p = ldPosition(positions + token, maxPosition);
        T const* at = x + (static_cast<int64_t>(token) * heads + head) * headDim + j;
        Raw<BYTES> a;
        Raw<BYTES> b;
        ldRaw<LD>(a, at);
        ldRaw<LD>(b, at + half);
        if (i < half)
        {
            float const angle = __fmul_rn(static_cast<float>(p), invFreq);
            row[0][i] = static_cast<float>(cos(static_cast<double>(angle)));
            row[1][i] = static_cast<float>(sin(static_cast<double>(angle)));
        }
        __syncthreads();
        float c[kVEC];
        float s[kVEC];
#pragma unroll
        for (int k = 0; k < kVEC; ++k)
        {
            c[k] = row[0][j + k];
            s[k] = row[1][j + k];
        }
        rotatePair<T, BYTES>(a, b, c, s);
        T* out = y + (static_cast<int64_t>(token) * heads + head) * headDim + j;
        stRaw<ST>(out, a);
        stRaw<ST>(out + half, b);
        __syncthreads();
    }
    allowDependents();
}

// ---- the lab ----

template <typename T>
struct Problem
{
    T const* x;
    int64_t const* positions;
    float const* cache;
    T* y;
    int tokens;
    int heads;
    int headDim;
};

struct Knobs
{
    int block;  // target threads per block
    int hsplit; // blocks sharing one token's heads
    int cap;    // 0: a block per token group; else at most cap blocks per SM, grid-stride
    bool pdl;
};

constexpr Knobs kDEFAULT{256, 1, 0, true};

int smCount()
{
    static int const sms = []
    {
        int device = 0;
        int n = 0;
        check(cudaGetDevice(&device), "device");
        check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "sms");
        return n;
    }();
    return sms;
}

// cudaErrorNotSupported (nothing launched) where the shape does not suit the variant: the variant is skipped.
bool geometry(int tokens, int perToken, int heads, int hpt, Knobs const& k, bool wholeWarps, dim3* grid, dim3* block)
{
    if (heads % k.hsplit != 0 || (heads / k.hsplit) % hpt != 0 || perToken > 1024 || perToken < 1)
    {
        return false;
    }
    int const tpb = std::min(std::max(1, k.block / perToken), tokens);
    if (wholeWarps && (perToken * tpb) % 32 != 0)
    {
        return false;
    }
    int blocks = (tokens + tpb - 1) / tpb;
    if (k.cap > 0)
    {
        blocks = std::min(blocks, smCount() * k.cap);
    }
    *grid = dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(k.hsplit));
    *block = dim3(static_cast<unsigned>(perToken), static_cast<unsigned>(tpb));
    return true;
}

template <typename T, int BYTES, int HPT, int LD = kLD_CS, int ST = kST_CS, bool ASYNC = false, bool EARLY = false>
cudaError_t pair(Problem<T> const& pr, cudaStream_t s, Knobs const& k = kDEFAULT)
{
    constexpr int kVEC = BYTES / sizeof(T);
    int const half = pr.headDim / 2;
    if (kVEC < 1 || half % kVEC != 0)
    {
        return cudaErrorNotSupported;
    }
    int const chunks = half / kVEC;
    dim3 grid;
    dim3 block;
    if (!geometry(pr.tokens, chunks * (pr.heads / k.hsplit) / HPT, pr.heads, HPT, k, false, &grid, &block))
    {
        return cudaErrorNotSupported;
    }
    if (ASYNC && block.x * block.y > kASYNC_THREADS)
    {
        return cudaErrorNotSupported;
    }
    return ttp::launchKernel(&pairKernel<T, BYTES, HPT, LD, ST, ASYNC, EARLY>, grid, block, s, k.pdl, pr.x,
        pr.positions, pr.cache, pr.y, pr.tokens, pr.heads, pr.headDim, pr.headDim, chunks, kMAX_POSITION);
}

template <typename T, int BYTES, int HPT, int LD = kLD_CS, int ST = kST_CS, bool EARLY = false>
cudaError_t shfl(Problem<T> const& pr, cudaStream_t s, Knobs const& k = kDEFAULT)
{
    constexpr int kVEC = BYTES / sizeof(T);
    int const half = pr.headDim / 2;
    int const chunks = kVEC >= 1 && half % kVEC == 0 ? half / kVEC : 0;
    if (chunks == 0 || 2 * chunks > 32 || (chunks & (chunks - 1)) != 0)
    {
        return cudaErrorNotSupported;
    }
    dim3 grid;
    dim3 block;
    if (!geometry(pr.tokens, 2 * chunks * (pr.heads / k.hsplit) / HPT, pr.heads, HPT, k, true, &grid, &block))
    {
        return cudaErrorNotSupported;
    }
    return ttp::launchKernel(&shflKernel<T, BYTES, HPT, LD, ST, EARLY>, grid, block, s, k.pdl, pr.x, pr.positions,
        pr.cache, pr.y, pr.tokens, pr.heads, pr.headDim, pr.headDim, chunks, kMAX_POSITION);
}

template <typename T, int BYTES, int LD = kLD_CS, int ST = kST_CS>
cudaError_t sincosRow(Problem<T> const& pr, cudaStream_t s, Knobs const& k = kDEFAULT)
{
    constexpr int kVEC = BYTES / sizeof(T);
    int const half = pr.headDim / 2;
    int const chunks = kVEC >= 1 && half % kVEC == 0 ? half / kVEC : 0;
    int const perBlock = pr.heads % k.hsplit == 0 ? chunks * (pr.heads / k.hsplit) : 0;
    if (chunks == 0 || perBlock < half || perBlock > 1024 || half > kMAX_HALF)
    {
        return cudaErrorNotSupported;
    }
    return ttp::launchKernel(&sincosKernel<T, BYTES, LD, ST>, dim3(static_cast<unsigned>(pr.tokens), k.hsplit),
        dim3(static_cast<unsigned>(perBlock)), s, k.pdl, pr.x, pr.positions, pr.y, pr.tokens, pr.heads, pr.headDim,
        pr.headDim, chunks, kMAX_POSITION, kBASE);
}

// The production kernel launched as launchRotary does, with PDL chosen here and optionally one block per 256 items
// (no cap, so no partly filled last grid-stride round).
template <typename T>
cudaError_t production(Problem<T> const& pr, cudaStream_t s, bool pdl, bool allItems)
{
    constexpr int kVEC = 16 / sizeof(T);
    int64_t const items = static_cast<int64_t>(pr.tokens) * pr.heads * (pr.headDim / 2 / kVEC);
    int64_t blocks = (items + ttp::kBLOCK - 1) / ttp::kBLOCK;
    if (!allItems)
    {
        blocks = std::min<int64_t>(blocks, smCount() * (2048 / ttp::kBLOCK));
    }
    return ttp::launchKernel(&ttp::rotaryKernel<T, int64_t, kVEC, true>, dim3(static_cast<unsigned>(blocks)),
        dim3(ttp::kBLOCK), s, pdl, pr.x, pr.positions, pr.cache, pr.y, static_cast<int64_t>(pr.tokens),
        static_cast<int64_t>(pr.heads), static_cast<int64_t>(pr.headDim), static_cast<int64_t>(pr.headDim),
        static_cast<int64_t>(kMAX_POSITION));
}

uint32_t hash(uint64_t i)
{
    i ^= i >> 33;
    i *= 0xff51afd7ed558ccdULL;
    i ^= i >> 33;
    i *= 0xc4ceb9fe1a85ec53ULL;
    i ^= i >> 33;
    return static_cast<uint32_t>(i);
}

template <typename T>
__global__ void fillKernel(T* x, int64_t n, uint32_t seed)
{
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
        i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    {
        uint32_t h = static_cast<uint32_t>(i) * 2654435761U + seed;
        h ^= h >> 15;
        h *= 2246822519U;
        h ^= h >> 13;
        x[i] = fromFloat<T>(static_cast<float>(h >> 8) * (4.0F / 16777216.0F) - 2.0F);
    }
}

// Largest distance between a and b in units in the last place (bit patterns as ordered integers).
template <typename T>
__global__ void ulpKernel(T const* a, T const* b, int64_t n, unsigned long long* out)
{
    using U = std::conditional_t<sizeof(T) == 2, uint16_t, uint32_t>;
    constexpr U kSIGN = static_cast<U>(U(1) << (8 * sizeof(T) - 1));
    unsigned long long worst = 0;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
        i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    {
        U ua;
        U ub;
        std::memcpy(&ua, a + i, sizeof(U));
        std::memcpy(&ub, b + i, sizeof(U));
        int64_t const oa = (ua & kSIGN) ? -static_cast<int64_t>(ua & ~kSIGN) : static_cast<int64_t>(ua);
        int64_t const ob = (ub & kSIGN) ? -static_cast<int64_t>(ub & ~kSIGN) : static_cast<int64_t>(ub);
        worst = max(worst, static_cast<unsigned long long>(oa > ob ? oa - ob : ob - oa));
    }
    atomicMax(out, worst);
}

template <typename T>
constexpr ttp::DType kDType = sizeof(T) == 4              ? ttp::DType::kFLOAT32
                              : std::is_same_v<T, __half> ? ttp::DType::kFLOAT16
                                                          : ttp::DType::kBFLOAT16;

using Launch = std::function<cudaError_t(cudaStream_t)>;

template <typename T>
void shape(char const* dtype, int tokens, int heads, int headDim, float const* cache)
{
    int64_t const n = static_cast<int64_t>(tokens) * heads * headDim;
    size_t const bytes = static_cast<size_t>(n) * sizeof(T);
    T* x = nullptr;
    T* y = nullptr;
    T* ref = nullptr;
    int64_t* positions = nullptr;
    unsigned long long* worst = nullptr;
    check(cudaMalloc(&x, bytes), "malloc");
    check(cudaMalloc(&y, bytes), "malloc");
    check(cudaMalloc(&ref, bytes), "malloc");
    check(cudaMalloc(&positions, tokens * sizeof(int64_t)), "malloc");
    check(cudaMalloc(&worst, sizeof(unsigned long long)), "malloc");
    fillKernel<T><<<1024, 256>>>(x, n, 12345U + static_cast<uint32_t>(tokens));
    std::vector<int64_t> hostPositions(tokens);
    for (int t = 0; t < tokens; ++t)
    {
        hostPositions[t] = hash(static_cast<uint64_t>(t) + 77) % kMAX_POSITION;
    }
    check(cudaMemcpy(positions, hostPositions.data(), tokens * sizeof(int64_t), cudaMemcpyHostToDevice), "positions");
    check(cudaDeviceSynchronize(), "fill");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");

    // Copy of the bytes moved (x read, y written, positions read) split into a read and a write.
    size_t const moved = (2 * bytes + tokens * sizeof(int64_t)) / 2;
    void* copyIn = nullptr;
    void* copyOut = nullptr;
    check(cudaMalloc(&copyIn, moved), "malloc");
    check(cudaMalloc(&copyOut, moved), "malloc");
    double const copyUs = graphMicros(
        [&](cudaStream_t s) { return cudaMemcpyAsync(copyOut, copyIn, moved, cudaMemcpyDeviceToDevice, s); });
    cudaFree(copyIn);
    cudaFree(copyOut);

    Problem<T> const pr{x, positions, cache, y, tokens, heads, headDim};
    Launch const autoLaunch = [&](cudaStream_t s)
    {
        return ttp::rotaryEmbedding(x, positions, ttp::DType::kINT64, cache, y, tokens, heads, headDim, headDim,
            kMAX_POSITION, true, kDType<T>, s);
    };
    check(autoLaunch(stream), "auto");
    check(cudaMemcpyAsync(ref, y, bytes, cudaMemcpyDeviceToDevice, stream), "ref");

    bool const tiny = tokens <= 128;
    bool const large = tokens >= 128;
    std::vector<std::pair<std::string, Launch>> variants;
    auto add = [&](bool when, char const* name, Launch fn)
    {
        if (when)
        {
            variants.emplace_back(name, std::move(fn));
        }
    };
    add(true, "auto", autoLaunch);
    add(true, "prod nopdl", [&](cudaStream_t s) { return production(pr, s, false, false); });
    add(true, "prod grid=all", [&](cudaStream_t s) { return production(pr, s, true, true); });
    add(true, "pair b16 h1", [&](cudaStream_t s) { return pair<T, 16, 1>(pr, s); });
    add(true, "pair b16 h2", [&](cudaStream_t s) { return pair<T, 16, 2>(pr, s); });
    add(true, "pair b16 h4", [&](cudaStream_t s) { return pair<T, 16, 4>(pr, s); });
    add(true, "pair b16 h8", [&](cudaStream_t s) { return pair<T, 16, 8>(pr, s); });
    add(true, "pair b16 h1 async", [&](cudaStream_t s) { return pair<T, 16, 1, kLD_CS, kST_CS, true>(pr, s); });
    add(true, "pair b16 h2 async", [&](cudaStream_t s) { return pair<T, 16, 2, kLD_CS, kST_CS, true>(pr, s); });
    add(true, "pair b16 h4 async", [&](cudaStream_t s) { return pair<T, 16, 4, kLD_CS, kST_CS, true>(pr, s); });
    add(true, "pair b16 h1 trig-early",
        [&](cudaStream_t s) { return pair<T, 16, 1, kLD_CS, kST_CS, false, true>(pr, s); });
    add(true, "pair b16 h1 nopdl", [&](cudaStream_t s) { return pair<T, 16, 1>(pr, s, {256, 1, 0, false}); });
    add(true, "shfl b16 h1", [&](cudaStream_t s) { return shfl<T, 16, 1>(pr, s); });
    add(true, "shfl b16 h2", [&](cudaStream_t s) { return shfl<T, 16, 2>(pr, s); });
    add(true, "shfl b16 h4", [&](cudaStream_t s) { return shfl<T, 16, 4>(pr, s); });
    add(true, "shfl b16 h8", [&](cudaStream_t s) { return shfl<T, 16, 8>(pr, s); });
    // (a) few tokens: more, smaller threads; a token over several blocks; the next call launched early.
    add(tiny, "pair b8 h1", [&](cudaStream_t s) { return pair<T, 8, 1>(pr, s); });
    add(tiny, "pair b4 h1", [&](cudaStream_t s) { return pair<T, 4, 1>(pr, s); });
    add(tiny, "pair b8 h1 trig-early",
        [&](cudaStream_t s) { return pair<T, 8, 1, kLD_CS, kST_CS, false, true>(pr, s); });
    add(tiny, "pair b4 h1 trig-early",
        [&](cudaStream_t s) { return pair<T, 4, 1, kLD_CS, kST_CS, false, true>(pr, s); });
    add(tiny, "pair b16 h1 split2", [&](cudaStream_t s) { return pair<T, 16, 1>(pr, s, {256, 2, 0, true}); });
    add(tiny, "pair b16 h1 split4", [&](cudaStream_t s) { return pair<T, 16, 1>(pr, s, {256, 4, 0, true}); });
    add(tiny, "pair b16 h1 split8", [&](cudaStream_t s) { return pair<T, 16, 1>(pr, s, {256, 8, 0, true}); });
    add(tiny, "pair b8 h1 split4 trig-early",
        [&](cudaStream_t s) { return pair<T, 8, 1, kLD_CS, kST_CS, false, true>(pr, s, {256, 4, 0, true}); });
    add(tiny, "pair b16 h1 ld-nc st-wb", [&](cudaStream_t s) { return pair<T, 16, 1, kLD_NC, kST_WB>(pr, s); });
    add(tiny, "sincos b16", [&](cudaStream_t s) { return sincosRow<T, 16>(pr, s); });
    add(tiny, "sincos b8", [&](cudaStream_t s) { return sincosRow<T, 8>(pr, s); });
    add(tiny, "sincos b16 split2", [&](cudaStream_t s) { return sincosRow<T, 16>(pr, s, {256, 2, 0, true}); });
    add(tiny, "sincos b8 split4", [&](cudaStream_t s) { return sincosRow<T, 8>(pr, s, {256, 4, 0, true}); });
    add(tiny, "shfl b8 h1", [&](cudaStream_t s) { return shfl<T, 8, 1>(pr, s); });
    add(tiny, "shfl b8 h1 trig-early", [&](cudaStream_t s) { return shfl<T, 8, 1, kLD_CS, kST_CS, true>(pr, s); });
    // (b) many tokens: cache policies, block size, grid-stride cap, early trigger.
    add(large, "pair b16 h2 ld-nc", [&](cudaStream_t s) { return pair<T, 16, 2, kLD_NC>(pr, s); });
    add(large, "pair b16 h2 ld-na", [&](cudaStream_t s) { return pair<T, 16, 2, kLD_NA>(pr, s); });
    add(large, "pair b16 h2 ld-na256", [&](cudaStream_t s) { return pair<T, 16, 2, kLD_NA256>(pr, s); });
    add(large, "pair b16 h2 ld-naef", [&](cudaStream_t s) { return pair<T, 16, 2, kLD_NAEF>(pr, s); });
    add(large, "pair b16 h2 st-wb", [&](cudaStream_t s) { return pair<T, 16, 2, kLD_CS, kST_WB>(pr, s); });
    add(large, "pair b16 h4 ld-na256", [&](cudaStream_t s) { return pair<T, 16, 4, kLD_NA256>(pr, s); });
    add(large, "pair b16 h2 b128", [&](cudaStream_t s) { return pair<T, 16, 2>(pr, s, {128, 1, 0, true}); });
    add(large, "pair b16 h2 b512", [&](cudaStream_t s) { return pair<T, 16, 2>(pr, s, {512, 1, 0, true}); });
    add(large, "pair b16 h2 cap8", [&](cudaStream_t s) { return pair<T, 16, 2>(pr, s, {256, 1, 8, true}); });
    add(large, "pair b16 h4 cap4", [&](cudaStream_t s) { return pair<T, 16, 4>(pr, s, {256, 1, 4, true}); });
    add(large, "pair b16 h4 async st-wb", [&](cudaStream_t s) { return pair<T, 16, 4, kLD_CS, kST_WB, true>(pr, s); });
    add(large, "pair b16 h2 trig-early",
        [&](cudaStream_t s) { return pair<T, 16, 2, kLD_CS, kST_CS, false, true>(pr, s); });
    add(large, "shfl b16 h4 ld-na256", [&](cudaStream_t s) { return shfl<T, 16, 4, kLD_NA256>(pr, s); });

    for (auto const& [name, fn] : variants)
    {
        // Checked first: y poisoned (NaN), one call, compared with auto's output.
        check(cudaMemsetAsync(y, 0xff, bytes, stream), "poison");
        cudaError_t const err = fn(stream);
        if (err == cudaErrorNotSupported)
        {
            continue;
        }
        check(err, name.c_str());
        check(cudaMemsetAsync(worst, 0, sizeof(unsigned long long), stream), "zero");
        ulpKernel<T><<<1024, 256, 0, stream>>>(ref, y, n, worst);
        unsigned long long ulps = 0;
        check(cudaMemcpyAsync(&ulps, worst, sizeof(ulps), cudaMemcpyDeviceToHost, stream), "ulps");
        check(cudaStreamSynchronize(stream), "check");
        double const us = graphMicros(fn);
        char status[48] = "ok";
        if (ulps > 1)
        {
            std::snprintf(status, sizeof(status), "WRONG (%llu ulp)", ulps);
        }
        std::printf("%-5s %5dx%dx%-4d %-30s %8.2f us  %6.1f%% of copy (copy %.2f us)  %s\n", dtype, tokens, heads,
            headDim, name.c_str(), us, 100.0 * copyUs / us, copyUs, status);
    }
    std::fflush(stdout);
    cudaStreamDestroy(stream);
    cudaFree(x);
    cudaFree(y);
    cudaFree(ref);
    cudaFree(positions);
    cudaFree(worst);
}

template <typename T>
void all(char const* dtype, float const* cache128, float const* cache64, bool checks)
{
    for (int tokens : {1, 4, 128, 4096, 16384})
    {
        shape<T>(dtype, tokens, 32, 128, cache128);
    }
    if (checks)
    {
        for (int tokens : {1, 128, 16384})
        {
            shape<T>(dtype, tokens, 8, 64, cache64);
        }
    }
}
} // namespace

int main()
{
    float* cache128 = nullptr;
    float* cache64 = nullptr;
    check(cudaMalloc(&cache128, ttp::rotaryCacheBytes(kMAX_POSITION, 128)), "malloc");
    check(cudaMalloc(&cache64, ttp::rotaryCacheBytes(kMAX_POSITION, 64)), "malloc");
    check(ttp::rotaryCache(cache128, kMAX_POSITION, 128, kBASE, nullptr), "cache");
    check(ttp::rotaryCache(cache64, kMAX_POSITION, 64, kBASE, nullptr), "cache");
    check(cudaDeviceSynchronize(), "cache");
    all<__nv_bfloat16>("bf16", cache128, cache64, true);
    all<__half>("fp16", cache128, cache64, true);
    all<float>("fp32", cache128, cache64, false);
    cudaFree(cache128);
    cudaFree(cache64);
    return 0;
}
