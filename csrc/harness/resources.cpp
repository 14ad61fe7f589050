// Shared resources (IPluginResource): every one a run acquires is released once its plugins are gone.
#include "run.h"

namespace ttp::harness
{

ResourceBaseline::ResourceBaseline()
    : mHeld(pluginRegistry().heldResources())
    , mAcquires(pluginRegistry().acquireCount())
    , mStats(pluginRegistry().resourceStats())
{
    pluginRegistry().resetPeaks();
}

void ResourceBaseline::checkReleased(Report& report) const
{
    for (auto const& [key, stats] : pluginRegistry().resourceStats())
    {
        auto const before = mStats.find(key);
        int64_t const failed = stats.failedReleases - (before != mStats.end() ? before->second.failedReleases : 0);
        if (failed > 0)
        {
            report.violation("resource-release", "releasePluginResource",
                "shared resource '" + key + "': its release() returned non-zero " + std::to_string(failed)
                    + " time(s)");
        }
    }
    for (auto const& [key, count] : pluginRegistry().heldResources())
    {
        auto const before = mHeld.find(key);
        int32_t const leaked = count - (before != mHeld.end() ? before->second : 0);
        if (leaked <= 0)
        {
            continue;
        }
        report.violation("resource-leak", "releasePluginResource",
            "shared resource '" + key + "' is still held (" + std::to_string(leaked)
                + " reference(s)) after every plugin object was destroyed");
        // Dropped here so that later runs start clean.
        for (int32_t i = 0; i < leaked; ++i)
        {
            pluginRegistry().releasePluginResource(key.c_str());
        }
    }
}

void ResourceBaseline::addToResult(Report& report) const
{
    report.result()["resource_acquires"] = pluginRegistry().acquireCount() - mAcquires;
    Json resources = Json::object();
    for (auto const& [key, stats] : pluginRegistry().resourceStats())
    {
        auto const found = mStats.find(key);
        HarnessPluginRegistry::ResourceStats const before
            = found != mStats.end() ? found->second : HarnessPluginRegistry::ResourceStats{};
        if (stats.acquires == before.acquires)
        {
            continue;
        }
        Json entry = Json::object();
        entry["acquires"] = stats.acquires - before.acquires;
        entry["builds"] = stats.clones - before.clones;
        entry["releases"] = stats.releases - before.releases;
        entry["peak"] = static_cast<int64_t>(stats.peak);
        int32_t held = 0;
        for (auto const& [heldKey, count] : pluginRegistry().heldResources())
        {
            held = heldKey == key ? count : held;
        }
        entry["held"] = static_cast<int64_t>(held);
        resources[key] = entry;
    }
    report.result()["resources"] = std::move(resources);
}

} // namespace ttp::harness
