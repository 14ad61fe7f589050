// Kernel lab: times the production kernels (and, when scripts/kernel_lab/base/ holds the base commit's sources,
// the base kernels) against a device-to-device copy of the same bytes, as CUDA graphs of 20 calls (GPU time per
// call without launch overhead), rotating buffers beyond L2 for sizes above 8 MB. Also rms_norm's internal
// configurations, to choose the heuristic. Output: one table row per (op, shape, variant).
//   nvcc -std=c++17 -O3 -arch=sm_90 lab.cu pad_lab.cu ../../csrc/kernels/masked_rows.cu -o lab && ./lab
#include "../../csrc/kernels/masked_rows.h"
#include "../../csrc/kernels/rms_norm.cu"
#include "base_decls.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace ttp
{
cudaError_t padVariant(int variant, void const* x, void* y, int64_t planes, int64_t h, int64_t w, int64_t oh,
    int64_t ow, DType dtype, cudaStream_t stream);
char const* padVariantName(int variant);
} // namespace ttp

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

constexpr int kCallsPerGraph = 20;
constexpr int kReplays = 15;
constexpr size_t kRotateAbove = 8u << 20;
constexpr size_t kFootprint = 256u << 20;

// fn(set, stream) enqueues one call on buffer set `set`; returns the median microseconds per call.
double graphMicros(std::function<cudaError_t(int, cudaStream_t)> const& fn, int sets)
{
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    for (int i = 0; i < 3; ++i)
    {
        check(fn(i % sets, stream), "warm-up");
    }
    check(cudaStreamSynchronize(stream), "warm-up sync");
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
    for (int i = 0; i < kCallsPerGraph; ++i)
    {
        check(fn(i % sets, stream), "captured call");
    }
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    cudaGraphExec_t exec = nullptr;
    check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");
    check(cudaGraphLaunch(exec, stream), "graph warm-up");
    std::vector<double> samples;
    for (int r = 0; r < kReplays; ++r)
    {
        check(cudaEventRecord(start, stream), "record");
        check(cudaGraphLaunch(exec, stream), "graph launch");
        check(cudaEventRecord(stop, stream), "record");
        check(cudaEventSynchronize(stop), "sync");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
        samples.push_back(1e3 * ms / kCallsPerGraph);
    }
    std::sort(samples.begin(), samples.end());
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    return samples[samples.size() / 2];
}

bool gHot = false; // same buffers every call (L2-resident below its size), as the benchmarks' graph timer does

int setsFor(size_t bytes)
{
    if (gHot || bytes < kRotateAbove)
    {
        return 1;
    }
    return static_cast<int>(std::min<size_t>(8, std::max<size_t>(1, (kFootprint + bytes - 1) / bytes)));
}

struct Buffers
{
    std::vector<void*> in;
    std::vector<void*> out;
    explicit Buffers(int sets, size_t inBytes, size_t outBytes)
    {
        for (int s = 0; s < sets; ++s)
        {
            void* a = nullptr;
            void* b = nullptr;
            check(cudaMalloc(&a, std::max<size_t>(inBytes, 16)), "malloc in");
            check(cudaMalloc(&b, std::max<size_t>(outBytes, 16)), "malloc out");
            // Not zeros: a pseudo-random byte pattern (finite for every float type: exponent bits never all set).
            std::vector<uint8_t> host(inBytes);
            uint32_t state = 12345U + s;
            for (size_t i = 0; i < inBytes; ++i)
            {
                state = state * 1664525U + 1013904223U;
                host[i] = static_cast<uint8_t>((state >> 24) & 0x3f);
            }
            check(cudaMemcpy(a, host.data(), inBytes, cudaMemcpyHostToDevice), "fill");
            in.push_back(a);
            out.push_back(b);
        }
    }
    ~Buffers()
    {
        for (void* p : in)
            cudaFree(p);
        for (void* p : out)
            cudaFree(p);
    }
};

