// Peer lab, pad_to part: the production launcher and candidate configurations (L2 priorities, block sizes, vector
// widths, a kernel per group of whole rows) behind one C entry point.
#include "../../csrc/kernels/pad_to.cu"

#include <vector>

namespace
{
using ttp::CachePolicy;
constexpr CachePolicy D = CachePolicy::kDEFAULT;
constexpr CachePolicy CO = CachePolicy::kCOHERENT;
constexpr CachePolicy EL = CachePolicy::kEVICT_LAST;
constexpr CachePolicy EF = CachePolicy::kEVICT_FIRST;

// A block per group of whole output rows: blockIdx.x a group of rows of one plane, blockIdx.y/z the plane,
// threadIdx.y the row in the group, threadIdx.x the vector in the row. No index division at all (the flat
// kernel divides twice by invariants); x's rows are whole vectors (width % VEC == 0, x aligned).
template <typename T, int VEC, CachePolicy LD, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    padRowsKernel(T const* __restrict__ x, T* __restrict__ y, ttp::PadArgs a, T value)
{
    using V = ttp::Vec<T, VEC>;
    int64_t const plane = blockIdx.y + int64_t{gridDim.y} * blockIdx.z;
    uint32_t const h = blockIdx.x * blockDim.y + threadIdx.y;
    if (plane >= a.planes || h >= a.outHeight)
    {
        return;
    }
    V fill;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
    {
        fill.v[k] = value;
    }
    auto* yRow = reinterpret_cast<V*>(y + (plane * a.outHeight + h) * a.outWidth);
    auto const* xRow = reinterpret_cast<V const*>(x + (plane * a.height + h) * a.width);
    auto const chunks = static_cast<uint32_t>(a.outWidth / VEC);
    auto const inChunks
        = h < a.height ? static_cast<uint32_t>((a.width < a.outWidth ? a.width : a.outWidth) / VEC) : 0U;
    for (uint32_t c = threadIdx.x; c < chunks; c += blockDim.x)
    {
        V out = fill;
        if (c < inChunks)
        {
            out = ttp::loadVec<LD>(xRow + c);
        }
        ttp::storeVec<D>(yRow + c, out);
    }
}

template <typename T, CachePolicy LD, int BLOCK>
cudaError_t runRows(void const* x, void* y, ttp::PadArgs const& a, ttp::DType, cudaStream_t s)
{
    constexpr int kVec = 16 / sizeof(T);
    int64_t const chunks = a.outWidth / kVec;
    auto const bx = static_cast<unsigned>(std::min<int64_t>(chunks, BLOCK));
    unsigned const by = BLOCK / bx;
    auto const gy = static_cast<unsigned>(std::min<int64_t>(a.planes, 65535));
    dim3 const grid(
        static_cast<unsigned>((a.outHeight + by - 1) / by), gy, static_cast<unsigned>((a.planes + gy - 1) / gy));
    padRowsKernel<T, kVec, LD, BLOCK>
        <<<grid, dim3(bx, by), 0, s>>>(static_cast<T const*>(x), static_cast<T*>(y), a, T{});
    return cudaGetLastError();
}

template <typename T, CachePolicy LD, CachePolicy ST, int UNROLL = 1, int PER_SM = 0, int BLOCK = 256, int VBYTES = 16>
cudaError_t run(void const* x, void* y, ttp::PadArgs const& a, ttp::DType, cudaStream_t s)
{
    constexpr int kVec = VBYTES / sizeof(T);
    ttp::PadShape const shape{a.planes * a.outHeight * (a.outWidth / kVec), a.height, a.width};
    ttp::FastDivmod32 const cpr(static_cast<uint32_t>(a.outWidth / kVec));
    ttp::FastDivmod32 const rpp(static_cast<uint32_t>(a.outHeight));
    return ttp::launch<T, kVec, true, ttp::FastDivmod32, UNROLL, PER_SM, LD, ST, BLOCK>(
        static_cast<T const*>(x), static_cast<T*>(y), shape, cpr, rpp, T{}, s);
}

template <typename T>
cudaError_t production(void const* x, void* y, ttp::PadArgs const& a, ttp::DType dt, cudaStream_t s)
{
    return ttp::padTo(x, y, a.planes, a.height, a.width, a.outHeight, a.outWidth, 0.F, dt, s);
}

// The candidates beside their launch configuration in one table, so a name cannot drift from what it runs.
using Launch = cudaError_t (*)(void const*, void*, ttp::PadArgs const&, ttp::DType, cudaStream_t);

struct Variant
{
    char const* name;
    Launch launch;
};

template <typename T>
std::vector<Variant> const& variants()
{
    static std::vector<Variant> const v{{"production padTo()", production<T>}, {"ld=EL st=D", run<T, EL, D>},
        {"ld=D st=EF", run<T, D, EF>}, {"ld=EL st=EF", run<T, EL, EF>}, {"ld=EF st=D", run<T, EF, D>},
        {"ld=EF st=EF", run<T, EF, EF>}, {"ld=D st=EL", run<T, D, EL>}, {"ld=EF st=EL", run<T, EF, EL>},
        {"st=EF unroll=2", run<T, D, EF, 2>}, {"st=EF persistent 8/SM", run<T, D, EF, 1, 8>},
        {"st=EF persistent 4/SM", run<T, D, EF, 1, 4>}, {"ld=EF st=EF unroll=2", run<T, EF, EF, 2>},
        {"st=EF unroll=4", run<T, D, EF, 4>}, {"ld=D st=D", run<T, D, D>},
        {"ld=D st=EF B=128", run<T, D, EF, 1, 0, 128>}, {"ld=D st=D B=128", run<T, D, D, 1, 0, 128>},
        {"ld=EF st=D B=128", run<T, EF, D, 1, 0, 128>}, {"ld=D st=EF B=512", run<T, D, EF, 1, 0, 512>},
        {"ld=EF st=D B=512", run<T, EF, D, 1, 0, 512>}, {"8-byte vectors st=EF", run<T, D, EF, 1, 0, 256, 8>},
        {"8-byte vectors ld=D st=D", run<T, D, D, 1, 0, 256, 8>}, {"8-byte vectors B=128", run<T, D, D, 1, 0, 128, 8>},
        {"ld=coherent", run<T, CO, D>}, {"ld=coherent B=128", run<T, CO, D, 1, 0, 128>},
        {"rows B=256", runRows<T, D, 256>}, {"rows B=256 ld=coherent", runRows<T, CO, 256>},
        {"rows B=128", runRows<T, D, 128>}, {"rows B=128 ld=coherent", runRows<T, CO, 128>},
        {"rows B=512", runRows<T, D, 512>}, {"ld=D st=D B=512", run<T, D, D, 1, 0, 512>},
        {"ld=D st=D B=1024", run<T, D, D, 1, 0, 1024>}, {"rows B=1024", runRows<T, D, 1024>},
        {"rows B=512 ld=EF", runRows<T, EF, 512>}, {"ld=EF st=D B=1024", run<T, EF, D, 1, 0, 1024>}};
    return v;
}

template <typename T>
cudaError_t typed(int v, void const* x, void* y, ttp::PadArgs const& a, ttp::DType dt, cudaStream_t s)
{
    auto const& all = variants<T>();
    return v >= 0 && v < static_cast<int>(all.size()) ? all[v].launch(x, y, a, dt, s) : cudaErrorInvalidValue;
}
} // namespace

extern "C"
{
    char const* lab_pad_name(int v)
    {
        auto const& all = variants<uint8_t>();
        return v >= 0 && v < static_cast<int>(all.size()) ? all[v].name : nullptr;
    }

    // dtype: ttp::DType (0 fp32, 2 bf16, 3 int8); variants > 0 need widths that are multiples of 16 bytes.
    int lab_pad(int v, void const* x, void* y, long long planes, long long h, long long w, long long oh, long long ow,
        int dtype, void* stream)
    {
        auto const s = static_cast<cudaStream_t>(stream);
        auto const dt = static_cast<ttp::DType>(dtype);
        ttp::PadArgs const a{planes, h, w, oh, ow};
        switch (ttp::dtypeSize(dt))
        {
        case 1: return static_cast<int>(typed<uint8_t>(v, x, y, a, dt, s));
        case 2: return static_cast<int>(typed<uint16_t>(v, x, y, a, dt, s));
        default: return static_cast<int>(typed<uint32_t>(v, x, y, a, dt, s));
        }
    }
}
