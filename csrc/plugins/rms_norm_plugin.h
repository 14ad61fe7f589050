// RMSNorm plugin (namespace "torchtrt", version "1"), the TensorRT side of torch.ops.torchtrt.rms_norm.
//
// Inputs:  0 x       (..., H), rank >= 1
//          1 weight  (H)
// Outputs: 0 y       same shape as x: y = x * rsqrt(mean(x^2, last dim) + eps) * weight, fp32 accumulation
// Fields, types and tactics: as declared in torchtrt_plugins/ops/rms_norm.py (read from contracts/ops.h).
// Formats: kLINEAR; x, weight and y share one type. Tactic 0 (TensorRT's default) lets the kernel heuristic
//          choose. Timing cache id: name, version, eps.
// Workspace: none.
#pragma once

#include "contracts/ops.h"
#include "kernels/rms_norm.h"
#include "plugin_common.h"

namespace ttp::plugin
{

class RmsNormPlugin : public PluginBase<RmsNormPlugin>
{
public:
    // Name, version, inputs, fields and tactics: the op's declaration (torchtrt_plugins/ops/rms_norm.py).
    static constexpr char const* kNAME = contract::rms_norm::kPLUGIN_NAME;
    static constexpr char const* kVERSION = contract::rms_norm::kPLUGIN_VERSION;
    static constexpr auto kINPUTS = contract::rms_norm::kINPUT_NAMES;
    static constexpr auto kOUTPUTS = contract::rms_norm::kOUTPUTS;
    static constexpr auto kTACTICS = contract::rms_norm::kTACTICS;

    explicit RmsNormPlugin(float eps)
        : mEps(eps)
    {
    }

    TTP_PLUGIN_INTERFACE(RmsNormPlugin);
    TTP_PLUGIN_SHAPE_CHECKS();
    std::vector<double> fieldValues() const
    {
        return {mEps};
    }

private:
    void checkDims(nvinfer1::Dims const& x, nvinfer1::Dims const& weight) const;

    float mEps;
};

class RmsNormCreator : public CreatorBase<RmsNormPlugin>
{
};

} // namespace ttp::plugin