double copyMicros(size_t movedBytes)
{
    size_t const half = movedBytes / 2;
    int const sets = setsFor(movedBytes);
    Buffers b(sets, half, half);
    return graphMicros([&](int s, cudaStream_t st)
        { return cudaMemcpyAsync(b.out[s], b.in[s], half, cudaMemcpyDeviceToDevice, st); }, sets);
}

void row(char const* op, std::string const& shape, char const* variant, double us, double copyUs, size_t bytes)
{
    std::printf("%-12s %-22s %-34s %9.2f us  %7.1f%% of copy  (%.1f MB, copy %.2f us)%s\n", op, shape.c_str(), variant,
        us, 100.0 * copyUs / us, bytes / 1e6, copyUs, gHot ? " hot" : "");
    std::fflush(stdout);
}

using ttp::DType;

void rmsNormCases()
{
    struct Shape
    {
        int64_t rows, hidden;
        DType dtype;
    };
    Shape const shapes[] = {{1, 4096, DType::kBFLOAT16}, {8, 4096, DType::kBFLOAT16}, {128, 4096, DType::kBFLOAT16},
        {1024, 2048, DType::kBFLOAT16}, {1, 4096, DType::kFLOAT32}, {4096, 12288, DType::kBFLOAT16},
        {4096, 4096, DType::kBFLOAT16}, {100000, 128, DType::kBFLOAT16}, {65536, 4096, DType::kBFLOAT16},
        {16384, 8192, DType::kBFLOAT16}, {4096, 4096, DType::kFLOAT32}, {100000, 128, DType::kFLOAT32},
        {1000000, 64, DType::kBFLOAT16}, {2048, 16384, DType::kBFLOAT16}};
    for (Shape const& sh : shapes)
    {
        size_t const elt = ttp::dtypeSize(sh.dtype);
        size_t const xBytes = sh.rows * sh.hidden * elt;
        size_t const moved = 2 * xBytes + sh.hidden * elt;
        int const sets = setsFor(moved);
        Buffers b(sets, xBytes, xBytes);
        void* w = nullptr;
        check(cudaMalloc(&w, sh.hidden * elt), "w");
        check(cudaMemcpy(w, b.in[0], sh.hidden * elt, cudaMemcpyDeviceToDevice), "w fill");
        double const copy = copyMicros(moved);
        std::string const shape = std::to_string(sh.rows) + "x" + std::to_string(sh.hidden)
                                  + (sh.dtype == DType::kBFLOAT16 ? " bf16" : " fp32");
        using Launch = std::function<cudaError_t(void const*, void const*, void*, int64_t, int64_t, cudaStream_t)>;
        auto time = [&](char const* name, Launch const& launch)
        {
            double const us = graphMicros(
                [&](int s, cudaStream_t st) { return launch(b.in[s], w, b.out[s], sh.rows, sh.hidden, st); }, sets);
            row("rms_norm", shape, name, us, copy, moved);
        };
        time("rmsNorm() auto", [&](void const* x, void const* ww, void* y, int64_t r, int64_t h, cudaStream_t st)
            { return ttp::rmsNorm(x, ww, y, r, h, 1e-6F, 0.F, sh.dtype, ttp::RmsNormTactic::kAUTO, st); });
#ifdef TTP_LAB_BASE
        time("BASE rmsNorm() auto",
            [&](void const* x, void const* ww, void* y, int64_t r, int64_t h, cudaStream_t st)
            {
                return ttp_base::rmsNorm(
                    x, ww, y, r, h, 1e-6F, static_cast<ttp_base::DType>(sh.dtype), ttp_base::RmsNormTactic::kAUTO, st);
            });
#endif
        if (sh.dtype != DType::kBFLOAT16)
        {
            cudaFree(w);
            continue;
        }
        using T = __nv_bfloat16;
        int64_t const nvec = sh.hidden / 8;
#define TTP_BLOCK(C, B, P)                                                                                             \
    if (static_cast<int64_t>(C) * (B) >= nvec && static_cast<int64_t>(C) * (B) < 4 * nvec + (B))                       \
        time("block C=" #C " B=" #B " pw=" #P,                                                                         \
            [&](void const* x, void const* ww, void* y, int64_t r, int64_t h, cudaStream_t st)                         \
            {                                                                                                          \
                return ttp::launchBlockConfig<T, 8, C, B, P>(                                                          \
                    static_cast<T const*>(x), static_cast<T const*>(ww), static_cast<T*>(y), r, h, 1e-6F, 0.F, st);    \
            });
        TTP_BLOCK(1, 128, true)
        TTP_BLOCK(2, 128, true)
        TTP_BLOCK(4, 128, true)
        TTP_BLOCK(4, 128, false)
        TTP_BLOCK(1, 256, true)
        TTP_BLOCK(2, 256, true)
        TTP_BLOCK(2, 256, false)
        TTP_BLOCK(4, 256, false)
        TTP_BLOCK(4, 256, true)
        TTP_BLOCK(8, 256, false)
        TTP_BLOCK(1, 512, true)
        TTP_BLOCK(2, 512, false)
        TTP_BLOCK(3, 512, false)
        TTP_BLOCK(4, 512, false)
        TTP_BLOCK(6, 256, false)
        TTP_BLOCK(2, 768, false)
        TTP_BLOCK(2, 1024, false)
        TTP_BLOCK(4, 1024, false)
        TTP_BLOCK(3, 128, false)
        TTP_BLOCK(12, 128, false)
        TTP_BLOCK(12, 128, true)
        TTP_BLOCK(3, 512, true)
        TTP_BLOCK(6, 256, true)
        TTP_BLOCK(8, 256, true)
        TTP_BLOCK(4, 512, true)
        TTP_BLOCK(4, 384, true)
        TTP_BLOCK(4, 384, false)
        TTP_BLOCK(2, 512, true)
        TTP_BLOCK(8, 128, true)
        TTP_BLOCK(16, 128, true)
        TTP_BLOCK(16, 128, false)
        TTP_BLOCK(8, 256, false)
        TTP_BLOCK(6, 256, true)
#undef TTP_BLOCK
#define TTP_WARP(L, C, U, CAP)                                                                                         \
    if (nvec <= (L) * (C) && nvec > (L) * (C) / 2)                                                                     \
        time("warp L=" #L " C=" #C " U=" #U " cap=" #CAP,                                                              \
            [&](void const* x, void const* ww, void* y, int64_t r, int64_t h, cudaStream_t st)                         \
            {                                                                                                          \
                return ttp::launchWarpConfig<T, 8, L, C, U>(static_cast<T const*>(x), static_cast<T const*>(ww),       \
                    static_cast<T*>(y), r, h, 1e-6F, 0.F, st, CAP);                                                    \
            });
        TTP_WARP(16, 1, 1, 0)
        TTP_WARP(16, 1, 2, 0)
        TTP_WARP(16, 1, 4, 0)
        TTP_WARP(16, 1, 8, 0)
        TTP_WARP(16, 1, 4, 8)
        TTP_WARP(16, 1, 4, 4)
        TTP_WARP(16, 1, 2, 8)
        TTP_WARP(8, 1, 4, 0)
        TTP_WARP(8, 1, 2, 0)
        TTP_WARP(8, 1, 8, 0)
        TTP_WARP(8, 1, 4, 8)
        TTP_WARP(8, 2, 1, 0)
        TTP_WARP(8, 2, 2, 0)
        TTP_WARP(16, 1, 1, 4)
#undef TTP_WARP
        if (nvec <= 64)
        {
            time("warp tactic", [&](void const* x, void const* ww, void* y, int64_t r, int64_t h, cudaStream_t st)
                { return ttp::rmsNorm(x, ww, y, r, h, 1e-6F, 0.F, sh.dtype, ttp::RmsNormTactic::kWARP_PER_ROW, st); });
        }
        cudaFree(w);
    }
}

