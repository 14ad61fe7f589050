// torchtrt::efficient_nms behind the SDK launcher ABI (sdk/ttp_sdk.h; declared in torchtrt_plugins/ops/
// efficient_nms.py): the eager op and the generic plugin both call it. K is read from the outputs' dims, since
// max_output_boxes may reach the plugin as a shape input.
#include "kernels/efficient_nms.h"
#include "op_fields.h"
#include "sdk/ttp_sdk.h"

namespace ttp::launchers
{
namespace
{

namespace fields = torchtrt::fields::efficient_nms;

// From the inputs alone: the workspace function needs nothing else.
bool shapeOf(sdk::LaunchArgs const& a, EfficientNmsShape& shape)
{
    if (a.nbInputs != 2)
    {
        return false;
    }
    sdk::Tensor const& boxes = a.inputs[0];
    sdk::Tensor const& scores = a.inputs[1];
    if (scores.rank != 3 || (boxes.rank != 3 && boxes.rank != 4) || boxes.dims[boxes.rank - 1] != 4)
    {
        return false;
    }
    shape = EfficientNmsShape{scores.dims[0], scores.dims[1], scores.dims[2], boxes.rank == 4};
    return boxes.dims[0] == shape.batch && boxes.dims[1] == shape.boxes
           && (!shape.boxPerClass || boxes.dims[2] == shape.classes);
}

} // namespace

size_t efficientNmsWorkspaceSize(sdk::LaunchArgs const& a)
{
    EfficientNmsShape shape{};
    return shapeOf(a, shape) ? ::ttp::efficientNmsWorkspaceSize(shape) : 0;
}

cudaError_t efficientNms(sdk::LaunchArgs const& a)
{
    EfficientNmsShape shape{};
    if (!shapeOf(a, shape) || a.nbOutputs != 4 || a.nbScalars != fields::kNB_SCALARS)
    {
        return cudaErrorInvalidValue;
    }
    // max_output_boxes is read only to check it: K is the outputs' dims.
    auto const scoreThreshold = static_cast<float>(a.scalars[fields::kSCORE_THRESHOLD]);
    auto const iouThreshold = static_cast<float>(a.scalars[fields::kIOU_THRESHOLD]);
    double const maxOutputBoxes = a.scalars[fields::kMAX_OUTPUT_BOXES];
    auto const backgroundClass = static_cast<int64_t>(a.scalars[fields::kBACKGROUND_CLASS]);
    bool const scoreActivation = a.scalars[fields::kSCORE_ACTIVATION] != 0.0;
    bool const classAgnostic = a.scalars[fields::kCLASS_AGNOSTIC] != 0.0;
    auto const boxCoding = static_cast<int32_t>(a.scalars[fields::kBOX_CODING]);

    sdk::Tensor const& numDetections = a.outputs[0];
    sdk::Tensor const& boxes = a.outputs[1];
    sdk::Tensor const& scores = a.outputs[2];
    sdk::Tensor const& classes = a.outputs[3];
    int64_t const k = scores.rank == 2 ? scores.dims[1] : -1;
    DType const dtype = a.inputs[0].dtype;
    bool const outputs = numDetections.dtype == DType::kINT32 && numDetections.numel() == shape.batch && boxes.rank == 3
                         && boxes.dims[1] == k && boxes.dims[2] == 4 && classes.rank == 2 && classes.dims[1] == k
                         && classes.dtype == DType::kINT32 && boxes.dtype == dtype && scores.dtype == dtype
                         && a.inputs[1].dtype == dtype;
    bool const sizeField = maxOutputBoxes == sdk::kSHAPE_INPUT_MARKER || maxOutputBoxes == static_cast<double>(k);
    if (!outputs || !sizeField)
    {
        return cudaErrorInvalidValue;
    }
    EfficientNmsParams const params{
        scoreThreshold, iouThreshold, k, backgroundClass, scoreActivation, classAgnostic, boxCoding};
    size_t const workspaceSize = a.workspaceSize != 0 ? a.workspaceSize : ::ttp::efficientNmsWorkspaceSize(shape);
    return ::ttp::efficientNms(shape, params, dtype, a.inputs[0].data, a.inputs[1].data,
        static_cast<int32_t*>(numDetections.data), boxes.data, scores.data, static_cast<int32_t*>(classes.data),
        a.workspace, workspaceSize, a.stream);
}

} // namespace ttp::launchers
