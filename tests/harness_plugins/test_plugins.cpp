#include "test_plugins.h"

#include <cmath>
#include <cuda_fp16.h>
#include <dlfcn.h>
#include <limits>

namespace ttp::testplugins
{
namespace
{

constexpr double kInf = std::numeric_limits<double>::infinity();
using sdk::FieldType;
using sdk::ScalarKind;

bool isScaleType(nvinfer1::DataType t)
{
    return t == nvinfer1::DataType::kFLOAT || t == nvinfer1::DataType::kHALF;
}

constexpr bool usesResource(Fault f)
{
    return f == Fault::kUSES_RESOURCE || f == Fault::kLEAKS_RESOURCE;
}

constexpr KernelFault kernelFault(Fault f)
{
    return f == Fault::kWRITES_PAST_OUTPUT ? KernelFault::kWRITE_PAST_END
           : f == Fault::kMODIFIES_INPUT   ? KernelFault::kMODIFY_INPUT
                                           : KernelFault::kNONE;
}

// A resource shared by every runtime plugin with the same scale: the scale itself.
class ScaleResource final : public nvinfer1::IPluginResource
{
public:
    explicit ScaleResource(float value)
        : mValue(value)
    {
    }
    int32_t release() noexcept override
    {
        return 0;
    }
    nvinfer1::IPluginResource* clone() noexcept override
    {
        return new (std::nothrow) ScaleResource(mValue);
    }
    float const* value() const noexcept
    {
        return &mValue;
    }

private:
    float mValue;
};

// The harness exports its registry under this name; TensorRT's getPluginRegistry is not in the process.
nvinfer1::IPluginRegistry* harnessRegistry()
{
    using Fn = nvinfer1::IPluginRegistry* (*)();
    auto const fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "ttp_harness_plugin_registry"));
    return fn != nullptr ? fn() : nullptr;
}

} // namespace

void throwEscaping(char const* what)
{
    throw std::runtime_error(what);
}

// ------------------------------------------------------------------------------------------ Scale

template <Fault F>
ScalePlugin<F>::ScalePlugin(ScalePlugin const& other)
    : Base(other)
    , mScale(F == Fault::kCLONE_SHARES_STATE ? other.mScale : std::make_shared<float>(*other.mScale))
{
    if constexpr (F == Fault::kCLONE_ALLOCATES)
    {
        if (cudaMalloc(&mScratch, size_t{8} << 20) != cudaSuccess)
        {
            cudaGetLastError();
            mScratch = nullptr;
        }
    }
}

template <Fault F>
ScalePlugin<F>::~ScalePlugin()
{
    if (mScratch != nullptr)
    {
        cudaFree(mScratch);
    }
    if (!mResourceKey.empty() && F != Fault::kLEAKS_RESOURCE)
    {
        if (nvinfer1::IPluginRegistry* registry = harnessRegistry())
        {
            registry->releasePluginResource(mResourceKey.c_str());
        }
    }
}

template <Fault F>
std::vector<tp::FieldDecl> const& ScalePlugin<F>::fieldDescs()
{
    static std::vector<tp::FieldDecl> const descs{
        {"scale", "scale", FieldType::kFLOAT32, ScalarKind::kFLOAT, /*required=*/true, 1.0, 0.0, kInf,
            /*minInclusive=*/false},
    };
    return descs;
}

template <Fault F>
ScalePlugin<F>* ScalePlugin<F>::create(tp::FieldReader const& fields, nvinfer1::TensorRTPhase /*phase*/)
{
    tp::FieldDecl desc = fieldDescs()[0];
    if constexpr (F == Fault::kACCEPTS_INVALID_FIELD)
    {
        desc.min = -kInf;
    }
    return new ScalePlugin(fields.getFloat(desc));
}

template <Fault F>
int32_t ScalePlugin<F>::outputDataTypes(nvinfer1::DataType* outputTypes, int32_t /*nbOutputs*/,
    nvinfer1::DataType const* inputTypes, int32_t /*nbInputs*/) const
{
    if (!isScaleType(inputTypes[0]))
    {
        Base::fail("input 'x' must be FLOAT or HALF, got ", tp::dataTypeName(inputTypes[0]));
    }
    outputTypes[0] = inputTypes[0];
    return 0;
}

