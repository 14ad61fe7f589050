// MaskedRows plugin (namespace "torchtrt", version "1"), the TensorRT side of torch.ops.torchtrt.masked_rows.
// A data-dependent output shape: its first dimension is a size tensor the plugin computes.
//
// Inputs:  0 x       (N, ...), rank >= 1
//          1 mask    (N), kINT32, non-zero keeps the row. TensorRT plugins take no kBOOL I/O
//                    (PluginTensorDesc::type): the converter casts the torch bool mask to INT32.
// Outputs: 0 y       (K, ...): the kept rows of x in order; K is output 1 (declareSizeTensor, opt N/2, upper N)
//          1 count   0-D kINT32 size tensor K (as TensorRT requires of size tensors); the torch op does not return it
// Fields:  none
// Formats: kLINEAR; x and y share one type (declared in torchtrt_plugins/ops/masked_rows.py, read from
//          contracts/ops.h); mask and count kINT32
// Tactics: none. Workspace: one bit per row plus one int64 per tile of rows (kernels/masked_rows.h); the
//          kernels scan the mask on the device, so enqueue never synchronizes with the host.
#pragma once

#include "contracts/ops.h"
#include "kernels/masked_rows.h"
#include "plugin_common.h"

namespace ttp::plugin
{

class MaskedRowsPlugin : public PluginBase<MaskedRowsPlugin>
{
public:
    // Name, version, inputs, fields and tactics: the op's declaration (torchtrt_plugins/ops/masked_rows.py).
    static constexpr char const* kNAME = contract::masked_rows::kPLUGIN_NAME;
    static constexpr char const* kVERSION = contract::masked_rows::kPLUGIN_VERSION;
    static constexpr auto kINPUTS = contract::masked_rows::kINPUT_NAMES;
    static constexpr std::array<char const*, 2> kOUTPUTS{"y", "count"};
    static constexpr auto kTACTICS = contract::masked_rows::kTACTICS;

    TTP_PLUGIN_INTERFACE(MaskedRowsPlugin);
    TTP_PLUGIN_SHAPE_CHECKS();
    std::vector<double> fieldValues() const
    {
        return {};
    }
    size_t workspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const;

private:
    void checkDims(nvinfer1::Dims const& x, nvinfer1::Dims const& mask) const;
};

class MaskedRowsCreator : public CreatorBase<MaskedRowsPlugin>
{
};

} // namespace ttp::plugin
