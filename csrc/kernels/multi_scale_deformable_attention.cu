#include "multi_scale_deformable_attention.h"
#include "type_utils.cuh"

#include <algorithm>
#include <climits>
#include <type_traits>

namespace ttp
{
namespace
{

constexpr int kBLOCK = 256;
constexpr int64_t kMAX_SIDE = 1 << 30; // a level's height or width: their products stay in int64, rows in int32

// One sample point of one (b, q, h): the value row (in S) of its top-left corner, the level's width (the rows of the
// other corners: row + 1, row + width, row + width + 1), which corners are inside (bit k: corner k of 00, 01, 10, 11,
// inside the level's map and the S rows), and each corner's bilinear weight times the point's attention weight.
struct MsdaPoint
{
    int32_t row;
    int32_t width;
    uint32_t inside;
    float weight[4];
};

// grid_sample's unnormalization of Hugging Face's grid 2 * loc - 1, align_corners=False, with no contraction into an
// fma, so that the pixel coordinates are those of the fp32 reference.
__device__ __forceinline__ float pixel(float loc, float size)
{
    return __fmul_rn(__fsub_rn(__fmul_rn(__fadd_rn(__fsub_rn(__fmul_rn(2.F, loc), 1.F), 1.F), size), 1.F), 0.5F);
}

template <typename T, typename I>
__device__ __forceinline__ MsdaPoint samplePoint(I const* __restrict__ shapes, I const* __restrict__ starts,
    T const* __restrict__ locations, T const* __restrict__ weights, int32_t j, int32_t points, int64_t spatial)
{
    MsdaPoint p{};
    int32_t const level = j / points;
    auto const height = static_cast<int64_t>(shapes[2 * level]);
    auto const width = static_cast<int64_t>(shapes[2 * level + 1]);
    auto const start = static_cast<int64_t>(starts[level]);
    if (height <= 0 || width <= 0 || height > kMAX_SIDE || width > kMAX_SIDE || start < 0 || start >= spatial)
    {
        return p;
    }
    p.width = static_cast<int32_t>(width);
    float const x = pixel(toFloat(locations[2 * j]), static_cast<float>(width));
    float const y = pixel(toFloat(locations[2 * j + 1]), static_cast<float>(height));
    if (!(x > -1.F && y > -1.F && x < static_cast<float>(width) && y < static_cast<float>(height))) // NaN: outside
    {
        return p;
    }
    float const x0 = floorf(x);
    float const y0 = floorf(y);
    float const fx = x - x0;
    float const fy = y - y0;
    auto const left = static_cast<int64_t>(x0);
    auto const top = static_cast<int64_t>(y0);
    int64_t const row = start + top * width + left;
    float const attention = toFloat(weights[j]);
    bool const inX[2] = {left >= 0, left + 1 < width};
    bool const inY[2] = {top >= 0, top + 1 < height};
    float const wx[2] = {1.F - fx, fx};
    float const wy[2] = {1.F - fy, fy};
#pragma unroll
    for (int k = 0; k < 4; ++k)
    {
        int64_t const r = row + (k & 1) + (k >> 1) * width;
        bool const inside = inX[k & 1] && inY[k >> 1] && r >= 0 && r < spatial;
        p.inside |= static_cast<uint32_t>(inside) << k;
        p.weight[k] = wy[k >> 1] * wx[k & 1] * attention;
    }
    p.row = static_cast<int32_t>(row);
    return p;
}

__device__ __forceinline__ MsdaPoint shuffled(MsdaPoint const& p, int src)
{
    MsdaPoint q;
    q.row = __shfl_sync(0xffffffffU, p.row, src);
    q.width = __shfl_sync(0xffffffffU, p.width, src);
    q.inside = __shfl_sync(0xffffffffU, p.inside, src);
#pragma unroll
    for (int k = 0; k < 4; ++k)
    {
        q.weight[k] = __shfl_sync(0xffffffffU, p.weight[k], src);
    }
    return q;
}

template <typename T, int VEC>
__device__ __forceinline__ void accumulate(
    float (&acc)[VEC], MsdaPoint const& p, T const* __restrict__ base, int64_t rowStride, bool channelInside)
{
    using V = Vec<T, VEC>;
    V corner[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
    {
        int64_t const r = static_cast<int64_t>(p.row) + (k & 1) + (k >> 1) * static_cast<int64_t>(p.width);
        bool const load = channelInside && ((p.inside >> k) & 1U);
        corner[k] = load ? *reinterpret_cast<V const*>(base + r * rowStride) : V{};
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
    {
        if ((p.inside >> k) & 1U)
        {
#pragma unroll
            for (int e = 0; e < VEC; ++e)
            {
                acc[e] += p.weight[k] * toFloat(corner[k].v[e]);
            }
        }
    }
}

// The (b, q, h) item of lane group `slot` (thread / group), or -1 past the last. HEAD_TILES: block k takes
// kBLOCK / group consecutive queries of one head, blocks ordered (b, query tile, h); else items in (b, q, h) order.
template <bool HEAD_TILES>
__device__ __forceinline__ int64_t itemOf(int64_t slot, int32_t group, MsdaShape const& shape)
{
    if constexpr (HEAD_TILES)
    {
        int64_t const perTile = kBLOCK / group;
        int64_t const tile = slot / perTile;
        int64_t const tilesPerHead = (shape.queries + perTile - 1) / perTile;
        int64_t const head = tile % shape.heads;
        int64_t const rest = tile / shape.heads;
        int64_t const batch = rest / tilesPerHead;
        int64_t const query = (rest % tilesPerHead) * perTile + slot % perTile;
        return batch < shape.batch && query < shape.queries ? (batch * shape.queries + query) * shape.heads + head : -1;
    }
    return slot < shape.batch * shape.queries * shape.heads ? slot : -1;
}

// GROUP lanes (a power of two <= 32, `group`) per (b, q, h) item, across its D / VEC channel vectors (a lane takes
// vectors member, member + group, ...). SHARED: lane t of a group computes points t, t + group, ... once and the
// group reads them by shuffle; else every lane computes every point (the group's loads of one location coincide).
// Every lane of a warp runs the same trip counts (one L * P for all items), so the shuffles see the whole warp.
template <typename T, typename I, int VEC, bool SHARED, bool HEAD_TILES>
__global__ void __launch_bounds__(kBLOCK) msdaKernel(T const* __restrict__ value, I const* __restrict__ shapes,
    I const* __restrict__ starts, T const* __restrict__ locations, T const* __restrict__ weights, T* __restrict__ out,
    MsdaShape shape, int32_t group)
{
    waitForPrerequisites();
    int64_t const thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    int32_t const lane = static_cast<int32_t>(threadIdx.x % kWarpSize);
    int32_t const member = lane & (group - 1);
    int32_t const leader = lane - member;
    int64_t const found = itemOf<HEAD_TILES>(thread / group, group, shape);
    bool const active = found >= 0;
    int64_t const item = active ? found : 0; // an idle group still takes part in the shuffles
    int64_t const head = item % shape.heads;
    int64_t const batch = item / (shape.heads * shape.queries);
    auto const pointsPerItem = static_cast<int32_t>(shape.levels * shape.points);
    auto const points = static_cast<int32_t>(shape.points);
    T const* itemLocations = locations + item * pointsPerItem * 2;
    T const* itemWeights = weights + item * pointsPerItem;
    int64_t const rowStride = shape.heads * shape.channels;
    auto const vectors = static_cast<int32_t>(shape.channels / VEC);
    for (int32_t first = 0; first < vectors; first += group)
    {
        int32_t const vector = first + member;
        bool const channelInside = vector < vectors;
        T const* base = value + (batch * shape.spatial * shape.heads + head) * shape.channels + vector * VEC;
        float acc[VEC] = {};
        if constexpr (SHARED)
        {
            for (int32_t j0 = 0; j0 < pointsPerItem; j0 += group)
            {
                MsdaPoint const mine
                    = j0 + member < pointsPerItem
                          ? samplePoint(shapes, starts, itemLocations, itemWeights, j0 + member, points, shape.spatial)
                          : MsdaPoint{};
                int32_t const n = min(group, pointsPerItem - j0);
#pragma unroll 4
                for (int32_t t = 0; t < n; ++t)
                {
                    accumulate<T, VEC>(acc, shuffled(mine, leader + t), base, rowStride, channelInside);
                }
            }
        }
        else
        {
#pragma unroll 4
            for (int32_t j = 0; j < pointsPerItem; ++j)
            {
                accumulate<T, VEC>(acc,
                    samplePoint(shapes, starts, itemLocations, itemWeights, j, points, shape.spatial), base, rowStride,
                    channelInside);
            }
        }
        if (active && channelInside)
        {
            Vec<T, VEC> result;
#pragma unroll
            for (int e = 0; e < VEC; ++e)
            {
                result.v[e] = fromFloat<T>(acc[e]);
            }
            *reinterpret_cast<Vec<T, VEC>*>(out + item * shape.channels + vector * VEC) = result;
        }
    }
}

// *p where `inside`, else zeros: moved as one word of V's size (a select of a vector of 16-bit elements would go
// through local memory).
template <typename V>
__device__ __forceinline__ V loadOrZero(V const* p, bool inside)
{
    constexpr size_t kBYTES = sizeof(V);
    static_assert(kBYTES == 16 || kBYTES == 8 || kBYTES == 4 || kBYTES == 2, "a vector of 2, 4, 8 or 16 bytes");
    using W = std::conditional_t<kBYTES == 16, uint4,
        std::conditional_t<kBYTES == 8, uint2, std::conditional_t<kBYTES == 4, uint32_t, uint16_t>>>;
    W word{};
    if (inside)
    {
        word = *reinterpret_cast<W const*>(p);
    }
    V v;
    std::memcpy(&v, &word, sizeof(v));
    return v;
}

// Blocks an SM the wide kernel's registers are bounded for: without a bound ptxas keeps it to 48-64 registers and
// spills; 3 (fp32: 4) measured best among 2, 3 and 4 (H200, docs/results.md).
template <typename T>
constexpr int kWideMinBlocks = sizeof(T) == 4 ? 4 : 3;

// Wide lanes: a lane takes VEC channels of one (b, q, h) item (16 bytes where D and the pointers allow: a group of
// four lanes for 32 16-bit channels) and computes every point itself, a level's shape once for its P points: no
// shuffles, and each point's arithmetic serves four 16-byte corner loads. A corner outside the map or S loads zeros,
// so every corner is summed without a branch. Blocks take consecutive items (head tiles measured slower here).
template <typename T, typename I, int VEC>
__global__ void __launch_bounds__(kBLOCK, kWideMinBlocks<T>) msdaWideKernel(T const* __restrict__ value,
    I const* __restrict__ shapes, I const* __restrict__ starts, T const* __restrict__ locations,
    T const* __restrict__ weights, T* __restrict__ out, MsdaShape shape, int32_t group)
{
    waitForPrerequisites();
    int64_t const thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    int64_t const item = itemOf<false>(thread / group, group, shape);
    if (item < 0)
    {
        return;
    }
    using V = Vec<T, VEC>;
    int64_t const head = item % shape.heads;
    int64_t const batch = item / (shape.heads * shape.queries);
    auto const levels = static_cast<int32_t>(shape.levels);
    auto const points = static_cast<int32_t>(shape.points);
    int64_t const spatial = shape.spatial;
    auto const rowStride = static_cast<int32_t>(shape.heads * shape.channels / VEC); // in vectors
    auto const vectors = static_cast<int32_t>(shape.channels / VEC);
    T const* itemLocations = locations + item * levels * points * 2;
    T const* itemWeights = weights + item * levels * points;
    for (auto vector = static_cast<int32_t>(thread % group); vector < vectors; vector += group)
    {
        V const* base = reinterpret_cast<V const*>(value) + (batch * spatial * shape.heads + head) * vectors + vector;
        float acc[VEC] = {};
        for (int32_t level = 0; level < levels; ++level)
        {
            auto const height = static_cast<int64_t>(shapes[2 * level]);
            auto const width = static_cast<int64_t>(shapes[2 * level + 1]);
            auto const start = static_cast<int64_t>(starts[level]);
            if (height <= 0 || width <= 0 || height > kMAX_SIDE || width > kMAX_SIDE || start < 0 || start >= spatial)
            {
                continue;
            }
            bool const fits = start + height * width <= spatial; // then a corner inside the map is inside S
            auto const fw = static_cast<float>(width);
            auto const fh = static_cast<float>(height);
            T const* levelLocations = itemLocations + 2 * level * points;
            T const* levelWeights = itemWeights + level * points;
#pragma unroll 4
            for (int32_t point = 0; point < points; ++point)
            {
                float const x = pixel(toFloat(levelLocations[2 * point]), fw);
                float const y = pixel(toFloat(levelLocations[2 * point + 1]), fh);
                if (!(x > -1.F && y > -1.F && x < fw && y < fh)) // NaN: outside
                {
                    continue;
                }
                float const x0 = floorf(x);
                float const y0 = floorf(y);
                float const fx = x - x0;
                float const fy = y - y0;
                auto const left = static_cast<int32_t>(x0);
                auto const top = static_cast<int32_t>(y0);
                int64_t const row = start + static_cast<int64_t>(top) * width + left;
                float const attention = toFloat(levelWeights[point]);
                bool const inX[2] = {left >= 0, left + 1 < width};
                bool const inY[2] = {top >= 0, top + 1 < height};
                float const wx[2] = {1.F - fx, fx};
                float const wy[2] = {1.F - fy, fy};
                V corner[4];
#pragma unroll
                for (int k = 0; k < 4; ++k)
                {
                    int64_t const r = row + (k & 1) + (k >> 1) * width;
                    bool const inside = inX[k & 1] && inY[k >> 1] && (fits || (r >= 0 && r < spatial));
                    // r < S < 2^31 where inside: the row's offset is one 32 x 32 -> 64-bit multiply
                    corner[k] = loadOrZero(base + static_cast<int64_t>(static_cast<int32_t>(r)) * rowStride, inside);
                }
#pragma unroll
                for (int k = 0; k < 4; ++k)
                {
                    float const weight = wy[k >> 1] * wx[k & 1] * attention;
#pragma unroll
                    for (int e = 0; e < VEC; ++e)
                    {
                        acc[e] += weight * toFloat(corner[k].v[e]);
                    }
                }
            }
        }
        V result;
#pragma unroll
        for (int e = 0; e < VEC; ++e)
        {
            result.v[e] = fromFloat<T>(acc[e]);
        }
        reinterpret_cast<V*>(out)[item * vectors + vector] = result;
    }
}

// The smallest power of two >= vectors, at most a warp.
inline int32_t groupFor(int64_t vectors)
{
    int32_t group = 1;
    while (group < kWarpSize && group < vectors)
    {
        group *= 2;
    }
    return group;
}

int64_t slotsFor(MsdaShape const& shape, int32_t group, bool headTiles)
{
    if (!headTiles)
    {
        return shape.batch * shape.queries * shape.heads;
    }
    int64_t const perTile = kBLOCK / group;
    return shape.batch * shape.heads * ((shape.queries + perTile - 1) / perTile) * perTile;
}

template <typename T, typename I, int VEC>
cudaError_t launchMsdaWide(T const* value, I const* shapes, I const* starts, T const* locations, T const* weights,
    T* out, MsdaShape const& shape, cudaStream_t stream)
{
    int32_t const group = groupFor(shape.channels / VEC);
    int64_t const blocks = (slotsFor(shape, group, false) * group + kBLOCK - 1) / kBLOCK;
    if (blocks > INT_MAX)
    {
        return cudaErrorInvalidValue;
    }
    auto* kernel = &msdaWideKernel<T, I, VEC>;
    return launchKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kBLOCK), stream, pdlSupported(), value,
        shapes, starts, locations, weights, out, shape, group);
}

template <typename T, typename I, int VEC>
cudaError_t launchMsda(T const* value, I const* shapes, I const* starts, T const* locations, T const* weights, T* out,
    MsdaShape const& shape, MsdaTactic tactic, cudaStream_t stream)
{
    int32_t const group = groupFor(shape.channels / VEC);
    if (tactic == MsdaTactic::kHEURISTIC)
    {
        // Sharing pays where enough lanes split the points' arithmetic (a group of few lanes computes them anyway);
        // head tiles keep neighbouring queries' corners in one block's L1. Not yet timed against each other.
        tactic = group >= 8 ? MsdaTactic::kHEAD_TILES : MsdaTactic::kPER_LANE_POINTS;
    }
    int64_t const blocks = (slotsFor(shape, group, tactic == MsdaTactic::kHEAD_TILES) * group + kBLOCK - 1) / kBLOCK;
    if (blocks > INT_MAX)
    {
        return cudaErrorInvalidValue;
    }
    void (*kernel)(T const*, I const*, I const*, T const*, T const*, T*, MsdaShape, int32_t) = nullptr;
    switch (tactic)
    {
    case MsdaTactic::kSHARED_POINTS: kernel = &msdaKernel<T, I, VEC, true, false>; break;
    case MsdaTactic::kPER_LANE_POINTS: kernel = &msdaKernel<T, I, VEC, false, false>; break;
    case MsdaTactic::kHEAD_TILES: kernel = &msdaKernel<T, I, VEC, true, true>; break;
    default: return cudaErrorInvalidValue;
    }
    return launchKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kBLOCK), stream, pdlSupported(), value,
        shapes, starts, locations, weights, out, shape, group);
}

} // namespace