template <Fault F>
int32_t ScalePlugin<F>::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t /*nbInputs*/,
    nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t /*nbShapeInputs*/, nvinfer1::DimsExprs* outputs,
    int32_t /*nbOutputs*/, nvinfer1::IExprBuilder& /*exprBuilder*/)
{
    outputs[0] = inputs[0];
    return 0;
}

template <Fault F>
int32_t ScalePlugin<F>::getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
    nvinfer1::DimsExprs const* shapeInputs, int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
    nvinfer1::IExprBuilder& exprBuilder) noexcept
{
    if constexpr (F == Fault::kTHROWS_IN_OUTPUT_SHAPES)
    {
        throwEscaping("Scale: shape inference is not implemented");
    }
    return Base::getOutputShapes(inputs, nbInputs, shapeInputs, nbShapeInputs, outputs, nbOutputs, exprBuilder);
}

template <Fault F>
bool ScalePlugin<F>::supportsFormat(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs, int32_t /*nbOutputs*/) const
{
    auto const& desc = inOut[pos].desc;
    if (desc.format != nvinfer1::TensorFormat::kLINEAR)
    {
        return false;
    }
    if (pos == 0)
    {
        // The bug: the output's type is not decided yet when the input is asked about.
        bool const sameAsOutput = F != Fault::kREADS_ABOVE_POS || desc.type == inOut[nbInputs].desc.type;
        return isScaleType(desc.type) && sameAsOutput;
    }
    return desc.type == inOut[0].desc.type;
}

template <Fault F>
void ScalePlugin<F>::configure(nvinfer1::DynamicPluginTensorDesc const* in, int32_t /*nbInputs*/,
    nvinfer1::DynamicPluginTensorDesc const* /*out*/, int32_t /*nbOutputs*/)
{
    if constexpr (F == Fault::kCLONE_SHARES_STATE)
    {
        // Rounds the scale to the configured precision, in state the clone shares with its source.
        if (in[0].desc.type == nvinfer1::DataType::kHALF)
        {
            *mScale = __half2float(__float2half(*mScale));
        }
    }
}

template <Fault F>
cudaError_t ScalePlugin<F>::run(nvinfer1::PluginTensorDesc const* inputDesc,
    nvinfer1::PluginTensorDesc const* /*outputDesc*/, void const* const* inputs, void* const* outputs,
    void* /*workspace*/, cudaStream_t stream) const
{
    float const value = mResource != nullptr ? *mResource : *mScale;
    cudaStream_t const launchOn = F == Fault::kDEFAULT_STREAM ? cudaStream_t{nullptr} : stream;
    cudaError_t const err = scale(inputs[0], outputs[0], tp::volume(inputDesc[0].dims), value,
        inputDesc[0].type == nvinfer1::DataType::kHALF, this->tactic() == 2 ? 128 : 256, kernelFault(F), launchOn);
    if constexpr (F == Fault::kSYNCS_HOST)
    {
        // As an op that reads a count back to size its output would: the host waits for the stream.
        return err != cudaSuccess ? err : cudaStreamSynchronize(stream);
    }
    return err;
}

template <Fault F>
nvinfer1::IPluginV3* ScalePlugin<F>::attachToContext(nvinfer1::IPluginResourceContext* context) noexcept
{
    if constexpr (!usesResource(F))
    {
        return Base::attachToContext(context);
    }
    return tp::guarded<nvinfer1::IPluginV3*>(kNAME, "attachToContext", nullptr,
        [&]
        {
            nvinfer1::IPluginRegistry* registry = harnessRegistry();
            if (registry == nullptr)
            {
                Base::fail("no plugin registry to acquire the shared scale from");
            }
            auto attached = std::make_unique<ScalePlugin>(*this);
            std::string const key = "torchtrt_test.scale." + std::to_string(*mScale);
            ScaleResource prototype(*mScale);
            auto* shared = static_cast<ScaleResource*>(registry->acquirePluginResource(key.c_str(), &prototype));
            if (shared == nullptr)
            {
                Base::fail("acquirePluginResource('", key, "') returned nullptr");
            }
            attached->mResourceKey = key;
            attached->mResource = shared->value();
            return static_cast<nvinfer1::IPluginV3*>(attached.release());
        });
}

