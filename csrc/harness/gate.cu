#include "device.h"

namespace ttp::harness
{
namespace
{

__device__ uint64_t globalTimerNs()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void gateKernel(int32_t* flags, uint64_t timeoutNs)
{
    int32_t volatile* open = flags;
    uint64_t const start = globalTimerNs();
    while (*open == 0)
    {
        if (globalTimerNs() - start > timeoutNs)
        {
            flags[1] = 1;
            __threadfence_system();
            return;
        }
        __nanosleep(2000);
    }
}

} // namespace

cudaError_t launchGate(int32_t* flags, uint64_t timeoutNs, cudaStream_t stream)
{
    gateKernel<<<1, 1, 0, stream>>>(flags, timeoutNs);
    return cudaGetLastError();
}

} // namespace ttp::harness
