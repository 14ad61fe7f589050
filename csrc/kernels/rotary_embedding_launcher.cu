// torchtrt::rotary_embedding behind the SDK launcher ABI (sdk/ttp_sdk.h), with its shared cos/sin cache
// (declare(resources=...), sdk/resources.h): torchtrt_plugins/ops/rotary_embedding.py.
#include "kernels/rotary_embedding.h"
#include "sdk/ttp_sdk.h"

namespace ttp::launchers
{

// The cache's key fields, in declared order: max_position, rotary_dim, base.
size_t rotaryCacheBytes(sdk::LaunchArgs const& a)
{
    return a.nbScalars == 3
               ? ttp::rotaryCacheBytes(static_cast<int64_t>(a.scalars[0]), static_cast<int64_t>(a.scalars[1]))
               : 0;
}

cudaError_t rotaryCache(sdk::LaunchArgs const& a)
{
    size_t const bytes = rotaryCacheBytes(a);
    if (bytes == 0 || a.nbOutputs != 1 || a.outputs[0].rank != 1 || a.outputs[0].dims[0] != static_cast<int64_t>(bytes))
    {
        return cudaErrorInvalidValue;
    }
    return ttp::rotaryCache(static_cast<float*>(a.outputs[0].data), static_cast<int64_t>(a.scalars[0]),
        static_cast<int64_t>(a.scalars[1]), a.scalars[2], a.stream);
}

cudaError_t rotaryEmbedding(sdk::LaunchArgs const& a)
{
    if (a.nbInputs != 2 || a.nbOutputs != 1 || a.nbScalars != 4 || a.nbResources != 1 || a.resources[0] == nullptr
        || a.inputs[0].rank < 2)
    {
        return cudaErrorInvalidValue;
    }
    sdk::Tensor const& x = a.inputs[0];
    sdk::Tensor const& positions = a.inputs[1];
    int64_t const heads = x.dims[x.rank - 2];
    int64_t const headDim = x.dims[x.rank - 1];
    int64_t const tokens = heads * headDim == 0 ? 0 : x.numel() / (heads * headDim);
    // The fake kernel's shape rule, checked again where the data is: positions has x's leading dims.
    if (positions.numel() != tokens)
    {
        return cudaErrorInvalidValue;
    }
    // Scalars in schema order: rotary_dim, max_position, base, is_neox.
    return ttp::rotaryEmbedding(x.data, positions.data, positions.dtype, static_cast<float const*>(a.resources[0]),
        a.outputs[0].data, tokens, heads, headDim, static_cast<int64_t>(a.scalars[0]),
        static_cast<int64_t>(a.scalars[1]), a.scalars[3] != 0.0, x.dtype, a.stream);
}

} // namespace ttp::launchers
