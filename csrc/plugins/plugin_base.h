// PluginBase, the escape hatch for what torchtrt_plugins.declare cannot express: a hand-written IPluginV3 on the
// SDK's plugin machinery (sdk/plugin_support.h: logging, `guarded`, the field reader over sdk/fields.h, the creator
// registry that the library's getCreators hands out):
// - PluginBase<Derived>: the IPluginV3 capability plumbing, clone, tactics and the timing cache id;
// - CreatorBase<Plugin> and self-registration of creators for getCreators.
#pragma once

#include <array>
#include <sstream>
#include <string>
#include <vector>

#include "sdk/plugin_support.h"

namespace ttp::plugin
{

// Derived provides:
//   static constexpr char const* kNAME, kVERSION;
//   static constexpr std::array<char const*, N> kINPUTS, kOUTPUTS (tensor names: they give the counts);
//   static constexpr std::array<int32_t, N> kTACTICS (may be empty);
//   static std::vector<FieldDecl> const& fieldDescs();
//   static Derived* create(FieldReader const&, nvinfer1::TensorRTPhase)  (for CreatorBase);
//   std::vector<double> fieldValues() const  (same order as fieldDescs, what createPlugin reads back);
//   the methods TTP_PLUGIN_INTERFACE declares: outputDataTypes, outputShapes, supportsFormat, run;
//   where the defaults below do not fit, configure, workspaceSize and shapeChange (TTP_PLUGIN_SHAPE_CHECKS
//   declares the first and last).
// The base checks the input and output counts against kINPUTS and kOUTPUTS before calling any of them, so each
// sees exactly those. Each may throw; the base turns exceptions into logged errors and error codes.
template <typename Derived>
class PluginBase : public PluginInterfaces<>
{
public:
    PluginBase() = default;
    // A clone shares nothing mutable with its source: the serialization buffer is rebuilt on demand.
    PluginBase(PluginBase const& other)
        : PluginInterfaces<>(other)
        , mTactic(other.mTactic)
    {
    }
    PluginBase& operator=(PluginBase const&) = delete;
    ~PluginBase() override = default;

    nvinfer1::IPluginV3* clone() noexcept override
    {
        return guarded<nvinfer1::IPluginV3*>(Derived::kNAME, "clone", nullptr,
            [&] { return static_cast<nvinfer1::IPluginV3*>(new Derived(derived())); });
    }

    // IPluginV3OneCore
    char const* getPluginName() const noexcept override
    {
        return Derived::kNAME;
    }
    char const* getPluginVersion() const noexcept override
    {
        return Derived::kVERSION;
    }
    char const* getPluginNamespace() const noexcept override
    {
        return kNAMESPACE;
    }

