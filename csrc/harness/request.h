// A harness request (see harness.h for its JSON), read once before a run starts.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fields.h"
#include "json_io.h"

namespace ttp::harness
{

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
    // The first enqueue after onShapeChange, before any other, must capture in a CUDA graph (global capture mode,
    // as PyTorch captures): what an engine deserialized in a fresh process and captured at once needs (its kernels
    // loaded by then). Meaningful where the plugin's library has not run in this process yet.
    bool captureFirstEnqueue{false};

    static Request fromJson(JsonReader const& request);

    // "ns::name vversion", as reports name the plugin.
    std::string pluginId() const;
};

} // namespace ttp::harness
