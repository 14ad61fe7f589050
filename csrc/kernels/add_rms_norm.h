// add_rms_norm: residual[r, :] += x[r, :] (rounded to the dtype), then y[r, :] = rms_norm(residual[r, :]) * weight,
// the norm in fp32 from the rounded sum and rounded once: exactly `h = h + x; y = rms_norm(h, weight, eps)`.
#pragma once

#include "sdk/dtypes.h"

namespace ttp
{

// x, residual, residualOut, y: rows x hidden, contiguous; weight: hidden; all of dtype `dtype` (fp32/fp16/bf16).
// residualOut may be residual itself (the in-place update); each element is read before it is written, by the
// same thread, so nothing else may alias.
cudaError_t addRmsNorm(void const* x, void const* residual, void const* weight, void* residualOut, void* y,
    int64_t rows, int64_t hidden, float eps, DType dtype, cudaStream_t stream);

} // namespace ttp
