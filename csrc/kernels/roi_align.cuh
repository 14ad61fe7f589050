// RoIAlign's device code, shared by roi_align.cu and multi_scale_roi_align.cu: torchvision's bilinear sampling
// (clamped to the border, zero beyond one pixel outside) and the average of one output bin's samples.
#pragma once

#include "type_utils.cuh"

#include <cstdint>

namespace ttp::vision
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

// The average of the samples of bin (ph, pw) of `roi` (batch index, x1, y1, x2, y2, in image coordinates: `scale`
// maps them onto `plane`), in fp32.
template <typename T, typename Index>
__device__ float roiBinAverage(T const* plane, Index height, Index width, T const* roi, float scale, Index ph, Index pw,
    Index pooledHeight, Index pooledWidth, int samplingRatio, bool aligned)
{
    float const offset = aligned ? 0.5F : 0.0F;
    float const x1 = toFloat(roi[1]) * scale - offset;
    float const y1 = toFloat(roi[2]) * scale - offset;
    float roiWidth = toFloat(roi[3]) * scale - offset - x1;
    float roiHeight = toFloat(roi[4]) * scale - offset - y1;
    if (!aligned)
    {
        roiWidth = fmaxf(roiWidth, 1.0F);
        roiHeight = fmaxf(roiHeight, 1.0F);
    }
    float const binHeight = roiHeight / static_cast<float>(pooledHeight);
    float const binWidth = roiWidth / static_cast<float>(pooledWidth);
    int const gridHeight
        = samplingRatio > 0 ? samplingRatio : static_cast<int>(ceilf(roiHeight / static_cast<float>(pooledHeight)));
    int const gridWidth
        = samplingRatio > 0 ? samplingRatio : static_cast<int>(ceilf(roiWidth / static_cast<float>(pooledWidth)));
    float const count = fmaxf(static_cast<float>(gridHeight * gridWidth), 1.0F);
    float sum = 0.0F;
    for (int iy = 0; iy < gridHeight; ++iy)
    {
        float const y = y1 + static_cast<float>(ph) * binHeight
                        + (static_cast<float>(iy) + 0.5F) * binHeight / static_cast<float>(gridHeight);
        for (int ix = 0; ix < gridWidth; ++ix)
        {
            float const x = x1 + static_cast<float>(pw) * binWidth
                            + (static_cast<float>(ix) + 0.5F) * binWidth / static_cast<float>(gridWidth);
            sum += bilinear(plane, height, width, y, x);
        }
    }
    return sum / count;
}

// The output element (k, c, ph, pw) that an index into a (K, C, PH, PW) output stands for.
template <typename Index>
struct Bin
{
    Index k, c, ph, pw;
};

template <typename Index>
__device__ Bin<Index> binOf(Index index, Index channels, Index pooledHeight, Index pooledWidth)
{
    Index const pw = index % pooledWidth;
    Index const ph = (index / pooledWidth) % pooledHeight;
    Index const c = (index / pooledWidth / pooledHeight) % channels;
    return Bin<Index>{index / pooledWidth / pooledHeight / channels, c, ph, pw};
}

// Blocks of kBIN_THREADS for a grid-stride loop over `total` output elements (at most 65535 * 8: the loop takes the
// rest).
constexpr int kBIN_THREADS = 256;

inline unsigned binBlocks(int64_t total)
{
    int64_t const blocks = (total + kBIN_THREADS - 1) / kBIN_THREADS;
    return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

} // namespace ttp::vision
