// The benchmarks' hand-written C++ torch op: rms_norm as a user writes one by hand against the full LibTorch API
// (TORCH_LIBRARY, an unboxed kernel, at::empty_like, the current stream), calling the same launcher as the declared
// op (the launcher table's tactic 0, handed over by address). The host time of an eager call of ours is judged
// against it in the same process: what the generic boxed kernel costs over the launcher, beside what a
// hand-written op costs. Built on first use by torchtrt_plugins.benchmarks.handwritten (torch.utils.cpp_extension).
//
// Also, for the host-time breakdown (scripts/eager_overhead.py): the same op without its launch, the launcher alone
// in a C++ loop, and an op's call through the C++ dispatcher in a C++ loop (no Python).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <chrono>
#include <cmath>

#include "sdk/ttp_sdk.h"

namespace
{

ttp::sdk::Launcher gLauncher = nullptr;

ttp::DType kernelDType(at::ScalarType type)
{
    switch (type)
    {
    case at::kFloat: return ttp::DType::kFLOAT32;
    case at::kHalf: return ttp::DType::kFLOAT16;
    case at::kBFloat16: return ttp::DType::kBFLOAT16;
    default: TORCH_CHECK(false, "handwritten.rms_norm: argument 'x' must be float32, float16 or bfloat16");
    }
}

ttp::sdk::Tensor view(at::Tensor const& t)
{
    ttp::sdk::Tensor out{t.data_ptr(), kernelDType(t.scalar_type()), static_cast<int32_t>(t.dim()), {}};
    for (int64_t d = 0; d < t.dim(); ++d)
    {
        out.dims[d] = t.size(d);
    }
    return out;
}

at::Tensor rmsNormImpl(at::Tensor const& x, at::Tensor const& weight, double eps, double offset, bool launch)
{
    TORCH_CHECK(x.is_cuda() && weight.device() == x.device(), "handwritten.rms_norm: x and weight on one CUDA device");
    TORCH_CHECK(weight.scalar_type() == x.scalar_type(), "handwritten.rms_norm: weight must have x's dtype");
    TORCH_CHECK(std::isfinite(eps) && eps > 0, "handwritten.rms_norm: argument 'eps' must be a float > 0");
    TORCH_CHECK(x.dim() >= 1 && x.dim() <= ttp::sdk::kMAX_DIMS && weight.dim() == 1 && weight.size(0) == x.size(-1),
        "handwritten.rms_norm: argument 'weight' must have shape (x.shape[-1],)");
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor xc = x.contiguous();
    at::Tensor wc = weight.contiguous();
    at::Tensor y = at::empty_like(xc, at::MemoryFormat::Contiguous);
    if (launch)
    {
        ttp::sdk::Tensor const in[2] = {view(xc), view(wc)};
        ttp::sdk::Tensor const out[1] = {view(y)};
        double const scalars[2] = {eps, offset};
        ttp::sdk::LaunchArgs const args{in, 2, out, 1, scalars, 2, nullptr, 0, 0, c10::cuda::getCurrentCUDAStream()};
        cudaError_t const status = gLauncher(args);
        TORCH_CHECK(status == cudaSuccess, "handwritten.rms_norm: launch failed: ", cudaGetErrorString(status));
    }
    return y;
}

at::Tensor rmsNorm(at::Tensor const& x, at::Tensor const& weight, double eps, double offset)
{
    return rmsNormImpl(x, weight, eps, offset, true);
}

at::Tensor rmsNormNoLaunch(at::Tensor const& x, at::Tensor const& weight, double eps, double offset)
{
    return rmsNormImpl(x, weight, eps, offset, false);
}

void setLauncher(int64_t address)
{
    gLauncher = reinterpret_cast<ttp::sdk::Launcher>(address);
}

// Microseconds per launcher call over `calls` calls in a C++ loop (the last synchronized).
double launcherMicros(at::Tensor const& x, at::Tensor const& weight, at::Tensor const& y, int64_t calls)
{
    ttp::sdk::Tensor const in[2] = {view(x), view(weight)};
    ttp::sdk::Tensor const out[1] = {view(y)};
    double const scalars[2] = {1e-6, 0.0};
    ttp::sdk::LaunchArgs const args{in, 2, out, 1, scalars, 2, nullptr, 0, 0, c10::cuda::getCurrentCUDAStream()};
    auto const start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i)
    {
        TORCH_CHECK(gLauncher(args) == cudaSuccess, "launch failed");
    }
    auto const stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(stop - start).count() / static_cast<double>(calls);
}

// Microseconds per call of op `name` (schema (Tensor, Tensor, float, float) -> Tensor) through the C++ dispatcher.
double dispatchMicros(std::string const& name, at::Tensor const& x, at::Tensor const& weight, int64_t calls)
{
    auto const op = c10::Dispatcher::singleton()
                        .findSchemaOrThrow(name.c_str(), "")
                        .typed<at::Tensor(at::Tensor const&, at::Tensor const&, double, double)>();
    auto const start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i)
    {
        op.call(x, weight, 1e-6, 0.0);
    }
    auto const stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(stop - start).count() / static_cast<double>(calls);
}

} // namespace

TORCH_LIBRARY(ttp_handwritten, m)
{
    m.def("rms_norm(Tensor x, Tensor weight, float eps=1e-06, float weight_offset=0.) -> Tensor");
    m.def("rms_norm_no_launch(Tensor x, Tensor weight, float eps=1e-06, float weight_offset=0.) -> Tensor");
    m.def("set_launcher(int address) -> ()", &setLauncher);
    m.def("launcher_us(Tensor x, Tensor weight, Tensor y, int calls) -> float", &launcherMicros);
    m.def("dispatch_us(str name, Tensor x, Tensor weight, int calls) -> float", &dispatchMicros);
}

TORCH_LIBRARY_IMPL(ttp_handwritten, CUDA, m)
{
    m.impl("rms_norm", &rmsNorm);
    m.impl("rms_norm_no_launch", &rmsNormNoLaunch);
}
