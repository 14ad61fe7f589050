// One harness run over one plugin: the state shared by the build phase (run_build.cpp) and the execution phase
// (run_execute.cpp). Internal to the harness library.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "device.h"
#include "expr.h"
#include "fields.h"
#include "harness.h"
#include "json.h"
#include "services.h"
#include "trap.h"

namespace ttp::harness
{

char const* dataTypeName(nvinfer1::DataType type) noexcept;
nvinfer1::DataType dataTypeFromName(std::string const& name);
char const* formatName(nvinfer1::TensorFormat format) noexcept;
// Bytes of `count` elements (sub-byte types round up).
size_t storageBytes(nvinfer1::DataType type, int64_t count);
int64_t volume(nvinfer1::Dims const& dims) noexcept;
json::Value dimsJson(nvinfer1::Dims const& dims);

// Stops the run: a step cannot go on (missing creator, rejected fields, failed configuration...).
class Stop : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

struct InputRequest
{
    nvinfer1::DataType type{nvinfer1::DataType::kFLOAT};
    nvinfer1::Dims dims{};
    nvinfer1::Dims min{};
    nvinfer1::Dims opt{};
    nvinfer1::Dims max{};
    uint64_t ptr{0};
};

struct ShapeInputRequest
{
    std::vector<int64_t> values, min, opt, max;
};

struct Request
{
    std::string library;
    std::string name;
    std::string version;
    std::string ns;
    FieldSet fields;
    std::vector<InputRequest> inputs;
    std::vector<ShapeInputRequest> shapeInputs;
    std::optional<std::vector<int32_t>> tactics;
    std::vector<FieldSet> invalidFieldSets;
    bool enqueue{true};
    bool compareRuntimeOutputs{true};
    // Runtime plugins attached at once per tactic, as an engine holds one per layer of the op: each is enqueued and
    // must give the first one's outputs, and the shared resources they acquire are reported per key.
    int32_t instances{1};
    double gateTimeout{2.0};
    int32_t benchTactic{0};
    int32_t benchIters{100};
    int32_t benchWarmup{10};
    // The op's spec declares that enqueue reads back to the host (so it cannot be captured in a CUDA graph and
    // waits for its stream). Undeclared, enqueue must capture in a graph and replay to the same outputs.
    bool enqueueSyncsHost{false};

    static Request fromJson(json::Value const& request);
};

// The capability interfaces of one plugin object.
struct Handles
{
    nvinfer1::IPluginV3* plugin{nullptr};
    nvinfer1::IPluginV3OneCore* core{nullptr};
    nvinfer1::IPluginV3OneBuild* build{nullptr};
    nvinfer1::IPluginV3OneBuildV2* buildV2{nullptr};
    nvinfer1::IPluginV3OneRuntime* runtime{nullptr};
};

struct IOFormat
{
    nvinfer1::DataType type;
    nvinfer1::TensorFormat format;
    bool operator==(IOFormat const& o) const
    {
        return type == o.type && format == o.format;
    }
};
using Combination = std::vector<IOFormat>;

// What one enqueue produced.
struct Execution
{
    bool ran{false};
    std::vector<std::vector<uint8_t>> outputs; // host copies, for comparisons
    json::Value report = json::Value::object();
};

class Run
{
public:
    Run(Request request, AllocateFn allocate, void* user);
    ~Run();

    json::Value conformance();
    json::Value bench();

private:
    // ---- reporting
    std::string pluginId() const;
    void violation(std::string const& rule, std::string const& method, std::string const& detail);
    void error(std::string const& step, std::string const& detail);
    // Calls fn trapped, attributing log lines to `method`; an escaping exception is a violation. False if trapped.
    template <typename F>
    bool call(char const* method, F&& fn);
    // call() for a method returning a C string: a copy taken while trapped, or null where it returned nullptr.
    template <typename F>
    json::Value callForString(char const* method, F&& fn);
    json::Value logSince(size_t start) const;

    // ---- build phase (run_build.cpp)
    void loadLibrary();
    void checkInvalidFields();
    nvinfer1::IPluginV3* createPlugin(FieldSet& fields, nvinfer1::TensorRTPhase phase, char const* what);
    Handles resolve(nvinfer1::IPluginV3* plugin, char const* what, bool needBuild);
    void destroy(nvinfer1::IPluginV3*& plugin);
    void buildPhaseQueries();
    void outputShapes();
    std::vector<nvinfer1::Dims> outputDims(ShapePoint const& point) const;
    void enumerateFormats();
    void chooseCombination();
    std::vector<nvinfer1::DynamicPluginTensorDesc> dynamicDescs(Combination const& combination, bool useMinAsAll) const;
    std::vector<nvinfer1::PluginTensorDesc> concreteDescs(
        Combination const& combination, ShapePoint const& point) const;
    nvinfer1::IPluginV3* cloneForBuild();
    void attachDuringBuild();
    void configure();
    void tacticQueries();
    std::optional<FieldSet> fieldsOf(Handles const& h, char const* what);
    std::string timingCacheId(Handles const& h);
    void checkCloneIndependence();
    void serializationRoundTrip();
    void checkResourcesReleased();

