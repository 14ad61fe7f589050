// The benchmarks' hand-written C++ torch ops: rms_norm, add_rms_norm, pad_to and rotary_embedding as a user writes
// them by hand against the full LibTorch API (TORCH_LIBRARY, unboxed kernels, at::empty, the current stream), each
// calling the same launcher as the declared op (the launcher table's tactic 0, handed over by address). The host time
// of an eager call of ours is judged against its hand-written twin in the same process: what the generic boxed kernel
// costs over the launcher, beside what a hand-written op costs. The hand-written rotary_embedding takes its cos/sin
// cache as a tensor argument, as vLLM's does. Built on first use by benchmarks/handwritten.py
// (torch.utils.cpp_extension).
//
// Also, for the host-time breakdown (scripts/eager_overhead.py): rms_norm without its launch, the launcher alone in a
// C++ loop, and each op's call through the C++ dispatcher in a C++ loop (no Python).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <array>
#include <chrono>
#include <cmath>
#include <string>

#include "sdk/ttp_sdk.h"

namespace
{

// Tactic 0's launcher of each declared op with a hand-written twin (set_launcher).
struct Bound
{
    ttp::sdk::Launcher rmsNorm = nullptr;
    ttp::sdk::Launcher addRmsNorm = nullptr;
    ttp::sdk::Launcher padTo = nullptr;
    ttp::sdk::Launcher rotary = nullptr;
};
Bound gBound;

ttp::DType kernelDType(at::ScalarType type, char const* op)
{
    switch (type)
    {
    case at::kFloat: return ttp::DType::kFLOAT32;
    case at::kHalf: return ttp::DType::kFLOAT16;
    case at::kBFloat16: return ttp::DType::kBFLOAT16;
    case at::kInt: return ttp::DType::kINT32;
    case at::kLong: return ttp::DType::kINT64;
    default: TORCH_CHECK(false, "handwritten.", op, ": unsupported dtype ", type);
    }
}

ttp::sdk::Tensor view(at::Tensor const& t, char const* op)
{
    ttp::sdk::Tensor out{t.data_ptr(), kernelDType(t.scalar_type(), op), static_cast<int32_t>(t.dim()), {}};
    for (int64_t d = 0; d < t.dim(); ++d)
    {
        out.dims[d] = t.size(d);
    }
    return out;
}

template <size_t I, size_t O, size_t S>
void launch(char const* op, ttp::sdk::Launcher launcher, std::array<at::Tensor const*, I> const& inputs,
    std::array<at::Tensor const*, O> const& outputs, std::array<double, S> const& scalars,
    void const* const* resources = nullptr, int32_t nbResources = 0)
{
    TORCH_CHECK(launcher != nullptr, "handwritten.", op, ": no launcher (set_launcher)");
    std::array<ttp::sdk::Tensor, I> in;
    std::array<ttp::sdk::Tensor, O> out;
    for (size_t i = 0; i < I; ++i)
    {
        in[i] = view(*inputs[i], op);
    }
    for (size_t o = 0; o < O; ++o)
    {
        out[o] = view(*outputs[o], op);
    }
    ttp::sdk::LaunchArgs args{in.data(), static_cast<int32_t>(I), out.data(), static_cast<int32_t>(O), scalars.data(),
        static_cast<int32_t>(S), nullptr, 0, 0, c10::cuda::getCurrentCUDAStream()};
    args.resources = resources;
    args.nbResources = nbResources;
    cudaError_t const status = launcher(args);
    TORCH_CHECK(status == cudaSuccess, "handwritten.", op, ": launch failed: ", cudaGetErrorString(status));
}

void checkFloat(at::Tensor const& t, at::Tensor const& like, char const* op, char const* name)
{
    TORCH_CHECK(t.is_cuda() && t.device() == like.device(), "handwritten.", op, ": '", name, "' on x's CUDA device");
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "handwritten.", op, ": '", name, "' must have x's dtype");
}

// What rms_norm and add_rms_norm check alike: x on a CUDA device, the weight's dtype and shape, eps.
void checkNorm(at::Tensor const& x, at::Tensor const& weight, double eps, char const* op)
{
    TORCH_CHECK(x.is_cuda(), "handwritten.", op, ": x must be a CUDA tensor");
    checkFloat(weight, x, op, "weight");
    TORCH_CHECK(std::isfinite(eps) && eps > 0, "handwritten.", op, ": argument 'eps' must be a float > 0");
    TORCH_CHECK(x.dim() >= 1 && x.dim() <= ttp::sdk::kMAX_DIMS && weight.dim() == 1 && weight.size(0) == x.size(-1),
        "handwritten.", op, ": argument 'weight' must have shape (x.shape[-1],)");
}

