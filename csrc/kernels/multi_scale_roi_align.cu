#include "multi_scale_roi_align.h"

#include "op_fields.h"
#include "roi_align.cuh"
#include "type_utils.cuh"

#include <cmath>
#include <limits>

namespace ttp::vision
{
namespace
{

template <typename T, typename Index>
struct Levels
{
    T const* data[kMAX_LEVELS];
    Index height[kMAX_LEVELS];
    Index width[kMAX_LEVELS];
    float scale[kMAX_LEVELS];
    int count;
    int lowest;  // k_min: -log2 of level 0's scale, truncated as torchvision's setup_scales truncates it
    int highest; // k_max: the same of the last level's
    Index channels, pooledHeight, pooledWidth;
    int samplingRatio;
    float canonicalScale, canonicalLevel;
    bool aligned;
};

// LevelMapper: floor(k0 + log2(sqrt(area) / s0) + 1e-6), clamped to [k_min, k_max], minus k_min; -1 where that is
// NaN (a box of negative area), which no level takes.
template <typename T, typename Index>
__device__ int levelOf(T const* roi, Levels<T, Index> const& g)
{
    float const area = (toFloat(roi[3]) - toFloat(roi[1])) * (toFloat(roi[4]) - toFloat(roi[2]));
    float const target = floorf(g.canonicalLevel + log2f(sqrtf(area) / g.canonicalScale) + 1e-6F);
    if (isnan(target))
    {
        return -1;
    }
    float const clamped = fminf(fmaxf(target, static_cast<float>(g.lowest)), static_cast<float>(g.highest));
    return static_cast<int>(clamped) - g.lowest;
}

// One thread per output element (k, c, ph, pw), as roi_align.cu's kernel; Index as there.
template <typename T, typename Index>
__global__ void multiScaleRoiAlignKernel(T const* rois, T* output, Index total, Levels<T, Index> g)
{
    for (auto index = static_cast<Index>(blockIdx.x * blockDim.x + threadIdx.x); index < total;
        index += static_cast<Index>(gridDim.x * blockDim.x))
    {
        auto const [k, c, ph, pw] = binOf(index, g.channels, g.pooledHeight, g.pooledWidth);
        T const* roi = rois + k * 5;
        int const level = levelOf(roi, g);
        float value = 0.0F;
        if (level >= 0 && level < g.count)
        {
            Index const height = g.height[level];
            Index const width = g.width[level];
            T const* plane = g.data[level] + (static_cast<Index>(toFloat(roi[0])) * g.channels + c) * height * width;
            value = roiBinAverage(plane, height, width, roi, g.scale[level], ph, pw, g.pooledHeight, g.pooledWidth,
                g.samplingRatio, g.aligned);
        }
        output[index] = fromFloat<T>(value);
    }
}

template <typename T, typename Index>
cudaError_t launch(sdk::LaunchArgs const& a, Levels<T, int64_t> const& wide, int64_t total)
{
    Levels<T, Index> g{};
    for (int l = 0; l < wide.count; ++l)
    {
        g.data[l] = wide.data[l];
        g.height[l] = static_cast<Index>(wide.height[l]);
        g.width[l] = static_cast<Index>(wide.width[l]);
        g.scale[l] = wide.scale[l];
    }
    g.count = wide.count;
    g.lowest = wide.lowest;
    g.highest = wide.highest;
    g.channels = static_cast<Index>(wide.channels);
    g.pooledHeight = static_cast<Index>(wide.pooledHeight);
    g.pooledWidth = static_cast<Index>(wide.pooledWidth);
    g.samplingRatio = wide.samplingRatio;
    g.canonicalScale = wide.canonicalScale;
    g.canonicalLevel = wide.canonicalLevel;
    g.aligned = wide.aligned;
    multiScaleRoiAlignKernel<T, Index>
        <<<binBlocks(total), kBIN_THREADS, 0, a.stream>>>(static_cast<T const*>(a.inputs[wide.count].data),
            static_cast<T*>(a.outputs[0].data), static_cast<Index>(total), g);
    return cudaGetLastError();
}

template <typename T>
cudaError_t launch(sdk::LaunchArgs const& a, Levels<T, int64_t> g)
{
    int64_t const total = a.outputs[0].numel();
    if (total == 0)
    {
        return cudaSuccess;
    }
    int64_t largest = total;
    for (int l = 0; l < g.count; ++l)
    {
        g.data[l] = static_cast<T const*>(a.inputs[l].data);
        largest = std::max(largest, a.inputs[l].numel());
    }
    // The grid-stride loop may step past total by one grid; the levels' offsets stay below their element counts.
    int64_t const limit = std::numeric_limits<int32_t>::max() - int64_t{65535} * 8 * 256;
    return largest < limit ? launch<T, int32_t>(a, g, total) : launch<T, int64_t>(a, g, total);
}

template <typename T>
Levels<T, int64_t> levelsOf(sdk::LaunchArgs const& a, int count, double const* scales)
{
    Levels<T, int64_t> g{};
    g.count = count;
    for (int l = 0; l < count; ++l)
    {
        g.height[l] = a.inputs[l].dims[2];
        g.width[l] = a.inputs[l].dims[3];
        g.scale[l] = static_cast<float>(scales[l]);
    }
    g.lowest = static_cast<int>(-std::log2(static_cast<float>(scales[0])));
    g.highest = static_cast<int>(-std::log2(static_cast<float>(scales[count - 1])));
    return g;
}

// One op per level count (a plugin takes a fixed number of inputs): the generated indices of each, by count.
struct FieldIndices
{
    int32_t count;
    int32_t scale0;
    int32_t samplingRatio;
    int32_t canonicalScale;
    int32_t canonicalLevel;
    int32_t aligned;
};

#define TTP_MSRA_FIELDS(L)                                                                                             \
    FieldIndices                                                                                                       \
    {                                                                                                                  \
        torchtrt_vision::fields::multi_scale_roi_align_##L::kNB_SCALARS,                                               \
            torchtrt_vision::fields::multi_scale_roi_align_##L::kSCALE_0,                                              \
            torchtrt_vision::fields::multi_scale_roi_align_##L::kSAMPLING_RATIO,                                       \
            torchtrt_vision::fields::multi_scale_roi_align_##L::kCANONICAL_SCALE,                                      \
            torchtrt_vision::fields::multi_scale_roi_align_##L::kCANONICAL_LEVEL,                                      \
            torchtrt_vision::fields::multi_scale_roi_align_##L::kALIGNED                                               \
    }
constexpr FieldIndices kFIELDS[kMAX_LEVELS + 1]
    = {{}, {}, TTP_MSRA_FIELDS(2), TTP_MSRA_FIELDS(3), TTP_MSRA_FIELDS(4), TTP_MSRA_FIELDS(5)};
#undef TTP_MSRA_FIELDS
static_assert(kMAX_LEVELS == 5, "kFIELDS lists every level count of vision.MULTI_SCALE_LEVELS");

} // namespace

cudaError_t multiScaleRoiAlign(sdk::LaunchArgs const& a)
{
    int const count = a.nbInputs - 1;
    if (count < 2 || count > kMAX_LEVELS || a.nbOutputs != 1 || a.nbScalars != kFIELDS[count].count)
    {
        return cudaErrorInvalidValue;
    }
    // pooled_height and pooled_width are read from the output dims instead: they may have arrived as shape inputs.
    FieldIndices const& f = kFIELDS[count];
    double const* scales = a.scalars + f.scale0;
    double const samplingRatio = a.scalars[f.samplingRatio];
    double const canonicalScale = a.scalars[f.canonicalScale];
    double const canonicalLevel = a.scalars[f.canonicalLevel];
    bool const aligned = a.scalars[f.aligned] != 0.0;

    sdk::Tensor const& rois = a.inputs[count];
    sdk::Tensor const& out = a.outputs[0];
    if (rois.rank != 2 || rois.dims[1] != 5 || rois.dtype != a.inputs[0].dtype || out.rank != 4
        || out.dims[0] != rois.dims[0] || !(canonicalScale > 0.0) || !std::isfinite(canonicalLevel))
    {
        return cudaErrorInvalidValue;
    }
    for (int l = 0; l < count; ++l)
    {
        sdk::Tensor const& level = a.inputs[l];
        if (level.rank != 4 || level.dtype != a.inputs[0].dtype || level.dims[0] != a.inputs[0].dims[0]
            || level.dims[1] != out.dims[1] || !(scales[l] > 0.0))
        {
            return cudaErrorInvalidValue;
        }
    }
    auto run = [&](auto zero)
    {
        using T = decltype(zero);
        Levels<T, int64_t> g = levelsOf<T>(a, count, scales);
        g.channels = out.dims[1];
        g.pooledHeight = out.dims[2];
        g.pooledWidth = out.dims[3];
        g.samplingRatio = static_cast<int>(samplingRatio);
        g.canonicalScale = static_cast<float>(canonicalScale);
        g.canonicalLevel = static_cast<float>(canonicalLevel);
        g.aligned = aligned;
        return launch<T>(a, g);
    };
    switch (a.inputs[0].dtype)
    {
    case DType::kFLOAT32: return run(float{});
    case DType::kFLOAT16: return run(__half{});
    default: return cudaErrorInvalidValue;
    }
}

} // namespace ttp::vision