    // ---- execution phase (run_execute.cpp)
    bool canExecute();
    void prepareExecution();
    nvinfer1::IPluginV3* cloneChecked(char const* what);
    Execution execute(Handles const& h, std::string const& phase, int32_t tactic);
    // Captures `enqueue` in a CUDA graph on the run's stream, replays it and compares the outputs with `expected`
    // (the direct enqueue's); checks Request::enqueueSyncsHost against whether the capture worked.
    void checkGraphCapture(std::string const& where, std::function<void()> const& enqueue, int32_t const& status,
        std::vector<GuardedBuffer>& outputs, GuardedBuffer& workspace,
        std::vector<std::vector<uint8_t>> const& expected);
    void buildPhaseExecutions();
    // attachToContext (always: it needs no device) and, when `withEnqueue`, enqueue for every tactic.
    void runtimePhase(nvinfer1::IPluginV3* runtimePlugin, bool withEnqueue);

    Request mRequest;
    AllocateFn mAllocate;
    void* mUser;
    json::Value mResult = json::Value::object();
    json::Value mViolations = json::Value::array();
    json::Value mErrors = json::Value::array();
    std::set<std::string> mSeenViolations;
    std::vector<LogLine> mLog;
    json::Value mCalls = json::Value::array(); // every plugin method called, in order

    void* mLibrary{nullptr};
    nvinfer1::IPluginCreatorV3One* mCreator{nullptr};
    nvinfer1::IPluginV3* mNetworkPlugin{nullptr}; // what the network holds; the build works on a clone of it
    nvinfer1::IPluginV3* mBuildPlugin{nullptr};
    Handles mBuild;
    int32_t mNbOutputs{0};
    std::vector<nvinfer1::DataType> mOutputTypes;

    ExprBuilder mExprs;
    std::vector<nvinfer1::DimsExprs> mOutputExprs;
    ShapePoint mMin, mOpt, mMax, mConcrete;
    std::set<int32_t> mSizeTensorOutputs;

    std::vector<Combination> mFormatTable;
    Combination mCombination;
    int32_t mFormatLimit{nvinfer1::IPluginV3OneBuild::kDEFAULT_FORMAT_COMBINATION_LIMIT};
    size_t mWorkspaceSize{0};
    std::vector<int32_t> mValidTactics;
    std::vector<int32_t> mRunTactics;
    std::map<int32_t, int32_t> mAliasedInputs; // output -> input

    // Execution resources (GPU only).
    cudaStream_t mStream{nullptr};
    cudaStream_t mSideStream{nullptr};
    std::unique_ptr<StreamGate> mGate;
    std::map<int32_t, std::vector<std::vector<uint8_t>>> mBuildOutputs; // tactic -> outputs
    json::Value mRuns = json::Value::array();
    int64_t mBuffers{0};
    HarnessResourceContext mResourceContext;
    std::map<std::string, int32_t> mResourcesAtStart;
    int64_t mAcquiresAtStart{0};
    std::map<std::string, HarnessPluginRegistry::ResourceStats> mStatsAtStart;
};

// TTP_HARNESS_TRACE=1 prints every plugin call to stderr (to find where a plugin crashes the process).
bool tracing() noexcept;
void trace(std::string const& what) noexcept;

template <typename F>
bool Run::call(char const* method, F&& fn)
{
    trace(pluginId() + " " + method);
    mCalls.push(method);
    CapturingLogger& logger = loggerFinder().logger();
    logger.setDuring(method);
    TrapOutcome const outcome = trapped(fn);
    logger.setDuring("");
    if (outcome.kind == TrapOutcome::Kind::kEXCEPTION)
    {
        violation("no-throw", method, "an exception escaped the noexcept method: " + outcome.what);
    }
    else if (outcome.kind == TrapOutcome::Kind::kFAULT)
    {
        violation("crash", method, "memory fault at address " + std::to_string(outcome.faultAddress));
    }
    return outcome.ok();
}

} // namespace ttp::harness
