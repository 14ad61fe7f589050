// add_rms_norm lab candidates shared by add_rms_lab.cu and peers_add_rms.cu: 16-byte load and store cache hints
// and the register-resident row kernel (regKernel), one row per block or persistent.
#pragma once

#include "../../csrc/kernels/add_rms_norm.cu"

#include <cstdint>
#include <type_traits>

// ---- issue 24: candidates for the widest rows (./add_rms_lab large) ----------------------------------------------
// Lab-only kernels, 16-byte vectors only (every shape here is a multiple of 8 elements):
//  - regKernel: BLOCK threads per row, C vectors each, the weight in registers. ONE: one block per row (the shipped
//    kernel with its loads' cache hints made choices); STATIC / DYNAMIC: persistent blocks looping over rows (rows
//    blockIdx.x + k * gridDim.x, or taken from a global counter), with PIPE the next row's x and residual loaded
//    before the current row's stores and reduction (two rows' loads in flight per thread).
//  - bulkKernel: persistent blocks whose thread 0 streams the rows' x and residual into shared memory with bulk
//    asynchronous copies (cp.async.bulk, TMA's 1-D form) STAGES rows ahead, completion on an mbarrier; the threads
//    read the row from shared memory and store from registers.
namespace lab
{
using ttp::Vec;

// Load hints (16-byte vectors): kPLAIN what the compiler picks (ld.global.nc where the pointer is const
// __restrict__), kCS ld.global.cs (streaming), kNC ld.global.nc.L1::no_allocate, kNC256 the same with an L2 256-byte
// prefetch, kEF ld.global.nc.L1::no_allocate with an L2 evict_first policy, kEL the same with evict_last, kCOH
// ld.global (the coherent path, as Liger's Triton kernel reads x).
enum class Ld
{
    kPLAIN,
    kCS,
    kNC,
    kNC256,
    kEF,
    kEL,
    kCOH,
    kCOH_EL, // ld.global.L1::no_allocate with an L2 evict_last policy: coherent (for the residual, which the kernel
    kCOH_EF, // overwrites), kCOH_EF the same with evict_first
    kL1_EL,  // ld.global.L1::evict_last with an L2 evict_last policy (what Triton emits for eviction_policy=
    kL1_EF,  // 'evict_last'), kL1_EF the same with evict_first in both
};

// Store hints: kPLAIN st.global, kCS st.global.cs (the norm's store past the L2, CacheHints::kLARGE), kEF
// st.global.L1::no_allocate with an L2 evict_first policy, kNA st.global.L1::no_allocate, kEL st.global.L1::no_allocate
// with an L2 evict_last policy (the shipped keep-sum store).
enum class St
{
    kPLAIN,
    kCS,
    kEF,
    kNA,
    kEL,
};

constexpr char const* name(Ld p)
{
    constexpr char const* kNames[]
        = {"plain", "cs", "nc", "nc256", "ef", "el", "coh", "coh-el", "coh-ef", "l1-el", "l1-ef"};
    return kNames[static_cast<int>(p)];
}
constexpr char const* name(St p)
{
    constexpr char const* kNames[] = {"plain", "cs", "ef", "na", "el"};
    return kNames[static_cast<int>(p)];
}

// An L2 cache policy covering a whole access: evict_last when LAST, else evict_first.
template <bool LAST>
__device__ __forceinline__ uint64_t l2Policy()
{
    uint64_t policy = 0;
    if constexpr (LAST)
    {
        asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    }
    else
    {
        asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    }
    return policy;
}

// A 16-byte load into uint4 r from p: INSTR, an ld with .L2::cache_hint, under the L2 policy evict_last where LAST,
// else evict_first.
#define LAB_LD_HINTED(INSTR, LAST)                                                                                     \
    asm volatile(INSTR ".v4.u32 {%0, %1, %2, %3}, [%4], %5;"                                                           \
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)                                                                   \
        : "l"(p), "l"(l2Policy<(LAST)>()))

