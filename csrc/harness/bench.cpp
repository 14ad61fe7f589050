// The enqueue benchmark: the build steps up to configurePlugin, then timed enqueues of one clone on one tactic.
#include "conformance.h"

namespace ttp::harness
{

Json Run::bench()
{
    Json out = Json::object();
    mPlugins.loadLibrary();
    mPlugins.buildPlugin = mPlugins.create(mRequest.fields, nvinfer1::TensorRTPhase::kBUILD, "createPlugin");
    if (mPlugins.buildPlugin == nullptr)
    {
        throw Stop("createPlugin(kBUILD) returned nullptr for the fields " + mRequest.fields.describe());
    }
    mPlugins.build = mPlugins.resolve(mPlugins.buildPlugin, "build plugin", true);
    queryOutputs(mContext);
    enumerateFormats(mContext);
    chooseCombination(mContext);
    configure(mContext);
    if (!mExecutor.canExecute())
    {
        throw Stop("cannot enqueue: " + mReport.result()["enqueue_skipped"].get<std::string>());
    }
    nvinfer1::IPluginV3* clone = nullptr;
    mReport.call("clone", [&] { clone = mPlugins.build.plugin->clone(); });
    if (clone == nullptr)
    {
        throw Stop("clone returned nullptr");
    }
    Handles const h = mPlugins.resolve(clone, "clone", true);
    size_t const nbInputs = mRequest.inputs.size();
    std::vector<nvinfer1::PluginTensorDesc> descs
        = concreteDescs(mContext, mContext.formats.chosen, mContext.outputs.concrete);
    int32_t status = 1;
    mReport.call("setTactic", [&] { status = h.runtime->setTactic(mRequest.benchTactic); });
    mReport.call("onShapeChange",
        [&]
        {
            status = status != 0 ? status
                                 : h.runtime->onShapeChange(descs.data(), static_cast<int32_t>(nbInputs),
                                       descs.data() + nbInputs, mContext.outputs.count);
        });
    if (status != 0)
    {
        mPlugins.destroy(clone);
        throw Stop("setTactic/onShapeChange failed for tactic " + std::to_string(mRequest.benchTactic));
    }
    std::vector<void const*> inputPtrs;
    for (InputRequest const& in : mRequest.inputs)
    {
        inputPtrs.push_back(reinterpret_cast<void const*>(in.ptr));
    }
    std::vector<GuardedBuffer> outputs;
    std::vector<void*> outputPtrs;
    allocateOutputs(descs.data() + nbInputs, mContext.outputs.count, outputs, outputPtrs);
    GuardedBuffer workspace(mContext.workspaceSize);
    std::vector<cudaEvent_t> events(2 * static_cast<size_t>(std::max(mRequest.benchIters, 0)));
    for (cudaEvent_t& e : events)
    {
        cudaCheck(cudaEventCreate(&e), "cudaEventCreate");
    }
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    auto enqueueOnce = [&]
    {
        int32_t s = 1;
        mReport.call("enqueue",
            [&]
            {
                s = h.runtime->enqueue(descs.data(), descs.data() + nbInputs, inputPtrs.data(), outputPtrs.data(),
                    workspace.data(), mExecutor.stream());
            });
        if (s != 0)
        {
            throw Stop("enqueue returned " + std::to_string(s));
        }
    };
    Json times = Json::array();
    try
    {
        for (int32_t i = 0; i < mRequest.benchWarmup; ++i)
        {
            enqueueOnce();
        }
        for (int32_t i = 0; i < mRequest.benchIters; ++i)
        {
            cudaCheck(cudaEventRecord(events[2 * i], mExecutor.stream()), "cudaEventRecord");
            enqueueOnce();
            cudaCheck(cudaEventRecord(events[2 * i + 1], mExecutor.stream()), "cudaEventRecord");
        }
        cudaCheck(cudaStreamSynchronize(mExecutor.stream()), "cudaStreamSynchronize");
        for (int32_t i = 0; i < mRequest.benchIters; ++i)
        {
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cudaEventElapsedTime");
            times.push_back(static_cast<double>(ms));
        }
    }
    catch (...)
    {
        for (cudaEvent_t e : events)
        {
            cudaEventDestroy(e);
        }
        mPlugins.destroy(clone);
        throw;
    }
    for (cudaEvent_t e : events)
    {
        cudaEventDestroy(e);
    }
    mPlugins.destroy(clone);
    out["times_ms"] = std::move(times);
    out["tactic"] = mRequest.benchTactic;
    out["workspace_size"] = static_cast<uint64_t>(mContext.workspaceSize);
    out["violations"] = mReport.violations();
    out["log"] = mReport.logSince(0);
    return out;
}

} // namespace ttp::harness
