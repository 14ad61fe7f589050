#include "roi_align.h"

#include "op_fields.h"
#include "roi_align.cuh"
#include "type_utils.cuh"

#include <limits>

namespace ttp::vision
{
namespace
{

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
        auto const [k, c, ph, pw] = binOf(index, g.channels, g.pooledHeight, g.pooledWidth);
        T const* plane = input + (static_cast<Index>(toFloat(rois[k * 5])) * g.channels + c) * g.height * g.width;
        output[index] = fromFloat<T>(roiBinAverage(plane, g.height, g.width, rois + k * 5, g.scale, ph, pw,
            g.pooledHeight, g.pooledWidth, g.samplingRatio, g.aligned));
    }
}

template <typename T, typename Index>
cudaError_t launch(sdk::LaunchArgs const& a, Geometry<int64_t> const& g, int64_t total)
{
    Geometry<Index> const narrow{static_cast<Index>(g.channels), static_cast<Index>(g.height),
        static_cast<Index>(g.width), static_cast<Index>(g.pooledHeight), static_cast<Index>(g.pooledWidth), g.scale,
        g.samplingRatio, g.aligned};
    roiAlignKernel<T, Index><<<binBlocks(total), kBIN_THREADS, 0, a.stream>>>(static_cast<T const*>(a.inputs[0].data),
        static_cast<T const*>(a.inputs[1].data), static_cast<T*>(a.outputs[0].data), static_cast<Index>(total), narrow);
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
