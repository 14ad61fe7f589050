// MaskedRows plugin (namespace "torchtrt", version "1"), the TensorRT side of torch.ops.torchtrt.masked_rows.
// A data-dependent output shape: its first dimension is a size tensor the plugin computes.
//
// Inputs:  0 x       (N, ...), rank >= 1
//          1 mask    (N), kINT32, non-zero keeps the row. TensorRT plugins take no kBOOL I/O
//                    (PluginTensorDesc::type): the converter casts the torch bool mask to INT32.
// Outputs: 0 y       (K, ...): the kept rows of x in order; K is output 1 (declareSizeTensor, opt N/2, upper N)
//          1 count   0-D kINT32 size tensor K (as TensorRT requires of size tensors); the torch op does not return it
// Fields:  none
// Formats: kLINEAR; x and y share one type in {kFLOAT, kHALF, kBF16, kINT32, kINT64}; mask and count kINT32
// Tactics: none. Workspace: one bit per row plus one int64 per tile of rows (kernels/masked_rows.h); the
//          kernels scan the mask on the device, so enqueue never synchronizes with the host.
#pragma once

#include "kernels/masked_rows.h"
#include "plugin_common.h"

namespace ttp::plugin
{

class MaskedRowsPlugin : public PluginBase<MaskedRowsPlugin>
{
public:
    static constexpr char const* kNAME = "MaskedRows";
    static constexpr char const* kVERSION = "1";
    static constexpr int32_t kNB_OUTPUTS = 2;
    static constexpr std::array<int32_t, 0> kTACTICS{};

    static std::vector<FieldDesc> const& fieldDescs();
    static MaskedRowsPlugin* create(FieldReader const& fields, nvinfer1::TensorRTPhase phase);
    std::vector<double> fieldValues() const
    {
        return {};
    }

    int32_t outputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,
        int32_t nbInputs) const;
    int32_t outputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs, nvinfer1::IExprBuilder& exprBuilder);
    bool supportsFormat(
        int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs, int32_t nbOutputs) const;
    void configure(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) const;
    size_t workspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const;
    void shapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) const;
    cudaError_t run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) const;

private:
    void checkCounts(int32_t nbInputs, int32_t nbOutputs) const;
    void checkDims(nvinfer1::Dims const& x, nvinfer1::Dims const& mask) const;
};

class MaskedRowsCreator : public CreatorBase<MaskedRowsPlugin>
{
};

} // namespace ttp::plugin