at::Tensor rmsNormImpl(at::Tensor const& x, at::Tensor const& weight, double eps, double offset, bool run)
{
    checkNorm(x, weight, eps, "rms_norm");
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor xc = x.contiguous();
    at::Tensor wc = weight.contiguous();
    at::Tensor y = at::empty_like(xc, at::MemoryFormat::Contiguous);
    if (run)
    {
        launch<2, 1, 2>("rms_norm", gBound.rmsNorm, {&xc, &wc}, {&y}, {eps, offset});
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

at::Tensor addRmsNorm(at::Tensor const& x, at::Tensor& residual, at::Tensor const& weight, double eps)
{
    checkNorm(x, weight, eps, "add_rms_norm");
    checkFloat(residual, x, "add_rms_norm", "residual");
    TORCH_CHECK(residual.sizes() == x.sizes() && residual.is_contiguous(),
        "handwritten.add_rms_norm: 'residual' must be contiguous with x's shape (updated in place)");
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor xc = x.contiguous();
    at::Tensor wc = weight.contiguous();
    at::Tensor y = at::empty_like(xc, at::MemoryFormat::Contiguous);
    launch<3, 2, 1>("add_rms_norm", gBound.addRmsNorm, {&xc, &residual, &wc}, {&y, &residual}, {eps});
    return y;
}

at::Tensor padTo(at::Tensor const& x, int64_t height, int64_t width, double value)
{
    TORCH_CHECK(x.is_cuda() && x.dim() == 4, "handwritten.pad_to: x must be a 4-D CUDA tensor");
    TORCH_CHECK(height >= x.size(2) && width >= x.size(3),
        "handwritten.pad_to: 'height' and 'width' must be at least x's last two sizes");
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor xc = x.contiguous();
    at::Tensor y = at::empty({x.size(0), x.size(1), height, width}, xc.options());
    launch<1, 1, 3>(
        "pad_to", gBound.padTo, {&xc}, {&y}, {static_cast<double>(height), static_cast<double>(width), value});
    return y;
}

at::Tensor rotaryEmbedding(at::Tensor const& x, at::Tensor const& positions, at::Tensor const& cosSinCache,
    int64_t rotaryDim, int64_t maxPosition, bool isNeox)
{
    TORCH_CHECK(x.is_cuda() && x.dim() >= 2, "handwritten.rotary_embedding: x must be a CUDA tensor of rank >= 2");
    TORCH_CHECK(positions.device() == x.device() && cosSinCache.device() == x.device(),
        "handwritten.rotary_embedding: positions and cos_sin_cache on x's device");
    TORCH_CHECK(cosSinCache.scalar_type() == at::kFloat && cosSinCache.is_contiguous()
                    && cosSinCache.numel() == maxPosition * rotaryDim,
        "handwritten.rotary_embedding: 'cos_sin_cache' must be contiguous fp32 (max_position, rotary_dim)");
    TORCH_CHECK(rotaryDim > 0 && rotaryDim % 2 == 0 && rotaryDim <= x.size(-1),
        "handwritten.rotary_embedding: 'rotary_dim' must be even, in (0, head_size]");
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor xc = x.contiguous();
    at::Tensor pc = positions.contiguous();
    at::Tensor y = at::empty_like(xc, at::MemoryFormat::Contiguous);
    void const* const table[1] = {cosSinCache.data_ptr()};
    // The launcher reads rotary_dim, max_position and is_neox (the declared op's base builds the cache).
    launch<2, 1, 4>("rotary_embedding", gBound.rotary, {&xc, &pc}, {&y},
        {static_cast<double>(rotaryDim), static_cast<double>(maxPosition), 0.0, isNeox ? 1.0 : 0.0}, table, 1);
    return y;
}

void setLauncher(std::string const& op, int64_t address)
{
    auto const launcher = reinterpret_cast<ttp::sdk::Launcher>(address);
    if (op == "rms_norm")
    {
        gBound.rmsNorm = launcher;
    }
    else if (op == "add_rms_norm")
    {
        gBound.addRmsNorm = launcher;
    }
    else if (op == "pad_to")
    {
        gBound.padTo = launcher;
    }
    else if (op == "rotary_embedding")
    {
        gBound.rotary = launcher;
    }
    else
    {
        TORCH_CHECK(false, "handwritten.set_launcher: no hand-written op '", op, "'");
    }
}

// Microseconds per launcher call over `calls` calls in a C++ loop (the last synchronized).
double launcherMicros(at::Tensor const& x, at::Tensor const& weight, at::Tensor const& y, int64_t calls)
{
    TORCH_CHECK(gBound.rmsNorm != nullptr, "handwritten.launcher_us: no rms_norm launcher");
    ttp::sdk::Tensor const in[2] = {view(x, "rms_norm"), view(weight, "rms_norm")};
    ttp::sdk::Tensor const out[1] = {view(y, "rms_norm")};
    double const scalars[2] = {1e-6, 0.0};
    ttp::sdk::LaunchArgs const args{in, 2, out, 1, scalars, 2, nullptr, 0, 0, c10::cuda::getCurrentCUDAStream()};
    auto const start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i)
    {
        TORCH_CHECK(gBound.rmsNorm(args) == cudaSuccess, "launch failed");
    }
    auto const stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(stop - start).count() / static_cast<double>(calls);
}

// Microseconds per call of op `name` through the C++ dispatcher, typed as the op's schema, in a C++ loop.
template <typename Signature, typename... Args>
double dispatchLoop(std::string const& name, int64_t calls, Args&&... args)
{
    auto const op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "").typed<Signature>();
    auto const start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i)
    {
        op.call(args...);
    }
    auto const stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(stop - start).count() / static_cast<double>(calls);
}

