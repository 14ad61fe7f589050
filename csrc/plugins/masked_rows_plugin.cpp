#include "masked_rows_plugin.h"

namespace ttp::plugin
{
namespace
{
constexpr auto isRowType = acceptsTypeIn<contract::masked_rows::kINPUTS[0].pluginMask>;
constexpr auto isMaskType = acceptsTypeIn<contract::masked_rows::kINPUTS[1].pluginMask>;
} // namespace

std::vector<FieldDesc> const& MaskedRowsPlugin::fieldDescs()
{
    static std::vector<FieldDesc> const descs = fieldDescsOf(contract::masked_rows::kFIELDS);
    return descs;
}

MaskedRowsPlugin* MaskedRowsPlugin::create(FieldReader const& /*fields*/, nvinfer1::TensorRTPhase /*phase*/)
{
    return new MaskedRowsPlugin();
}

int32_t MaskedRowsPlugin::outputDataTypes(nvinfer1::DataType* outputTypes, int32_t /*nbOutputs*/,
    nvinfer1::DataType const* inputTypes, int32_t /*nbInputs*/) const
{
    if (!isRowType(inputTypes[0]))
    {
        fail("input 'x' must have a type in {FLOAT, HALF, BF16, INT32, INT64}, got ", dataTypeName(inputTypes[0]));
    }
    if (!isMaskType(inputTypes[1]))
    {
        fail("input 'mask' must be INT32 (plugins take no BOOL inputs: cast the mask first), got ",
            dataTypeName(inputTypes[1]));
    }
    outputTypes[0] = inputTypes[0];
    outputTypes[1] = nvinfer1::DataType::kINT32;
    return 0;
}

int32_t MaskedRowsPlugin::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t /*nbInputs*/,
    nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs,
    int32_t /*nbOutputs*/, nvinfer1::IExprBuilder& exprBuilder)
{
    if (nbShapeInputs != 0)
    {
        fail("expected no shape inputs, got ", nbShapeInputs);
    }
    if (inputs[0].nbDims < 1 || inputs[1].nbDims != 1)
    {
        fail(
            "input 'x' must have rank >= 1 and 'mask' rank 1, got ranks ", inputs[0].nbDims, " and ", inputs[1].nbDims);
    }
    // K is unknown until the mask is read: at most every row, half of them to tune for.
    nvinfer1::IDimensionExpr const* upper = inputs[0].d[0];
    nvinfer1::IDimensionExpr const* opt
        = exprBuilder.operation(nvinfer1::DimensionOperation::kFLOOR_DIV, *upper, *exprBuilder.constant(2));
    nvinfer1::IDimensionExpr const* kept = exprBuilder.declareSizeTensor(1, *opt, *upper);
    if (kept == nullptr)
    {
        fail("declareSizeTensor(1, N/2, N) failed");
    }
    outputs[0] = inputs[0];
    outputs[0].d[0] = kept;
    outputs[1].nbDims = 0;
    return 0;
}

bool MaskedRowsPlugin::supportsFormat(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t /*nbInputs*/, int32_t /*nbOutputs*/) const
{
    auto const& desc = inOut[pos].desc;
    if (desc.format != nvinfer1::TensorFormat::kLINEAR)
    {
        return false;
    }
    switch (pos)
    {
    case 0: return isRowType(desc.type);
    case 2: return desc.type == inOut[0].desc.type;
    default: return desc.type == nvinfer1::DataType::kINT32; // mask, count
    }
}

void MaskedRowsPlugin::checkDims(nvinfer1::Dims const& x, nvinfer1::Dims const& mask) const
{
    if (x.nbDims < 1 || mask.nbDims != 1)
    {
        fail("input 'x' must have rank >= 1 and 'mask' rank 1, got ", dimsString(x), " and ", dimsString(mask));
    }
    if (x.d[0] >= 0 && mask.d[0] >= 0 && x.d[0] != mask.d[0])
    {
        fail("input 'mask' must have shape (", x.d[0], ") to match the first dimension of 'x' ", dimsString(x),
            ", got ", dimsString(mask));
    }
}

void MaskedRowsPlugin::configure(nvinfer1::DynamicPluginTensorDesc const* in, int32_t /*nbInputs*/,
    nvinfer1::DynamicPluginTensorDesc const* /*out*/, int32_t /*nbOutputs*/) const
{
    checkDims(in[0].desc.dims, in[1].desc.dims);
    checkDims(in[0].max, in[1].max);
    if (in[0].max.d[0] > std::numeric_limits<int32_t>::max())
    {
        fail(
            "input 'x' may have at most 2^31 - 1 rows (the INT32 size tensor counts them), got up to ", in[0].max.d[0]);
    }
}

size_t MaskedRowsPlugin::workspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t /*nbInputs*/,
    nvinfer1::DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const
{
    return maskedRowsWorkspaceSize(inputs[0].max.d[0]);
}

void MaskedRowsPlugin::shapeChange(nvinfer1::PluginTensorDesc const* in, int32_t /*nbInputs*/,
    nvinfer1::PluginTensorDesc const* /*out*/, int32_t /*nbOutputs*/) const
{
    checkDims(in[0].dims, in[1].dims);
}

cudaError_t MaskedRowsPlugin::run(nvinfer1::PluginTensorDesc const* inputDesc,
    nvinfer1::PluginTensorDesc const* /*outputDesc*/, void const* const* inputs, void* const* outputs, void* workspace,
    cudaStream_t stream) const
{
    // y's buffer holds N rows (the size tensor's upper bound); its dims here carry no K.
    nvinfer1::Dims const& x = inputDesc[0].dims;
    checkDims(x, inputDesc[1].dims);
    int64_t rowBytes = dtypeSize(toKernelDType(inputDesc[0].type));
    for (int32_t i = 1; i < x.nbDims; ++i)
    {
        rowBytes *= x.d[i];
    }
    cudaError_t const err
        = maskedRowsCount(inputs[1], DType::kINT32, x.d[0], rowBytes, workspace, outputs[1], DType::kINT32, stream);
    if (err != cudaSuccess)
    {
        return err;
    }
    return maskedRowsScatter(inputs[0], outputs[0], x.d[0], rowBytes, workspace, stream);
}

} // namespace ttp::plugin

TTP_REGISTER_CREATOR(ttp::plugin::MaskedRowsCreator)
