#include "kernels/pad_to.h"
#include "common.h"
#include "contracts/ops.h"

#include <cmath>

namespace ttp::torch_adapter
{
namespace
{

at::Tensor padTo(at::Tensor const& x, int64_t height, int64_t width, double value)
{
    TTP_CHECK(x.is_cuda(), "pad_to", "argument 'x' must be a CUDA tensor");
    TTP_CHECK(x.dim() == 4, "pad_to", "argument 'x' must have shape (B, C, H, W), got ", x.sizes());
    // Ranges and dtypes: the op's declaration (torchtrt_plugins/ops/pad_to.py).
    auto const& fields = contract::pad_to::kFIELDS;
    checkField(fields[0], static_cast<double>(height), "pad_to");
    checkField(fields[1], static_cast<double>(width), "pad_to");
    checkInputs(contract::pad_to::kINPUTS, {&x}, "pad_to");
    DType const dtype = toKernelDType(x.scalar_type(), "pad_to", "x");
    checkField(fields[2], value, "pad_to");
    TTP_CHECK(dtype != DType::kINT8 || (value == std::nearbyint(value) && value >= -128 && value <= 127), "pad_to",
        "argument 'value' must be an integer in [-128, 127] when 'x' is int8, got ", value);
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor xc = x.contiguous();
    at::Tensor y = at::empty({x.size(0), x.size(1), height, width}, xc.options());
    checkCuda(ttp::padTo(xc.data_ptr(), y.data_ptr(), x.size(0) * x.size(1), x.size(2), x.size(3), height, width,
                  static_cast<float>(value), dtype, c10::cuda::getCurrentCUDAStream()),
        "pad_to");
    return y;
}

} // namespace

TORCH_LIBRARY_IMPL(torchtrt, CUDA, m)
{
    m.impl("pad_to", &padTo);
}

} // namespace ttp::torch_adapter
