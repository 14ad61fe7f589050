#include "rms_norm_plugin.h"

namespace ttp::plugin
{
namespace
{
constexpr auto isNormType = acceptsTypeIn<contract::rms_norm::kINPUTS[0].pluginMask>;

// The declared tactics are the kernel's own (kernels/rms_norm.h).
static_assert(RmsNormPlugin::kTACTICS.size() == 2
              && RmsNormPlugin::kTACTICS[0] == static_cast<int32_t>(RmsNormTactic::kWARP_PER_ROW)
              && RmsNormPlugin::kTACTICS[1] == static_cast<int32_t>(RmsNormTactic::kBLOCK_PER_ROW));
} // namespace

std::vector<FieldDesc> const& RmsNormPlugin::fieldDescs()
{
    static std::vector<FieldDesc> const descs = fieldDescsOf(contract::rms_norm::kFIELDS);
    return descs;
}

RmsNormPlugin* RmsNormPlugin::create(FieldReader const& fields, nvinfer1::TensorRTPhase /*phase*/)
{
    return new RmsNormPlugin(fields.getFloat(fieldDescs()[0]));
}

int32_t RmsNormPlugin::outputDataTypes(nvinfer1::DataType* outputTypes, int32_t /*nbOutputs*/,
    nvinfer1::DataType const* inputTypes, int32_t /*nbInputs*/) const
{
    if (!isNormType(inputTypes[0]) || inputTypes[1] != inputTypes[0])
    {
        fail("inputs 'x' and 'weight' must share one type in {FLOAT, HALF, BF16}, got ", dataTypeName(inputTypes[0]),
            " and ", dataTypeName(inputTypes[1]));
    }
    outputTypes[0] = inputTypes[0];
    return 0;
}

int32_t RmsNormPlugin::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t /*nbInputs*/,
    nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs,
    int32_t /*nbOutputs*/, nvinfer1::IExprBuilder& /*exprBuilder*/)
{
    if (nbShapeInputs != 0)
    {
        fail("expected no shape inputs, got ", nbShapeInputs);
    }
    if (inputs[0].nbDims < 1 || inputs[1].nbDims != 1)
    {
        fail("input 'x' must have rank >= 1 and 'weight' rank 1, got ranks ", inputs[0].nbDims, " and ",
            inputs[1].nbDims);
    }
    outputs[0] = inputs[0];
    return 0;
}

bool RmsNormPlugin::supportsFormat(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t /*nbInputs*/, int32_t /*nbOutputs*/) const
{
    return linearOfFirstType(pos, inOut, isNormType);
}

void RmsNormPlugin::checkDims(nvinfer1::Dims const& x, nvinfer1::Dims const& weight) const
{
    if (x.nbDims < 1 || weight.nbDims != 1)
    {
        fail("input 'x' must have rank >= 1 and 'weight' rank 1, got ", dimsString(x), " and ", dimsString(weight));
    }
    int64_t const hidden = x.d[x.nbDims - 1];
    if (hidden >= 0 && weight.d[0] >= 0 && hidden != weight.d[0])
    {
        fail("input 'weight' must have shape (", hidden, ") to match the last dimension of 'x' ", dimsString(x),
            ", got ", dimsString(weight));
    }
}

void RmsNormPlugin::configure(nvinfer1::DynamicPluginTensorDesc const* in, int32_t /*nbInputs*/,
    nvinfer1::DynamicPluginTensorDesc const* /*out*/, int32_t /*nbOutputs*/) const
{
    checkDims(in[0].desc.dims, in[1].desc.dims);
    checkDims(in[0].max, in[1].max);
}

void RmsNormPlugin::shapeChange(nvinfer1::PluginTensorDesc const* in, int32_t /*nbInputs*/,
    nvinfer1::PluginTensorDesc const* /*out*/, int32_t /*nbOutputs*/) const
{
    checkDims(in[0].dims, in[1].dims);
}

cudaError_t RmsNormPlugin::run(nvinfer1::PluginTensorDesc const* inputDesc,
    nvinfer1::PluginTensorDesc const* /*outputDesc*/, void const* const* inputs, void* const* outputs,
    void* /*workspace*/, cudaStream_t stream) const
{
    nvinfer1::Dims const& x = inputDesc[0].dims;
    checkDims(x, inputDesc[1].dims);
    int64_t const hidden = x.d[x.nbDims - 1];
    int64_t const rows = hidden == 0 ? 0 : volume(x) / hidden;
    return rmsNorm(inputs[0], inputs[1], outputs[0], rows, hidden, mEps, toKernelDType(inputDesc[0].type),
        static_cast<RmsNormTactic>(tactic()), stream);
}

} // namespace ttp::plugin

TTP_REGISTER_CREATOR(ttp::plugin::RmsNormCreator)
