#include "roi_align.h"

#include "op_fields.h"
#include "type_utils.cuh"

#include <limits>

namespace ttp::vision
{
namespace
{

template <typename T, typename Index>
__device__ float bilinear(T const* plane, Index height, Index width, float y, float x)
{
    if (y < -1.0F || y > static_cast<float>(height) || x < -1.0F || x > static_cast<float>(width))
    {
        return 0.0F;
    }
    y = fmaxf(y, 0.0F);
    x = fmaxf(x, 0.0F);
    auto y0 = static_cast<Index>(y);
    auto x0 = static_cast<Index>(x);
    Index y1 = y0 + 1;
    Index x1 = x0 + 1;
    if (y0 >= height - 1)
    {
        y0 = y1 = height - 1;
        y = static_cast<float>(y0);
    }
    if (x0 >= width - 1)
    {
        x0 = x1 = width - 1;
        x = static_cast<float>(x0);
    }
    float const ly = y - static_cast<float>(y0);
    float const lx = x - static_cast<float>(x0);
    float const hy = 1.0F - ly;
    float const hx = 1.0F - lx;
    auto at = [&](Index r, Index c) { return toFloat(plane[r * width + c]); };
    return hy * hx * at(y0, x0) + hy * lx * at(y0, x1) + ly * hx * at(y1, x0) + ly * lx * at(y1, x1);
}

template <typename Index>
struct Geometry
{
    Index channels, height, width, pooledHeight, pooledWidth;
    float scale;
    int samplingRatio;
    bool aligned;
};

// One thread per output element (k, c, ph, pw). Index: int32_t where every offset fits (the usual case: 64-bit
// division and multiplication cost several instructions each), else int64_t.
template <typename T, typename Index>
__global__ void roiAlignKernel(T const* input, T const* rois, T* output, Index total, Geometry<Index> g)
{
    for (auto index = static_cast<Index>(blockIdx.x * blockDim.x + threadIdx.x); index < total;
        index += static_cast<Index>(gridDim.x * blockDim.x))
    {
        Index const pw = index % g.pooledWidth;
        Index const ph = (index / g.pooledWidth) % g.pooledHeight;
        Index const c = (index / g.pooledWidth / g.pooledHeight) % g.channels;
        Index const k = index / g.pooledWidth / g.pooledHeight / g.channels;
        T const* roi = rois + k * 5;
        auto const batch = static_cast<Index>(toFloat(roi[0]));
        float const offset = g.aligned ? 0.5F : 0.0F;
        float const x1 = toFloat(roi[1]) * g.scale - offset;
        float const y1 = toFloat(roi[2]) * g.scale - offset;
        float roiWidth = toFloat(roi[3]) * g.scale - offset - x1;
        float roiHeight = toFloat(roi[4]) * g.scale - offset - y1;
        if (!g.aligned)
        {
            roiWidth = fmaxf(roiWidth, 1.0F);
            roiHeight = fmaxf(roiHeight, 1.0F);
        }
        float const binHeight = roiHeight / static_cast<float>(g.pooledHeight);
        float const binWidth = roiWidth / static_cast<float>(g.pooledWidth);
        int const gridHeight = g.samplingRatio > 0
                                   ? g.samplingRatio
                                   : static_cast<int>(ceilf(roiHeight / static_cast<float>(g.pooledHeight)));
        int const gridWidth = g.samplingRatio > 0
                                  ? g.samplingRatio
                                  : static_cast<int>(ceilf(roiWidth / static_cast<float>(g.pooledWidth)));
        float const count = fmaxf(static_cast<float>(gridHeight * gridWidth), 1.0F);
        T const* plane = input + (batch * g.channels + c) * g.height * g.width;
        float sum = 0.0F;
        for (int iy = 0; iy < gridHeight; ++iy)
        {
            float const y = y1 + static_cast<float>(ph) * binHeight
                            + (static_cast<float>(iy) + 0.5F) * binHeight / static_cast<float>(gridHeight);
            for (int ix = 0; ix < gridWidth; ++ix)
            {
                float const x = x1 + static_cast<float>(pw) * binWidth
                                + (static_cast<float>(ix) + 0.5F) * binWidth / static_cast<float>(gridWidth);
                sum += bilinear(plane, g.height, g.width, y, x);
            }
        }
        output[index] = fromFloat<T>(sum / count);
    }
}

template <typename T, typename Index>
cudaError_t launch(sdk::LaunchArgs const& a, Geometry<int64_t> const& g, int64_t total)
{
    Geometry<Index> const narrow{static_cast<Index>(g.channels), static_cast<Index>(g.height),
        static_cast<Index>(g.width), static_cast<Index>(g.pooledHeight), static_cast<Index>(g.pooledWidth), g.scale,
        g.samplingRatio, g.aligned};
    int const threads = 256;
    int64_t const blocks = (total + threads - 1) / threads;
    roiAlignKernel<T, Index><<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), threads, 0, a.stream>>>(
        static_cast<T const*>(a.inputs[0].data), static_cast<T const*>(a.inputs[1].data),
        static_cast<T*>(a.outputs[0].data), static_cast<Index>(total), narrow);
    return cudaGetLastError();
}

template <typename T>
cudaError_t launch(sdk::LaunchArgs const& a, Geometry<int64_t> const& g)
{
    int64_t const total = a.outputs[0].numel();
    if (total == 0)
    {
        return cudaSuccess;
    }
    // The grid-stride loop may step past total by one grid; the input's offsets stay below its element count.
    int64_t const limit = std::numeric_limits<int32_t>::max() - int64_t{65535} * 8 * 256;
    bool const narrow = total < limit && a.inputs[0].numel() < limit;
    return narrow ? launch<T, int32_t>(a, g, total) : launch<T, int64_t>(a, g, total);
}

} // namespace

namespace fields = torchvision::fields::roi_align;

cudaError_t roiAlign(sdk::LaunchArgs const& a)
{
    sdk::Tensor const& input = a.inputs[0];
    sdk::Tensor const& out = a.outputs[0];
    if (a.nbInputs != 2 || a.nbOutputs != 1 || a.nbScalars != fields::kNB_SCALARS || input.rank != 4 || out.rank != 4)
    {
        return cudaErrorInvalidValue;
    }
    // Pooled sizes from the output dims: they may have arrived as shape inputs.
    Geometry<int64_t> const g{input.dims[1], input.dims[2], input.dims[3], out.dims[2], out.dims[3],
        static_cast<float>(a.scalars[fields::kSPATIAL_SCALE]), static_cast<int>(a.scalars[fields::kSAMPLING_RATIO]),
        a.scalars[fields::kALIGNED] != 0.0};
    switch (input.dtype)
    {
    case DType::kFLOAT32: return launch<float>(a, g);
    case DType::kFLOAT16: return launch<__half>(a, g);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace ttp::vision
