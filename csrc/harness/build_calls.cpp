// The builder's calls after format negotiation: clone, attachToContext, configurePlugin, getWorkspaceSize and the
// tactic queries.
#include "run.h"

#include <set>

namespace ttp::harness
{

nvinfer1::IPluginV3* cloneForBuild(RunContext& run)
{
    nvinfer1::IPluginV3* clone = nullptr;
    run.report.call("clone", [&] { clone = run.plugins.networkPlugin->clone(); });
    if (clone == nullptr)
    {
        run.report.violation("clone", "clone", "returned nullptr when the builder cloned the network's plugin");
        throw Stop("clone() of the plugin created by createPlugin(kBUILD) returned nullptr");
    }
    return clone;
}

void attachDuringBuild(RunContext& run)
{
    run.plugins.timingCacheId(run.plugins.build); // queried before attachToContext, as the builder does
    // The builder attaches the plugin to a (build-time) resource context before configuring it.
    nvinfer1::IPluginV3* attached = nullptr;
    run.report.call("attachToContext",
        [&] { attached = run.plugins.build.runtime->attachToContext(&run.plugins.resourceContext()); });
    if (attached == nullptr)
    {
        run.report.violation("attach", "attachToContext", "returned nullptr during the build phase");
        return;
    }
    run.plugins.resolve(attached, "plugin attached during the build", false);
    run.plugins.destroy(attached);
}

void configure(RunContext& run)
{
    std::vector<nvinfer1::DynamicPluginTensorDesc> descs = dynamicDescs(run, run.formats.chosen, false);
    int32_t const nbInputs = static_cast<int32_t>(run.request.inputs.size());
    int32_t status = 1;
    run.report.call("configurePlugin",
        [&]
        {
            status = run.plugins.build.build->configurePlugin(
                descs.data(), nbInputs, descs.data() + nbInputs, run.outputs.count);
        });
    if (status != 0)
    {
        throw Stop(
            "configurePlugin returned " + std::to_string(status) + " for " + combinationText(run.formats.chosen));
    }
    run.report.call("getWorkspaceSize",
        [&]
        {
            run.workspaceSize = run.plugins.build.build->getWorkspaceSize(
                descs.data(), nbInputs, descs.data() + nbInputs, run.outputs.count);
        });
    run.report.result()["workspace_size"] = static_cast<uint64_t>(run.workspaceSize);
    run.report.result()["configured"] = combinationJson(run.formats.chosen);
}

void queryTactics(RunContext& run)
{
    int32_t count = 0;
    run.report.call("getNbTactics", [&] { count = run.plugins.build.build->getNbTactics(); });
    if (count < 0)
    {
        run.report.violation("tactics", "getNbTactics", "returned " + std::to_string(count));
        count = 0;
    }
    // NVIDIA's builder calls getValidTactics even when getNbTactics() returned 0: getValidTactics(nullptr, 0).
    std::vector<int32_t> tactics(count, 0);
    int32_t status = 1;
    run.report.call("getValidTactics",
        [&] { status = run.plugins.build.build->getValidTactics(count > 0 ? tactics.data() : nullptr, count); });
    if (status != 0)
    {
        run.report.violation("tactics", "getValidTactics",
            "returned " + std::to_string(status) + " for "
                + (count > 0 ? "its " + std::to_string(count) + " tactics"
                             : std::string("getValidTactics(nullptr, 0) after getNbTactics() returned 0"))
                + "; TensorRT's builder fails the build on a non-zero return");
    }
    else
    {
        std::set<int32_t> seen;
        for (int32_t t : tactics)
        {
            if (t == 0 || !seen.insert(t).second)
            {
                run.report.violation("tactics", "getValidTactics",
                    "tactic values must be unique and non-zero (0 is TensorRT's default tactic), got "
                        + listText(std::vector<int64_t>(tactics.begin(), tactics.end())));
                break;
            }
        }
        run.validTactics = tactics;
    }
    // With a single candidate the builder times nothing and picks the default tactic.
    int32_t chosen = 1;
    run.report.call("setTactic", [&] { chosen = run.plugins.build.runtime->setTactic(0); });
    if (chosen != 0)
    {
        run.report.violation(
            "tactics", "setTactic", "setTactic(0), TensorRT's default tactic, returned " + std::to_string(chosen));
    }
    run.report.result()["tactics"] = run.validTactics;
    run.report.result()["timing_cache_id"]
        = run.report.callForString("getTimingCacheID", [&] { return run.plugins.build.build->getTimingCacheID(); });
    run.report.result()["metadata"]
        = run.report.callForString("getMetadataString", [&] { return run.plugins.build.build->getMetadataString(); });

    if (run.request.tactics)
    {
        run.runTactics = *run.request.tactics;
    }
    else
    {
        run.runTactics = {0};
        run.runTactics.insert(run.runTactics.end(), run.validTactics.begin(), run.validTactics.end());
    }
}

} // namespace ttp::harness
