// Test plugins of the conformance harness (namespace "torchtrt", version "1", in their own library), built on the
// same PluginBase as the real ones. Each broken variant breaks exactly one rule; the tests check the harness catches
// it.
//
// Scale<fault>:     x (FLOAT or HALF, any shape) -> y = x * scale; field scale kFLOAT32 > 0 (required);
//                   LINEAR, y has x's type; tactics 1 (256 threads/block) and 2 (128).
// Positives<fault>: x (FLOAT, any shape) -> values (FLOAT, [K]) and count (INT64 0-D size tensor K, opt ceil(N/2),
//                   upper N); field threshold kFLOAT32 (optional, default 0): values = x[x > threshold] in order.
// DimOps:           x (FLOAT, 2-D: d0, d1) and a shape input (s0, s1) -> two FLOAT outputs whose extents use every
//                   DimensionOperation: [d0 + d1, d0 * d1, max(d0, s0), min(d1, s1), s0 - d0] and
//                   [d0 == d1, d0 < s1, floordiv(s1, d0), ceildiv(s1, d0), 7]. enqueue writes nothing.
#pragma once

#include <memory>

#include "plugins/plugin_base.h"
#include "test_kernels.h"

namespace ttp::testplugins
{

namespace tp = ttp::plugin;

enum class Fault : int32_t
{
    kNONE,
    kTHROWS_IN_OUTPUT_SHAPES, // an exception escapes getOutputShapes
    kREADS_ABOVE_POS,         // supportsFormatCombination reads inOut[pos + 1]
    kCLONE_ALLOCATES,         // clone cudaMallocs 8 MiB
    kCLONE_SHARES_STATE,      // clone shares the scale with its source; configurePlugin rewrites it
    kWRITES_PAST_OUTPUT,      // the kernel writes one element past y
    kMODIFIES_INPUT,          // the kernel overwrites x
    kDEFAULT_STREAM,          // enqueue launches on the legacy default stream instead of the given one
    kSERIALIZE_CHANGES_FIELD, // getFieldsToSerialize doubles scale
    kACCEPTS_INVALID_FIELD,   // createPlugin accepts scale <= 0
    kUSES_RESOURCE,           // correct: a runtime plugin shares a resource through the plugin registry
    kLEAKS_RESOURCE,          // acquires the shared resource and never releases it
    kSIZE_TENSOR_1D,          // Positives: the size tensor is declared with shape [1]
    kSIZE_TENSOR_FLOAT,       // Positives: the size tensor is FLOAT
    kSYNCS_HOST,              // enqueue synchronizes its stream with the host (no CUDA graph can capture it)
};

constexpr char const* scaleName(Fault fault)
{
    switch (fault)
    {
    case Fault::kNONE: return "Scale";
    case Fault::kTHROWS_IN_OUTPUT_SHAPES: return "ScaleThrowsInOutputShapes";
    case Fault::kREADS_ABOVE_POS: return "ScaleReadsAbovePos";
    case Fault::kCLONE_ALLOCATES: return "ScaleCloneAllocates";
    case Fault::kCLONE_SHARES_STATE: return "ScaleCloneSharesState";
    case Fault::kWRITES_PAST_OUTPUT: return "ScaleWritesPastOutput";
    case Fault::kMODIFIES_INPUT: return "ScaleModifiesInput";
    case Fault::kDEFAULT_STREAM: return "ScaleUsesDefaultStream";
    case Fault::kSERIALIZE_CHANGES_FIELD: return "ScaleSerializeChangesField";
    case Fault::kACCEPTS_INVALID_FIELD: return "ScaleAcceptsInvalidField";
    case Fault::kUSES_RESOURCE: return "ScaleUsesResource";
    case Fault::kLEAKS_RESOURCE: return "ScaleLeaksResource";
    case Fault::kSIZE_TENSOR_1D: return "PositivesSizeTensor1D";
    case Fault::kSIZE_TENSOR_FLOAT: return "PositivesSizeTensorFloat";
    case Fault::kSYNCS_HOST: return "ScaleSyncsHost";
    }
    return "Unknown";
}

// Throws through a noexcept method: a separate function, so the compiler does not flag the throw itself.
[[noreturn]] void throwEscaping(char const* what);

template <Fault F>
class ScalePlugin : public tp::PluginBase<ScalePlugin<F>>
{
    using Base = tp::PluginBase<ScalePlugin<F>>;

public:
    static constexpr char const* kNAME = scaleName(F);
    static constexpr char const* kVERSION = "1";
    static constexpr std::array<char const*, 1> kINPUTS{"x"};
    static constexpr std::array<char const*, 1> kOUTPUTS{"y"};
    static constexpr std::array<int32_t, 2> kTACTICS{1, 2};

    explicit ScalePlugin(float scale)
        : mScale(std::make_shared<float>(scale))
    {
    }
    ScalePlugin(ScalePlugin const& other);
    ~ScalePlugin() override;

    TTP_PLUGIN_INTERFACE(ScalePlugin);
    std::vector<double> fieldValues() const
    {
        return {F == Fault::kSERIALIZE_CHANGES_FIELD ? 2.0 * *mScale : *mScale};
    }

    void configure(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs);

    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
        nvinfer1::IExprBuilder& exprBuilder) noexcept override;
    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* context) noexcept override;

private:
    std::shared_ptr<float> mScale;
    void* mScratch{nullptr};         // kCLONE_ALLOCATES
    std::string mResourceKey;        // kUSES_RESOURCE / kLEAKS_RESOURCE: set once acquired
    float const* mResource{nullptr}; // the shared scale
};

template <Fault F>
class PositivesPlugin : public tp::PluginBase<PositivesPlugin<F>>
{
public:
    static constexpr char const* kNAME = F == Fault::kNONE ? "Positives" : scaleName(F);
    static constexpr char const* kVERSION = "1";
    static constexpr std::array<char const*, 1> kINPUTS{"x"};
    static constexpr std::array<char const*, 2> kOUTPUTS{"values", "count"};
    static constexpr std::array<int32_t, 0> kTACTICS{};

    explicit PositivesPlugin(float threshold)
        : mThreshold(threshold)
    {
    }

    TTP_PLUGIN_INTERFACE(PositivesPlugin);
    std::vector<double> fieldValues() const
    {
        return {mThreshold};
    }

private:
    float mThreshold;
};

class DimOpsPlugin : public tp::PluginBase<DimOpsPlugin>
{
public:
    static constexpr char const* kNAME = "DimOps";
    static constexpr char const* kVERSION = "1";
    static constexpr std::array<char const*, 1> kINPUTS{"x"};
    static constexpr std::array<char const*, 2> kOUTPUTS{"a", "b"};
    static constexpr std::array<int32_t, 0> kTACTICS{};

    TTP_PLUGIN_INTERFACE(DimOpsPlugin);
    std::vector<double> fieldValues() const
    {
        return {};
    }
};

} // namespace ttp::testplugins
