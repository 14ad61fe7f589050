#include "plugin_objects.h"

#include <algorithm>
#include <cstring>
#include <dlfcn.h>
#include <vector>

namespace ttp::harness
{
namespace
{

std::string safeString(char const* s)
{
    return s != nullptr ? std::string(s) : std::string("(null)");
}

} // namespace

PluginObjects::PluginObjects(Request const& request, Report& report)
    : mRequest(request)
    , mReport(report)
{
}

PluginObjects::~PluginObjects()
{
    destroy(buildPlugin);
    destroy(networkPlugin);
}

void PluginObjects::loadLibrary()
{
    try
    {
        mLibrary = openPluginLibrary(mRequest.library);
    }
    catch (std::runtime_error const& e)
    {
        throw Stop(e.what());
    }
    auto setLoggerFinder = reinterpret_cast<SetLoggerFinderFn>(dlsym(mLibrary, "setLoggerFinder"));
    auto getCreators = reinterpret_cast<GetCreatorsFn>(dlsym(mLibrary, "getCreators"));
    if (setLoggerFinder == nullptr)
    {
        mReport.violation("library", "setLoggerFinder", "the library does not export setLoggerFinder");
    }
    else
    {
        mReport.call("setLoggerFinder", [&] { setLoggerFinder(&loggerFinder()); });
    }
    if (getCreators == nullptr)
    {
        throw Stop(mRequest.library + " does not export getCreators");
    }
    int32_t count = 0;
    nvinfer1::IPluginCreatorInterface* const* creators = nullptr;
    if (!mReport.call("getCreators", [&] { creators = getCreators(count); }) || (creators == nullptr && count > 0))
    {
        throw Stop("getCreators failed");
    }
    std::vector<nvinfer1::IPluginCreatorInterface*> all(creators, creators + std::max(count, 0));
    pluginRegistry().setCreators(all);

    Json list = Json::array();
    std::string available;
    for (nvinfer1::IPluginCreatorInterface* creator : all)
    {
        Json entry = Json::object();
        nvinfer1::InterfaceInfo info{};
        mReport.call("IPluginCreatorInterface::getInterfaceInfo", [&] { info = creator->getInterfaceInfo(); });
        entry["interface"] = safeString(info.kind);
        entry["interface_version"] = std::to_string(info.major) + "." + std::to_string(info.minor);
        if (info.kind == nullptr || std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") != 0)
        {
            list.push_back(std::move(entry));
            continue;
        }
        auto* v3 = static_cast<nvinfer1::IPluginCreatorV3One*>(creator);
        std::string name, version, ns;
        mReport.call("IPluginCreatorV3One::getPluginName",
            [&]
            {
                name = safeString(v3->getPluginName());
                version = safeString(v3->getPluginVersion());
                ns = safeString(v3->getPluginNamespace());
            });
        entry["name"] = name;
        entry["version"] = version;
        entry["namespace"] = ns;
        nvinfer1::PluginFieldCollection const* fc = nullptr;
        Json fields = Json::array();
        if (mReport.call("IPluginCreatorV3One::getFieldNames", [&] { fc = v3->getFieldNames(); }) && fc != nullptr)
        {
            for (int32_t i = 0; i < fc->nbFields && fc->fields != nullptr; ++i)
            {
                Json f = Json::object();
                f["name"] = safeString(fc->fields[i].name);
                f["type"] = fieldTypeName(fc->fields[i].type);
                f["length"] = fc->fields[i].length;
                fields.push_back(std::move(f));
            }
        }
        entry["fields"] = std::move(fields);
        list.push_back(std::move(entry));
        available += (available.empty() ? "" : ", ") + ns + "::" + name + " v" + version;
        if (name == mRequest.name && version == mRequest.version && ns == mRequest.ns)
        {
            mCreator = v3;
        }
    }
    mReport.result()["creators"] = std::move(list);
    if (mCreator == nullptr)
    {
        throw Stop("no IPluginCreatorV3One for " + mRequest.pluginId() + " in " + mRequest.library
                   + "; available: " + (available.empty() ? std::string("none") : available));
    }
}

nvinfer1::IPluginV3* PluginObjects::create(FieldSet& fields, nvinfer1::TensorRTPhase phase, char const* what)
{
    nvinfer1::IPluginV3* plugin = nullptr;
    mReport.call(what, [&] { plugin = mCreator->createPlugin(mRequest.name.c_str(), fields.collection(), phase); });
    return plugin;
}

void PluginObjects::destroy(nvinfer1::IPluginV3*& plugin)
{
    if (plugin != nullptr)
    {
        nvinfer1::IPluginV3* doomed = plugin;
        plugin = nullptr;
        mReport.call("~IPluginV3", [&] { delete doomed; });
    }
}

Handles PluginObjects::resolve(nvinfer1::IPluginV3* plugin, char const* what, bool needBuild)
{
    Handles h;
    h.plugin = plugin;
    struct Wanted
    {
        nvinfer1::PluginCapabilityType type;
        char const* kind;
        bool required;
    };
    Wanted const wanted[] = {{nvinfer1::PluginCapabilityType::kCORE, "PLUGIN_V3ONE_CORE", true},
        {nvinfer1::PluginCapabilityType::kBUILD, "PLUGIN_V3ONE_BUILD", needBuild},
        {nvinfer1::PluginCapabilityType::kRUNTIME, "PLUGIN_V3ONE_RUNTIME", true}};
    for (Wanted const& w : wanted)
    {
        nvinfer1::IPluginCapability* capability = nullptr;
        nvinfer1::InterfaceInfo info{};
        bool const ok = mReport.call("getCapabilityInterface",
            [&]
            {
                capability = plugin->getCapabilityInterface(w.type);
                if (capability != nullptr)
                {
                    info = capability->getInterfaceInfo();
                }
            });
        if (!ok || capability == nullptr)
        {
            if (w.required)
            {
                mReport.violation("capability", "getCapabilityInterface",
                    std::string(what) + ": no " + w.kind + " interface (returned nullptr)");
            }
            continue;
        }
        if (info.kind == nullptr || std::strcmp(info.kind, w.kind) != 0)
        {
            mReport.violation("capability", "getCapabilityInterface",
                std::string(what) + ": asked for " + w.kind + ", got an interface of kind " + safeString(info.kind));
            continue;
        }
        switch (w.type)
        {
        case nvinfer1::PluginCapabilityType::kCORE:
            h.core = static_cast<nvinfer1::IPluginV3OneCore*>(capability);
            break;
        case nvinfer1::PluginCapabilityType::kBUILD:
            h.build = static_cast<nvinfer1::IPluginV3OneBuild*>(capability);
            if (info.major >= 2)
            {
                h.buildV2 = static_cast<nvinfer1::IPluginV3OneBuildV2*>(h.build);
            }
            break;
        case nvinfer1::PluginCapabilityType::kRUNTIME:
            h.runtime = static_cast<nvinfer1::IPluginV3OneRuntime*>(capability);
            break;
        }
    }
    if (h.core == nullptr || h.runtime == nullptr || (needBuild && h.build == nullptr))
    {
        throw Stop(std::string(what) + " lacks a required capability interface");
    }
    std::string name, version, ns;
    mReport.call("getPluginName",
        [&]
        {
            name = safeString(h.core->getPluginName());
            version = safeString(h.core->getPluginVersion());
            ns = safeString(h.core->getPluginNamespace());
        });
    if (name != mRequest.name || version != mRequest.version || ns != mRequest.ns)
    {
        mReport.violation("identity", "getPluginName",
            std::string(what) + " calls itself " + ns + "::" + name + " v" + version + ", but its creator is "
                + mRequest.pluginId());
    }
    return h;
}

std::optional<FieldSet> PluginObjects::fieldsOf(Handles const& h, char const* what)
{
    nvinfer1::PluginFieldCollection const* fc = nullptr;
    std::optional<FieldSet> fields;
    std::string problem;
    mReport.call("getFieldsToSerialize",
        [&]
        {
            fc = h.runtime->getFieldsToSerialize();
            try
            {
                fields = FieldSet::fromCollection(fc);
            }
            catch (std::runtime_error const& e)
            {
                problem = e.what();
            }
        });
    if (!problem.empty())
    {
        mReport.violation("serialization", "getFieldsToSerialize", std::string(what) + ": " + problem);
    }
    return fields;
}

std::string PluginObjects::timingCacheId(Handles const& h)
{
    std::string id = "(null)";
    if (h.build != nullptr)
    {
        mReport.call("getTimingCacheID",
            [&]
            {
                char const* s = h.build->getTimingCacheID();
                id = s != nullptr ? s : "(null)";
            });
    }
    return id;
}

} // namespace ttp::harness
