// RoIAlign's device code, shared by roi_align.cu and multi_scale_roi_align.cu: torchvision's bilinear sampling
// (clamped to the border, zero beyond one pixel outside) and the average of one output bin's samples.
#pragma once

#include "type_utils.cuh"

#include <cstdint>

namespace ttp::vision
{

// One sampling point's four corners (clamped to the border) and their weights; `inside` false beyond one pixel
// outside the plane, where the sample is zero.
template <typename Index>
struct Corners
{
    Index y0, x0, y1, x1;
    float hy, hx, ly, lx;
    bool inside;
};

template <typename Index>
__device__ __forceinline__ Corners<Index> corners(Index height, Index width, float y, float x)
{
    Corners<Index> c{};
    c.inside = !(y < -1.0F || y > static_cast<float>(height) || x < -1.0F || x > static_cast<float>(width));
    if (!c.inside)
    {
        return c;
    }
    y = fmaxf(y, 0.0F);
    x = fmaxf(x, 0.0F);
    c.y0 = static_cast<Index>(y);
    c.x0 = static_cast<Index>(x);
    c.y1 = c.y0 + 1;
    c.x1 = c.x0 + 1;
    if (c.y0 >= height - 1)
    {
        c.y0 = c.y1 = height - 1;
        y = static_cast<float>(c.y0);
    }
    if (c.x0 >= width - 1)
    {
        c.x0 = c.x1 = width - 1;
        x = static_cast<float>(c.x0);
    }
    c.ly = y - static_cast<float>(c.y0);
    c.lx = x - static_cast<float>(c.x0);
    c.hy = 1.0F - c.ly;
    c.hx = 1.0F - c.lx;
    return c;
}

// The corners' values blended, each product and sum rounded in this order, so that every kernel forms a sample bit
// for bit the same (the compiler may not contract it otherwise).
template <typename Index>
__device__ __forceinline__ float blend(Corners<Index> const& c, float v00, float v01, float v10, float v11)
{
    float const sum = __fmaf_rn(__fmul_rn(c.hy, c.lx), v01, __fmul_rn(__fmul_rn(c.hy, c.hx), v00));
    return __fmaf_rn(__fmul_rn(c.ly, c.lx), v11, __fmaf_rn(__fmul_rn(c.ly, c.hx), v10, sum));
}

template <typename T, typename Index>
__device__ float bilinear(T const* plane, Index height, Index width, float y, float x)
{
    Corners<Index> const c = corners(height, width, y, x);
    if (!c.inside)
    {
        return 0.0F;
    }
    auto at = [&](Index r, Index col) { return toFloat(plane[r * width + col]); };
    return blend(c, at(c.y0, c.x0), at(c.y0, c.x1), at(c.y1, c.x0), at(c.y1, c.x1));
}

// The sampling grid of one RoI (batch index, x1, y1, x2, y2, in image coordinates: `scale` maps them onto the plane):
// its corner, bin sizes, samples per bin in each direction and their count.
struct RoiGrid
{
    float x1, y1, binHeight, binWidth;
    int gridHeight, gridWidth;
    float count;

    // Sample iy of bin row ph (and ix of bin column pw), each step rounded as torchvision rounds it.
    __device__ __forceinline__ float y(int64_t ph, int iy) const
    {
        return __fadd_rn(__fmaf_rn(static_cast<float>(ph), binHeight, y1),
            __fdiv_rn(__fmul_rn(__fadd_rn(static_cast<float>(iy), 0.5F), binHeight), static_cast<float>(gridHeight)));
    }
    __device__ __forceinline__ float x(int64_t pw, int ix) const
    {
        return __fadd_rn(__fmaf_rn(static_cast<float>(pw), binWidth, x1),
            __fdiv_rn(__fmul_rn(__fadd_rn(static_cast<float>(ix), 0.5F), binWidth), static_cast<float>(gridWidth)));
    }
};

template <typename T, typename Index>
__device__ __forceinline__ RoiGrid roiGrid(
    T const* roi, float scale, Index pooledHeight, Index pooledWidth, int samplingRatio, bool aligned)
{
    float const offset = aligned ? 0.5F : 0.0F;
    RoiGrid r{};
    auto const at = [&](int i) { return __fmaf_rn(toFloat(roi[i]), scale, -offset); };
    r.x1 = at(1);
    r.y1 = at(2);
    float roiWidth = __fsub_rn(at(3), r.x1);
    float roiHeight = __fsub_rn(at(4), r.y1);
    if (!aligned)
    {
        roiWidth = fmaxf(roiWidth, 1.0F);
        roiHeight = fmaxf(roiHeight, 1.0F);
    }
    r.binHeight = roiHeight / static_cast<float>(pooledHeight);
    r.binWidth = roiWidth / static_cast<float>(pooledWidth);
    r.gridHeight
        = samplingRatio > 0 ? samplingRatio : static_cast<int>(ceilf(roiHeight / static_cast<float>(pooledHeight)));
    r.gridWidth
        = samplingRatio > 0 ? samplingRatio : static_cast<int>(ceilf(roiWidth / static_cast<float>(pooledWidth)));
    r.count = fmaxf(static_cast<float>(r.gridHeight * r.gridWidth), 1.0F);
    return r;
}

// The average of the samples of bin (ph, pw) of `roi` (see RoiGrid), in fp32.
template <typename T, typename Index>
__device__ float roiBinAverage(T const* plane, Index height, Index width, T const* roi, float scale, Index ph, Index pw,
    Index pooledHeight, Index pooledWidth, int samplingRatio, bool aligned)
{
    RoiGrid const r = roiGrid(roi, scale, pooledHeight, pooledWidth, samplingRatio, aligned);
    float sum = 0.0F;
    for (int iy = 0; iy < r.gridHeight; ++iy)
    {
        float const y = r.y(ph, iy);
        for (int ix = 0; ix < r.gridWidth; ++ix)
        {
            sum += bilinear(plane, height, width, y, r.x(pw, ix));
        }
    }
    return sum / r.count;
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
