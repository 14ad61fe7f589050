// PadTo plugin (namespace "torchtrt", version "1"), the TensorRT side of torch.ops.torchtrt.pad_to.
//
// Inputs:  0 x       (B, C, H, W)
// Shape inputs (only for fields holding -1, in field order): one 1-element INT32/INT64 shape tensor each,
//          the output height and/or width; they reach getOutputShapes only, enqueue reads the output dims.
// Outputs: 0 y       (B, C, height, width): x at [:, :, :min(H, height), :min(W, width)], `value` elsewhere
// Fields:  height, width, value: types, defaults and ranges as declared in torchtrt_plugins/ops/pad_to.py (read
//          from contracts/ops.h). height or width -1: taken from the next shape input. For kINT8 I/O `value` is
//          divided by the tensor scale when TensorRT sets one, then rounded and saturated.
// Formats: kLINEAR; x and y share one declared type; kINT8 x and y share one scale
// Tactics: none (one memory-bound kernel, vectorized along W). Timing cache id: name, version, fields.
// Workspace: none.
#pragma once

#include "contracts/ops.h"
#include "kernels/pad_to.h"
#include "plugin_common.h"

namespace ttp::plugin
{

class PadToPlugin : public PluginBase<PadToPlugin>
{
public:
    // Name, version, inputs, fields and tactics: the op's declaration (torchtrt_plugins/ops/pad_to.py).
    static constexpr char const* kNAME = contract::pad_to::kPLUGIN_NAME;
    static constexpr char const* kVERSION = contract::pad_to::kPLUGIN_VERSION;
    static constexpr auto kINPUTS = contract::pad_to::kINPUT_NAMES;
    static constexpr auto kOUTPUTS = contract::pad_to::kOUTPUTS;
    static constexpr auto kTACTICS = contract::pad_to::kTACTICS;

    PadToPlugin(int64_t height, int64_t width, float value)
        : mHeight(height)
        , mWidth(width)
        , mValue(value)
    {
    }

    TTP_PLUGIN_INTERFACE(PadToPlugin);
    TTP_PLUGIN_SHAPE_CHECKS();
    std::vector<double> fieldValues() const
    {
        return {static_cast<double>(mHeight), static_cast<double>(mWidth), mValue};
    }

private:
    int32_t shapeInputCount() const noexcept
    {
        return (mHeight < 0 ? 1 : 0) + (mWidth < 0 ? 1 : 0);
    }
    void checkDims(nvinfer1::Dims const& x, nvinfer1::Dims const& y) const;
    void checkScales(nvinfer1::PluginTensorDesc const& x, nvinfer1::PluginTensorDesc const& y) const;

    int64_t mHeight; // -1: from a shape input
    int64_t mWidth;  // -1: from a shape input
    float mValue;
};

class PadToCreator : public CreatorBase<PadToPlugin>
{
};

} // namespace ttp::plugin
