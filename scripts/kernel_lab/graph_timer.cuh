// The kernel labs' graph timer: fn enqueued 20 times into one CUDA graph on a fresh non-blocking stream, replayed 15
// times, the L2 flushed before each replay (a 256 MiB memset outside the timed span); the median microseconds per
// call. The benchmarks' graph timer does the same (torchtrt_plugins/benchmarks/timing.py): without the flush, the
// lab ranked add_rms_norm's float32 row splits differently from the benchmark (docs/results.md, 2026-11-28).
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <functional>
#include <vector>

namespace
{
void check(cudaError_t err, char const* what)
{
    if (err != cudaSuccess)
    {
        std::fprintf(stderr, "CUDA error %s at %s\n", cudaGetErrorString(err), what);
        std::exit(1);
    }
}

double graphMicros(std::function<cudaError_t(cudaStream_t)> const& fn)
{
    constexpr int kCalls = 20;
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    check(fn(stream), "warm-up");
    check(cudaStreamSynchronize(stream), "sync");
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
    for (int i = 0; i < kCalls; ++i)
    {
        check(fn(stream), "captured call");
    }
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    cudaGraphExec_t exec = nullptr;
    check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    cudaEvent_t a = nullptr;
    cudaEvent_t b = nullptr;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    constexpr size_t kFlushBytes = 256U << 20U;
    void* flush = nullptr;
    check(cudaMalloc(&flush, kFlushBytes), "flush buffer");
    check(cudaGraphLaunch(exec, stream), "warm graph");
    std::vector<double> samples;
    for (int r = 0; r < 15; ++r)
    {
        check(cudaMemsetAsync(flush, 0, kFlushBytes, stream), "flush");
        cudaEventRecord(a, stream);
        cudaGraphLaunch(exec, stream);
        cudaEventRecord(b, stream);
        check(cudaEventSynchronize(b), "sync");
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        samples.push_back(1e3 * ms / kCalls);
    }
    std::sort(samples.begin(), samples.end());
    cudaFree(flush);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    return samples[samples.size() / 2];
}
} // namespace