// ------------------------------------------------------------------------------------------ Positives

template <Fault F>
std::vector<tp::FieldDecl> const& PositivesPlugin<F>::fieldDescs()
{
    static std::vector<tp::FieldDecl> const descs{
        {"threshold", "threshold", FieldType::kFLOAT32, ScalarKind::kFLOAT, /*required=*/false, 0.0, -kInf, kInf, true},
    };
    return descs;
}

template <Fault F>
PositivesPlugin<F>* PositivesPlugin<F>::create(tp::FieldReader const& fields, nvinfer1::TensorRTPhase /*phase*/)
{
    return new PositivesPlugin(fields.getFloat(fieldDescs()[0]));
}

template <Fault F>
int32_t PositivesPlugin<F>::outputDataTypes(nvinfer1::DataType* outputTypes, int32_t /*nbOutputs*/,
    nvinfer1::DataType const* inputTypes, int32_t /*nbInputs*/) const
{
    if (inputTypes[0] != nvinfer1::DataType::kFLOAT)
    {
        PositivesPlugin::fail("input 'x' must be FLOAT, got ", tp::dataTypeName(inputTypes[0]));
    }
    outputTypes[0] = nvinfer1::DataType::kFLOAT;
    outputTypes[1] = F == Fault::kSIZE_TENSOR_FLOAT ? nvinfer1::DataType::kFLOAT : nvinfer1::DataType::kINT64;
    return 0;
}

template <Fault F>
int32_t PositivesPlugin<F>::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t /*nbInputs*/,
    nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t /*nbShapeInputs*/, nvinfer1::DimsExprs* outputs,
    int32_t /*nbOutputs*/, nvinfer1::IExprBuilder& exprBuilder)
{
    nvinfer1::IDimensionExpr const* n = exprBuilder.constant(1);
    for (int32_t d = 0; d < inputs[0].nbDims; ++d)
    {
        n = exprBuilder.operation(nvinfer1::DimensionOperation::kPROD, *n, *inputs[0].d[d]);
    }
    auto const* opt = exprBuilder.operation(nvinfer1::DimensionOperation::kCEIL_DIV, *n, *exprBuilder.constant(2));
    outputs[0].nbDims = 1;
    outputs[0].d[0] = exprBuilder.declareSizeTensor(1, *opt, *n);
    outputs[1].nbDims = F == Fault::kSIZE_TENSOR_1D ? 1 : 0;
    outputs[1].d[0] = exprBuilder.constant(1);
    return 0;
}

template <Fault F>
bool PositivesPlugin<F>::supportsFormat(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t /*nbInputs*/, int32_t /*nbOutputs*/) const
{
    auto const& desc = inOut[pos].desc;
    nvinfer1::DataType const countType
        = F == Fault::kSIZE_TENSOR_FLOAT ? nvinfer1::DataType::kFLOAT : nvinfer1::DataType::kINT64;
    return desc.format == nvinfer1::TensorFormat::kLINEAR
           && desc.type == (pos == 2 ? countType : nvinfer1::DataType::kFLOAT);
}

template <Fault F>
cudaError_t PositivesPlugin<F>::run(nvinfer1::PluginTensorDesc const* inputDesc,
    nvinfer1::PluginTensorDesc const* /*outputDesc*/, void const* const* inputs, void* const* outputs,
    void* /*workspace*/, cudaStream_t stream) const
{
    return positives(static_cast<float const*>(inputs[0]), static_cast<float*>(outputs[0]), outputs[1],
        tp::volume(inputDesc[0].dims), mThreshold, F == Fault::kSIZE_TENSOR_FLOAT, stream);
}

// ------------------------------------------------------------------------------------------ DimOps

std::vector<tp::FieldDecl> const& DimOpsPlugin::fieldDescs()
{
    static std::vector<tp::FieldDecl> const descs{};
    return descs;
}

DimOpsPlugin* DimOpsPlugin::create(tp::FieldReader const& /*fields*/, nvinfer1::TensorRTPhase /*phase*/)
{
    return new DimOpsPlugin();
}