    // IPluginV3OneBuild
    int32_t getNbOutputs() const noexcept override
    {
        return static_cast<int32_t>(Derived::kOUTPUTS.size());
    }

    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,
        int32_t nbInputs) const noexcept override
    {
        return guarded(Derived::kNAME, "getOutputDataTypes", int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                return derived().outputDataTypes(outputTypes, nbOutputs, inputTypes, nbInputs);
            });
    }

    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
        nvinfer1::IExprBuilder& exprBuilder) noexcept override
    {
        return guarded(Derived::kNAME, "getOutputShapes", int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                return derived().outputShapes(
                    inputs, nbInputs, shapeInputs, nbShapeInputs, outputs, nbOutputs, exprBuilder);
            });
    }

    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override
    {
        return guarded(Derived::kNAME, "supportsFormatCombination", false,
            [&] { return derived().supportsFormat(pos, inOut, nbInputs, nbOutputs); });
    }

    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override
    {
        return guarded(Derived::kNAME, "configurePlugin", int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                derived().configure(in, nbInputs, out, nbOutputs);
                return int32_t{0};
            });
    }

    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override
    {
        return guarded(Derived::kNAME, "getWorkspaceSize", size_t{0},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                return derived().workspaceSize(inputs, nbInputs, outputs, nbOutputs);
            });
    }

    int32_t getNbTactics() noexcept override
    {
        return static_cast<int32_t>(Derived::kTACTICS.size());
    }

    int32_t getValidTactics(int32_t* tactics, int32_t nbTactics) noexcept override
    {
        // NVIDIA's builder calls getValidTactics(nullptr, 0) after getNbTactics() returned 0: that is a valid
        // query with nothing to write, not an error.
        if (nbTactics == 0 && Derived::kTACTICS.empty())
        {
            return 0;
        }
        if (tactics == nullptr || nbTactics != static_cast<int32_t>(Derived::kTACTICS.size()))
        {
            log(Severity::kERROR, concat(kNAMESPACE, "::", Derived::kNAME, " getValidTactics: expected room for ",
                                      Derived::kTACTICS.size(), " tactics, got ", nbTactics));
            return 1;
        }
        for (size_t i = 0; i < Derived::kTACTICS.size(); ++i)
        {
            tactics[i] = Derived::kTACTICS[i];
        }
        return 0;
    }

    char const* getTimingCacheID() noexcept override
    {
        return guarded<char const*>(Derived::kNAME, "getTimingCacheID", nullptr,
            [&]
            {
                std::ostringstream id;
                id << Derived::kNAME << "_v" << Derived::kVERSION;
                for (double value : derived().fieldValues())
                {
                    id << "_" << value;
                }
                mTimingCacheId = id.str();
                return mTimingCacheId.c_str();
            });
    }

    // IPluginV3OneRuntime
    int32_t setTactic(int32_t tactic) noexcept override
    {
        bool valid = tactic == 0;
        for (int32_t t : Derived::kTACTICS)
        {
            valid = valid || t == tactic;
        }
        if (!valid)
        {
            log(Severity::kERROR, concat(kNAMESPACE, "::", Derived::kNAME, " setTactic: unknown tactic ", tactic));
            return 1;
        }
        mTactic = tactic;
        return 0;
    }

    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept override
    {
        return guarded(Derived::kNAME, "onShapeChange", int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                derived().shapeChange(in, nbInputs, out, nbOutputs);
                return int32_t{0};
            });
    }

    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override
    {
        return guarded(Derived::kNAME, "enqueue", int32_t{1},
            [&]
            {
                cudaError_t const err = derived().run(inputDesc, outputDesc, inputs, outputs, workspace, stream);
                if (err != cudaSuccess)
                {
                    throw PluginError(concat("CUDA error ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
                }
                return int32_t{0};
            });
    }

    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* /*context*/) noexcept override
    {
        return clone();
    }

    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override
    {
        return guarded<nvinfer1::PluginFieldCollection const*>(Derived::kNAME, "getFieldsToSerialize", nullptr,
            [&]
            {
                auto const& descs = Derived::fieldDescs();
                auto const values = derived().fieldValues();
                mFieldWriter.clear();
                for (size_t i = 0; i < descs.size(); ++i)
                {
                    mFieldWriter.add(descs[i], values.at(i));
                }
                return mFieldWriter.collection();
            });
    }

    // Defaults for plugins that need nothing more than the base's count checks (Derived's own hide them).
    void configure(nvinfer1::DynamicPluginTensorDesc const* /*in*/, int32_t /*nbInputs*/,
        nvinfer1::DynamicPluginTensorDesc const* /*out*/, int32_t /*nbOutputs*/) const
    {
    }
    size_t workspaceSize(nvinfer1::DynamicPluginTensorDesc const* /*inputs*/, int32_t /*nbInputs*/,
        nvinfer1::DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const
    {
        return 0;
    }
    void shapeChange(nvinfer1::PluginTensorDesc const* /*in*/, int32_t /*nbInputs*/,
        nvinfer1::PluginTensorDesc const* /*out*/, int32_t /*nbOutputs*/) const
    {
    }

protected:
    // The tactic chosen by setTactic; 0 lets the kernel heuristic decide.
    int32_t tactic() const noexcept
    {
        return mTactic;
    }

    // Throws PluginError with "<what> must be <expected>, got <got>" for shape/type checks.
    template <typename... Args>
    [[noreturn]] static void fail(Args const&... args)
    {
        throw PluginError(concat(args...));
    }

private:
    // "expected 2 inputs (x, weight) and 1 output (y), got 3 and 1"
    static void checkCounts(int32_t nbInputs, int32_t nbOutputs)
    {
        if (nbInputs != static_cast<int32_t>(Derived::kINPUTS.size())
            || nbOutputs != static_cast<int32_t>(Derived::kOUTPUTS.size()))
        {
            fail("expected ", countOf(Derived::kINPUTS, "input"), " and ", countOf(Derived::kOUTPUTS, "output"),
                ", got ", nbInputs, " and ", nbOutputs);
        }
    }
    template <size_t N>
    static std::string countOf(std::array<char const*, N> const& names, char const* noun)
    {
        std::string text = concat(N, " ", noun, N == 1 ? " (" : "s (");
        for (size_t i = 0; i < N; ++i)
        {
            text += concat(i == 0 ? "" : ", ", names[i]);
        }
        return text + ")";
    }

    Derived& derived() noexcept
    {
        return static_cast<Derived&>(*this);
    }
    Derived const& derived() const noexcept
    {
        return static_cast<Derived const&>(*this);
    }

    int32_t mTactic{0};
    std::string mTimingCacheId;
    FieldWriter mFieldWriter;
};

// ------------------------------------------------------------------------------------------ creators

// Plugin provides `static Plugin* create(FieldReader const&, nvinfer1::TensorRTPhase)` (may throw).
template <typename Plugin>
class CreatorBase : public nvinfer1::IPluginCreatorV3One
{
public:
    CreatorBase()
    {
        for (FieldDecl const& desc : Plugin::fieldDescs())
        {
            mFields.emplace_back(desc.name, nullptr, pluginFieldType(desc), 1);
        }
        mCollection.nbFields = static_cast<int32_t>(mFields.size());
        mCollection.fields = mFields.data();
    }

    nvinfer1::IPluginV3* createPlugin(char const* /*name*/, nvinfer1::PluginFieldCollection const* fc,
        nvinfer1::TensorRTPhase phase) noexcept override
    {
        return guarded<nvinfer1::IPluginV3*>(Plugin::kNAME, "createPlugin", nullptr,
            [&]
            {
                return static_cast<nvinfer1::IPluginV3*>(
                    Plugin::create(FieldReader(Plugin::kNAME, fc, mCollection), phase));
            });
    }

    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override
    {
        return &mCollection;
    }
    char const* getPluginName() const noexcept override
    {
        return Plugin::kNAME;
    }
    char const* getPluginVersion() const noexcept override
    {
        return Plugin::kVERSION;
    }
    char const* getPluginNamespace() const noexcept override
    {
        return kNAMESPACE;
    }

private:
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mCollection{};
};

// Registers one creator instance for getCreators; use once per plugin source file.
template <typename Creator>
struct CreatorRegistration
{
    CreatorRegistration()
    {
        static Creator creator;
        CreatorRegistry::creators().push_back(&creator);
    }
};

// Declares, inside a plugin class, the methods PluginBase<Derived> calls that every plugin defines.
#define TTP_PLUGIN_INTERFACE(PLUGIN)                                                                                   \
    static std::vector<::ttp::sdk::FieldDecl> const& fieldDescs();                                                     \
    static PLUGIN* create(::ttp::plugin::FieldReader const& fields, nvinfer1::TensorRTPhase phase);                    \
    int32_t outputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,  \
        int32_t nbInputs) const;                                                                                       \
    int32_t outputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,  \
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs, nvinfer1::IExprBuilder& exprBuilder);  \
    bool supportsFormat(                                                                                               \
        int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs, int32_t nbOutputs) const;       \
    cudaError_t run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,         \
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) const

// Declares configure and shapeChange, for a plugin that checks the shapes it is configured and run with.
#define TTP_PLUGIN_SHAPE_CHECKS()                                                                                      \
    void configure(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,                                      \
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) const;                                        \
    void shapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,    \
        int32_t nbOutputs) const

#define TTP_REGISTER_CREATOR(CREATOR)                                                                                  \
    namespace                                                                                                          \
    {                                                                                                                  \
    ::ttp::plugin::CreatorRegistration<CREATOR> const kCreatorRegistration{};                                          \
    }

} // namespace ttp::plugin
