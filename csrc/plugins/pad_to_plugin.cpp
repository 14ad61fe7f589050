#include "pad_to_plugin.h"

namespace ttp::plugin
{
namespace
{
constexpr auto isPadType = acceptsTypeIn<contract::pad_to::kINPUTS[0].pluginMask>;

bool hasScale(nvinfer1::PluginTensorDesc const& desc)
{
    return desc.type == nvinfer1::DataType::kINT8 && desc.scale > 0.F;
}
} // namespace

std::vector<FieldDesc> const& PadToPlugin::fieldDescs()
{
    static std::vector<FieldDesc> const descs = fieldDescsOf(contract::pad_to::kFIELDS);
    return descs;
}

PadToPlugin* PadToPlugin::create(FieldReader const& fields, nvinfer1::TensorRTPhase /*phase*/)
{
    auto const& descs = fieldDescs();
    return new PadToPlugin(fields.getInt(descs[0]), fields.getInt(descs[1]), fields.getFloat(descs[2]));
}

int32_t PadToPlugin::outputDataTypes(nvinfer1::DataType* outputTypes, int32_t /*nbOutputs*/,
    nvinfer1::DataType const* inputTypes, int32_t /*nbInputs*/) const
{
    if (!isPadType(inputTypes[0]))
    {
        fail("input 'x' must have a type in {FLOAT, HALF, BF16, INT8}, got ", dataTypeName(inputTypes[0]));
    }
    outputTypes[0] = inputTypes[0];
    return 0;
}

int32_t PadToPlugin::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
    nvinfer1::DimsExprs const* shapeInputs, int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
    nvinfer1::IExprBuilder& exprBuilder)
{
    if (nbInputs != 1 || nbOutputs != 1 || nbShapeInputs != shapeInputCount())
    {
        fail("expected 1 input, ", shapeInputCount(), " shape inputs (one per field 'height'/'width' holding -1) and ",
            "1 output, got ", nbInputs, ", ", nbShapeInputs, " and ", nbOutputs);
    }
    if (inputs[0].nbDims != 4)
    {
        fail("input 'x' must have rank 4 (B, C, H, W), got rank ", inputs[0].nbDims);
    }
    int32_t nextShapeInput = 0;
    auto target = [&](int64_t field, char const* name) -> nvinfer1::IDimensionExpr const*
    {
        if (field >= 0)
        {
            return exprBuilder.constant(field);
        }
        nvinfer1::DimsExprs const& value = shapeInputs[nextShapeInput++];
        if (value.nbDims != 1 || value.d[0] == nullptr)
        {
            fail("the shape input for field '", name, "' must hold exactly 1 value, got ", value.nbDims);
        }
        return value.d[0];
    };
    outputs[0].nbDims = 4;
    outputs[0].d[0] = inputs[0].d[0];
    outputs[0].d[1] = inputs[0].d[1];
    outputs[0].d[2] = target(mHeight, "height");
    outputs[0].d[3] = target(mWidth, "width");
    return 0;
}

bool PadToPlugin::supportsFormat(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t /*nbInputs*/, int32_t /*nbOutputs*/) const
{
    return linearOfFirstType(pos, inOut, isPadType);
}

void PadToPlugin::checkDims(nvinfer1::Dims const& x, nvinfer1::Dims const& y) const
{
    if (x.nbDims != 4 || y.nbDims != 4)
    {
        fail("input 'x' and output 'y' must have rank 4, got ", dimsString(x), " and ", dimsString(y));
    }
    auto known = [](int64_t a, int64_t b) { return a >= 0 && b >= 0; };
    if ((known(x.d[0], y.d[0]) && x.d[0] != y.d[0]) || (known(x.d[1], y.d[1]) && x.d[1] != y.d[1]))
    {
        fail("output 'y' ", dimsString(y), " must keep the batch and channel dimensions of input 'x' ", dimsString(x));
    }
    if ((known(mHeight, y.d[2]) && y.d[2] != mHeight) || (known(mWidth, y.d[3]) && y.d[3] != mWidth))
    {
        fail("output 'y' ", dimsString(y), " must be ", mHeight, " x ", mWidth, " (fields 'height', 'width')");
    }
}

void PadToPlugin::checkScales(nvinfer1::PluginTensorDesc const& x, nvinfer1::PluginTensorDesc const& y) const
{
    // The kernel copies x's INT8 values as they are: y must read them with the same scale.
    if (hasScale(x) && hasScale(y) && x.scale != y.scale)
    {
        fail("INT8 input 'x' and output 'y' must share one scale, got ", x.scale, " and ", y.scale);
    }
}

void PadToPlugin::configure(nvinfer1::DynamicPluginTensorDesc const* in, int32_t /*nbInputs*/,
    nvinfer1::DynamicPluginTensorDesc const* out, int32_t /*nbOutputs*/) const
{
    checkDims(in[0].desc.dims, out[0].desc.dims);
    checkScales(in[0].desc, out[0].desc);
}

void PadToPlugin::shapeChange(nvinfer1::PluginTensorDesc const* in, int32_t /*nbInputs*/,
    nvinfer1::PluginTensorDesc const* out, int32_t /*nbOutputs*/) const
{
    checkDims(in[0].dims, out[0].dims);
    checkScales(in[0], out[0]);
}

cudaError_t PadToPlugin::run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
    void const* const* inputs, void* const* outputs, void* /*workspace*/, cudaStream_t stream) const
{
    // The output dims are concrete here, also where height/width came from shape inputs.
    nvinfer1::Dims const& x = inputDesc[0].dims;
    nvinfer1::Dims const& y = outputDesc[0].dims;
    checkDims(x, y);
    float const value = hasScale(outputDesc[0]) ? mValue / outputDesc[0].scale : mValue;
    return padTo(inputs[0], outputs[0], x.d[0] * x.d[1], x.d[2], x.d[3], y.d[2], y.d[3], value,
        toKernelDType(inputDesc[0].type), stream);
}

} // namespace ttp::plugin

TTP_REGISTER_CREATOR(ttp::plugin::PadToCreator)
