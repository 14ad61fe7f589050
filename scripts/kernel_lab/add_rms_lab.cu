// add_rms_norm's row configurations (GROUP threads per row, C vectors each, BLOCK threads) timed against a copy of the
// same bytes, as CUDA graphs of 20 calls on the same buffers (the benchmarks' graph timer), per dtype and shape: to
// choose kRowConfigs. Also the production launcher ("auto").
//   nvcc -std=c++17 -O3 -arch=sm_90 add_rms_lab.cu -o add_rms_lab && ./add_rms_lab
#include "../../csrc/kernels/add_rms_norm.cu"
#include "graph_timer.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <type_traits>
#include <vector>

namespace
{
template <typename T>
constexpr ttp::DType kDType = sizeof(T) == 4              ? ttp::DType::kFLOAT32
                              : std::is_same_v<T, __half> ? ttp::DType::kFLOAT16
                                                          : ttp::DType::kBFLOAT16;

template <typename T>
void shape(char const* dtype, int64_t rows, int64_t hidden)
{
    constexpr int kVec = 16 / sizeof(T);
    size_t const bytes = static_cast<size_t>(rows * hidden) * sizeof(T);
    std::vector<void*> buf(5);
    for (auto& p : buf)
    {
        check(cudaMalloc(&p, bytes), "malloc");
        check(cudaMemset(p, 0x11, bytes), "memset");
    }
    auto* x = static_cast<T const*>(buf[0]);
    auto* r = static_cast<T*>(buf[1]);
    auto* w = static_cast<T const*>(buf[2]);
    auto* y = static_cast<T*>(buf[3]);
    size_t const moved = 4 * bytes + static_cast<size_t>(hidden) * sizeof(T);
    void* copyIn = nullptr;
    void* copyOut = nullptr;
    check(cudaMalloc(&copyIn, moved / 2), "malloc");
    check(cudaMalloc(&copyOut, moved / 2), "malloc");
    double const copyUs = graphMicros(
        [&](cudaStream_t s) { return cudaMemcpyAsync(copyOut, copyIn, moved / 2, cudaMemcpyDeviceToDevice, s); });
    cudaFree(copyIn);
    cudaFree(copyOut);
    int64_t const nvec = hidden / kVec;
    auto report = [&](char const* name, double us)
    {
        std::printf("%-5s %6lldx%-6lld %-24s %8.2f us  %6.1f%% of copy (copy %.2f us)\n", dtype,
            static_cast<long long>(rows), static_cast<long long>(hidden), name, us, 100.0 * copyUs / us, copyUs);
    };
    report("auto",
        graphMicros([&](cudaStream_t s) { return ttp::addRmsNorm(x, r, w, r, y, rows, hidden, 1e-6F, kDType<T>, s); }));
#define TTP_CONFIG(G, C, B)                                                                                            \
    if (nvec <= (G) * (C) && nvec > (G) * (C) / 3)                                                                     \
    {                                                                                                                  \
        report("g" #G " c" #C " b" #B,                                                                                 \
            graphMicros([&](cudaStream_t s)                                                                            \
                { return ttp::launchConfig<T, kVec, G, C, B>(x, r, w, r, y, rows, hidden, 1e-6F, false, s); }));       \
        report("g" #G " c" #C " b" #B " w-late", graphMicros(                                                          \
                                                     [&](cudaStream_t s)                                               \
                                                     {                                                                 \
                                                         return ttp::launchConfig<T, kVec, G, C, B, false>(            \
                                                             x, r, w, r, y, rows, hidden, 1e-6F, false, s);            \
                                                     }));                                                              \
        report("g" #G " c" #C " b" #B " st-cs",                                                                        \
            graphMicros([&](cudaStream_t s)                                                                            \
                { return ttp::launchConfig<T, kVec, G, C, B>(x, r, w, r, y, rows, hidden, 1e-6F, true, s); }));        \
    }
    TTP_CONFIG(32, 2, 256)
    TTP_CONFIG(128, 1, 128)
    TTP_CONFIG(128, 2, 128)
    TTP_CONFIG(128, 4, 128)
    TTP_CONFIG(256, 1, 256)
    TTP_CONFIG(256, 2, 256)
    TTP_CONFIG(256, 3, 256)
    TTP_CONFIG(256, 4, 256)
    TTP_CONFIG(256, 6, 256)
    TTP_CONFIG(256, 8, 256)
    TTP_CONFIG(384, 4, 384)
    TTP_CONFIG(512, 2, 512)
    TTP_CONFIG(512, 3, 512)
    TTP_CONFIG(768, 2, 768)
    TTP_CONFIG(512, 4, 512)
    TTP_CONFIG(1024, 1, 1024)
    TTP_CONFIG(512, 6, 512)
    TTP_CONFIG(512, 8, 512)
    TTP_CONFIG(768, 4, 768)
    TTP_CONFIG(1024, 2, 1024)
    TTP_CONFIG(1024, 3, 1024)
    TTP_CONFIG(1024, 4, 1024)
#undef TTP_CONFIG
    for (void* p : buf)
    {
        cudaFree(p);
    }
}

template <typename T>
void all(char const* dtype)
{
    int64_t const shapes[][2] = {{1, 4096}, {128, 4096}, {1024, 2048}, {4096, 4096}, {4096, 2048}, {4096, 12288},
        {4096, 8192}, {2048, 16384}, {100000, 128}};
    for (auto const& s : shapes)
    {
        shape<T>(dtype, s[0], s[1]);
    }
}
} // namespace

int main()
{
    all<__nv_bfloat16>("bf16");
    all<__half>("fp16");
    all<float>("fp32");
    return 0;
}
