// torchtrt::rms_norm behind the SDK launcher ABI (sdk/ttp_sdk.h), one launcher per declared tactic
// (torchtrt_plugins/ops/rms_norm.py): the eager op and the generic plugin both call these.
#include "kernels/rms_norm.h"
#include "sdk/ttp_sdk.h"

namespace ttp::launchers
{
namespace
{

cudaError_t launchRmsNorm(sdk::LaunchArgs const& a, RmsNormTactic tactic)
{
    if (a.nbInputs != 2 || a.nbOutputs != 1 || a.nbScalars != 2 || a.inputs[0].rank < 1)
    {
        return cudaErrorInvalidValue;
    }
    sdk::Tensor const& x = a.inputs[0];
    sdk::Tensor const& weight = a.inputs[1];
    int64_t const hidden = x.dims[x.rank - 1];
    // The fake kernel's shape rule, checked again where the data is: weight is (hidden,).
    if (weight.rank != 1 || weight.dims[0] != hidden || weight.dtype != x.dtype)
    {
        return cudaErrorInvalidValue;
    }
    int64_t const rows = hidden == 0 ? 0 : x.numel() / hidden;
    // Scalars in schema order: eps, weight_offset.
    return rmsNorm(x.data, weight.data, a.outputs[0].data, rows, hidden, static_cast<float>(a.scalars[0]),
        static_cast<float>(a.scalars[1]), x.dtype, tactic, a.stream);
}

} // namespace

// Tactic 0: the kernel's heuristic chooses.
cudaError_t rmsNorm(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kAUTO);
}

cudaError_t rmsNormWarpPerRow(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kWARP_PER_ROW);
}

cudaError_t rmsNormBlockPerRow(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kBLOCK_PER_ROW);
}

} // namespace ttp::launchers