template <Ld P, typename V>
__device__ __forceinline__ V ld(V const* p)
{
    static_assert(sizeof(V) == 16, "16-byte vectors");
    if constexpr (P == Ld::kPLAIN)
    {
        return *p;
    }
    else if constexpr (P == Ld::kL1_EL || P == Ld::kL1_EF || P == Ld::kEL) // the shipped loads of these hints
    {
        return ttp::loadVec<P == Ld::kL1_EL   ? ttp::CachePolicy::kKEEP_L1
                            : P == Ld::kL1_EF ? ttp::CachePolicy::kLAST_READ
                                              : ttp::CachePolicy::kEVICT_LAST>(p);
    }
    else
    {
        uint4 r;
        if constexpr (P == Ld::kCS)
        {
            r = __ldcs(reinterpret_cast<uint4 const*>(p));
        }
        else if constexpr (P == Ld::kNC)
        {
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                : "l"(p));
        }
        else if constexpr (P == Ld::kCOH) // not volatile: the compiler may schedule it as a plain load
        {
            asm("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
        }
        else if constexpr (P == Ld::kNC256)
        {
            asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                : "l"(p));
        }
        else if constexpr (P == Ld::kCOH_EL || P == Ld::kCOH_EF)
        {
            LAB_LD_HINTED("ld.global.L1::no_allocate.L2::cache_hint", P == Ld::kCOH_EL);
        }
        else
        {
            static_assert(P == Ld::kEF);
            LAB_LD_HINTED("ld.global.nc.L1::no_allocate.L2::cache_hint", false);
        }
        V v;
        *reinterpret_cast<uint4*>(&v) = r;
        return v;
    }
}

#undef LAB_LD_HINTED

template <St P, typename V>
__device__ __forceinline__ void st(V* p, V const& v)
{
    static_assert(sizeof(V) == 16, "16-byte vectors");
    if constexpr (P == St::kPLAIN)
    {
        *p = v;
    }
    else
    {
        uint4 const r = *reinterpret_cast<uint4 const*>(&v);
        if constexpr (P == St::kCS)
        {
            __stcs(reinterpret_cast<uint4*>(p), r);
        }
        else if constexpr (P == St::kNA)
        {
            asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(r.x), "r"(r.y),
                "r"(r.z), "r"(r.w)
                : "memory");
        }
        else
        {
            uint64_t const policy = l2Policy<P == St::kEL>();
            asm volatile("st.global.L1::no_allocate.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p),
                "r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w), "l"(policy)
                : "memory");
        }
    }
}

enum class Sched
{
    kONE,     // grid = rows, one row per block
    kSTATIC,  // persistent, rows blockIdx.x + k * gridDim.x
    kDYNAMIC, // persistent, rows from counter[0]
};

// The dynamic schedule's counters (next row, finished blocks) go back to zero when the last block leaves, so the
// next launch (stream-ordered; a dependent launch waits for this grid before it reads them) starts from row 0.
__device__ __forceinline__ void releaseCounter(int* counter)
{
    if (threadIdx.x == 0)
    {
        __threadfence();
        if (atomicAdd(counter + 1, 1) == static_cast<int>(gridDim.x) - 1)
        {
            counter[0] = 0;
            counter[1] = 0;
            __threadfence();
        }
    }
}

template <typename T>
constexpr int kVecOf = 16 / static_cast<int>(sizeof(T));

// The launcher ABI's dtype of element type T.
template <typename T>
constexpr ttp::DType kDType = sizeof(T) == 4              ? ttp::DType::kFLOAT32
                              : std::is_same_v<T, __half> ? ttp::DType::kFLOAT16
                                                          : ttp::DType::kBFLOAT16;

// A row's slots (thread tid's C vectors, BLOCK apart): h[c] = sumAt(c, i) for vector i of the row, stored at ov + i
// with hint SS unless LATE (the caller stores it); returns their sum of squares.
template <St SS, int C, int BLOCK, bool LATE = false, typename V, typename SumAt>
__device__ __forceinline__ float addAndStore(V (&h)[C], V* ov, int tid, int nvec, SumAt const& sumAt)
{
    float s = 0.F;
#pragma unroll
    for (int c = 0; c < C; ++c)
    {
        int const i = tid + c * BLOCK;
        if (i < nvec)
        {
            h[c] = sumAt(c, i);
            if constexpr (!LATE)
            {
                st<SS>(ov + i, h[c]);
            }
            s += ttp::sumSquares(h[c]);
        }
    }
    return s;
}

