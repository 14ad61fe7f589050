// Kernels of the harness's test plugins; the faults are the ones the harness must catch.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace ttp::testplugins
{

enum class KernelFault : int32_t
{
    kNONE,
    kWRITE_PAST_END, // also writes y[n]
    kMODIFY_INPUT    // also overwrites x
};

// y = x * scale over n elements of float (half when `half`), `threads` per block.
cudaError_t scale(
    void const* x, void* y, int64_t n, float scale, bool half, int32_t threads, KernelFault fault, cudaStream_t stream);

// values = the elements of x greater than threshold, in order; *count = how many (int64, or float when
// `countAsFloat`). One thread: these run on test-sized inputs only.
cudaError_t positives(
    float const* x, float* values, void* count, int64_t n, float threshold, bool countAsFloat, cudaStream_t stream);

} // namespace ttp::testplugins
