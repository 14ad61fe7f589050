// Clone independence: a clone shares no mutable state or memory with its source.
#include "run.h"

#include <malloc.h>

namespace ttp::harness
{

void checkCloneIndependence(RunContext& run)
{
    // Clone twice (source X, clone Y), drive Y through another configuration, then check that X did not notice;
    // destroy X (freed bytes poisoned) and check that Y did not notice either.
    std::optional<FieldSet> const reference = run.plugins.fieldsOf(run.plugins.build, "build plugin");
    std::string const referenceId = run.plugins.timingCacheId(run.plugins.build);
    nvinfer1::IPluginV3* source = nullptr;
    run.report.call("clone", [&] { source = run.plugins.build.plugin->clone(); });
    if (source == nullptr)
    {
        run.report.violation("clone", "clone", "returned nullptr");
        return;
    }
    Handles const x = run.plugins.resolve(source, "clone", true);
    nvinfer1::IPluginV3* cloned = nullptr;
    run.report.call("clone", [&] { cloned = x.plugin->clone(); });
    if (cloned == nullptr)
    {
        run.report.violation("clone", "clone", "clone of a clone returned nullptr");
        run.plugins.destroy(source);
        return;
    }
    Handles const y = run.plugins.resolve(cloned, "clone of a clone", true);

    Combination alternative = run.formats.chosen;
    for (Combination const& c : run.formats.table)
    {
        alternative = c != run.formats.chosen ? c : alternative;
    }
    std::vector<nvinfer1::DynamicPluginTensorDesc> descs = dynamicDescs(run, alternative, true);
    std::vector<nvinfer1::PluginTensorDesc> concrete = concreteDescs(run, alternative, run.outputs.min);
    int32_t const nbInputs = static_cast<int32_t>(run.request.inputs.size());
    int32_t const otherTactic = run.validTactics.empty() ? 0 : run.validTactics.back();
    run.report.call("setTactic", [&] { y.runtime->setTactic(otherTactic); });
    run.report.call("configurePlugin",
        [&] { y.build->configurePlugin(descs.data(), nbInputs, descs.data() + nbInputs, run.outputs.count); });
    run.report.call("onShapeChange",
        [&] { y.runtime->onShapeChange(concrete.data(), nbInputs, concrete.data() + nbInputs, run.outputs.count); });

    auto const mutation = "setTactic(" + std::to_string(otherTactic) + ") and configurePlugin"
                          + combinationText(alternative) + " on its clone";
    for (auto const& [handles, what] :
        {std::pair<Handles const*, char const*>{&run.plugins.build, "the build plugin"}, {&x, "a clone"}})
    {
        std::optional<FieldSet> const after = run.plugins.fieldsOf(*handles, what);
        if (reference && after && *after != *reference)
        {
            run.report.violation("clone-shares-state", "clone",
                std::string("after ") + mutation + ", the fields of " + what + " changed from " + reference->describe()
                    + " to " + after->describe() + ": clone shares mutable state with its source");
        }
        std::string const id = run.plugins.timingCacheId(*handles);
        if (id != referenceId)
        {
            run.report.violation("clone-shares-state", "clone",
                std::string("after ") + mutation + ", the timing cache id of " + what + " changed from '" + referenceId
                    + "' to '" + id + "'");
        }
    }

    std::optional<FieldSet> const before = run.plugins.fieldsOf(y, "clone of a clone");
    std::string const idBefore = run.plugins.timingCacheId(y);
    // M_PERTURB fills memory released by free() (outside glibc's per-thread cache) with a pattern, so that a
    // clone still reading its source's memory sees garbage rather than stale but plausible values.
    mallopt(M_PERTURB, 0xA5);
    run.plugins.destroy(source);
    mallopt(M_PERTURB, 0);
    std::optional<FieldSet> const after = run.plugins.fieldsOf(y, "clone of a clone");
    if (before && after && *before != *after)
    {
        run.report.violation("clone-shares-state", "clone",
            "destroying a clone's source changed the clone's fields from " + before->describe() + " to "
                + after->describe() + ": the clone uses memory owned by its source");
    }
    if (run.plugins.timingCacheId(y) != idBefore)
    {
        run.report.violation(
            "clone-shares-state", "clone", "destroying a clone's source changed the clone's timing cache id");
    }
    run.plugins.destroy(cloned);
}

} // namespace ttp::harness
