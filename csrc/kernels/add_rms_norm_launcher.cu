// torchtrt::add_rms_norm behind the SDK launcher ABI (sdk/ttp_sdk.h; torchtrt_plugins/ops/add_rms_norm.py): the
// eager op and the generic plugin both call it. Outputs: y, then the new residual (the mutated argument: the
// residual's own memory eagerly, the plugin output aliased to it in an engine, or a separate buffer where the
// engine was built without aliased plugin I/O).
#include "kernels/add_rms_norm.h"
#include "op_fields.h"
#include "sdk/ttp_sdk.h"

namespace ttp::launchers
{

namespace fields = torchtrt::fields::add_rms_norm;

cudaError_t addRmsNorm(sdk::LaunchArgs const& a)
{
    if (a.nbInputs != 3 || a.nbOutputs != 2 || a.nbScalars != fields::kNB_SCALARS || a.inputs[0].rank < 1)
    {
        return cudaErrorInvalidValue;
    }
    sdk::Tensor const& x = a.inputs[0];
    sdk::Tensor const& residual = a.inputs[1];
    sdk::Tensor const& weight = a.inputs[2];
    int64_t const hidden = x.dims[x.rank - 1];
    bool same = residual.rank == x.rank && residual.dtype == x.dtype && a.outputs[1].dtype == x.dtype;
    for (int32_t d = 0; same && d < x.rank; ++d)
    {
        same = residual.dims[d] == x.dims[d];
    }
    if (!same || weight.rank != 1 || weight.dims[0] != hidden || weight.dtype != x.dtype)
    {
        return cudaErrorInvalidValue;
    }
    int64_t const rows = hidden == 0 ? 0 : x.numel() / hidden;
    return ttp::addRmsNorm(x.data, residual.data, weight.data, a.outputs[1].data, a.outputs[0].data, rows, hidden,
        static_cast<float>(a.scalars[fields::kEPS]), x.dtype, a.stream);
}

} // namespace ttp::launchers
