// Peer lab, rms_norm part: the production launcher and candidate configurations behind one C entry point, so that
// peers_lab.py can time them with the benchmarks' own timers beside Liger-Kernel and inductor in one process.
#include "../../csrc/kernels/rms_norm.cu"

#include <string>
#include <vector>

namespace
{
using ttp::CachePolicy;
using Launch = cudaError_t (*)(void const*, void const*, void*, int64_t, int64_t, cudaStream_t);

struct Variant
{
    char const* name;
    Launch launch;
    int minVec; // applies to rows of nvec vectors with minVec <= nvec <= maxVec
    int maxVec;
};

template <typename T, int C, int B, bool PDL>
cudaError_t rowV(void const* x, void const* w, void* y, int64_t r, int64_t h, cudaStream_t s)
{
    return ttp::launchRowConfig<T, 16 / sizeof(T), C, B, PDL>(
        static_cast<T const*>(x), static_cast<T const*>(w), static_cast<T*>(y), r, h, 1e-6F, 0.F, s);
}

template <typename T, int L, int C, int U, CachePolicy LD, CachePolicy ST>
cudaError_t warpV(void const* x, void const* w, void* y, int64_t r, int64_t h, cudaStream_t s)
{
    return ttp::launchWarpConfig<T, 16 / sizeof(T), L, C, U, LD, ST>(
        static_cast<T const*>(x), static_cast<T const*>(w), static_cast<T*>(y), r, h, 1e-6F, 0.F, s);
}

template <typename T, int C, int B, bool PF, CachePolicy LD, CachePolicy ST>
cudaError_t blockV(void const* x, void const* w, void* y, int64_t r, int64_t h, cudaStream_t s)
{
    return ttp::launchBlockConfig<T, 16 / sizeof(T), C, B, PF, LD, ST>(
        static_cast<T const*>(x), static_cast<T const*>(w), static_cast<T*>(y), r, h, 1e-6F, 0.F, s);
}

template <typename T>
cudaError_t prodV(void const* x, void const* w, void* y, int64_t r, int64_t h, cudaStream_t s)
{
    ttp::DType const dt = sizeof(T) == 4 ? ttp::DType::kFLOAT32 : ttp::DType::kBFLOAT16;
    return ttp::rmsNorm(x, w, y, r, h, 1e-6F, 0.F, dt, ttp::RmsNormTactic::kAUTO, s);
}

constexpr CachePolicy D = CachePolicy::kDEFAULT;
constexpr CachePolicy EF = CachePolicy::kEVICT_FIRST;

#define ROW(T, C, B, P) {"row C=" #C " B=" #B " pdl=" #P, rowV<T, C, B, P>, (C) * (B) / 2 + 1, (C) * (B)}
#define BLK(T, C, B, PF, LD, ST)                                                                                       \
    {"block C=" #C " B=" #B " pf=" #PF " ld=" #LD " st=" #ST, blockV<T, C, B, PF, LD, ST>, (C) * (B) / 2 + 1, (C) * (B)}
#define WARP(T, L, C, U, LD, ST, LO, HI)                                                                               \
    {"warp L=" #L " C=" #C " U=" #U " ld=" #LD " st=" #ST, warpV<T, L, C, U, LD, ST>, LO, HI}

template <typename T>
std::vector<Variant> const& variants()
{
    static std::vector<Variant> const v
        = sizeof(T) == 2 ? std::vector<Variant>{{"production rmsNorm()", prodV<T>, 0, 1 << 30}, ROW(T, 2, 256, true),
                               ROW(T, 4, 128, true), ROW(T, 1, 512, true), ROW(T, 2, 128, true), ROW(T, 1, 256, true),
                               ROW(T, 6, 256, true), ROW(T, 3, 512, true), ROW(T, 12, 128, true), ROW(T, 4, 128, false),
                               WARP(T, 16, 1, 1, D, D, 9, 16), WARP(T, 16, 1, 1, EF, D, 9, 16),
                               BLK(T, 4, 128, true, D, EF), BLK(T, 6, 256, true, D, EF), BLK(T, 4, 128, true, D, D)}
                         : std::vector<Variant>{{"production rmsNorm()", prodV<T>, 0, 1 << 30}, ROW(T, 8, 128, true),
                               ROW(T, 4, 256, true), ROW(T, 2, 512, true), ROW(T, 8, 128, false),
                               BLK(T, 8, 128, true, D, EF), BLK(T, 4, 256, true, D, EF), BLK(T, 8, 128, true, D, D)};
    return v;
}

#undef ROW
#undef BLK
#undef WARP

} // namespace

extern "C"
{
    // dtype: 0 fp32, 2 bf16 (ttp::DType). Name of variant `v` for rows of `hidden`: "" when it does not apply,
    // nullptr past the last.
    char const* lab_rms_name(int v, int dtype, long long hidden)
    {
        auto const& list = dtype == 0 ? variants<float>() : variants<__nv_bfloat16>();
        if (v < 0 || v >= static_cast<int>(list.size()))
            return nullptr;
        long long const nvec = hidden / (dtype == 0 ? 4 : 8);
        return nvec >= list[v].minVec && nvec <= list[v].maxVec ? list[v].name : "";
    }

    int lab_rms(int v, void const* x, void const* w, void* y, long long rows, long long hidden, int dtype, void* stream)
    {
        auto const& list = dtype == 0 ? variants<float>() : variants<__nv_bfloat16>();
        return static_cast<int>(list[v].launch(x, w, y, rows, hidden, static_cast<cudaStream_t>(stream)));
    }
}
