// Host time of what a launcher does per call, in a C++ loop (no torch): the device queries our launchers make, an
// empty kernel's launch three ways (<<<>>>, cudaLaunchKernelEx without attributes, with the programmatic-serialization
// attribute), and rms_norm's launcher entry (kernels/rms_norm.h) on tiny and decode-sized rows.
//   nvcc -std=c++17 -O3 -arch=sm_90 -I../../csrc launch_lab.cu ../../csrc/kernels/rms_norm.cu -o launch_lab
#include "kernels/rms_norm.h"
#include "kernels/type_utils.cuh"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

namespace
{

__global__ void emptyKernel(int* p)
{
    if (p != nullptr && threadIdx.x == 1000)
    {
        *p = 1;
    }
}

double micros(char const* name, std::function<void()> const& fn)
{
    constexpr int kCalls = 20000;
    std::vector<double> samples;
    for (int r = 0; r < 5; ++r)
    {
        cudaDeviceSynchronize();
        auto const start = std::chrono::steady_clock::now();
        for (int i = 0; i < kCalls; ++i)
        {
            fn();
        }
        auto const stop = std::chrono::steady_clock::now();
        samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count() / kCalls);
    }
    cudaDeviceSynchronize();
    std::sort(samples.begin(), samples.end());
    std::printf("%-58s median %6.3f us  (min %6.3f, max %6.3f)\n", name, samples[2], samples[0], samples[4]);
    return samples[2];
}

} // namespace

int main()
{
    cudaStream_t stream = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    void* x = nullptr;
    void* w = nullptr;
    void* y = nullptr;
    cudaMalloc(&x, 1 << 20);
    cudaMalloc(&w, 1 << 20);
    cudaMalloc(&y, 1 << 20);
    cudaMemset(x, 0, 1 << 20);
    cudaMemset(w, 0, 1 << 20);
    int device = 0;
    int value = 0;
    micros("cudaGetDevice", [&] { cudaGetDevice(&device); });
    micros("cudaDeviceGetAttribute(compute capability major)",
        [&] { cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, device); });
    micros("cudaDeviceGetAttribute(multiprocessor count)",
        [&] { cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device); });
    micros("cudaDeviceGetAttribute(L2 cache size)",
        [&] { cudaDeviceGetAttribute(&value, cudaDevAttrL2CacheSize, device); });
    micros("ttp::currentDeviceAttribute(multiprocessor count), cached",
        [&] { ttp::currentDeviceAttribute(cudaDevAttrMultiProcessorCount, &value); });
    micros("ttp::pdlSupported()", [&] { value = ttp::pdlSupported() ? 1 : 0; });
    micros("cudaGetLastError", [&] { (void)cudaGetLastError(); });
    micros("empty kernel <<<1, 128>>>", [&] { emptyKernel<<<1, 128, 0, stream>>>(nullptr); });
    micros("empty kernel cudaLaunchKernelEx, no attribute",
        [&] { ttp::launchKernel(emptyKernel, dim3(1), dim3(128), stream, false, nullptr); });
    micros("empty kernel cudaLaunchKernelEx, programmatic serialization",
        [&] { ttp::launchKernel(emptyKernel, dim3(1), dim3(128), stream, true, nullptr); });
    micros("rms_norm launcher 4x64 fp32 (warp kernel)",
        [&] { ttp::rmsNorm(x, w, y, 4, 64, 1e-6F, 0.F, ttp::DType::kFLOAT32, ttp::RmsNormTactic::kAUTO, stream); });
    micros("rms_norm launcher 1x4096 bf16 (row kernel, PDL)",
        [&] { ttp::rmsNorm(x, w, y, 1, 4096, 1e-6F, 0.F, ttp::DType::kBFLOAT16, ttp::RmsNormTactic::kAUTO, stream); });
    cudaError_t const err = cudaDeviceSynchronize();
    std::printf("status: %s\n", cudaGetErrorString(err));
    return err == cudaSuccess ? 0 : 1;
}
