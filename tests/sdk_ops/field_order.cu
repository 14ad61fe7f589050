// The launcher of tests/cpu/test_field_names.py's two ops, which take the same scalars in opposite schema orders:
// it writes into output 0, a host buffer that test passes (the ops never run on a device), alpha and beta as read
// through the generated index constants, then scalars[0], what a launcher reading by position takes for alpha.
#include "op_fields.h"
#include "sdk/ttp_sdk.h"

namespace field_order
{
namespace
{

template <int32_t kALPHA, int32_t kBETA>
cudaError_t report(ttp::sdk::LaunchArgs const& a)
{
    if (a.nbOutputs != 1 || a.outputs[0].dtype != ttp::DType::kFLOAT32 || a.outputs[0].numel() != 3 || a.nbScalars != 2)
    {
        return cudaErrorInvalidValue;
    }
    auto* out = static_cast<float*>(a.outputs[0].data);
    out[0] = static_cast<float>(a.scalars[kALPHA]);
    out[1] = static_cast<float>(a.scalars[kBETA]);
    out[2] = static_cast<float>(a.scalars[0]);
    return cudaSuccess;
}

} // namespace

cudaError_t alphaFirst(ttp::sdk::LaunchArgs const& a)
{
    return report<fields::alpha_first::kALPHA, fields::alpha_first::kBETA>(a);
}

cudaError_t betaFirst(ttp::sdk::LaunchArgs const& a)
{
    return report<fields::beta_first::kALPHA, fields::beta_first::kBETA>(a);
}

} // namespace field_order
