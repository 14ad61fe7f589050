// torchtrt::masked_rows behind the SDK launcher ABI (sdk/ttp_sdk.h; declared in torchtrt_plugins/ops/masked_rows.py):
// the eager op and the generic plugin both call these. From the plugin, y comes at its upper bound (every row of x);
// the kept rows are written compactly from the start and their count K to the 0-D INT64 size tensor. The eager op
// (sizes_first) counts first, reads K back and passes y at K rows for the copy. The mask is kBOOL from the
// eager op and kINT32 from the plugin (TensorRT plugins take no BOOL inputs); the kernels read either.
#include "kernels/masked_rows.h"
#include "sdk/ttp_sdk.h"

namespace ttp::launchers
{
namespace
{

bool valid(sdk::LaunchArgs const& a)
{
    return a.nbInputs == 2 && a.nbOutputs == 2 && a.inputs[0].rank >= 1 && a.inputs[1].rank == 1
           && a.inputs[1].dims[0] == a.inputs[0].dims[0];
}

int64_t rowBytes(sdk::Tensor const& x)
{
    int64_t bytes = dtypeSize(x.dtype);
    for (int32_t i = 1; i < x.rank; ++i)
    {
        bytes *= x.dims[i];
    }
    return bytes;
}

} // namespace

size_t maskedRowsWorkspace(sdk::LaunchArgs const& args)
{
    return args.nbInputs >= 1 && args.inputs[0].rank >= 1 ? maskedRowsWorkspaceSize(args.inputs[0].dims[0]) : 0;
}

cudaError_t maskedRows(sdk::LaunchArgs const& args)
{
    if (!valid(args) || args.workspaceSize < maskedRowsWorkspace(args))
    {
        return cudaErrorInvalidValue;
    }
    sdk::Tensor const& x = args.inputs[0];
    sdk::Tensor const& mask = args.inputs[1];
    int64_t const rows = x.dims[0];
    int64_t const bytes = rowBytes(x);
    // Declared sizes_first: the count (phase 1) leaves the destinations in the workspace for the copy (phase 2).
    if (args.phase != sdk::kPHASE_OUTPUTS)
    {
        cudaError_t const err = maskedRowsCount(
            mask.data, mask.dtype, rows, bytes, args.workspace, args.outputs[1].data, DType::kINT64, args.stream);
        if (err != cudaSuccess || args.phase == sdk::kPHASE_SIZES)
        {
            return err;
        }
    }
    return maskedRowsScatter(x.data, args.outputs[0].data, rows, bytes, args.workspace, args.stream);
}

} // namespace ttp::launchers
