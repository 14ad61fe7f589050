// Peer lab, add_rms_norm part: the production launcher and candidate row splits and cache hints behind one C entry
// point, so that peers_lab.py can time them with the benchmarks' own timers beside Liger-Kernel and inductor in one
// process (issue 24: the wide rows, where the lab alone cannot say which peer is ahead).
#include "add_rms_candidates.cuh"

#include <vector>

namespace
{
using lab::Ld;
using lab::Sched;
using lab::St;
using ttp::CacheHints;
using Launch
    = cudaError_t (*)(void const*, void const*, void const*, void*, void*, int64_t, int64_t, int*, cudaStream_t);

struct Variant
{
    char const* name;
    Launch launch;
    int vecs; // applies to rows of nvec vectors with vecs - per vector slot < nvec <= vecs (0: every row)
    int slot;
};

template <typename T>
cudaError_t prodV(
    void const* x, void const* r, void const* w, void* ro, void* y, int64_t rows, int64_t h, int*, cudaStream_t s)
{
    return ttp::addRmsNorm(x, r, w, ro, y, rows, h, 1e-6F, lab::kDType<T>, s);
}

// The shipped kernel at split BLOCK x C with the cache hints asked (PREFETCH_W false: the weight loaded after the sum).
template <typename T, int C, int B, CacheHints ST, bool PREFETCH_W = true>
cudaError_t cfgV(
    void const* x, void const* r, void const* w, void* ro, void* y, int64_t rows, int64_t h, int*, cudaStream_t s)
{
    return ttp::launchConfig<T, 16 / sizeof(T), B, C, B, PREFETCH_W>(static_cast<T const*>(x), static_cast<T const*>(r),
        static_cast<T const*>(w), static_cast<T*>(ro), static_cast<T*>(y), rows, h, 1e-6F, ST, s);
}

// Whether the shipped launcher loads the weight after the sum at split BLOCK x C in bf16 (from many rows on).
template <int C, int B>
constexpr bool lateWeightBf16At()
{
    for (ttp::RowConfig const& k : ttp::kRowConfigs)
    {
        if (k.group == B && k.block == B && k.c == C)
        {
            return k.lateWeightBf16;
        }
    }
    return false;
}

// The shipped kernel at split BLOCK x C (one row per block) with the policies asked for the norm's store (SP), the
// sum's (SS) and x's load (LX); the weight loaded when the shipped launcher loads it at this split, with many rows.
template <typename T, int C, int B, ttp::CachePolicy SP, ttp::CachePolicy SS, ttp::CachePolicy LX>
cudaError_t polV(
    void const* x, void const* r, void const* w, void* ro, void* y, int64_t rows, int64_t h, int*, cudaStream_t s)
{
    constexpr bool kLateWeight = std::is_same_v<T, __nv_bfloat16> && lateWeightBf16At<C, B>();
    return ttp::launchKernel(ttp::addRmsNormKernel<T, 16 / sizeof(T), B, C, B, !kLateWeight, SP, SS, LX>,
        dim3(static_cast<unsigned>(rows)), dim3(B), s, ttp::pdlSupported(), static_cast<T const*>(x),
        static_cast<T const*>(r), static_cast<T const*>(w), static_cast<T*>(ro), static_cast<T*>(y), rows,
        static_cast<int>(h), 1e-6F);
}

// Inductor's two-pass structure (lab::twoPassKernel), one row per block, any row length.
// PDL false: a plain launch (inductor's).
template <typename T, int B, int U, St SS, St SP, bool L1, bool Y_FIRST = false, int MINB = 1, bool PDL = true>
cudaError_t twoPassV(
    void const* x, void const* r, void const* w, void* ro, void* y, int64_t rows, int64_t h, int*, cudaStream_t s)
{
    return ttp::launchKernel(lab::twoPassKernel<T, B, U, SS, SP, L1, Y_FIRST, MINB>, dim3(static_cast<unsigned>(rows)),
        dim3(B), s, PDL && ttp::pdlSupported(), static_cast<T const*>(x), static_cast<T const*>(r),
        static_cast<T const*>(w), static_cast<T*>(ro), static_cast<T*>(y), static_cast<int>(rows), static_cast<int>(h),
        1e-6F);
}

// The shipped two-pass kernel (ttp::addRmsNormTwoPassKernel) at BLOCK x CHUNKS, MINB rows per SM, pass 2 AHEAD chunks
// at a time.
template <typename T, int B, int CH, int MINB, bool PDL = true, int AHEAD = 1>
cudaError_t fixedV(
    void const* x, void const* r, void const* w, void* ro, void* y, int64_t rows, int64_t h, int*, cudaStream_t s)
{
    if (h != static_cast<int64_t>(B) * CH * static_cast<int64_t>(16 / sizeof(T)))
    {
        return cudaErrorInvalidValue;
    }
    return ttp::launchKernel(ttp::addRmsNormTwoPassKernel<T, B, CH, MINB, AHEAD>, dim3(static_cast<unsigned>(rows)),
        dim3(B), s, PDL && ttp::pdlSupported(), static_cast<T const*>(x), static_cast<T const*>(r),
        static_cast<T const*>(w), static_cast<T*>(ro), static_cast<T*>(y), 1e-6F);
}

// The lab's row kernel, one row per block, with the load and store hints asked (SS the sum's store, SP the norm's,
// LR the residual's load); a programmatic dependent launch where the shipped launcher makes one
// (TORCHTRT_PLUGINS_PDL=0: none).
template <typename T, int C, int B, Ld LX, bool WREG, St SS, St SP, int MINB = 1, bool ONE_BARRIER = false,
    Ld LR = Ld::kPLAIN, bool LATE_SUM = false>
cudaError_t regV(void const* x, void const* r, void const* w, void* ro, void* y, int64_t rows, int64_t h, int* counter,
    cudaStream_t s)
{
    return ttp::launchKernel(
        lab::regKernel<T, C, B, Sched::kONE, false, LX, LR, Ld::kPLAIN, SP, WREG, SS, MINB, ONE_BARRIER, LATE_SUM>,
        dim3(static_cast<unsigned>(rows)), dim3(B), s, ttp::pdlSupported(), static_cast<T const*>(x),
        static_cast<T const*>(r), static_cast<T const*>(w), static_cast<T*>(ro), static_cast<T*>(y),
        static_cast<int>(rows), static_cast<int>(h), 1e-6F, counter);
}

// Per split: the shipped kernel with its large-launch hints; the lab kernel with Liger's recipe (x plain, the weight
// after the sum, plain stores), with the shipped large-launch hints, and with those and one barrier.
#define CFG(T, C, B, ST, NAME) {"cfg b" #B " c" #C " hints=" NAME, cfgV<T, C, B, ST>, (C) * (B), B}
#define CFG_LATE(T, C, B)                                                                                              \
    {"cfg b" #B " c" #C " hints=large late-w", cfgV<T, C, B, CacheHints::kLARGE, false>, (C) * (B), B}
// Policies named norm/sum/x: D default, F evict-first, L evict-last.
#define POL(T, C, B, SP, SS, LX, NAME)                                                                                 \
    {"pol b" #B " c" #C " " NAME,                                                                                      \
        polV<T, C, B, ttp::CachePolicy::k##SP, ttp::CachePolicy::k##SS, ttp::CachePolicy::k##LX>, (C) * (B), B}
#define POLS(T, C, B)                                                                                                  \
    POL(T, C, B, EVICT_FIRST, DEFAULT, DEFAULT, "F/D/D"), POL(T, C, B, DEFAULT, DEFAULT, DEFAULT, "D/D/D"),            \
        POL(T, C, B, EVICT_FIRST, EVICT_FIRST, DEFAULT, "F/F/D"), POL(T, C, B, DEFAULT, DEFAULT, EVICT_FIRST, "D/D/F")
// Two passes: plain stores and Triton's L1 hints (as inductor's kernel); the same re-reading from the L2; Triton's L1
// hints with the shipped large-launch store hints.
#define TWO(T, B, U)                                                                                                   \
    {"two-pass b" #B " u" #U " l1 sum:PLAIN y:PLAIN", twoPassV<T, B, U, St::kPLAIN, St::kPLAIN, true>, 0, 0},          \
        {"two-pass b" #B " u" #U " l2 sum:PLAIN y:PLAIN", twoPassV<T, B, U, St::kPLAIN, St::kPLAIN, false>, 0, 0},     \
        {"two-pass b" #B " u" #U " l1 sum:EL y:CS", twoPassV<T, B, U, St::kEL, St::kCS, true>, 0, 0}
// Inductor's form with its store order, without a programmatic launch, and held to every thread slot of an SM; and
// inductor's form (the sum stored first) without a programmatic launch.
#define TWO_X(T, B, U)                                                                                                 \
    {"two-pass b" #B " u" #U " l1 y-first", twoPassV<T, B, U, St::kPLAIN, St::kPLAIN, true, true>, 0, 0},              \
        {"two-pass b" #B " u" #U " l1 y-first no-pdl",                                                                 \
            twoPassV<T, B, U, St::kPLAIN, St::kPLAIN, true, true, 1, false>, 0, 0},                                    \
        {"two-pass b" #B " u" #U " l1 y-first full-occupancy",                                                         \
            twoPassV<T, B, U, St::kPLAIN, St::kPLAIN, true, true, 2048 / (B)>, 0, 0},                                  \
        {"two-pass b" #B " u" #U " l1 no-pdl", twoPassV<T, B, U, St::kPLAIN, St::kPLAIN, true, false, 1, false>, 0, 0}
// Inductor's form alone, at more splits of the row.
#define TWO_L1(T, B, U)                                                                                                \
    {"two-pass b" #B " u" #U " l1 sum:PLAIN y:PLAIN", twoPassV<T, B, U, St::kPLAIN, St::kPLAIN, true>, 0, 0}
// The shipped large-launch hints with the weight in registers or not, the sum stored after the reduction; and the
// same with the sum stored as made, the weight after the sum.
#define LATE_SUM(T, C, B)                                                                                              \
    {"row b" #B " c" #C " x:PLAIN w:true sum:EL y:CS late-sum",                                                        \
        regV<T, C, B, Ld::kPLAIN, true, St::kEL, St::kCS, 1, false, Ld::kPLAIN, true>, (C) * (B), B},                  \
        {"row b" #B " c" #C " x:PLAIN w:false sum:EL y:CS late-sum",                                                   \
            regV<T, C, B, Ld::kPLAIN, false, St::kEL, St::kCS, 1, false, Ld::kPLAIN, true>, (C) * (B), B},             \
        ROW(T, C, B, PLAIN, false, EL, CS)
#define ROW(T, C, B, LX, WREG, SS, SP)                                                                                 \
    {"row b" #B " c" #C " x:" #LX " w:" #WREG " sum:" #SS " y:" #SP,                                                   \
        regV<T, C, B, Ld::k##LX, WREG, St::k##SS, St::k##SP>, (C) * (B), B}
// The shipped large-launch hints (x plain, the weight in registers, the sum evict-last, the norm evict-first) with
// one barrier in the reduction.
#define ROW1(T, C, B)                                                                                                  \
    {"row b" #B " c" #C " x:PLAIN w:true sum:EL y:CS one-barrier",                                                     \
        regV<T, C, B, Ld::kPLAIN, true, St::kEL, St::kCS, 1, true>, (C) * (B), B}
// The shipped large-launch hints with the residual read with hint LR (the line the sum then overwrites).
#define ROWR(T, C, B, LR)                                                                                              \
    {"row b" #B " c" #C " x:PLAIN r:" #LR " w:true sum:EL y:CS",                                                       \
        regV<T, C, B, Ld::kPLAIN, true, St::kEL, St::kCS, 1, false, Ld::k##LR>, (C) * (B), B}
// Liger's recipe with x read coherently and one barrier (what its Triton kernel compiles to, in place or not).
#define LIGER(T, C, B)                                                                                                 \
    {"row b" #B " c" #C " x:COH w:false sum:PLAIN y:PLAIN one-barrier",                                                \
        regV<T, C, B, Ld::kCOH, false, St::kPLAIN, St::kPLAIN, 1, true>, (C) * (B), B}
// Rows of exactly B x CH vectors.
#define FIXED(T, B, CH, MINB) {"fixed b" #B " c" #CH " m" #MINB, fixedV<T, B, CH, MINB>, (B) * (CH), 1}
// Pass 2 loading A chunks before storing them.
#define FIXED_AHEAD(T, B, CH, MINB, A)                                                                                 \
    {"fixed b" #B " c" #CH " m" #MINB " ahead" #A, fixedV<T, B, CH, MINB, true, A>, (B) * (CH), 1}
#define FIXED_NOPDL(T, B, CH, MINB)                                                                                    \
    {"fixed b" #B " c" #CH " m" #MINB " no-pdl", fixedV<T, B, CH, MINB, false>, (B) * (CH), 1}
#define SPLIT(T, C, B)                                                                                                 \
    CFG(T, C, B, CacheHints::kLARGE, "large"), ROW(T, C, B, PLAIN, false, PLAIN, PLAIN),                               \
        ROW(T, C, B, PLAIN, true, EL, CS), ROW1(T, C, B), ROWR(T, C, B, EF), ROWR(T, C, B, NC), ROWR(T, C, B, CS),     \
        ROW(T, C, B, COH, true, EL, CS), LIGER(T, C, B)

template <typename T>
std::vector<Variant> const& variants()
{
    static std::vector<Variant> const v
        = sizeof(T) == 2
              ? std::vector<Variant>{{"production addRmsNorm()", prodV<T>, 0, 0}, SPLIT(T, 3, 512), CFG_LATE(T, 3, 512),
                    SPLIT(T, 2, 768), CFG_LATE(T, 2, 768), CFG(T, 2, 1024, CacheHints::kLARGE, "large"),
                    CFG_LATE(T, 2, 1024), SPLIT(T, 4, 384), SPLIT(T, 2, 256), SPLIT(T, 1, 512), SPLIT(T, 4, 128),
                    POLS(T, 4, 128), POLS(T, 2, 512), POLS(T, 2, 1024), LATE_SUM(T, 4, 128), LATE_SUM(T, 2, 512),
                    LATE_SUM(T, 2, 1024), TWO(T, 256, 1), TWO(T, 256, 2), TWO(T, 512, 1), TWO(T, 512, 2),
                    TWO(T, 1024, 1), TWO_L1(T, 128, 2), TWO_L1(T, 128, 4), TWO_L1(T, 256, 4), TWO_L1(T, 512, 4),
                    TWO_L1(T, 1024, 2), TWO_X(T, 512, 1), TWO_X(T, 1024, 1), TWO_X(T, 256, 2), TWO_X(T, 512, 2),
                    TWO_X(T, 128, 4), FIXED(T, 256, 2, 4), FIXED(T, 256, 2, 1), FIXED(T, 512, 1, 4),
                    FIXED(T, 128, 4, 8), FIXED(T, 512, 2, 4), FIXED(T, 512, 2, 2), FIXED(T, 512, 2, 1),
                    FIXED(T, 1024, 1, 2), FIXED(T, 256, 4, 8), FIXED(T, 1024, 2, 2), FIXED(T, 1024, 2, 1),
                    FIXED(T, 512, 4, 4), FIXED(T, 512, 4, 2), FIXED_NOPDL(T, 512, 2, 4), FIXED_NOPDL(T, 1024, 2, 2),
                    FIXED(T, 512, 3, 1), FIXED(T, 512, 3, 2), FIXED(T, 768, 2, 1), FIXED(T, 768, 2, 2),
                    FIXED(T, 384, 4, 1), FIXED_AHEAD(T, 768, 2, 1, 2), FIXED_AHEAD(T, 1024, 2, 2, 2),
                    FIXED_AHEAD(T, 512, 2, 2, 2), FIXED_AHEAD(T, 1024, 2, 1, 2)}
              : std::vector<Variant>{{"production addRmsNorm()", prodV<T>, 0, 0}, SPLIT(T, 6, 512), SPLIT(T, 4, 768),
                    SPLIT(T, 2, 512), SPLIT(T, 1, 1024), TWO(T, 256, 1), TWO(T, 256, 2), TWO(T, 512, 1), TWO(T, 512, 2),
                    TWO(T, 1024, 1), FIXED(T, 512, 2, 4), FIXED(T, 512, 2, 2), FIXED(T, 1024, 1, 2),
                    FIXED(T, 1024, 2, 2), FIXED(T, 1024, 2, 1), FIXED(T, 512, 4, 4), FIXED(T, 512, 4, 2),
                    FIXED(T, 1024, 4, 2), FIXED(T, 1024, 4, 1), FIXED_NOPDL(T, 1024, 2, 2), FIXED(T, 1024, 3, 1),
                    FIXED(T, 1024, 3, 2), FIXED(T, 768, 4, 1), FIXED(T, 512, 6, 1), FIXED(T, 512, 1, 4),
                    FIXED(T, 256, 4, 4), FIXED(T, 512, 4, 1), FIXED_NOPDL(T, 512, 4, 2), FIXED_AHEAD(T, 512, 4, 1, 4),
                    FIXED_AHEAD(T, 512, 4, 1, 2), FIXED_AHEAD(T, 1024, 2, 2, 2), FIXED_AHEAD(T, 1024, 4, 1, 4),
                    FIXED_AHEAD(T, 1024, 4, 1, 2), FIXED_AHEAD(T, 768, 4, 1, 2), FIXED_AHEAD(T, 512, 4, 2, 4)};
    return v;
}

#undef SPLIT
#undef FIXED
#undef FIXED_NOPDL
#undef FIXED_AHEAD
#undef ROW
#undef ROW1
#undef ROWR
#undef LIGER
#undef CFG
#undef LATE_SUM
#undef TWO
#undef TWO_L1
#undef TWO_X
#undef POL
#undef POLS
#undef CFG_LATE

template <typename F>
auto withDType(int dtype, F&& f)
{
    return dtype == 0 ? f(float{}) : dtype == 1 ? f(__half{}) : f(__nv_bfloat16{});
}

} // namespace

extern "C"
{
    // dtype: 0 fp32, 1 fp16, 2 bf16 (ttp::DType). Name of variant `v` for rows of `hidden`: "" when it does not
    // apply, nullptr past the last.
    char const* lab_add_rms_name(int v, int dtype, long long hidden)
    {
        return withDType(dtype,
            [&](auto t) -> char const*
            {
                using T = decltype(t);
                auto const& list = variants<T>();
                if (v < 0 || v >= static_cast<int>(list.size()))
                {
                    return nullptr;
                }
                long long const nvec = hidden / (16 / sizeof(T));
                Variant const& e = list[v];
                return e.vecs == 0 || (nvec > e.vecs - e.slot && nvec <= e.vecs) ? e.name : "";
            });
    }

    int lab_add_rms(int v, void const* x, void const* r, void const* w, void* ro, void* y, long long rows,
        long long hidden, int dtype, void* counter, void* stream)
    {
        return withDType(dtype,
            [&](auto t)
            {
                using T = decltype(t);
                return static_cast<int>(variants<T>()[v].launch(
                    x, r, w, ro, y, rows, hidden, static_cast<int*>(counter), static_cast<cudaStream_t>(stream)));
            });
    }
}