// SS: the sum's store hint (default: SP, the norm's); MINB: blocks per SM the registers must allow; ONE_BARRIER: one
// row per block (kONE) reduces with blockSum<BLOCK, true> (one barrier, as Liger's Triton kernel); LATE_SUM: the sum
// stored after the reduction, beside the norm (as inductor's kernel stores it), not as soon as it is made.
template <typename T, int C, int BLOCK, Sched S, bool PIPE, Ld LX, Ld LR, Ld LW, St SP, bool WREG, St SS = SP,
    int MINB = 1, bool ONE_BARRIER = false, bool LATE_SUM = false>
__global__ void __launch_bounds__(BLOCK, MINB) regKernel(T const* __restrict__ x, T const* residual,
    T const* __restrict__ w, T* residualOut, T* __restrict__ y, int rows, int hidden, float eps, int* counter)
{
    using V = Vec<T, kVecOf<T>>;
    __shared__ float partial[BLOCK / ttp::kWarpSize];
    __shared__ int nextRow[2];
    ttp::allowDependents();
    ttp::waitForPrerequisites();
    int const nvec = hidden / kVecOf<T>;
    int const tid = static_cast<int>(threadIdx.x);
    V weight[C];
#pragma unroll
    for (int c = 0; c < C; ++c)
    {
        int const i = tid + c * BLOCK;
        if (WREG && i < nvec)
        {
            weight[c] = ld<LW>(reinterpret_cast<V const*>(w) + i);
        }
    }
    V xa[C];
    V ra[C];
    auto loadRow = [&](int row, V(&xs)[C], V(&rs)[C])
    {
        if (row < rows)
        {
            V const* xv = reinterpret_cast<V const*>(x + static_cast<int64_t>(row) * hidden);
            V const* rv = reinterpret_cast<V const*>(residual + static_cast<int64_t>(row) * hidden);
#pragma unroll
            for (int c = 0; c < C; ++c)
            {
                int const i = tid + c * BLOCK;
                if (i < nvec)
                {
                    xs[c] = ld<LX>(xv + i);
                    rs[c] = ld<LR>(rv + i);
                }
            }
        }
    };
    int row = static_cast<int>(blockIdx.x);
    int next = rows;
    if constexpr (S == Sched::kSTATIC)
    {
        next = row + static_cast<int>(gridDim.x);
    }
    else if constexpr (S == Sched::kDYNAMIC)
    {
        if (tid == 0)
        {
            nextRow[0] = static_cast<int>(gridDim.x) + atomicAdd(counter, 1);
        }
        __syncthreads();
        next = nextRow[0];
    }
    if constexpr (PIPE)
    {
        loadRow(row, xa, ra);
    }
    for (int it = 1; row < rows; ++it)
    {
        V xb[C];
        V rb[C];
        if constexpr (PIPE)
        {
            loadRow(next, xb, rb);
        }
        else
        {
            loadRow(row, xa, ra);
        }
        if constexpr (S == Sched::kDYNAMIC)
        {
            if (tid == 0)
            {
                nextRow[it & 1] = static_cast<int>(gridDim.x) + atomicAdd(counter, 1);
            }
        }
        V* ov = reinterpret_cast<V*>(residualOut + static_cast<int64_t>(row) * hidden);
        float const s = addAndStore<SS, C, BLOCK, LATE_SUM>(
            xa, ov, tid, nvec, [&](int c, int) { return ttp::addVec(xa[c], ra[c]); });
        static_assert(!ONE_BARRIER || S == Sched::kONE, "one barrier: one reduction per block");
        float const scale = rsqrtf(ttp::blockSum<BLOCK, ONE_BARRIER>(s, partial) / static_cast<float>(hidden) + eps);
        int after = rows;
        if constexpr (S == Sched::kSTATIC)
        {
            after = next + static_cast<int>(gridDim.x);
        }
        else if constexpr (S == Sched::kDYNAMIC)
        {
            after = nextRow[it & 1];
        }
        V* yv = reinterpret_cast<V*>(y + static_cast<int64_t>(row) * hidden);
#pragma unroll
        for (int c = 0; c < C; ++c)
        {
            int const i = tid + c * BLOCK;
            if (i < nvec)
            {
                if constexpr (LATE_SUM)
                {
                    st<SS>(ov + i, xa[c]);
                }
                st<SP>(
                    yv + i, ttp::normVec(xa[c], WREG ? weight[c] : ld<LW>(reinterpret_cast<V const*>(w) + i), scale));
            }
        }
        if constexpr (PIPE)
        {
#pragma unroll
            for (int c = 0; c < C; ++c)
            {
                xa[c] = xb[c];
                ra[c] = rb[c];
            }
        }
        row = next;
        next = after;
    }
    if constexpr (S == Sched::kDYNAMIC)
    {
        releaseCounter(counter);
    }
}
// Vectors base + u * BLOCK (u < U) of a row after thread tid's own (zero past the row's nvec) from x (hint LX) and the
// residual (LR).
template <Ld LX, Ld LR, int BLOCK, int U, typename V>
__device__ __forceinline__ void loadChunk(V (&a)[U], V (&b)[U], V const* xv, V const* rv, int tid, int base, int nvec)
{
#pragma unroll
    for (int u = 0; u < U; ++u)
    {
        int const k = base + u * BLOCK;
        bool const inRow = tid + k < nvec;
        a[u] = inRow ? ld<LX>(xv + k) : V{};
        b[u] = inRow ? ld<LR>(rv + k) : V{};
    }
}

