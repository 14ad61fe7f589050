// The execution phase of a harness run (GPU only): clone, setTactic, onShapeChange and enqueue for every tactic,
// on the build plugin's clones and on the plugin re-created from serialized fields, with the buffer, stream,
// input and clone checks.
#include "execution.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace ttp::harness
{
namespace
{

// Free memory moves in steps of the driver's allocation granularity; any drop counts.
std::string bytesStr(int64_t bytes)
{
    return std::to_string(bytes) + " bytes";
}

} // namespace

void allocateOutputs(nvinfer1::PluginTensorDesc const* outputDescs, int32_t nbOutputs,
    std::vector<GuardedBuffer>& outputs, std::vector<void*>& outputPtrs)
{
    for (int32_t o = 0; o < nbOutputs; ++o)
    {
        nvinfer1::PluginTensorDesc const& d = outputDescs[o];
        outputs.emplace_back(storageBytes(d.type, volume(d.dims)));
        outputPtrs.push_back(outputs.back().data());
    }
}

Executor::Executor(RunContext& run, AllocateFn allocate, void* user)
    : mRun(run)
    , mAllocate(allocate)
    , mUser(user)
{
}

Executor::~Executor()
{
    if (mStream != nullptr)
    {
        cudaStreamDestroy(mStream);
    }
    if (mSideStream != nullptr)
    {
        cudaStreamDestroy(mSideStream);
    }
}

bool Executor::canExecute()
{
    if (!mRun.request.enqueue)
    {
        mRun.report.result()["enqueue_skipped"] = "enqueue=false in the request";
        return false;
    }
    if (!deviceStatus().empty())
    {
        mRun.report.result()["enqueue_skipped"] = deviceStatus();
        return false;
    }
    for (size_t i = 0; i < mRun.request.inputs.size(); ++i)
    {
        if (mRun.request.inputs[i].ptr == 0 && volume(mRun.request.inputs[i].dims) > 0)
        {
            mRun.report.result()["enqueue_skipped"]
                = "input " + std::to_string(i) + " has no device data (shapes only)";
            return false;
        }
    }
    if (mStream == nullptr)
    {
        prepare();
    }
    return true;
}

void Executor::prepare()
{
    cudaCheck(cudaFree(nullptr), "initializing the CUDA context");
    cudaCheck(cudaStreamCreateWithFlags(&mStream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaCheck(cudaStreamCreateWithFlags(&mSideStream, cudaStreamNonBlocking), "cudaStreamCreate");
    mGate = std::make_unique<StreamGate>(mRun.request.gateTimeout);
}

// Free device memory is the device's, not this process's: another process allocating while clone() runs looks like
// the clone allocating. Where free memory drops, the clone is destroyed and made again, up to kCloneAttempts times.
nvinfer1::IPluginV3* Executor::cloneChecked(char const* what)
{
    constexpr int kCloneAttempts = 3;
    for (int attempt = 1;; ++attempt)
    {
        cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        size_t const before = freeDeviceMemory();
        nvinfer1::IPluginV3* clone = nullptr;
        mRun.report.call("clone", [&] { clone = mRun.plugins.build.plugin->clone(); });
        size_t const after = freeDeviceMemory();
        if (clone == nullptr)
        {
            mRun.report.violation("clone", "clone", "returned nullptr");
            return nullptr;
        }
        if (after >= before)
        {
            return clone;
        }
        // Another process allocating on a shared device drops free memory too: a plugin's drop is the one that comes
        // back with every clone (each destroyed before the next).
        if (attempt == kCloneAttempts)
        {
            mRun.report.violation("clone-allocates", "clone",
                std::string(what) + ": free device memory dropped by " + bytesStr(static_cast<int64_t>(before - after))
                    + " during clone(), in each of " + std::to_string(kCloneAttempts)
                    + " clones; device memory must come from getWorkspaceSize or be allocated in enqueue-free setup "
                      "outside clone");
            return clone;
        }
        mRun.plugins.destroy(clone);
    }
}

Execution Executor::execute(Handles const& h, std::string const& phase, int32_t tactic)
{
    Execution result;
    Json& report = result.report;
    report["phase"] = phase;
    report["tactic"] = tactic;
    size_t const nbInputs = mRun.request.inputs.size();
    auto const where = phase + " tactic " + std::to_string(tactic);
    size_t const violationsBefore = mRun.report.violationCount();

    int32_t status = 1;
    mRun.report.call("setTactic", [&] { status = h.runtime->setTactic(tactic); });
    if (status != 0)
    {
        mRun.report.error("setTactic", where + ": returned " + std::to_string(status));
        report["status"] = "setTactic failed";
        return result;
    }
    std::vector<nvinfer1::PluginTensorDesc> descs = concreteDescs(mRun, mRun.formats.chosen, mRun.outputs.concrete);
    status = 1;
    mRun.report.call("onShapeChange",
        [&]
        {
            status = h.runtime->onShapeChange(
                descs.data(), static_cast<int32_t>(nbInputs), descs.data() + nbInputs, mRun.outputs.count);
        });
    if (status != 0)
    {
        mRun.report.error("onShapeChange", where + ": returned " + std::to_string(status));
        report["status"] = "onShapeChange failed";
        return result;
    }

    // Buffers: inputs are copied into guarded buffers (the caller's tensors stay pristine for comparisons);
    // outputs and the workspace start filled with a pattern.
    std::vector<GuardedBuffer> inputs;
    std::vector<void const*> inputPtrs;
    for (size_t i = 0; i < nbInputs; ++i)
    {
        size_t const bytes = storageBytes(descs[i].type, volume(descs[i].dims));
        inputs.emplace_back(bytes);
        if (bytes != 0)
        {
            inputs.back().copyFrom(reinterpret_cast<void const*>(mRun.request.inputs[i].ptr), bytes);
        }
        inputPtrs.push_back(inputs.back().data());
    }
    std::vector<GuardedBuffer> outputs;
    std::vector<void*> outputPtrs;
    allocateOutputs(descs.data() + nbInputs, mRun.outputs.count, outputs, outputPtrs);
    GuardedBuffer workspace(mRun.workspaceSize);
    auto enqueue = [&]
    {
        status = 1;
        mRun.report.call("enqueue",
            [&]
            {
                status = h.runtime->enqueue(descs.data(), descs.data() + nbInputs, inputPtrs.data(), outputPtrs.data(),
                    workspace.data(), mStream);
            });
    };

    if (mRun.request.captureFirstEnqueue && !mRun.request.enqueueSyncsHost)
    {
        checkFirstEnqueueCaptures(where, enqueue, status);
    }
    // Kernels are loaded lazily (CUDA_MODULE_LOADING=LAZY): a kernel's first launch waits for the device to go
    // idle, which it never does while the gate holds a stream. An ungated warm-up enqueue loads them; the checked
    // enqueue then runs on fresh buffers. The buffers were filled and the inputs copied in on the legacy stream, which
    // the plugin's non-blocking stream is not ordered after: the device is synchronized before the warm-up too.
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    enqueue();
    cudaError_t const warmStatus = cudaDeviceSynchronize();
    if (status != 0 || warmStatus != cudaSuccess)
    {
        cudaGetLastError();
        std::string const why = warmStatus != cudaSuccess ? std::string("CUDA error ") + cudaGetErrorName(warmStatus)
                                                          : "returned " + std::to_string(status);
        mRun.report.error("enqueue", where + ": " + why);
        report["status"] = "enqueue failed: " + why;
        return result;
    }
    for (size_t i = 0; i < nbInputs; ++i)
    {
        inputs[i].reset();
        if (inputs[i].size() != 0)
        {
            inputs[i].copyFrom(reinterpret_cast<void const*>(mRun.request.inputs[i].ptr), inputs[i].size());
        }
    }
    for (GuardedBuffer& out : outputs)
    {
        out.reset();
    }
    workspace.reset();
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    trace("buffers ready; closing the stream gate");

    // The stream is held by the gate: whatever the plugin queues on it cannot run until the gate opens.
    mGate->close(mStream);
    auto const start = std::chrono::steady_clock::now();
    enqueue();
    double const enqueueSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool const blocked = mGate->timedOut();
    bool early = false;
    {
        // Opens the gate however this block ends.
        std::unique_ptr<StreamGate, void (*)(StreamGate*)> const opener(mGate.get(), [](StreamGate* g) { g->open(); });
        trace("enqueue returned; draining the default streams");
        drainDefaultStreams(mRun.request.gateTimeout);
        trace("reading outputs while the gate is closed");
        early = workspace.touched(mSideStream);
        for (GuardedBuffer const& out : outputs)
        {
            early = early || out.touched(mSideStream);
        }
    }
    trace("gate opened");
    cudaError_t const streamStatus = cudaStreamSynchronize(mStream);
    cudaError_t const syncStatus = cudaDeviceSynchronize();
    report["enqueue_host_ms"] = enqueueSeconds * 1e3;
    if (blocked && !mRun.request.enqueueSyncsHost)
    {
        mRun.report.violation("enqueue-blocks", "enqueue",
            where + ": enqueue did not return until the stream gate gave up ("
                + std::to_string(mRun.request.gateTimeout)
                + " s): it waited for its stream to drain (a host synchronization, cudaFree, or a pageable copy); an "
                  "op that must read back to the host declares it (OpSpec.enqueue_syncs_host)");
    }
    if (early && !blocked)
    {
        mRun.report.violation("stream", "enqueue",
            where
                + ": outputs or workspace changed while the stream passed to enqueue was still held: work ran "
                  "outside the given stream (on the legacy default stream, or a stream of the plugin's own)");
    }
    if (streamStatus != cudaSuccess || syncStatus != cudaSuccess)
    {
        cudaError_t const err = streamStatus != cudaSuccess ? streamStatus : syncStatus;
        cudaGetLastError();
        mRun.report.error(
            "enqueue", where + ": CUDA error " + std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err));
        report["status"] = std::string("CUDA error ") + cudaGetErrorName(err);
        return result;
    }
    if (status != 0)
    {
        mRun.report.error("enqueue", where + ": returned " + std::to_string(status));
        report["status"] = "enqueue returned " + std::to_string(status);
        return result;
    }

    auto checkGuards = [&](GuardedBuffer const& buffer, std::string const& name)
    {
        std::string const damage = buffer.guardDamage(mSideStream);
        if (!damage.empty())
        {
            mRun.report.violation("buffer-overrun", "enqueue",
                where + ": wrote outside " + name + " (" + bytesStr(static_cast<int64_t>(buffer.size()))
                    + "): " + damage);
        }
    };
    for (int32_t o = 0; o < mRun.outputs.count; ++o)
    {
        checkGuards(outputs[o], "output " + std::to_string(o));
    }
    checkGuards(workspace, "the workspace");
    for (size_t i = 0; i < nbInputs; ++i)
    {
        checkGuards(inputs[i], "input " + std::to_string(i));
        bool aliased = false;
        for (auto const& [out, in] : mRun.outputs.aliasedInputs)
        {
            aliased = aliased || in == static_cast<int32_t>(i);
        }
        if (aliased || inputs[i].size() == 0)
        {
            continue;
        }
        std::vector<uint8_t> const seen = inputs[i].read(mSideStream);
        std::vector<uint8_t> original(seen.size());
        cudaCheck(cudaMemcpy(original.data(), reinterpret_cast<void const*>(mRun.request.inputs[i].ptr),
                      original.size(), cudaMemcpyDeviceToHost),
            "reading an input");
        if (seen != original)
        {
            size_t first = 0;
            while (first < seen.size() && seen[first] == original[first])
            {
                ++first;
            }
            mRun.report.violation("input-modified", "enqueue",
                where + ": input " + std::to_string(i) + " was modified (first changed byte " + std::to_string(first)
                    + "); only inputs aliased to an output (getAliasedInput) may be written");
        }
    }

    // Size tensors: read their values so data-dependent extents can be resolved (and trimmed by the caller).
    ShapePoint actual = mRun.outputs.concrete;
    actual.sizeTensors = ShapePoint::SizeTensors::kVALUE;
    Json sizeValues = Json::object();
    for (int32_t o : mRun.outputs.sizeTensors)
    {
        nvinfer1::DataType const type = mRun.formats.chosen[nbInputs + o].type;
        if ((type != nvinfer1::DataType::kINT32 && type != nvinfer1::DataType::kINT64) || outputs[o].size() == 0)
        {
            continue;
        }
        std::vector<uint8_t> const raw = outputs[o].read(mSideStream);
        int64_t value = 0;
        if (type == nvinfer1::DataType::kINT32)
        {
            int32_t v32 = 0;
            std::memcpy(&v32, raw.data(), sizeof(v32));
            value = v32;
        }
        else
        {
            std::memcpy(&value, raw.data(), sizeof(value));
        }
        actual.sizeValues[o] = value;
        sizeValues[std::to_string(o)] = value;
    }
    std::vector<nvinfer1::Dims> const actualDims = mRun.outputs.dims(actual);
    Json outs = Json::array();
    for (int32_t o = 0; o < mRun.outputs.count; ++o)
    {
        nvinfer1::PluginTensorDesc const& d = descs[nbInputs + o];
        Json out = Json::object();
        out["dtype"] = dataTypeName(d.type);
        out["dims"] = dimsJson(actualDims[o]);
        out["upper_dims"] = dimsJson(d.dims);
        if (volume(actualDims[o]) > volume(d.dims))
        {
            mRun.report.violation("size-tensor-value", "enqueue",
                where + ": output " + std::to_string(o) + " resolves to " + dimsText(actualDims[o])
                    + ", beyond its declared upper bound " + dimsText(d.dims));
        }
        int64_t buffer = -1;
        if (mAllocate != nullptr && outputs[o].size() != 0)
        {
            trace("allocating output " + std::to_string(o) + " through the caller");
            void* destination = mAllocate(mUser, outputs[o].size());
            if (destination == nullptr)
            {
                throw Stop("the caller's allocator returned nullptr");
            }
            cudaCheck(cudaMemcpy(destination, outputs[o].data(), outputs[o].size(), cudaMemcpyDeviceToDevice),
                "copying an output");
            buffer = mBuffers++;
        }
        out["buffer"] = buffer;
        outs.push_back(std::move(out));
        result.outputs.push_back(outputs[o].read(mSideStream));
    }
    // Another fault of this enqueue (say, work on the wrong stream) would show again in the replay: one rule each.
    size_t const blockedViolations = blocked && !mRun.request.enqueueSyncsHost ? 1 : 0;
    if (mRun.report.violationCount() == violationsBefore + blockedViolations)
    {
        checkGraphCapture(where, enqueue, status, outputs, workspace, result.outputs);
    }
    report["outputs"] = std::move(outs);
    report["size_tensor_values"] = std::move(sizeValues);
    report["status"] = "ok";
    result.ran = true;
    return result;
}

void Executor::checkFirstEnqueueCaptures(
    std::string const& where, std::function<void()> const& enqueue, int32_t const& status)
{
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamBeginCapture(mStream, cudaStreamCaptureModeGlobal);
    if (err == cudaSuccess)
    {
        enqueue();
        err = cudaStreamEndCapture(mStream, &graph);
    }
    if (graph != nullptr)
    {
        cudaGraphDestroy(graph);
    }
    if (err != cudaSuccess || status != 0)
    {
        std::string const why = err != cudaSuccess ? std::string("CUDA error ") + cudaGetErrorName(err)
                                                   : "enqueue returned " + std::to_string(status) + " while capturing";
        cudaGetLastError(); // a failed capture leaves its error behind
        mRun.report.violation("first-enqueue-capture", "enqueue",
            where + ": the first enqueue after onShapeChange could not be captured in a CUDA graph (" + why
                + "); a deserialized engine captured at once needs its kernels loaded before (onShapeChange)");
    }
}

void Executor::checkGraphCapture(std::string const& where, std::function<void()> const& enqueue, int32_t const& status,
    std::vector<GuardedBuffer>& outputs, GuardedBuffer& workspace, std::vector<std::vector<uint8_t>> const& expected)
{
    for (GuardedBuffer& out : outputs)
    {
        out.reset();
    }
    workspace.reset();
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamBeginCapture(mStream, cudaStreamCaptureModeThreadLocal);
    if (err == cudaSuccess)
    {
        enqueue();
        err = cudaStreamEndCapture(mStream, &graph);
    }
    bool const captured = err == cudaSuccess && status == 0 && graph != nullptr;
    std::string const why = err != cudaSuccess ? std::string("CUDA error ") + cudaGetErrorName(err)
                                               : "enqueue returned " + std::to_string(status) + " while capturing";
    cudaGetLastError(); // a failed capture leaves its error behind
    bool replayed = false;
    if (captured)
    {
        cudaGraphExec_t exec = nullptr;
        if (cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess && cudaGraphLaunch(exec, mStream) == cudaSuccess
            && cudaStreamSynchronize(mStream) == cudaSuccess)
        {
            replayed = true;
            for (size_t o = 0; o < outputs.size() && o < expected.size(); ++o)
            {
                if (mRun.request.compareRuntimeOutputs && outputs[o].read(mSideStream) != expected[o])
                {
                    mRun.report.violation("graph-replay", "enqueue",
                        where + ": output " + std::to_string(o)
                            + " of the enqueue captured in a CUDA graph and replayed differs from the direct "
                              "enqueue's (enqueue must queue all of its work on the given stream)");
                }
            }
        }
        cudaGetLastError();
        if (exec != nullptr)
        {
            cudaGraphExecDestroy(exec);
        }
    }
    if (graph != nullptr)
    {
        cudaGraphDestroy(graph);
    }
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (!mRun.request.enqueueSyncsHost && !captured)
    {
        mRun.report.violation("graph-capture", "enqueue",
            where + ": enqueue could not be captured in a CUDA graph (" + why
                + "); an engine captures it (CUDA graphs), so it must not synchronize, allocate, or read back to the "
                  "host; an op that must read back declares it in its spec (OpSpec.enqueue_syncs_host)");
    }
    if (mRun.request.enqueueSyncsHost && captured && replayed)
    {
        mRun.report.violation("host-sync-declaration", "enqueue",
            where
                + ": the spec declares enqueue_syncs_host, but enqueue was captured in a CUDA graph and replayed: "
                  "it does not read back to the host; drop the declaration");
    }
}

void Executor::buildPhaseExecutions()
{
    for (int32_t tactic : mRun.runTactics)
    {
        nvinfer1::IPluginV3* clone = cloneChecked("build phase");
        if (clone == nullptr)
        {
            return;
        }
        Handles const h = mRun.plugins.resolve(clone, "clone", true);
        Execution e = execute(h, "build", tactic);
        if (e.ran)
        {
            mBuildOutputs[tactic] = std::move(e.outputs);
        }
        mRuns.push_back(std::move(e.report));
        mRun.plugins.destroy(clone);
    }
}

void Executor::runtimePhase(nvinfer1::IPluginV3* runtimePlugin, bool withEnqueue)
{
    Handles const runtime = mRun.plugins.resolve(runtimePlugin, "runtime plugin", false);
    for (int32_t tactic : mRun.runTactics)
    {
        // Every instance attached before any runs, all alive until the last has run: what an engine holding the op
        // in several layers does, so that resources they share are held by all of them at once.
        std::vector<nvinfer1::IPluginV3*> attached;
        for (int32_t i = 0; i < mRun.request.instances; ++i)
        {
            nvinfer1::IPluginV3* plugin = nullptr;
            mRun.report.call(
                "attachToContext", [&] { plugin = runtime.runtime->attachToContext(&mRun.plugins.resourceContext()); });
            if (plugin == nullptr)
            {
                mRun.report.violation("attach", "attachToContext", "returned nullptr");
                for (auto*& p : attached)
                {
                    mRun.plugins.destroy(p);
                }
                return;
            }
            attached.push_back(plugin);
        }
        if (!withEnqueue)
        {
            for (auto*& p : attached)
            {
                mRun.plugins.destroy(p);
            }
            return;
        }
        std::vector<std::vector<uint8_t>> first;
        for (size_t i = 0; i < attached.size(); ++i)
        {
            Handles const h = mRun.plugins.resolve(attached[i], "attached plugin", false);
            Execution e = execute(h, i == 0 ? "runtime" : "instance", tactic);
            auto const reference = mBuildOutputs.find(tactic);
            if (i == 0 && e.ran && mRun.request.compareRuntimeOutputs && reference != mBuildOutputs.end())
            {
                for (size_t o = 0; o < e.outputs.size() && o < reference->second.size(); ++o)
                {
                    if (e.outputs[o] != reference->second[o]
                        && mRun.outputs.sizeTensors.count(static_cast<int32_t>(o)) == 0)
                    {
                        mRun.report.violation("serialization", "enqueue",
                            "tactic " + std::to_string(tactic) + ": output " + std::to_string(o)
                                + " of the plugin re-created from its serialized fields differs from the build "
                                  "plugin's");
                    }
                }
            }
            if (i == 0)
            {
                first = e.outputs;
            }
            else if (e.ran && e.outputs != first)
            {
                mRun.report.violation("instances", "enqueue",
                    "tactic " + std::to_string(tactic) + ": runtime instance " + std::to_string(i)
                        + " (attached from the same plugin, alive beside the first) gives other outputs than the "
                          "first");
            }
            mRuns.push_back(std::move(e.report));
        }
        for (auto*& p : attached)
        {
            mRun.plugins.destroy(p);
        }
    }
}

} // namespace ttp::harness
