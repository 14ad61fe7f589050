// rotary_embedding: rotary position embedding (RoPE) of x (..., heads, head_dim) at `positions` (...), from a cos/sin
// cache (max_position, rotary_dim) in fp32: row p holds cos(a_pi) then sin(a_pi), a_pi = fp32(p) * fp32(f_i) (an fp32
// product), f_i = base^(-2i/rotary_dim) rounded to fp32, i < rotary_dim / 2, cos and sin rounded once to fp32. The
// first rotary_dim elements of each head rotate (NeoX: element i with i + rotary_dim/2; GPT-J: element 2i with 2i + 1),
// the rest pass through; fp32 math, rounded once.
#pragma once

#include "sdk/dtypes.h"

namespace ttp
{

size_t rotaryCacheBytes(int64_t maxPosition, int64_t rotaryDim);

// cache: rotaryCacheBytes(maxPosition, rotaryDim) bytes of device memory.
cudaError_t rotaryCache(float* cache, int64_t maxPosition, int64_t rotaryDim, double base, cudaStream_t stream);

// x, y: tokens x heads x headDim, contiguous, dtype `dtype` (fp32/fp16/bf16); positions: tokens, int32 or int64
// (`positionsDtype`), each in [0, maxPosition) (others are clamped into it).
cudaError_t rotaryEmbedding(void const* x, void const* positions, DType positionsDtype, float const* cache, void* y,
    int64_t tokens, int64_t heads, int64_t headDim, int64_t rotaryDim, int64_t maxPosition, bool isNeox, DType dtype,
    cudaStream_t stream);

} // namespace ttp
