// roi_align: torchvision::roi_align's forward (average of bilinear samples per bin), behind the SDK launcher ABI.
//
// Inputs:  input (N, C, H, W), rois (K, 5) = (batch index, x1, y1, x2, y2), same floating type (fp32, fp16)
// Scalars: spatial_scale, pooled_height, pooled_width, sampling_ratio (<= 0: adaptive), aligned (0/1)
// Output:  (K, C, pooled_height, pooled_width); fp32 accumulation.
//
// Tactics: 0 (roiAlign) the heuristic: 2 where the samples (RoIs x bins x points) are at least half the input's
// pixels, else 1; 1 (roiAlignPerElement) a thread per output element, torchvision's
// design; 2 (roiAlignChannelsLast) the input copied channels-last into the workspace, a block per RoI and channel
// slice, each bin's sampling points computed once for 16 lanes of 16-byte channel runs, where C's elements fill whole
// 16-byte vectors, else as 1.
// Workspace: roiAlignWorkspaceSize: the channels-last copy (N * C * H * W elements) where tactic 2 applies.
#pragma once

#include "sdk/ttp_sdk.h"

namespace ttp::vision
{

size_t roiAlignWorkspaceSize(sdk::LaunchArgs const& args);
cudaError_t roiAlign(sdk::LaunchArgs const& args);
cudaError_t roiAlignPerElement(sdk::LaunchArgs const& args);
cudaError_t roiAlignChannelsLast(sdk::LaunchArgs const& args);

} // namespace ttp::vision
