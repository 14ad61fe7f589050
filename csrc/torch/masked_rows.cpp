#include "kernels/masked_rows.h"
#include "common.h"
#include "contracts/ops.h"

namespace ttp::torch_adapter
{
namespace
{

at::Tensor maskedRows(at::Tensor const& x, at::Tensor const& mask)
{
    TTP_CHECK(x.is_cuda() && mask.is_cuda() && x.device() == mask.device(), "masked_rows",
        "arguments 'x' and 'mask' must be CUDA tensors on one device");
    TTP_CHECK(x.dim() >= 1, "masked_rows", "argument 'x' must have at least 1 dimension");
    // Dtypes: the op's declaration (torchtrt_plugins/ops/masked_rows.py).
    checkInputs(contract::masked_rows::kINPUTS, {&x, &mask}, "masked_rows");
    DType const dtype = toKernelDType(x.scalar_type(), "masked_rows", "x");
    TTP_CHECK(mask.dim() == 1 && mask.size(0) == x.size(0), "masked_rows", "argument 'mask' must have shape (",
        x.size(0), ",) to match the first dimension of 'x', got ", mask.sizes());
    c10::cuda::CUDAGuard guard(x.device());
    cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();
    at::Tensor xc = x.contiguous();
    at::Tensor mc = mask.contiguous();
    int64_t const rows = x.size(0);
    int64_t rowBytes = dtypeSize(dtype);
    for (int64_t d = 1; d < x.dim(); ++d)
    {
        rowBytes *= x.size(d);
    }
    at::Tensor workspace
        = at::empty({static_cast<int64_t>(maskedRowsWorkspaceSize(rows))}, xc.options().dtype(at::kByte));
    at::Tensor count = at::empty({}, xc.options().dtype(at::kLong));
    checkCuda(maskedRowsCount(mc.data_ptr(), DType::kBOOL, rows, rowBytes, workspace.data_ptr(), count.data_ptr(),
                  DType::kINT64, stream),
        "masked_rows");
    // The op's one device->host read: y's first dimension is the data-dependent K. It waits only for the
    // counting kernels; the row copy is queued after it.
    int64_t const kept = count.item<int64_t>();
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes[0] = kept;
    at::Tensor y = at::empty(sizes, xc.options());
    if (kept > 0)
    {
        checkCuda(maskedRowsScatter(xc.data_ptr(), y.data_ptr(), rows, rowBytes, workspace.data_ptr(), stream),
            "masked_rows");
    }
    return y;
}

} // namespace

TORCH_LIBRARY_IMPL(torchtrt, CUDA, m)
{
    m.impl("masked_rows", &maskedRows);
}

} // namespace ttp::torch_adapter
