// torchtrt::rms_norm, rms_norm_fp8 and rms_norm_int8 behind the SDK launcher ABI (sdk/ttp_sdk.h), one launcher per
// declared tactic (torchtrt_plugins/ops/rms_norm.py, rms_norm_quant.py): the eager ops and the generic plugin both
// call these.
#include "kernels/rms_norm.h"
#include "op_fields.h"
#include "sdk/ttp_sdk.h"

namespace ttp::launchers
{
namespace
{

// The three ops' scalars are the same arguments at the same places.
namespace fields = torchtrt::fields::rms_norm;
static_assert(fields::kEPS == torchtrt::fields::rms_norm_fp8::kEPS
              && fields::kEPS == torchtrt::fields::rms_norm_int8::kEPS
              && fields::kWEIGHT_OFFSET == torchtrt::fields::rms_norm_fp8::kWEIGHT_OFFSET
              && fields::kWEIGHT_OFFSET == torchtrt::fields::rms_norm_int8::kWEIGHT_OFFSET
              && fields::kNB_SCALARS == torchtrt::fields::rms_norm_fp8::kNB_SCALARS
              && fields::kNB_SCALARS == torchtrt::fields::rms_norm_int8::kNB_SCALARS);

// Inputs x, weight (rms_norm), then scale (the quantized ops: one fp32 value, rank 0 or 1).
cudaError_t launchRmsNorm(sdk::LaunchArgs const& a, RmsNormTactic tactic, bool quantized)
{
    int32_t const nbInputs = quantized ? 3 : 2;
    if (a.nbInputs != nbInputs || a.nbOutputs != 1 || a.nbScalars != fields::kNB_SCALARS || a.inputs[0].rank < 1)
    {
        return cudaErrorInvalidValue;
    }
    sdk::Tensor const& x = a.inputs[0];
    sdk::Tensor const& weight = a.inputs[1];
    int64_t const hidden = x.dims[x.rank - 1];
    // The fake kernel's shape rule, checked again where the data is: weight is (hidden,).
    if (weight.rank != 1 || weight.dims[0] != hidden || weight.dtype != x.dtype)
    {
        return cudaErrorInvalidValue;
    }
    int64_t const rows = hidden == 0 ? 0 : x.numel() / hidden;
    auto const eps = static_cast<float>(a.scalars[fields::kEPS]);
    auto const weightOffset = static_cast<float>(a.scalars[fields::kWEIGHT_OFFSET]);
    if (!quantized)
    {
        return rmsNorm(
            x.data, weight.data, a.outputs[0].data, rows, hidden, eps, weightOffset, x.dtype, tactic, a.stream);
    }
    sdk::Tensor const& scale = a.inputs[2];
    if (scale.dtype != DType::kFLOAT32 || scale.rank > 1 || scale.numel() != 1)
    {
        return cudaErrorInvalidValue;
    }
    return rmsNormQuant(x.data, weight.data, static_cast<float const*>(scale.data), a.outputs[0].data, rows, hidden,
        eps, weightOffset, x.dtype, a.outputs[0].dtype, tactic, a.stream);
}

} // namespace

// Tactic 0: the kernel's heuristic chooses.
cudaError_t rmsNorm(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kAUTO, false);
}

cudaError_t rmsNormWarpPerRow(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kWARP_PER_ROW, false);
}

cudaError_t rmsNormBlockPerRow(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kBLOCK_PER_ROW, false);
}

cudaError_t rmsNormLarge(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kLARGE, false);
}

// The output's dtype (FP8 E4M3 or INT8) chooses the quantization.
cudaError_t rmsNormQuant(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kAUTO, true);
}

cudaError_t rmsNormQuantWarpPerRow(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kWARP_PER_ROW, true);
}

cudaError_t rmsNormQuantBlockPerRow(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kBLOCK_PER_ROW, true);
}

cudaError_t rmsNormQuantLarge(sdk::LaunchArgs const& args)
{
    return launchRmsNorm(args, RmsNormTactic::kLARGE, true);
}

} // namespace ttp::launchers
