// nms: torchvision::nms (greedy non-maximum suppression), behind the SDK launcher ABI. No host synchronization.
//
// Inputs:  dets (N, 4) = (x1, y1, x2, y2), scores (N,), fp32
// Scalars: iou_threshold (a box is dropped when its IoU with a kept, higher-scored box is > the threshold)
// Outputs: keep (N,) int64 buffer: the kept indices by decreasing score, K of them; size tensor K (0-D int64)
// Workspace: nmsWorkspaceSize: a score sort (cub) and the overlap bits, upper triangle by 64-box column block
//            (32 W (W + 1) words, W = ceil(N / 64)), and the kept bits (W words).
// Kernels:   iota, the sort, the overlap bits (one block per pair of 64-box blocks), the greedy walk (one block).
// Phases:    declared sizes_first: kPHASE_SIZES runs every kernel but writes the kept bits, not the indices, and K;
//            kPHASE_OUTPUTS writes the K indices from those bits (one block); kPHASE_ALL (the plugin) does both.
#pragma once

#include "sdk/ttp_sdk.h"

namespace ttp::vision
{

size_t nmsWorkspaceSize(sdk::LaunchArgs const& args);
cudaError_t nms(sdk::LaunchArgs const& args);

} // namespace ttp::vision