void padCases()
{
    struct Shape
    {
        int64_t planes, h, w, oh, ow;
        DType dtype;
    };
    Shape const shapes[] = {{8 * 64, 224, 224, 256, 256, DType::kINT8}, {8 * 64, 224, 224, 256, 256, DType::kBFLOAT16},
        {8 * 64, 256, 256, 224, 224, DType::kINT8}, {8 * 64, 256, 256, 224, 224, DType::kBFLOAT16},
        {32 * 3, 1000, 1000, 1024, 1024, DType::kINT8}, {64 * 128, 63, 63, 64, 64, DType::kINT8},
        {16 * 32, 512, 512, 480, 544, DType::kINT8}, {16 * 32, 512, 512, 480, 544, DType::kBFLOAT16},
        {64 * 128, 63, 63, 64, 64, DType::kBFLOAT16}, {1 * 3, 224, 224, 256, 256, DType::kBFLOAT16}};
    for (Shape const& sh : shapes)
    {
        size_t const elt = ttp::dtypeSize(sh.dtype);
        size_t const inBytes = sh.planes * sh.h * sh.w * elt;
        size_t const outBytes = sh.planes * sh.oh * sh.ow * elt;
        size_t const moved = sh.planes * std::min(sh.h, sh.oh) * std::min(sh.w, sh.ow) * elt + outBytes;
        int const sets = setsFor(moved);
        Buffers b(sets, inBytes, outBytes);
        double const copy = copyMicros(moved);
        std::string const shape = std::to_string(sh.planes) + "x" + std::to_string(sh.h) + "x" + std::to_string(sh.w)
                                  + "->" + std::to_string(sh.oh) + "x" + std::to_string(sh.ow)
                                  + (elt == 1 ? " i8" : " bf16");
        for (int v = 0; ttp::padVariantName(v) != nullptr; ++v)
        {
            if (v > 0 && (sh.w % (16 / elt) != 0 || sh.ow % (16 / elt) != 0))
            {
                continue;
            }
            double const us = graphMicros([&](int s, cudaStream_t st)
                { return ttp::padVariant(v, b.in[s], b.out[s], sh.planes, sh.h, sh.w, sh.oh, sh.ow, sh.dtype, st); },
                sets);
            row("pad_to", shape, ttp::padVariantName(v), us, copy, moved);
        }
        if (sh.oh <= sh.h && sh.ow <= sh.w)
        {
            // A crop is a strided copy: cudaMemcpy3DAsync of the kept box is the hardware's own way to move it.
            double const us3d = graphMicros(
                [&](int s, cudaStream_t st)
                {
                    cudaMemcpy3DParms p{};
                    p.srcPtr = make_cudaPitchedPtr(b.in[s], sh.w * elt, sh.ow * elt, sh.h);
                    p.dstPtr = make_cudaPitchedPtr(b.out[s], sh.ow * elt, sh.ow * elt, sh.oh);
                    p.extent = make_cudaExtent(sh.ow * elt, sh.oh, sh.planes);
                    p.kind = cudaMemcpyDeviceToDevice;
                    return cudaMemcpy3DAsync(&p, st);
                },
                sets);
            row("pad_to", shape, "PEER cudaMemcpy3DAsync (crop box)", us3d, copy, moved);
        }
#ifdef TTP_LAB_BASE
        double const us = graphMicros(
            [&](int s, cudaStream_t st)
            {
                return ttp_base::padTo(b.in[s], b.out[s], sh.planes, sh.h, sh.w, sh.oh, sh.ow, 0.F,
                    static_cast<ttp_base::DType>(sh.dtype), st);
            },
            sets);
        row("pad_to", shape, "BASE padTo()", us, copy, moved);
#endif
    }
}

