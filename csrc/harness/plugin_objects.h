// The plugin library under test, its creator and the plugin objects made from it: every plugin object a run creates,
// resolves to its capability interfaces and destroys goes through here, trapped and reported.
#pragma once

#include <NvInferRuntime.h>

#include <optional>
#include <string>

#include "fields.h"
#include "report.h"
#include "request.h"
#include "services.h"

namespace ttp::harness
{

// The capability interfaces of one plugin object.
struct Handles
{
    nvinfer1::IPluginV3* plugin{nullptr};
    nvinfer1::IPluginV3OneCore* core{nullptr};
    nvinfer1::IPluginV3OneBuild* build{nullptr};
    nvinfer1::IPluginV3OneBuildV2* buildV2{nullptr};
    nvinfer1::IPluginV3OneRuntime* runtime{nullptr};
};

class PluginObjects
{
public:
    PluginObjects(Request const& request, Report& report);
    // Destroys the network and build plugins where a run left them.
    ~PluginObjects();
    PluginObjects(PluginObjects const&) = delete;
    PluginObjects& operator=(PluginObjects const&) = delete;

    // Loads the library, hands it the logger finder, reports its creators ("creators") and picks the requested one;
    // Stop where there is none.
    void loadLibrary();
    nvinfer1::IPluginV3* create(FieldSet& fields, nvinfer1::TensorRTPhase phase, char const* what);
    // The plugin's capability interfaces, checked for kind and identity; Stop where a required one is missing.
    Handles resolve(nvinfer1::IPluginV3* plugin, char const* what, bool needBuild);
    void destroy(nvinfer1::IPluginV3*& plugin);
    // getFieldsToSerialize, deep-copied; nullopt (and a violation) where the collection is malformed.
    std::optional<FieldSet> fieldsOf(Handles const& h, char const* what);
    std::string timingCacheId(Handles const& h);

    HarnessResourceContext& resourceContext() noexcept
    {
        return mResourceContext;
    }

    // What the network holds (createPlugin(kBUILD)); the build works on a clone of it, `build`.
    nvinfer1::IPluginV3* networkPlugin{nullptr};
    nvinfer1::IPluginV3* buildPlugin{nullptr};
    Handles build;

private:
    Request const& mRequest;
    Report& mReport;
    void* mLibrary{nullptr};
    nvinfer1::IPluginCreatorV3One* mCreator{nullptr};
    HarnessResourceContext mResourceContext;
};

} // namespace ttp::harness
