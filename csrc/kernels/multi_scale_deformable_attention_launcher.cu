// torchtrt::multi_scale_deformable_attention behind the SDK launcher ABI (sdk/ttp_sdk.h):
// torchtrt_plugins/ops/multi_scale_deformable_attention.py. No scalar arguments.
#include "kernels/multi_scale_deformable_attention.h"
#include "sdk/ttp_sdk.h"

namespace ttp::launchers
{
namespace
{

cudaError_t launch(sdk::LaunchArgs const& a, MsdaTactic tactic)
{
    if (a.nbInputs != 5 || a.nbOutputs != 1)
    {
        return cudaErrorInvalidValue;
    }
    sdk::Tensor const& value = a.inputs[0];
    sdk::Tensor const& shapes = a.inputs[1];
    sdk::Tensor const& starts = a.inputs[2];
    sdk::Tensor const& locations = a.inputs[3];
    sdk::Tensor const& weights = a.inputs[4];
    if (value.rank != 4 || shapes.rank != 2 || starts.rank != 1 || locations.rank != 6 || weights.rank != 5)
    {
        return cudaErrorInvalidValue;
    }
    MsdaShape const shape{value.dims[0], value.dims[1], value.dims[2], value.dims[3], shapes.dims[0], locations.dims[1],
        locations.dims[4]};
    // The fake kernel's shape rules, checked again where the data is.
    bool const consistent
        = shapes.dims[1] == 2 && starts.dims[0] == shape.levels && locations.dims[0] == shape.batch
          && locations.dims[2] == shape.heads && locations.dims[3] == shape.levels && locations.dims[5] == 2
          && weights.dims[0] == shape.batch && weights.dims[1] == shape.queries && weights.dims[2] == shape.heads
          && weights.dims[3] == shape.levels && weights.dims[4] == shape.points && shapes.dtype == starts.dtype
          && locations.dtype == value.dtype && weights.dtype == value.dtype;
    if (!consistent)
    {
        return cudaErrorInvalidValue;
    }
    return ttp::multiScaleDeformableAttention(value.data, shapes.data, starts.data, shapes.dtype, locations.data,
        weights.data, a.outputs[0].data, shape, value.dtype, tactic, a.stream);
}

} // namespace

cudaError_t multiScaleDeformableAttention(sdk::LaunchArgs const& a)
{
    return launch(a, MsdaTactic::kHEURISTIC);
}

cudaError_t multiScaleDeformableAttentionSharedPoints(sdk::LaunchArgs const& a)
{
    return launch(a, MsdaTactic::kSHARED_POINTS);
}

cudaError_t multiScaleDeformableAttentionPerLanePoints(sdk::LaunchArgs const& a)
{
    return launch(a, MsdaTactic::kPER_LANE_POINTS);
}

cudaError_t multiScaleDeformableAttentionHeadTiles(sdk::LaunchArgs const& a)
{
    return launch(a, MsdaTactic::kHEAD_TILES);
}

cudaError_t multiScaleDeformableAttentionWideLanes(sdk::LaunchArgs const& a)
{
    return launch(a, MsdaTactic::kWIDE_LANES);
}

} // namespace ttp::launchers
