// torchtrt::rotary_embedding behind the SDK launcher ABI (sdk/ttp_sdk.h), with its shared cos/sin cache
// (declare(resources=...), sdk/resources.h): torchtrt_plugins/ops/rotary_embedding.py.
#include "kernels/rotary_embedding.h"
#include "op_fields.h"
#include "sdk/ttp_sdk.h"

namespace ttp::launchers
{

namespace
{
namespace fields = torchtrt::fields::rotary_embedding;
// The cache's size and init functions get its key fields.
namespace cache = fields::cos_sin;
} // namespace

size_t rotaryCacheBytes(sdk::LaunchArgs const& a)
{
    return a.nbScalars == cache::kNB_SCALARS
               ? ttp::rotaryCacheBytes(static_cast<int64_t>(a.scalars[cache::kMAX_POSITION]),
                     static_cast<int64_t>(a.scalars[cache::kROTARY_DIM]))
               : 0;
}

cudaError_t rotaryCache(sdk::LaunchArgs const& a)
{
    size_t const bytes = rotaryCacheBytes(a);
    if (bytes == 0 || a.nbOutputs != 1 || a.outputs[0].rank != 1 || a.outputs[0].dims[0] != static_cast<int64_t>(bytes))
    {
        return cudaErrorInvalidValue;
    }
    return ttp::rotaryCache(static_cast<float*>(a.outputs[0].data),
        static_cast<int64_t>(a.scalars[cache::kMAX_POSITION]), static_cast<int64_t>(a.scalars[cache::kROTARY_DIM]),
        a.scalars[cache::kBASE], a.stream);
}

cudaError_t rotaryEmbedding(sdk::LaunchArgs const& a)
{
    if (a.nbInputs != 2 || a.nbOutputs != 1 || a.nbScalars != fields::kNB_SCALARS || a.nbResources != 1
        || a.resources[0] == nullptr || a.inputs[0].rank < 2)
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
    return ttp::rotaryEmbedding(x.data, positions.data, positions.dtype, static_cast<float const*>(a.resources[0]),
        a.outputs[0].data, tokens, heads, headDim, static_cast<int64_t>(a.scalars[fields::kROTARY_DIM]),
        static_cast<int64_t>(a.scalars[fields::kMAX_POSITION]), a.scalars[fields::kIS_NEOX] != 0.0, x.dtype, a.stream);
}

} // namespace ttp::launchers
