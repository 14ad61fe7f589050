// rms_norm: y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * (weight + weightOffset), all in fp32, rounded once.
#pragma once

#include "sdk/dtypes.h"

namespace ttp
{

// Tactics are the plugin's custom tactic values: non-zero, stable across releases (they are serialized
// into timing caches). kAUTO is never advertised; it lets the heuristic choose.
enum class RmsNormTactic : int32_t
{
    kAUTO = 0,
    kWARP_PER_ROW = 1,
    kBLOCK_PER_ROW = 2,
    // Large launches: rows past the L2 at a compiled length (4096, 8192, 12288, 16384) in the two-pass form
    // (norm_two_pass.cuh), short rows (16 vectors to 1024 elements) laid out as inductor does; elsewhere tactic 1 or 2.
    kLARGE = 3,
};

// x, y: rows x hidden, contiguous; weight: hidden. All three of dtype `dtype` (fp32/fp16/bf16).
cudaError_t rmsNorm(void const* x, void const* weight, void* y, int64_t rows, int64_t hidden, float eps,
    float weightOffset, DType dtype, RmsNormTactic tactic, cudaStream_t stream);

// rms_norm quantized by a per-tensor scale: y = saturate(round(rms_norm(x) * (weight + weightOffset) / *scale)), from
// the fp32 value (never rounded to dtype first). outDtype: kFLOAT8_E4M3 (saturated to +-448) or kINT8 (round half to
// even, saturated to [-128, 127]). scale: one fp32 value in device memory, read by the kernel (no host copy).
cudaError_t rmsNormQuant(void const* x, void const* weight, float const* scale, void* y, int64_t rows, int64_t hidden,
    float eps, float weightOffset, DType dtype, DType outDtype, RmsNormTactic tactic, cudaStream_t stream);

// The tactic kAUTO resolves to for this problem.
RmsNormTactic rmsNormHeuristic(int64_t rows, int64_t hidden, DType dtype);

} // namespace ttp