cudaError_t multiScaleDeformableAttention(void const* value, void const* spatialShapes, void const* levelStartIndex,
    DType indexDtype, void const* locations, void const* weights, void* out, MsdaShape const& shape, DType dtype,
    MsdaTactic tactic, cudaStream_t stream)
{
    MsdaShape const& s = shape;
    if ((indexDtype != DType::kINT32 && indexDtype != DType::kINT64) || s.batch < 0 || s.spatial < 0 || s.heads < 0
        || s.channels < 0 || s.levels < 0 || s.queries < 0 || s.points < 0 || s.spatial > INT_MAX - kMAX_SIDE - 2
        || s.levels * s.points > INT_MAX / 2 || s.channels > INT_MAX)
    {
        return cudaErrorInvalidValue;
    }
    if (s.batch * s.queries * s.heads * s.channels == 0)
    {
        return cudaSuccess;
    }
    return withFloatType(dtype,
        [&](auto tag) -> cudaError_t
        {
            using T = decltype(tag);
            auto run = [&](auto const* shapes, auto const* starts) -> cudaError_t
            {
                auto const* v = static_cast<T const*>(value);
                auto const* loc = static_cast<T const*>(locations);
                auto const* w = static_cast<T const*>(weights);
                auto* y = static_cast<T*>(out);
                using I = std::remove_cv_t<std::remove_pointer_t<decltype(shapes)>>;
                auto const fitsVec = [&](int vec)
                {
                    return s.channels % vec == 0 && isAligned(value, vec * sizeof(T))
                           && isAligned(out, vec * sizeof(T));
                };
                constexpr int kWIDE = 16 / sizeof(T);
                if (tactic == MsdaTactic::kHEURISTIC && fitsVec(kWIDE))
                {
                    // 2.3-2.8x the other tactics at Deformable DETR's encoder and decoder sizes in every dtype (H200,
                    // docs/results.md); where 16-byte vectors do not fit, the wide kernel loses its point.
                    tactic = MsdaTactic::kWIDE_LANES;
                }
                if (tactic == MsdaTactic::kWIDE_LANES)
                {
                    // 16 bytes a load where D and the pointers allow it, else as the other tactics.
                    if (fitsVec(kWIDE))
                    {
                        return launchMsdaWide<T, I, kWIDE>(v, shapes, starts, loc, w, y, s, stream);
                    }
                    if constexpr (sizeof(T) == 2)
                    {
                        if (fitsVec(2))
                        {
                            return launchMsdaWide<T, I, 2>(v, shapes, starts, loc, w, y, s, stream);
                        }
                    }
                    return launchMsdaWide<T, I, 1>(v, shapes, starts, loc, w, y, s, stream);
                }
                // Two channels a load for 16-bit types, where D and the pointers allow it.
                if constexpr (sizeof(T) == 2)
                {
                    if (fitsVec(2))
                    {
                        return launchMsda<T, I, 2>(v, shapes, starts, loc, w, y, s, tactic, stream);
                    }
                }
                return launchMsda<T, I, 1>(v, shapes, starts, loc, w, y, s, tactic, stream);
            };
            return indexDtype == DType::kINT32
                       ? run(static_cast<int32_t const*>(spatialShapes), static_cast<int32_t const*>(levelStartIndex))
                       : run(static_cast<int64_t const*>(spatialShapes), static_cast<int64_t const*>(levelStartIndex));
        });
}

} // namespace ttp
