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
    kMODIFY_INPUT,   // also overwrites x
    kTRAP_ON_FILL    // traps where an element of x is the harness's fill pattern (bytes 0xCD): read before it was
                     // written, where a plugin indexing by it would fault
};

// y = x * scale over n elements of float (half when `half`), `threads` per block.
cudaError_t scale(
    void const* x, void* y, int64_t n, float scale, bool half, int32_t threads, KernelFault fault, cudaStream_t stream);

// y = x over n elements of 4 (or 2, when `half`) bytes, the highest first: block b copies the b-th run of 256 from
// the end, so the first writes land where a fill of y running upwards from its start arrives last.
cudaError_t copyDownward(void const* x, void* y, int64_t n, bool half, cudaStream_t stream);

// values = the elements of x greater than threshold, in order; *count = how many (int64, or float when
// `countAsFloat`). One thread: these run on test-sized inputs only.
cudaError_t positives(
    float const* x, float* values, void* count, int64_t n, float threshold, bool countAsFloat, cudaStream_t stream);

} // namespace ttp::testplugins
