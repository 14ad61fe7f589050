#include "roi_align.h"

#include "channels_last.cuh"
#include "op_fields.h"
#include "roi_align.cuh"
#include "type_utils.cuh"

#include <cstdint>
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

// Tactic 2: the input channels-last (the workspace), one block per RoI and slice of kLanes * VEC channels. Each
// group of kLanes lanes takes one bin: its sampling points, computed once, serve the lanes' VEC channels each, read
// with 16-byte loads; each sample is formed as roiBinAverage forms it. kBins bins at a time are staged in shared
// memory, so that the output, (K, C, PH, PW), is written in runs of consecutive bins.
constexpr int kLanes = 16;
constexpr int kBins = kBIN_THREADS / kLanes;

// bilinear()'s sample at (y, x) of VEC consecutive channels (`pixels` at the first, `channels` elements a pixel), added
// to `sum` (an outside point adds nothing, as bilinear()'s zero does): the same corners and blend, bit for bit.
template <typename T, int VEC>
__device__ __forceinline__ void addBilinearRun(
    T const* pixels, int64_t height, int64_t width, int64_t channels, float y, float x, float (&sum)[VEC])
{
    Corners<int64_t> const c = corners(height, width, y, x);
    if (!c.inside)
    {
        return;
    }
    using Load = Vec<T, VEC>;
    auto at
        = [&](int64_t r, int64_t col) { return *reinterpret_cast<Load const*>(pixels + (r * width + col) * channels); };
    Load const v00 = at(c.y0, c.x0);
    Load const v01 = at(c.y0, c.x1);
    Load const v10 = at(c.y1, c.x0);
    Load const v11 = at(c.y1, c.x1);
#pragma unroll
    for (int j = 0; j < VEC; ++j)
    {
        sum[j] += blend(c, toFloat(v00.v[j]), toFloat(v01.v[j]), toFloat(v10.v[j]), toFloat(v11.v[j]));
    }
}

template <typename T>
__global__ void __launch_bounds__(kBIN_THREADS)
    roiAlignChannelsLastKernel(T const* channelsLast, T const* rois, T* output, Geometry<int64_t> g)
{
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    constexpr int kSlice = kLanes * kVec;
    __shared__ T tile[kSlice * kBins];
    int64_t const k = blockIdx.x;
    int64_t const channel0 = static_cast<int64_t>(blockIdx.y) * kSlice;
    int const lane = static_cast<int>(threadIdx.x) % kLanes;
    int const slot = static_cast<int>(threadIdx.x) / kLanes;
    int64_t const channel = channel0 + lane * kVec;
    T const* roi = rois + k * 5;
    T const* pixels = channelsLast + static_cast<int64_t>(toFloat(roi[0])) * g.height * g.width * g.channels + channel;

    RoiGrid const r = roiGrid(roi, g.scale, g.pooledHeight, g.pooledWidth, g.samplingRatio, g.aligned);

    int64_t const bins = g.pooledHeight * g.pooledWidth;
    for (int64_t bin0 = 0; bin0 < bins; bin0 += kBins)
    {
        int64_t const bin = bin0 + slot;
        if (bin < bins && channel < g.channels)
        {
            int64_t const ph = bin / g.pooledWidth;
            int64_t const pw = bin - ph * g.pooledWidth;
            float sum[kVec] = {};
            for (int iy = 0; iy < r.gridHeight; ++iy)
            {
                float const y = r.y(ph, iy);
                for (int ix = 0; ix < r.gridWidth; ++ix)
                {
                    addBilinearRun<T, kVec>(pixels, g.height, g.width, g.channels, y, r.x(pw, ix), sum);
                }
            }
#pragma unroll
            for (int j = 0; j < kVec; ++j)
            {
                tile[(lane * kVec + j) * kBins + slot] = fromFloat<T>(sum[j] / r.count);
            }
        }
        __syncthreads();
        for (int i = static_cast<int>(threadIdx.x); i < kSlice * kBins; i += kBIN_THREADS)
        {
            int64_t const c = channel0 + i / kBins;
            int64_t const b = bin0 + i % kBins;
            if (c < g.channels && b < bins)
            {
                output[(k * g.channels + c) * bins + b] = tile[i];
            }
        }
        __syncthreads();
    }
}

// The channels-last copy's bytes where tactic 2 applies (a pixel's channels whole 16-byte vectors), else 0.
int64_t channelsLastBytes(sdk::Tensor const& input)
{
    int64_t const elementSize = dtypeSize(input.dtype);
    bool const applies = input.rank == 4 && input.dims[1] * elementSize % 16 == 0
                         && channelsLastFits(input.dims[0], input.dims[1], input.dims[2] * input.dims[3]);
    return applies ? input.numel() * elementSize : 0;
}

