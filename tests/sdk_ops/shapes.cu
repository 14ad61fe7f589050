// Launchers of the SDK test ops (tests/cpu/sdk_ops/__init__.py): they fill the outputs with zeros, which is all
// the shape tests need (nonzero_count's size tensor too: zero rows); a workspace function and a failing launcher
// exercise those paths. An output with no data (the sizes phase of sizes_first nonzero_count) is left alone.
#include "sdk/ttp_sdk.h"

namespace sdk_test
{

cudaError_t zeros(ttp::sdk::LaunchArgs const& a)
{
    for (int32_t o = 0; o < a.nbOutputs; ++o)
    {
        int64_t const bytes = a.outputs[o].numel() * ttp::dtypeSize(a.outputs[o].dtype);
        if (bytes > 0 && a.outputs[o].data != nullptr)
        {
            cudaError_t const err = cudaMemsetAsync(a.outputs[o].data, 0, static_cast<size_t>(bytes), a.stream);
            if (err != cudaSuccess)
            {
                return err;
            }
        }
    }
    return cudaSuccess;
}

size_t zerosWorkspace(ttp::sdk::LaunchArgs const& a)
{
    return static_cast<size_t>(a.inputs[0].numel()) * 4;
}

cudaError_t failing(ttp::sdk::LaunchArgs const& /*a*/)
{
    return cudaErrorInvalidValue;
}

} // namespace sdk_test