// Ops of schema (Tensor, Tensor, float, float) -> Tensor: rms_norm's.
double dispatchMicros(std::string const& name, at::Tensor const& x, at::Tensor const& weight, int64_t calls)
{
    return dispatchLoop<at::Tensor(at::Tensor const&, at::Tensor const&, double, double)>(
        name, calls, x, weight, 1e-6, 0.0);
}

// add_rms_norm's schema (Tensor, Tensor(a!), Tensor, float) -> Tensor.
double dispatchAddRmsMicros(
    std::string const& name, at::Tensor const& x, at::Tensor residual, at::Tensor const& weight, int64_t calls)
{
    return dispatchLoop<at::Tensor(at::Tensor const&, at::Tensor&, at::Tensor const&, double)>(
        name, calls, x, residual, weight, 1e-6);
}

// pad_to's schema (Tensor, SymInt, SymInt, float) -> Tensor.
double dispatchPadMicros(std::string const& name, at::Tensor const& x, int64_t height, int64_t width, int64_t calls)
{
    if (name.rfind("ttp_handwritten::", 0) == 0)
    {
        return dispatchLoop<at::Tensor(at::Tensor const&, int64_t, int64_t, double)>(
            name, calls, x, height, width, 0.0);
    }
    return dispatchLoop<at::Tensor(at::Tensor const&, c10::SymInt, c10::SymInt, double)>(
        name, calls, x, c10::SymInt(height), c10::SymInt(width), 0.0);
}

// The declared rotary_embedding (Tensor, Tensor, int, int, float, bool) -> Tensor against the hand-written one
// (Tensor, Tensor, Tensor cos_sin_cache, int, int, bool) -> Tensor.
double dispatchRotaryMicros(std::string const& name, at::Tensor const& x, at::Tensor const& positions,
    at::Tensor const& cosSinCache, int64_t rotaryDim, int64_t maxPosition, int64_t calls)
{
    if (name.rfind("ttp_handwritten::", 0) == 0)
    {
        return dispatchLoop<at::Tensor(at::Tensor const&, at::Tensor const&, at::Tensor const&, int64_t, int64_t,
            bool)>(name, calls, x, positions, cosSinCache, rotaryDim, maxPosition, true);
    }
    return dispatchLoop<at::Tensor(at::Tensor const&, at::Tensor const&, int64_t, int64_t, double, bool)>(
        name, calls, x, positions, rotaryDim, maxPosition, 10000.0, true);
}

} // namespace

TORCH_LIBRARY(ttp_handwritten, m)
{
    m.def("rms_norm(Tensor x, Tensor weight, float eps=1e-06, float weight_offset=0.) -> Tensor");
    m.def("rms_norm_no_launch(Tensor x, Tensor weight, float eps=1e-06, float weight_offset=0.) -> Tensor");
    m.def("add_rms_norm(Tensor x, Tensor(a!) residual, Tensor weight, float eps=1e-06) -> Tensor");
    m.def("pad_to(Tensor x, int height, int width, float value=0.) -> Tensor");
    m.def("rotary_embedding(Tensor x, Tensor positions, Tensor cos_sin_cache, int rotary_dim, int max_position, "
          "bool is_neox=True) -> Tensor");
    m.def("set_launcher(str op, int address) -> ()", &setLauncher);
    m.def("launcher_us(Tensor x, Tensor weight, Tensor y, int calls) -> float", &launcherMicros);
    m.def("dispatch_us(str name, Tensor x, Tensor weight, int calls) -> float", &dispatchMicros);
    m.def("dispatch_add_rms_us(str name, Tensor x, Tensor residual, Tensor weight, int calls) -> float",
        &dispatchAddRmsMicros);
    m.def("dispatch_pad_us(str name, Tensor x, int height, int width, int calls) -> float", &dispatchPadMicros);
    m.def("dispatch_rotary_us(str name, Tensor x, Tensor positions, Tensor cos_sin_cache, int rotary_dim, "
          "int max_position, int calls) -> float",
        &dispatchRotaryMicros);
}

TORCH_LIBRARY_IMPL(ttp_handwritten, CUDA, m)
{
    m.impl("rms_norm", &rmsNorm);
    m.impl("rms_norm_no_launch", &rmsNormNoLaunch);
    m.impl("add_rms_norm", &addRmsNorm);
    m.impl("pad_to", &padTo);
    m.impl("rotary_embedding", &rotaryEmbedding);
}
