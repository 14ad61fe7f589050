// multi_scale_deformable_attention: Deformable DETR's attention. value (B, S, H, D) holds L levels flattened one
// after the other (level l: spatialShapes[l] = (H_l, W_l), row-major, from row levelStartIndex[l]); each (b, q, h)
// samples P points per level at locations (B, Q, H, L, P, 2), (x, y) in [0, 1], bilinearly with zero padding
// (grid_sample, align_corners=False), and sums them weighted by weights (B, Q, H, L, P) into out (B, Q, H * D). fp32
// math, rounded once. A corner outside the level's map or outside the S rows of value is padding.
#pragma once

#include "sdk/dtypes.h"

namespace ttp
{

// How the lanes of one (b, q, h) share the work of its L * P points, and which items a block takes.
enum class MsdaTactic : int32_t
{
    kHEURISTIC = 0,
    // Each lane computes some points' corners and weights once; the group reads them by shuffle. A block takes
    // consecutive items: the heads of consecutive queries.
    kSHARED_POINTS = 1,
    // Every lane computes every point itself (no shuffles; the group's loads of one location coincide).
    kPER_LANE_POINTS = 2,
    // As kSHARED_POINTS, but a block takes consecutive queries of one head: neighbouring queries (an encoder's
    // pixels) sample overlapping corners of the same head's channels, which the block then finds in L1.
    kHEAD_TILES = 3,
    // Every lane computes every point itself and takes 16 bytes of channels (a group of D / 8 lanes for 16-bit
    // types, D / 4 for fp32, where D and the pointers allow): no shuffles, each point's arithmetic shared by wider
    // loads. A block takes consecutive items. The heuristic's choice wherever 16-byte vectors fit.
    kWIDE_LANES = 4,
};

struct MsdaShape
{
    int64_t batch;
    int64_t spatial;  // S
    int64_t heads;    // H
    int64_t channels; // D
    int64_t levels;   // L
    int64_t queries;  // Q
    int64_t points;   // P
};

// value, locations, weights, out: contiguous, dtype `dtype` (fp32/fp16/bf16); spatialShapes (L, 2) and
// levelStartIndex (L,): device memory, int32 or int64 (`indexDtype`).
cudaError_t multiScaleDeformableAttention(void const* value, void const* spatialShapes, void const* levelStartIndex,
    DType indexDtype, void const* locations, void const* weights, void* out, MsdaShape const& shape, DType dtype,
    MsdaTactic tactic, cudaStream_t stream);

} // namespace ttp
