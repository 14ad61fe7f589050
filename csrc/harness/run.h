// One harness run over one plugin: the context its phases share, and the phases, each in a file of its own. The order
// follows NVIDIA's builder (conformance.cpp). Internal to the harness library.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "expr.h"
#include "plugin_objects.h"
#include "report.h"
#include "request.h"
#include "tensor_types.h"

namespace ttp::harness
{

class Executor;

// What the output queries established: getNbOutputs, getOutputDataTypes, getAliasedInput, getOutputShapes.
struct Outputs
{
    int32_t count{0};
    std::vector<nvinfer1::DataType> types;
    std::map<int32_t, int32_t> aliasedInputs; // output -> input
    ExprBuilder exprs;
    std::vector<nvinfer1::DimsExprs> shapes;
    // The profile's points, and the request's concrete shapes.
    ShapePoint min, opt, max, concrete;
    std::set<int32_t> sizeTensors;

    // The output dims at a point; Stop where an expression cannot be evaluated there.
    std::vector<nvinfer1::Dims> dims(ShapePoint const& point) const;
};

// What format negotiation (supportsFormatCombination) found and chose.
struct Formats
{
    std::vector<Combination> table;
    Combination chosen;
    int32_t limit{nvinfer1::IPluginV3OneBuild::kDEFAULT_FORMAT_COMBINATION_LIMIT};
};

// The state the phases share: the request, the report, the plugin objects and what each build step settled.
struct RunContext
{
    RunContext(Request const& request, Report& report, PluginObjects& plugins)
        : request(request)
        , report(report)
        , plugins(plugins)
    {
    }

    Request const& request;
    Report& report;
    PluginObjects& plugins;
    Outputs outputs;
    Formats formats;
    size_t workspaceSize{0};
    std::vector<int32_t> validTactics; // getValidTactics
    std::vector<int32_t> runTactics;   // enqueued: the request's, or 0 and every valid tactic
};

// ---- creation and fields (invalid_fields.cpp)
// Each invalid field set of the request must be rejected by createPlugin, with a log line saying why.
void checkInvalidFields(RunContext& run);

// ---- output types and shapes (outputs.cpp)
void queryOutputs(RunContext& run);

// ---- format negotiation (formats.cpp)
void enumerateFormats(RunContext& run);
// The LINEAR combination of the input types and the announced output types; Stop where none is supported.
void chooseCombination(RunContext& run);
// The descs configurePlugin takes for `combination` (all three points the minimum where `useMinAsAll`).
std::vector<nvinfer1::DynamicPluginTensorDesc> dynamicDescs(
    RunContext const& run, Combination const& combination, bool useMinAsAll);
// The descs onShapeChange and enqueue take at `point`.
std::vector<nvinfer1::PluginTensorDesc> concreteDescs(
    RunContext const& run, Combination const& combination, ShapePoint const& point);

// ---- build-time calls (build_calls.cpp)
// The builder's clone of the network's plugin; Stop where clone fails.
nvinfer1::IPluginV3* cloneForBuild(RunContext& run);
void attachDuringBuild(RunContext& run);
void configure(RunContext& run);
void queryTactics(RunContext& run);

// ---- clones (clone_checks.cpp)
// A clone keeps no state shared with its source: configuring one, or destroying the source, changes no other.
void checkCloneIndependence(RunContext& run);

// ---- serialization (serialization.cpp)
// getFieldsToSerialize to bytes and back, createPlugin(kRUNTIME) from them, and that plugin's runtime phase.
void serializationRoundTrip(RunContext& run, Executor& executor);

// ---- shared resources (resources.cpp)
// The plugin registry's resource counts when a run starts: what the run acquired, and leaked, is measured from here.
class ResourceBaseline
{
public:
    ResourceBaseline();
    // Violations for failed releases and for resources still held (then dropped, so that later runs start clean).
    void checkReleased(Report& report) const;
    // "resource_acquires" and, per key the run acquired, "resources".
    void addToResult(Report& report) const;

private:
    std::map<std::string, int32_t> mHeld;
    int64_t mAcquires;
    std::map<std::string, HarnessPluginRegistry::ResourceStats> mStats;
};

} // namespace ttp::harness
