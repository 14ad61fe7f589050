// RMSNorm plugin (namespace "torchtrt", version "1"), the TensorRT side of torch.ops.torchtrt.rms_norm.
//
// Inputs:  0 x       (..., H), rank >= 1
//          1 weight  (H)
// Outputs: 0 y       same shape as x: y = x * rsqrt(mean(x^2, last dim) + eps) * weight, fp32 accumulation
// Fields:  eps       kFLOAT32, required, > 0
// Formats: kLINEAR; x, weight and y share one type in {kFLOAT, kHALF, kBF16}
// Tactics: 1 warp per row (small H), 2 one block per row, vectorized, row cached in registers (large H);
//          0 (TensorRT's default) lets the kernel heuristic choose. Timing cache id: name, version, eps.
// Workspace: none.
#pragma once

#include "kernels/rms_norm.h"
#include "plugin_common.h"

namespace ttp::plugin
{

class RmsNormPlugin : public PluginBase<RmsNormPlugin>
{
public:
    static constexpr char const* kNAME = "RMSNorm";
    static constexpr char const* kVERSION = "1";
    static constexpr int32_t kNB_OUTPUTS = 1;
    static constexpr std::array<int32_t, 2> kTACTICS{
        static_cast<int32_t>(RmsNormTactic::kWARP_PER_ROW), static_cast<int32_t>(RmsNormTactic::kBLOCK_PER_ROW)};

    explicit RmsNormPlugin(float eps)
        : mEps(eps)
    {
    }

    static std::vector<FieldDesc> const& fieldDescs();
    static RmsNormPlugin* create(FieldReader const& fields, nvinfer1::TensorRTPhase phase);
    std::vector<double> fieldValues() const
    {
        return {mEps};
    }

    int32_t outputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,
        int32_t nbInputs) const;
    int32_t outputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs, nvinfer1::IExprBuilder& exprBuilder);
    bool supportsFormat(
        int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs, int32_t nbOutputs) const;
    void configure(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) const;
    size_t workspaceSize(
        nvinfer1::DynamicPluginTensorDesc const*, int32_t, nvinfer1::DynamicPluginTensorDesc const*, int32_t) const
    {
        return 0;
    }
    void shapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) const;
    cudaError_t run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) const;

private:
    void checkDims(nvinfer1::Dims const& x, nvinfer1::Dims const& weight) const;

    float mEps;
};

class RmsNormCreator : public CreatorBase<RmsNormPlugin>
{
};

} // namespace ttp::plugin
