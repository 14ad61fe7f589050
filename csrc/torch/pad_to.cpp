#include "kernels/pad_to.h"
#include "common.h"

#include <cmath>

namespace ttp::torch_adapter
{
namespace
{

at::Tensor padTo(at::Tensor const& x, int64_t height, int64_t width, double value)
{
    TTP_CHECK(x.is_cuda(), "pad_to", "argument 'x' must be a CUDA tensor");
    TTP_CHECK(x.dim() == 4, "pad_to", "argument 'x' must have shape (B, C, H, W), got ", x.sizes());
    TTP_CHECK(height >= 0, "pad_to", "argument 'height' must be an integer >= 0, got ", height);
    TTP_CHECK(width >= 0, "pad_to", "argument 'width' must be an integer >= 0, got ", width);
    at::ScalarType const xType = x.scalar_type();
    TTP_CHECK(xType == at::kFloat || xType == at::kHalf || xType == at::kBFloat16 || xType == at::kChar, "pad_to",
        "argument 'x' must have dtype in {float32, float16, bfloat16, int8}, got ", xType);
    DType const dtype = toKernelDType(xType, "pad_to", "x");
    TTP_CHECK(std::isfinite(value), "pad_to", "argument 'value' must be a finite float, got ", value);
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
