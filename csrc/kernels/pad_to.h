// pad_to: y[p, h, w] = x[p, h, w] if h < height and w < width else value, for every plane p = (b, c);
// y is outHeight x outWidth per plane: value-padded at the bottom/right, cropped where it is smaller.
#pragma once

#include "sdk/dtypes.h"

namespace ttp
{

// x: planes x height x width, y: planes x outHeight x outWidth, both contiguous, of dtype `dtype`
// (kFLOAT32, kFLOAT16, kBFLOAT16 or kINT8). `value` is converted to `dtype` once (round to nearest;
// for kINT8 also saturated to [-128, 127]).
cudaError_t padTo(void const* x, void* y, int64_t planes, int64_t height, int64_t width, int64_t outHeight,
    int64_t outWidth, float value, DType dtype, cudaStream_t stream);

} // namespace ttp
