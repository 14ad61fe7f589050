#include "kernels/rms_norm.h"
#include "common.h"
#include "contracts/ops.h"

namespace ttp::torch_adapter
{
namespace
{

at::Tensor rmsNormImpl(at::Tensor const& x, at::Tensor const& weight, double eps, int64_t tactic)
{
    TTP_CHECK(x.is_cuda() && weight.is_cuda(), "rms_norm", "arguments 'x' and 'weight' must be CUDA tensors");
    TTP_CHECK(x.dim() >= 1, "rms_norm", "argument 'x' must have at least 1 dimension");
    TTP_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), "rms_norm", "argument 'weight' must have shape (",
        x.size(-1), ",) to match the last dimension of 'x', got ", weight.sizes());
    // Dtypes, eps's range and the tactics: the op's declaration (torchtrt_plugins/ops/rms_norm.py).
    checkInputs(contract::rms_norm::kINPUTS, {&x, &weight}, "rms_norm");
    checkField(contract::rms_norm::kFIELDS[0], eps, "rms_norm");
    checkTactic(contract::rms_norm::kTACTICS, tactic, "rms_norm");
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor xc = x.contiguous();
    at::Tensor wc = weight.contiguous();
    at::Tensor y = at::empty_like(xc, at::MemoryFormat::Contiguous);
    int64_t const hidden = x.size(-1);
    int64_t const rows = hidden == 0 ? 0 : xc.numel() / hidden;
    checkCuda(rmsNorm(xc.data_ptr(), wc.data_ptr(), y.data_ptr(), rows, hidden, static_cast<float>(eps),
                  toKernelDType(x.scalar_type(), "rms_norm", "x"), static_cast<RmsNormTactic>(tactic),
                  c10::cuda::getCurrentCUDAStream()),
        "rms_norm");
    return y;
}

at::Tensor rmsNorm(at::Tensor const& x, at::Tensor const& weight, double eps)
{
    return rmsNormImpl(x, weight, eps, static_cast<int64_t>(RmsNormTactic::kAUTO));
}

} // namespace

TORCH_LIBRARY_IMPL(torchtrt, CUDA, m)
{
    m.impl("rms_norm", &rmsNorm);
    m.impl("rms_norm_tactic", &rmsNormImpl);
}

} // namespace ttp::torch_adapter
