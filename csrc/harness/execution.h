// The execution phase (GPU only): the run's streams and stream gate, the enqueue checks, the outputs of each run.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device.h"
#include "harness.h"
#include "run.h"

namespace ttp::harness
{

// What one enqueue produced.
struct Execution
{
    bool ran{false};
    std::vector<std::vector<uint8_t>> outputs; // host copies, for comparisons
    Json report = Json::object();
};

// One guarded buffer per output desc, filled with the pattern, and the pointers enqueue takes.
void allocateOutputs(nvinfer1::PluginTensorDesc const* outputDescs, int32_t nbOutputs,
    std::vector<GuardedBuffer>& outputs, std::vector<void*>& outputPtrs);

class Executor
{
public:
    // `allocate` (may be null) receives a copy of each output of each run.
    Executor(RunContext& run, AllocateFn allocate, void* user);
    ~Executor();
    Executor(Executor const&) = delete;
    Executor& operator=(Executor const&) = delete;

    // Whether enqueue can run (else "enqueue_skipped" says why); creates the streams on first success.
    bool canExecute();
    // Every run tactic enqueued on a fresh clone of the build plugin; keeps the outputs for runtimePhase.
    void buildPhaseExecutions();
    // attachToContext (always: it needs no device) and, when `withEnqueue`, enqueue for every tactic.
    void runtimePhase(nvinfer1::IPluginV3* runtimePlugin, bool withEnqueue);

    cudaStream_t stream() const noexcept
    {
        return mStream;
    }
    // The report of every enqueue, in order.
    Json const& runs() const noexcept
    {
        return mRuns;
    }

private:
    void prepare();
    nvinfer1::IPluginV3* cloneChecked(char const* what);
    Execution execute(Handles const& h, std::string const& phase, int32_t tactic);
    // Captures the first `enqueue` after onShapeChange in a CUDA graph (Request::captureFirstEnqueue), not replayed.
    void checkFirstEnqueueCaptures(
        std::string const& where, std::function<void()> const& enqueue, int32_t const& status);
    // Captures `enqueue` in a CUDA graph on the run's stream, replays it and compares the outputs with `expected`
    // (the direct enqueue's); checks Request::enqueueSyncsHost against whether the capture worked.
    void checkGraphCapture(std::string const& where, std::function<void()> const& enqueue, int32_t const& status,
        std::vector<GuardedBuffer>& outputs, GuardedBuffer& workspace,
        std::vector<std::vector<uint8_t>> const& expected);

    RunContext& mRun;
    AllocateFn mAllocate;
    void* mUser;
    cudaStream_t mStream{nullptr};
    cudaStream_t mSideStream{nullptr};
    std::unique_ptr<StreamGate> mGate;
    std::map<int32_t, std::vector<std::vector<uint8_t>>> mBuildOutputs; // tactic -> outputs
    Json mRuns = Json::array();
    int64_t mBuffers{0};
};

} // namespace ttp::harness
