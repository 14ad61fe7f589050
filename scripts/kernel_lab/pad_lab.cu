// Kernel lab, pad_to part: the production kernel's template at other unroll depths and grid shapes.
#include "../../csrc/kernels/pad_to.cu"

namespace ttp
{

// variant: 0 production padTo(); 1..: (unroll, blocks per SM of a persistent grid; 0 = one pass).
char const* padVariantName(int variant)
{
    static char const* const names[] = {"padTo()", "unroll4 one-pass", "unroll8 one-pass", "unroll2 one-pass",
        "unroll4 persistent x8", "unroll1 one-pass", "unroll1 persistent x8"};
    return variant < static_cast<int>(sizeof(names) / sizeof(names[0])) ? names[variant] : nullptr;
}

template <typename T, int VEC>
cudaError_t padVariantTyped(int variant, void const* x, void* y, PadArgs const& a, cudaStream_t stream)
{
    PadShape const shape{a.planes * a.outHeight * (a.outWidth / VEC), a.height, a.width};
    FastDivmod32 const cpr(static_cast<uint32_t>(a.outWidth / VEC));
    FastDivmod32 const rpp(static_cast<uint32_t>(a.outHeight));
    auto const* xt = static_cast<T const*>(x);
    auto* yt = static_cast<T*>(y);
    T const v{};
    switch (variant)
    {
    case 1: return launch<T, VEC, true, FastDivmod32, 4, 0>(xt, yt, shape, cpr, rpp, v, stream);
    case 2: return launch<T, VEC, true, FastDivmod32, 8, 0>(xt, yt, shape, cpr, rpp, v, stream);
    case 3: return launch<T, VEC, true, FastDivmod32, 2, 0>(xt, yt, shape, cpr, rpp, v, stream);
    case 4: return launch<T, VEC, true, FastDivmod32, 4, 8>(xt, yt, shape, cpr, rpp, v, stream);
    case 5: return launch<T, VEC, true, FastDivmod32, 1, 0>(xt, yt, shape, cpr, rpp, v, stream);
    case 6: return launch<T, VEC, true, FastDivmod32, 1, 8>(xt, yt, shape, cpr, rpp, v, stream);
    default: return cudaErrorInvalidValue;
    }
}

// Element size 1 or 2; widths multiples of the 16-byte vector.
cudaError_t padVariant(int variant, void const* x, void* y, int64_t planes, int64_t h, int64_t w, int64_t oh,
    int64_t ow, DType dtype, cudaStream_t stream)
{
    if (variant == 0)
    {
        return padTo(x, y, planes, h, w, oh, ow, 0.F, dtype, stream);
    }
    PadArgs const a{planes, h, w, oh, ow};
    return dtypeSize(dtype) == 1 ? padVariantTyped<uint8_t, 16>(variant, x, y, a, stream)
                                 : padVariantTyped<uint16_t, 8>(variant, x, y, a, stream);
}

} // namespace ttp
