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
    static constexpr std::array<char const*, 2> kINPUTS{"x", "weight"};
    static constexpr std::array<char const*, 1> kOUTPUTS{"y"};
    static constexpr std::array<int32_t, 2> kTACTICS{
        static_cast<int32_t>(RmsNormTactic::kWARP_PER_ROW), static_cast<int32_t>(RmsNormTactic::kBLOCK_PER_ROW)};

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