// Inductor's structure for this op (its generated Triton kernel, torch 2.11, H200: a looped reduction, one row per
// program): pass 1 reads the row's x and residual with evict_last and sums the squares of their sum; pass 2 reads them
// again with evict_first, stores the sum over the residual and the norm. Registers hold only a chunk of BLOCK * U
// vectors, whatever the row's length. L1: the loads' L1 hints as Triton emits them (evict_last, then evict_first: a
// 512-thread row of 4096 16-bit elements re-reads 16 KB, which the L1 can hold), else L1::no_allocate (re-read from
// the L2). SS, SP: the sum's and the norm's store hints. Y_FIRST: the norm stored before the sum (inductor's order).
// MINB: blocks an SM must hold (2048 / BLOCK: every thread slot, as inductor's 26-32 registers allow).
template <typename T, int BLOCK, int U, St SS, St SP, bool L1, bool Y_FIRST = false, int MINB = 1>
__global__ void __launch_bounds__(BLOCK, MINB) twoPassKernel(T const* __restrict__ x, T const* residual,
    T const* __restrict__ w, T* residualOut, T* __restrict__ y, int rows, int hidden, float eps)
{
    using V = Vec<T, kVecOf<T>>;
    __shared__ float partial[BLOCK / ttp::kWarpSize];
    ttp::allowDependents();
    ttp::waitForPrerequisites();
    int const nvec = hidden / kVecOf<T>;
    int const tid = static_cast<int>(threadIdx.x);
    int64_t const offset = static_cast<int64_t>(blockIdx.x) * hidden;
    auto const [xv, rv, wv, ov, yv] = ttp::rowBases<V>(x, residual, w, residualOut, y, offset, tid);
    // Pass 1 keeps the row's lines (and the weight's), pass 2 lets them go; the residual is read coherently.
    constexpr Ld kKeepX = L1 ? Ld::kL1_EL : Ld::kEL;
    constexpr Ld kKeepR = L1 ? Ld::kL1_EL : Ld::kCOH_EL;
    constexpr Ld kDropX = L1 ? Ld::kL1_EF : Ld::kEF;
    constexpr Ld kDropR = L1 ? Ld::kL1_EF : Ld::kCOH_EF;
    V a[U];
    V b[U];
    float s = 0.F;
    for (int base = 0; base < nvec; base += BLOCK * U)
    {
        loadChunk<kKeepX, kKeepR, BLOCK>(a, b, xv, rv, tid, base, nvec);
#pragma unroll
        for (int u = 0; u < U; ++u)
        {
            s += ttp::sumSquares(ttp::addVec(a[u], b[u])); // zero past the row
        }
    }
    float const scale = rsqrtf(ttp::blockSum<BLOCK>(s, partial) / static_cast<float>(hidden) + eps);
    for (int base = 0; base < nvec; base += BLOCK * U)
    {
        loadChunk<kDropX, kDropR, BLOCK>(a, b, xv, rv, tid, base, nvec);
#pragma unroll
        for (int u = 0; u < U; ++u)
        {
            int const k = base + u * BLOCK;
            if (tid + k < nvec)
            {
                V const h = ttp::addVec(a[u], b[u]);
                if constexpr (!Y_FIRST)
                {
                    st<SS>(ov + k, h);
                }
                st<SP>(yv + k, ttp::normVec(h, ld<kKeepX>(wv + k), scale));
                if constexpr (Y_FIRST)
                {
                    st<SS>(ov + k, h);
                }
            }
        }
    }
}
} // namespace lab
