// nms: torchvision::nms (greedy non-maximum suppression), behind the SDK launcher ABI. No host synchronization.
//
// Inputs:  dets (N, 4) = (x1, y1, x2, y2), scores (N,), fp32
// Scalars: iou_threshold (a box is dropped when its IoU with a kept, higher-scored box is > the threshold)
// Outputs: keep (N,) int64 buffer: the kept indices by decreasing score, K of them; size tensor K (0-D int64)
// Workspace: nmsWorkspaceSize: a score sort (cub), the N x ceil(N / 64) overlap bit matrix and the removed bits.
#pragma once

#include "sdk/ttp_sdk.h"

namespace ttp::vision
{

size_t nmsWorkspaceSize(sdk::LaunchArgs const& args);
cudaError_t nms(sdk::LaunchArgs const& args);

} // namespace ttp::vision
