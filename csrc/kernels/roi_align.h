// roi_align: torchvision::roi_align's forward (average of bilinear samples per bin), behind the SDK launcher ABI.
//
// Inputs:  input (N, C, H, W), rois (K, 5) = (batch index, x1, y1, x2, y2), same floating type (fp32, fp16)
// Scalars: spatial_scale, pooled_height, pooled_width, sampling_ratio (<= 0: adaptive), aligned (0/1)
// Output:  (K, C, pooled_height, pooled_width); fp32 accumulation.
#pragma once

#include "sdk/ttp_sdk.h"

namespace ttp::vision
{

cudaError_t roiAlign(sdk::LaunchArgs const& args);

} // namespace ttp::vision
