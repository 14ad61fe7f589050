// The conformance run: the phases in the order NVIDIA's builder and runtime call a plugin.
#include "conformance.h"

namespace ttp::harness
{

Run::Run(Request request, AllocateFn allocate, void* user)
    : mRequest(std::move(request))
    , mReport(mRequest.pluginId())
    , mPlugins(mRequest, mReport)
    , mContext(mRequest, mReport, mPlugins)
    , mExecutor(mContext, allocate, user)
{
}

Run::~Run()
{
    // Before the executor's streams go, as the run's plugins were made before them.
    mPlugins.destroy(mPlugins.buildPlugin);
}

Json Run::conformance()
{
    Json stopped;
    try
    {
        mPlugins.loadLibrary();
        checkInvalidFields(mContext);
        mPlugins.networkPlugin = mPlugins.create(mRequest.fields, nvinfer1::TensorRTPhase::kBUILD, "createPlugin");
        if (mPlugins.networkPlugin == nullptr)
        {
            throw Stop(
                "createPlugin(kBUILD) returned nullptr for the fields " + mRequest.fields.describe() + "; see 'log'");
        }
        // The order NVIDIA's builder was observed to use (TensorRT-RTX 1.5-1.7): clone, output types and shapes,
        // supportsFormatCombination, getTimingCacheID, attachToContext, configurePlugin, getWorkspaceSize,
        // getNbTactics, getValidTactics, setTactic, then getFieldsToSerialize.
        mPlugins.buildPlugin = cloneForBuild(mContext);
        mPlugins.build = mPlugins.resolve(mPlugins.buildPlugin, "build plugin", true);
        queryOutputs(mContext);
        enumerateFormats(mContext);
        chooseCombination(mContext);
        attachDuringBuild(mContext);
        configure(mContext);
        queryTactics(mContext);
        checkCloneIndependence(mContext);
        if (mExecutor.canExecute())
        {
            mExecutor.buildPhaseExecutions();
        }
        serializationRoundTrip(mContext, mExecutor);
        mPlugins.destroy(mPlugins.buildPlugin);
        mPlugins.destroy(mPlugins.networkPlugin);
        mResources.checkReleased(mReport);
    }
    catch (Stop const& stop)
    {
        stopped = stop.what();
    }
    catch (std::exception const& e)
    {
        stopped = std::string("harness error: ") + e.what();
    }
    mPlugins.destroy(mPlugins.buildPlugin);
    mPlugins.destroy(mPlugins.networkPlugin);
    mReport.result()["calls"] = mReport.calls();
    mResources.addToResult(mReport);
    mReport.result()["stopped"] = stopped;
    mReport.result()["runs"] = mExecutor.runs();
    mReport.result()["violations"] = mReport.violations();
    mReport.result()["errors"] = mReport.errors();
    mReport.result()["log"] = mReport.logSince(0);
    return mReport.result();
}

} // namespace ttp::harness
