// multi_scale_roi_align: torchvision's MultiScaleRoIAlign (torchvision/ops/poolers.py) as one launch: each RoI goes to
// the feature level its box's scale picks (FPN's LevelMapper) and is pooled there as torchvision::roi_align pools it.
//
// Inputs:  level_0 .. level_{L-1} (N, C, H_l, W_l), 2 <= L <= kMAX_LEVELS, then rois (K, 5) = (batch index, x1, y1,
//          x2, y2) in image coordinates; one floating type (fp32, fp16)
// Scalars: scale_0 .. scale_{L-1} (each level's spatial scale), pooled_height, pooled_width, sampling_ratio
//          (<= 0: adaptive), canonical_scale, canonical_level, aligned (0/1)
// Output:  (K, C, pooled_height, pooled_width), in RoI order; a RoI whose level falls outside the levels given (or
//          whose box has a negative area) is zero, as in torchvision. fp32 accumulation; the level in fp32.
#pragma once

#include "sdk/ttp_sdk.h"

namespace ttp::vision
{

constexpr int kMAX_LEVELS = 5;

cudaError_t multiScaleRoiAlign(sdk::LaunchArgs const& args);

} // namespace ttp::vision
