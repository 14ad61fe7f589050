// The execution phase of a harness run (GPU only): clone, setTactic, onShapeChange and enqueue for every tactic,
// on the build plugin's clones and on the plugin re-created from serialized fields, with the buffer, stream,
// input and clone checks.
#include "run.h"

#include <chrono>
#include <cstring>
#include <functional>

namespace ttp::harness
{
namespace
{

// Free memory moves in steps of the driver's allocation granularity; any drop counts.
std::string bytesStr(int64_t bytes)
{
    return std::to_string(bytes) + " bytes";
}

// One guarded buffer per output desc, filled with the pattern, and the pointers enqueue takes.
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

} // namespace

bool Run::canExecute()
{
    if (!mRequest.enqueue)
    {
        mResult.set("enqueue_skipped", "enqueue=false in the request");
        return false;
    }
    if (!deviceStatus().empty())
    {
        mResult.set("enqueue_skipped", deviceStatus());
        return false;
    }
    for (size_t i = 0; i < mRequest.inputs.size(); ++i)
    {
        if (mRequest.inputs[i].ptr == 0 && volume(mRequest.inputs[i].dims) > 0)
        {
            mResult.set("enqueue_skipped", "input " + std::to_string(i) + " has no device data (shapes only)");
            return false;
        }
    }
    if (mStream == nullptr)
    {
        prepareExecution();
    }
    return true;
}

void Run::prepareExecution()
{
    cudaCheck(cudaFree(nullptr), "initializing the CUDA context");
    cudaCheck(cudaStreamCreateWithFlags(&mStream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaCheck(cudaStreamCreateWithFlags(&mSideStream, cudaStreamNonBlocking), "cudaStreamCreate");
    mGate = std::make_unique<StreamGate>(mRequest.gateTimeout);
}

nvinfer1::IPluginV3* Run::cloneChecked(char const* what)
{
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    size_t const before = freeDeviceMemory();
    nvinfer1::IPluginV3* clone = nullptr;
    call("clone", [&] { clone = mBuild.plugin->clone(); });
    size_t const after = freeDeviceMemory();
    if (after < before)
    {
        violation("clone-allocates", "clone",
            std::string(what) + ": free device memory dropped by " + bytesStr(static_cast<int64_t>(before - after))
                + " during clone(); device memory must come from getWorkspaceSize or be allocated in enqueue-free "
                  "setup outside clone");
    }
    if (clone == nullptr)
    {
        violation("clone", "clone", "returned nullptr");
    }
    return clone;
}

Execution Run::execute(Handles const& h, std::string const& phase, int32_t tactic)
{
    Execution result;
    json::Value& report = result.report;
    report.set("phase", phase);
    report.set("tactic", tactic);
    size_t const nbInputs = mRequest.inputs.size();
    auto const where = phase + " tactic " + std::to_string(tactic);
    size_t const violationsBefore = mViolations.size();

    int32_t status = 1;
    call("setTactic", [&] { status = h.runtime->setTactic(tactic); });
    if (status != 0)
    {
        error("setTactic", where + ": returned " + std::to_string(status));
        report.set("status", "setTactic failed");
        return result;
    }
    std::vector<nvinfer1::PluginTensorDesc> descs = concreteDescs(mCombination, mConcrete);
    status = 1;
    call("onShapeChange",
        [&]
        {
            status = h.runtime->onShapeChange(
                descs.data(), static_cast<int32_t>(nbInputs), descs.data() + nbInputs, mNbOutputs);
        });
    if (status != 0)
    {
        error("onShapeChange", where + ": returned " + std::to_string(status));
        report.set("status", "onShapeChange failed");
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
            inputs.back().copyFrom(reinterpret_cast<void const*>(mRequest.inputs[i].ptr), bytes);
        }
        inputPtrs.push_back(inputs.back().data());
    }
    std::vector<GuardedBuffer> outputs;
    std::vector<void*> outputPtrs;
    allocateOutputs(descs.data() + nbInputs, mNbOutputs, outputs, outputPtrs);
    GuardedBuffer workspace(mWorkspaceSize);
    auto enqueue = [&]
    {
        status = 1;
        call("enqueue",
            [&]
            {
                status = h.runtime->enqueue(descs.data(), descs.data() + nbInputs, inputPtrs.data(), outputPtrs.data(),
                    workspace.data(), mStream);
            });
    };

    // Kernels are loaded lazily (CUDA_MODULE_LOADING=LAZY): a kernel's first launch waits for the device to go
    // idle, which it never does while the gate holds a stream. An ungated warm-up enqueue loads them; the checked
    // enqueue then runs on fresh buffers.
    enqueue();
    cudaError_t const warmStatus = cudaDeviceSynchronize();
    if (status != 0 || warmStatus != cudaSuccess)
    {
        cudaGetLastError();
        std::string const why = warmStatus != cudaSuccess ? std::string("CUDA error ") + cudaGetErrorName(warmStatus)
                                                          : "returned " + std::to_string(status);
        error("enqueue", where + ": " + why);
        report.set("status", "enqueue failed: " + why);
        return result;
    }
    for (size_t i = 0; i < nbInputs; ++i)
    {
        inputs[i].reset();
        if (inputs[i].size() != 0)
        {
            inputs[i].copyFrom(reinterpret_cast<void const*>(mRequest.inputs[i].ptr), inputs[i].size());
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
        drainDefaultStreams(mRequest.gateTimeout);
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
    report.set("enqueue_host_ms", enqueueSeconds * 1e3);
    if (blocked && !mRequest.enqueueSyncsHost)
    {
        violation("enqueue-blocks", "enqueue",
            where + ": enqueue did not return until the stream gate gave up (" + std::to_string(mRequest.gateTimeout)
                + " s): it waited for its stream to drain (a host synchronization, cudaFree, or a pageable copy); an "
                  "op that must read back to the host declares it (OpSpec.enqueue_syncs_host)");
    }
    if (early && !blocked)
    {
        violation("stream", "enqueue",
            where
                + ": outputs or workspace changed while the stream passed to enqueue was still held: work ran "
                  "outside the given stream (on the legacy default stream, or a stream of the plugin's own)");
    }
    if (streamStatus != cudaSuccess || syncStatus != cudaSuccess)
    {
        cudaError_t const err = streamStatus != cudaSuccess ? streamStatus : syncStatus;
        cudaGetLastError();
        error("enqueue", where + ": CUDA error " + std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err));
        report.set("status", std::string("CUDA error ") + cudaGetErrorName(err));
        return result;
    }
    if (status != 0)
    {
        error("enqueue", where + ": returned " + std::to_string(status));
        report.set("status", "enqueue returned " + std::to_string(status));
        return result;
    }

    auto checkGuards = [&](GuardedBuffer const& buffer, std::string const& name)
    {
        std::string const damage = buffer.guardDamage(mSideStream);
        if (!damage.empty())
        {
            violation("buffer-overrun", "enqueue",
                where + ": wrote outside " + name + " (" + bytesStr(static_cast<int64_t>(buffer.size()))
                    + "): " + damage);
        }
    };
    for (int32_t o = 0; o < mNbOutputs; ++o)
    {
        checkGuards(outputs[o], "output " + std::to_string(o));
    }
    checkGuards(workspace, "the workspace");
    for (size_t i = 0; i < nbInputs; ++i)
    {
        checkGuards(inputs[i], "input " + std::to_string(i));
        bool aliased = false;
        for (auto const& [out, in] : mAliasedInputs)
        {
            aliased = aliased || in == static_cast<int32_t>(i);
        }
        if (aliased || inputs[i].size() == 0)
        {
            continue;
        }
        std::vector<uint8_t> const seen = inputs[i].read(mSideStream);
        std::vector<uint8_t> original(seen.size());
        cudaCheck(cudaMemcpy(original.data(), reinterpret_cast<void const*>(mRequest.inputs[i].ptr), original.size(),
                      cudaMemcpyDeviceToHost),
            "reading an input");
        if (seen != original)
        {
            size_t first = 0;
            while (first < seen.size() && seen[first] == original[first])
            {
                ++first;
            }
            violation("input-modified", "enqueue",
                where + ": input " + std::to_string(i) + " was modified (first changed byte " + std::to_string(first)
                    + "); only inputs aliased to an output (getAliasedInput) may be written");
        }
    }

    // Size tensors: read their values so data-dependent extents can be resolved (and trimmed by the caller).
    ShapePoint actual = mConcrete;
    actual.sizeTensors = ShapePoint::SizeTensors::kVALUE;
    json::Value sizeValues = json::Value::object();
    for (int32_t o : mSizeTensorOutputs)
    {
        nvinfer1::DataType const type = mCombination[nbInputs + o].type;
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
        sizeValues.set(std::to_string(o), value);
    }
    std::vector<nvinfer1::Dims> const actualDims = outputDims(actual);
    json::Value outs = json::Value::array();
    for (int32_t o = 0; o < mNbOutputs; ++o)
    {
        nvinfer1::PluginTensorDesc const& d = descs[nbInputs + o];
        json::Value out = json::Value::object();
        out.set("dtype", dataTypeName(d.type));
        out.set("dims", dimsJson(actualDims[o]));
        out.set("upper_dims", dimsJson(d.dims));
        if (volume(actualDims[o]) > volume(d.dims))
        {
            violation("size-tensor-value", "enqueue",
                where + ": output " + std::to_string(o) + " resolves to " + dimsJson(actualDims[o]).dump()
                    + ", beyond its declared upper bound " + dimsJson(d.dims).dump());
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
        out.set("buffer", buffer);
        outs.push(std::move(out));
        result.outputs.push_back(outputs[o].read(mSideStream));
    }
    // Another fault of this enqueue (say, work on the wrong stream) would show again in the replay: one rule each.
    size_t const blockedViolations = blocked && !mRequest.enqueueSyncsHost ? 1 : 0;
    if (mViolations.size() == violationsBefore + blockedViolations)
    {
        checkGraphCapture(where, enqueue, status, outputs, workspace, result.outputs);
    }
    report.set("outputs", std::move(outs));
    report.set("size_tensor_values", std::move(sizeValues));
    report.set("status", "ok");
    result.ran = true;
    return result;
}

void Run::checkGraphCapture(std::string const& where, std::function<void()> const& enqueue, int32_t const& status,
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
                if (mRequest.compareRuntimeOutputs && outputs[o].read(mSideStream) != expected[o])
                {
                    violation("graph-replay", "enqueue",
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
    if (!mRequest.enqueueSyncsHost && !captured)
    {
        violation("graph-capture", "enqueue",
            where + ": enqueue could not be captured in a CUDA graph (" + why
                + "); an engine captures it (CUDA graphs), so it must not synchronize, allocate, or read back to the "
                  "host; an op that must read back declares it in its spec (OpSpec.enqueue_syncs_host)");
    }
    if (mRequest.enqueueSyncsHost && captured && replayed)
    {
        violation("host-sync-declaration", "enqueue",
            where
                + ": the spec declares enqueue_syncs_host, but enqueue was captured in a CUDA graph and replayed: "
                  "it does not read back to the host; drop the declaration");
    }
}

void Run::buildPhaseExecutions()
{
    for (int32_t tactic : mRunTactics)
    {
        nvinfer1::IPluginV3* clone = cloneChecked("build phase");
        if (clone == nullptr)
        {
            return;
        }
        Handles const h = resolve(clone, "clone", true);
        Execution e = execute(h, "build", tactic);
        if (e.ran)
        {
            mBuildOutputs[tactic] = std::move(e.outputs);
        }
        mRuns.push(std::move(e.report));
        destroy(clone);
    }
}

void Run::runtimePhase(nvinfer1::IPluginV3* runtimePlugin, bool withEnqueue)
{
    Handles const runtime = resolve(runtimePlugin, "runtime plugin", false);
    for (int32_t tactic : mRunTactics)
    {
        // Every instance attached before any runs, all alive until the last has run: what an engine holding the op
        // in several layers does, so that resources they share are held by all of them at once.
        std::vector<nvinfer1::IPluginV3*> attached;
        for (int32_t i = 0; i < mRequest.instances; ++i)
        {
            nvinfer1::IPluginV3* plugin = nullptr;
            call("attachToContext", [&] { plugin = runtime.runtime->attachToContext(&mResourceContext); });
            if (plugin == nullptr)
            {
                violation("attach", "attachToContext", "returned nullptr");
                for (auto*& p : attached)
                {
                    destroy(p);
                }
                return;
            }
            attached.push_back(plugin);
        }
        if (!withEnqueue)
        {
            for (auto*& p : attached)
            {
                destroy(p);
            }
            return;
        }
        std::vector<std::vector<uint8_t>> first;
        for (size_t i = 0; i < attached.size(); ++i)
        {
            Handles const h = resolve(attached[i], "attached plugin", false);
            Execution e = execute(h, i == 0 ? "runtime" : "instance", tactic);
            auto const reference = mBuildOutputs.find(tactic);
            if (i == 0 && e.ran && mRequest.compareRuntimeOutputs && reference != mBuildOutputs.end())
            {
                for (size_t o = 0; o < e.outputs.size() && o < reference->second.size(); ++o)
                {
                    if (e.outputs[o] != reference->second[o] && mSizeTensorOutputs.count(static_cast<int32_t>(o)) == 0)
                    {
                        violation("serialization", "enqueue",
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
                violation("instances", "enqueue",
                    "tactic " + std::to_string(tactic) + ": runtime instance " + std::to_string(i)
                        + " (attached from the same plugin, alive beside the first) gives other outputs than the "
                          "first");
            }
            mRuns.push(std::move(e.report));
        }
        for (auto*& p : attached)
        {
            destroy(p);
        }
    }
}

// ------------------------------------------------------------------------------------------ bench

json::Value Run::bench()
{
    json::Value out = json::Value::object();
    loadLibrary();
    mBuildPlugin = createPlugin(mRequest.fields, nvinfer1::TensorRTPhase::kBUILD, "createPlugin");
    if (mBuildPlugin == nullptr)
    {
        throw Stop("createPlugin(kBUILD) returned nullptr for the fields " + mRequest.fields.describe());
    }
    mBuild = resolve(mBuildPlugin, "build plugin", true);
    buildPhaseQueries();
    enumerateFormats();
    chooseCombination();
    configure();
    if (!canExecute())
    {
        throw Stop("cannot enqueue: " + mResult.at("enqueue_skipped").asString());
    }
    nvinfer1::IPluginV3* clone = nullptr;
    call("clone", [&] { clone = mBuild.plugin->clone(); });
    if (clone == nullptr)
    {
        throw Stop("clone returned nullptr");
    }
    Handles const h = resolve(clone, "clone", true);
    size_t const nbInputs = mRequest.inputs.size();
    std::vector<nvinfer1::PluginTensorDesc> descs = concreteDescs(mCombination, mConcrete);
    int32_t status = 1;
    call("setTactic", [&] { status = h.runtime->setTactic(mRequest.benchTactic); });
    call("onShapeChange",
        [&]
        {
            status = status != 0 ? status
                                 : h.runtime->onShapeChange(descs.data(), static_cast<int32_t>(nbInputs),
                                       descs.data() + nbInputs, mNbOutputs);
        });
    if (status != 0)
    {
        destroy(clone);
        throw Stop("setTactic/onShapeChange failed for tactic " + std::to_string(mRequest.benchTactic));
    }
    std::vector<void const*> inputPtrs;
    for (InputRequest const& in : mRequest.inputs)
    {
        inputPtrs.push_back(reinterpret_cast<void const*>(in.ptr));
    }
    std::vector<GuardedBuffer> outputs;
    std::vector<void*> outputPtrs;
    allocateOutputs(descs.data() + nbInputs, mNbOutputs, outputs, outputPtrs);
    GuardedBuffer workspace(mWorkspaceSize);
    std::vector<cudaEvent_t> events(2 * static_cast<size_t>(std::max(mRequest.benchIters, 0)));
    for (cudaEvent_t& e : events)
    {
        cudaCheck(cudaEventCreate(&e), "cudaEventCreate");
    }
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    auto enqueueOnce = [&]
    {
        int32_t s = 1;
        call("enqueue",
            [&]
            {
                s = h.runtime->enqueue(descs.data(), descs.data() + nbInputs, inputPtrs.data(), outputPtrs.data(),
                    workspace.data(), mStream);
            });
        if (s != 0)
        {
            throw Stop("enqueue returned " + std::to_string(s));
        }
    };
    json::Value times = json::Value::array();
    try
    {
        for (int32_t i = 0; i < mRequest.benchWarmup; ++i)
        {
            enqueueOnce();
        }
        for (int32_t i = 0; i < mRequest.benchIters; ++i)
        {
            cudaCheck(cudaEventRecord(events[2 * i], mStream), "cudaEventRecord");
            enqueueOnce();
            cudaCheck(cudaEventRecord(events[2 * i + 1], mStream), "cudaEventRecord");
        }
        cudaCheck(cudaStreamSynchronize(mStream), "cudaStreamSynchronize");
        for (int32_t i = 0; i < mRequest.benchIters; ++i)
        {
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cudaEventElapsedTime");
            times.push(static_cast<double>(ms));
        }
    }
    catch (...)
    {
        for (cudaEvent_t e : events)
        {
            cudaEventDestroy(e);
        }
        destroy(clone);
        throw;
    }
    for (cudaEvent_t e : events)
    {
        cudaEventDestroy(e);
    }
    destroy(clone);
    out.set("times_ms", std::move(times));
    out.set("tactic", mRequest.benchTactic);
    out.set("workspace_size", static_cast<uint64_t>(mWorkspaceSize));
    out.set("violations", mViolations);
    out.set("log", logSince(0));
    return out;
}

} // namespace ttp::harness