int32_t DimOpsPlugin::outputDataTypes(nvinfer1::DataType* outputTypes, int32_t /*nbOutputs*/,
    nvinfer1::DataType const* /*inputTypes*/, int32_t /*nbInputs*/) const
{
    outputTypes[0] = nvinfer1::DataType::kFLOAT;
    outputTypes[1] = nvinfer1::DataType::kFLOAT;
    return 0;
}

int32_t DimOpsPlugin::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t /*nbInputs*/,
    nvinfer1::DimsExprs const* shapeInputs, int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t /*nbOutputs*/,
    nvinfer1::IExprBuilder& exprBuilder)
{
    if (inputs[0].nbDims != 2 || nbShapeInputs != 1 || shapeInputs[0].nbDims != 2)
    {
        fail("expected a 2-D input and a shape input of 2 values");
    }
    using Op = nvinfer1::DimensionOperation;
    auto const& d0 = *inputs[0].d[0];
    auto const& d1 = *inputs[0].d[1];
    auto const& s0 = *shapeInputs[0].d[0];
    auto const& s1 = *shapeInputs[0].d[1];
    auto op = [&](Op o, nvinfer1::IDimensionExpr const& a, nvinfer1::IDimensionExpr const& b)
    { return exprBuilder.operation(o, a, b); };
    outputs[0].nbDims = 5;
    outputs[0].d[0] = op(Op::kSUM, d0, d1);
    outputs[0].d[1] = op(Op::kPROD, d0, d1);
    outputs[0].d[2] = op(Op::kMAX, d0, s0);
    outputs[0].d[3] = op(Op::kMIN, d1, s1);
    outputs[0].d[4] = op(Op::kSUB, s0, d0);
    outputs[1].nbDims = 5;
    outputs[1].d[0] = op(Op::kEQUAL, d0, d1);
    outputs[1].d[1] = op(Op::kLESS, d0, s1);
    outputs[1].d[2] = op(Op::kFLOOR_DIV, s1, d0);
    outputs[1].d[3] = op(Op::kCEIL_DIV, s1, d0);
    outputs[1].d[4] = exprBuilder.constant(7);
    return 0;
}

bool DimOpsPlugin::supportsFormat(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t /*nbInputs*/, int32_t /*nbOutputs*/) const
{
    return inOut[pos].desc.format == nvinfer1::TensorFormat::kLINEAR
           && inOut[pos].desc.type == nvinfer1::DataType::kFLOAT;
}

cudaError_t DimOpsPlugin::run(nvinfer1::PluginTensorDesc const* /*inputDesc*/,
    nvinfer1::PluginTensorDesc const* /*outputDesc*/, void const* const* /*inputs*/, void* const* /*outputs*/,
    void* /*workspace*/, cudaStream_t /*stream*/) const
{
    return cudaSuccess;
}

// ------------------------------------------------------------------------------------------ registration

namespace
{

template <template <Fault> class Plugin, Fault... Faults>
struct Register
{
    Register()
    {
        (tp::CreatorRegistration<tp::CreatorBase<Plugin<Faults>>>(), ...);
    }
};

Register<ScalePlugin, Fault::kNONE, Fault::kTHROWS_IN_OUTPUT_SHAPES, Fault::kREADS_ABOVE_POS, Fault::kCLONE_ALLOCATES,
    Fault::kCLONE_SHARES_STATE, Fault::kWRITES_PAST_OUTPUT, Fault::kMODIFIES_INPUT, Fault::kDEFAULT_STREAM,
    Fault::kSERIALIZE_CHANGES_FIELD, Fault::kACCEPTS_INVALID_FIELD, Fault::kUSES_RESOURCE, Fault::kLEAKS_RESOURCE,
    Fault::kSYNCS_HOST> const kScaleCreators{};
Register<PositivesPlugin, Fault::kNONE, Fault::kSIZE_TENSOR_1D, Fault::kSIZE_TENSOR_FLOAT> const kPositivesCreators{};
tp::CreatorRegistration<tp::CreatorBase<DimOpsPlugin>> const kDimOpsCreator{};

} // namespace
} // namespace ttp::testplugins
