// deform_conv2d: torchvision::deform_conv2d's forward (DCN v1 without a mask, v2 with), behind the SDK launcher ABI.
//
// Inputs:  input (N, C, H, W), weight (O, C / groups, kh, kw), offset (N, 2 * offset_groups * kh * kw, out_h, out_w),
//          mask (N, offset_groups * kh * kw, out_h, out_w; read only when use_mask), bias (O), one floating type
//          (fp32, fp16, bf16)
// Scalars: stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups, offset_groups, use_mask (0/1)
// Output:  (N, O, out_h, out_w)
//
// One fused implicit GEMM per weight group: a block computes a tile of output pixels x output channels; for each
// K-chunk (K runs tap-major: kernel tap, then input channel) it samples the input bilinearly into shared memory and
// multiplies it with the weight tile on tensor cores (wmma), fp32 accumulation. A pixel's sampling point (corners,
// weights, mask) is computed once per tap and serves every channel; the next chunk is read into registers while the
// current one is multiplied. fp16 and bf16 multiply in their own type; fp32 as three TF32
// products (the operands split into a TF32 part and a TF32 remainder), which keeps about fp32's accuracy.
//
// Tactics: 0 (deformConv2d) the heuristic: as tactic 2 (faster than 1 at every shape measured on the H200);
// 1 (deformConv2dPlanes) samples the NCHW input, a scattered load per corner and channel; 2 (deformConv2dChannelsLast)
// first writes the input as (N, H, W, C) and the weight tap-major ((O, kh, kw, C / groups)) into the workspace, then
// runs a two-stage kernel: each weight tile copied into shared memory with cp.async, the next chunk's corner runs (8
// consecutive channels, 16-byte loads) loaded before the current chunk's products and blended after them. It applies
// where K-chunks hold whole taps (C / groups a multiple of 32, one offset group), else it runs as tactic 1.
// Workspace: deformConv2dWorkspaceSize: the channels-last copy (N * C * H * W elements) and the tap-major weight
// (O * C / groups * kh * kw elements) where tactic 2's path applies, else nothing.
#pragma once

#include "sdk/ttp_sdk.h"

namespace ttp::vision
{

size_t deformConv2dWorkspaceSize(sdk::LaunchArgs const& args);
cudaError_t deformConv2d(sdk::LaunchArgs const& args);
cudaError_t deformConv2dPlanes(sdk::LaunchArgs const& args);
cudaError_t deformConv2dChannelsLast(sdk::LaunchArgs const& args);

} // namespace ttp::vision