void maskedCases()
{
    struct Shape
    {
        int64_t rows, rowBytes;
    };
    Shape const shapes[] = {{4000000, 32}, {10000000, 32}, {1000000, 256}, {10000000, 4}, {1000000, 4096}};
    for (Shape const& sh : shapes)
    {
        // Half the rows kept, at random (a fixed LCG), as a one-byte mask.
        std::vector<uint8_t> mask(sh.rows);
        uint32_t state = 7U;
        int64_t kept = 0;
        for (auto& m : mask)
        {
            state = state * 1664525U + 1013904223U;
            m = (state >> 31) & 1U;
            kept += m;
        }
        size_t const moved = sh.rows + 2 * kept * sh.rowBytes;
        // What DRAM must move at 32-byte sector granularity: every sector of x holding a kept row is read whole.
        int64_t sectors = 0;
        int64_t lastSector = -1;
        for (int64_t r = 0; r < sh.rows; ++r)
        {
            for (int64_t byte = r * sh.rowBytes; mask[r] && byte < (r + 1) * sh.rowBytes; byte += 32)
            {
                int64_t const sector = byte / 32;
                sectors += sector != lastSector;
                lastSector = sector;
            }
        }
        size_t const sectorMoved = sh.rows + sectors * 32 + kept * sh.rowBytes;
        int const sets = setsFor(moved);
        Buffers b(sets, sh.rows * sh.rowBytes, sh.rows * sh.rowBytes);
        void* m = nullptr;
        void* count = nullptr;
        void* ws = nullptr;
        size_t const wsBytes = std::max<size_t>(ttp::maskedRowsWorkspaceSize(sh.rows), 256) * 2;
        check(cudaMalloc(&m, sh.rows), "mask");
        check(cudaMalloc(&count, 8), "count");
        check(cudaMalloc(&ws, wsBytes), "ws");
        check(cudaMemcpy(m, mask.data(), sh.rows, cudaMemcpyHostToDevice), "mask fill");
        double const copy = copyMicros(moved);
        std::string const shape = std::to_string(sh.rows) + " x " + std::to_string(sh.rowBytes) + "B 50%";
        double const us = graphMicros(
            [&](int s, cudaStream_t st)
            {
                cudaError_t err
                    = ttp::maskedRowsCount(m, DType::kBOOL, sh.rows, sh.rowBytes, ws, count, DType::kINT32, st);
                return err != cudaSuccess ? err
                                          : ttp::maskedRowsScatter(b.in[s], b.out[s], sh.rows, sh.rowBytes, ws, st);
            },
            sets);
        row("masked_rows", shape, "count+scatter", us, copy, moved);
        std::printf("masked_rows  %-22s sectors: x read at 32-byte granularity %.1f MB (kept rows %.1f MB); a copy of "
                    "mask + sectors + y takes %.2f us: %.1f%% of copy at most\n",
            shape.c_str(), sectors * 32 / 1e6, kept * sh.rowBytes / 1e6, copyMicros(sectorMoved),
            100.0 * copy / copyMicros(sectorMoved));
        int32_t k = -1;
        check(cudaMemcpy(&k, count, 4, cudaMemcpyDeviceToHost), "read K");
        if (k != kept)
        {
            std::printf("masked_rows %s: K %d, expected %lld\n", shape.c_str(), k, static_cast<long long>(kept));
        }
#ifdef TTP_LAB_BASE
        double const baseUs = graphMicros(
            [&](int s, cudaStream_t st)
            {
                cudaError_t err = ttp_base::maskedRowsCount(
                    m, ttp_base::DType::kBOOL, sh.rows, sh.rowBytes, ws, count, ttp_base::DType::kINT32, st);
                return err != cudaSuccess
                           ? err
                           : ttp_base::maskedRowsScatter(b.in[s], b.out[s], sh.rows, sh.rowBytes, ws, st);
            },
            sets);
        row("masked_rows", shape, "BASE count+scatter", baseUs, copy, moved);
#endif
        cudaFree(m);
        cudaFree(count);
        cudaFree(ws);
    }
}

} // namespace

int main(int argc, char** argv)
{
    std::string const only = argc > 1 ? argv[1] : "all";
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "properties");
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    for (bool hot : {false, true})
    {
        gHot = hot;
        if (only == "all" || only == "rms_norm")
            rmsNormCases();
        if (only == "all" || only == "pad_to")
            padCases();
        if (only == "all" || only == "masked_rows")
            maskedCases();
    }
    return 0;
}