// Tactic 2 where the workspace holds the copy and the grid fits, else false (tactic 1 runs).
template <typename T>
bool launchChannelsLast(sdk::LaunchArgs const& a, Geometry<int64_t> const& g, cudaError_t& err)
{
    int64_t const bytes = channelsLastBytes(a.inputs[0]);
    int64_t const rois = a.inputs[1].dims[0];
    constexpr int64_t kSlice = kLanes * 16 / static_cast<int64_t>(sizeof(T));
    int64_t const slices = (g.channels + kSlice - 1) / kSlice;
    if (bytes == 0 || a.workspace == nullptr || a.workspaceSize < static_cast<size_t>(bytes)
        || reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0 || rois > std::numeric_limits<int32_t>::max()
        || slices > 65535)
    {
        return false;
    }
    auto* copy = static_cast<T*>(a.workspace);
    toChannelsLast(
        static_cast<T const*>(a.inputs[0].data), copy, a.inputs[0].dims[0], g.channels, g.height * g.width, a.stream);
    dim3 const grid(static_cast<unsigned>(rois), static_cast<unsigned>(slices));
    roiAlignChannelsLastKernel<T><<<grid, kBIN_THREADS, 0, a.stream>>>(
        copy, static_cast<T const*>(a.inputs[1].data), static_cast<T*>(a.outputs[0].data), g);
    err = cudaGetLastError();
    return true;
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
cudaError_t launch(sdk::LaunchArgs const& a, Geometry<int64_t> const& g, bool channelsLast)
{
    int64_t const total = a.outputs[0].numel();
    if (total == 0)
    {
        return cudaSuccess;
    }
    if (cudaError_t err = cudaSuccess; channelsLast && launchChannelsLast<T>(a, g, err))
    {
        return err;
    }
    // The grid-stride loop may step past total by one grid; the input's offsets stay below its element count.
    int64_t const limit = std::numeric_limits<int32_t>::max() - int64_t{65535} * 8 * 256;
    bool const narrow = total < limit && a.inputs[0].numel() < limit;
    return narrow ? launch<T, int32_t>(a, g, total) : launch<T, int64_t>(a, g, total);
}

} // namespace

namespace fields = torchvision::fields::roi_align;

namespace
{

// The launch arguments checked and read into `g`; false where they do not describe a roi_align.
bool readGeometry(sdk::LaunchArgs const& a, Geometry<int64_t>& g)
{
    if (a.nbInputs != 2 || a.nbOutputs != 1 || a.nbScalars != fields::kNB_SCALARS || a.inputs[0].rank != 4
        || a.outputs[0].rank != 4)
    {
        return false;
    }
    sdk::Tensor const& input = a.inputs[0];
    sdk::Tensor const& out = a.outputs[0];
    // Pooled sizes from the output dims: they may have arrived as shape inputs.
    g = Geometry<int64_t>{input.dims[1], input.dims[2], input.dims[3], out.dims[2], out.dims[3],
        static_cast<float>(a.scalars[fields::kSPATIAL_SCALE]), static_cast<int>(a.scalars[fields::kSAMPLING_RATIO]),
        a.scalars[fields::kALIGNED] != 0.0};
    return true;
}

// Tactic 0's choice: tactic 2 where its copy pays for itself, else tactic 1. The copy reads and writes every input
// element once; tactic 2 then saves on each sample it reads (one per RoI, bin, sampling point and channel). So it
// runs where the samples are at least half the input's pixels, per channel (4 points a bin where the ratio is
// adaptive): the crossover bench_roi_align measures on the H200 (docs/results.md).
bool channelsLastPays(sdk::LaunchArgs const& a, Geometry<int64_t> const& g)
{
    int64_t const points = g.samplingRatio > 0 ? int64_t{g.samplingRatio} * g.samplingRatio : 4;
    int64_t const samples = a.outputs[0].dims[0] * g.pooledHeight * g.pooledWidth * points;
    return 2 * samples >= a.inputs[0].dims[0] * g.height * g.width;
}

enum class Choice
{
    kPerElement,
    kChannelsLast,
    kHeuristic
};

cudaError_t run(sdk::LaunchArgs const& a, Choice choice)
{
    Geometry<int64_t> g{};
    if (!readGeometry(a, g))
    {
        return cudaErrorInvalidValue;
    }
    bool const channelsLast
        = choice == Choice::kChannelsLast || (choice == Choice::kHeuristic && channelsLastPays(a, g));
    switch (a.inputs[0].dtype)
    {
    case DType::kFLOAT32: return launch<float>(a, g, channelsLast);
    case DType::kFLOAT16: return launch<__half>(a, g, channelsLast);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace

size_t roiAlignWorkspaceSize(sdk::LaunchArgs const& a)
{
    Geometry<int64_t> g{};
    return readGeometry(a, g) ? static_cast<size_t>(channelsLastBytes(a.inputs[0])) : 0;
}

cudaError_t roiAlign(sdk::LaunchArgs const& a)
{
    return run(a, Choice::kHeuristic);
}

cudaError_t roiAlignPerElement(sdk::LaunchArgs const& a)
{
    return run(a, Choice::kPerElement);
}

cudaError_t roiAlignChannelsLast(sdk::LaunchArgs const& a)
{
    return run(a, Choice::kChannelsLast);
}

} // namespace ttp::vision
