// The build phase of a harness run: everything TensorRT does with a plugin before it executes it.
#include "run.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <malloc.h>
#include <mutex>

namespace ttp::harness
{
namespace
{

using nvinfer1::DataType;
using nvinfer1::TensorFormat;

constexpr DataType kCANDIDATE_TYPES[] = {DataType::kFLOAT, DataType::kHALF, DataType::kBF16, DataType::kINT8,
    DataType::kINT32, DataType::kINT64, DataType::kBOOL, DataType::kFP8};
constexpr TensorFormat kCANDIDATE_FORMATS[] = {TensorFormat::kLINEAR, TensorFormat::kCHW2, TensorFormat::kHWC8,
    TensorFormat::kCHW4, TensorFormat::kCHW16, TensorFormat::kCHW32, TensorFormat::kDHWC8, TensorFormat::kCDHW32,
    TensorFormat::kHWC, TensorFormat::kHWC16, TensorFormat::kDHWC};
// Bounds the enumeration for plugins that accept nearly everything.
constexpr int64_t kMAX_FORMAT_QUERIES = 200000;

struct TypeName
{
    DataType type;
    char const* name;
    int32_t bits;
};
constexpr TypeName kTYPES[]
    = {{DataType::kFLOAT, "FLOAT", 32}, {DataType::kHALF, "HALF", 16}, {DataType::kINT8, "INT8", 8},
        {DataType::kINT32, "INT32", 32}, {DataType::kBOOL, "BOOL", 8}, {DataType::kUINT8, "UINT8", 8},
        {DataType::kFP8, "FP8", 8}, {DataType::kBF16, "BF16", 16}, {DataType::kINT64, "INT64", 64},
        {DataType::kINT4, "INT4", 4}, {DataType::kFP4, "FP4", 4}, {DataType::kE8M0, "E8M0", 8}};

nvinfer1::Dims toDims(std::vector<int64_t> const& values, char const* what)
{
    if (values.size() > static_cast<size_t>(nvinfer1::Dims::MAX_DIMS))
    {
        throw Stop(std::string(what) + ": more than 8 dimensions");
    }
    nvinfer1::Dims dims{};
    dims.nbDims = static_cast<int32_t>(values.size());
    std::copy(values.begin(), values.end(), dims.d);
    return dims;
}

std::string dimsStr(nvinfer1::Dims const& dims)
{
    return dimsJson(dims).dump();
}

std::string combinationStr(Combination const& c)
{
    std::string out = "(";
    for (size_t i = 0; i < c.size(); ++i)
    {
        out += std::string(i ? ", " : "") + dataTypeName(c[i].type) + "/" + formatName(c[i].format);
    }
    return out + ")";
}

std::string safeString(char const* s)
{
    return s != nullptr ? std::string(s) : std::string("(null)");
}

} // namespace

bool tracing() noexcept
{
    static bool const enabled = []
    {
        char const* value = std::getenv("TTP_HARNESS_TRACE");
        return value != nullptr && value[0] != '\0' && value[0] != '0';
    }();
    return enabled;
}

void trace(std::string const& what) noexcept
{
    if (tracing())
    {
        std::fprintf(stderr, "[harness] %s\n", what.c_str());
        std::fflush(stderr);
    }
}

// ------------------------------------------------------------------------------------------ vocabulary

char const* dataTypeName(DataType type) noexcept
{
    for (auto const& t : kTYPES)
    {
        if (t.type == type)
        {
            return t.name;
        }
    }
    return "UNKNOWN";
}

DataType dataTypeFromName(std::string const& name)
{
    for (auto const& t : kTYPES)
    {
        if (name == t.name)
        {
            return t.type;
        }
    }
    throw Stop("unknown data type '" + name + "'");
}

char const* formatName(TensorFormat format) noexcept
{
    switch (format)
    {
    case TensorFormat::kLINEAR: return "LINEAR";
    case TensorFormat::kCHW2: return "CHW2";
    case TensorFormat::kHWC8: return "HWC8";
    case TensorFormat::kCHW4: return "CHW4";
    case TensorFormat::kCHW16: return "CHW16";
    case TensorFormat::kCHW32: return "CHW32";
    case TensorFormat::kDHWC8: return "DHWC8";
    case TensorFormat::kCDHW32: return "CDHW32";
    case TensorFormat::kHWC: return "HWC";
    case TensorFormat::kDLA_LINEAR: return "DLA_LINEAR";
    case TensorFormat::kDLA_HWC4: return "DLA_HWC4";
    case TensorFormat::kHWC16: return "HWC16";
    case TensorFormat::kDHWC: return "DHWC";
    }
    return "UNKNOWN";
}

size_t storageBytes(DataType type, int64_t count)
{
    int32_t bits = 8;
    for (auto const& t : kTYPES)
    {
        bits = t.type == type ? t.bits : bits;
    }
    return static_cast<size_t>((std::max<int64_t>(count, 0) * bits + 7) / 8);
}

int64_t volume(nvinfer1::Dims const& dims) noexcept
{
    int64_t v = 1;
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        v *= dims.d[i];
    }
    return v;
}

json::Value dimsJson(nvinfer1::Dims const& dims)
{
    json::Value out = json::Value::array();
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        out.push(dims.d[i]);
    }
    return out;
}

Request Request::fromJson(json::Value const& r)
{
    Request out;
    out.library = r.at("library").asString();
    json::Value const& plugin = r.at("plugin");
    out.name = plugin.at("name").asString();
    out.version = plugin.at("version").asString();
    out.ns = plugin.at("namespace").asString();
    if (json::Value const* fields = r.find("fields"))
    {
        out.fields = FieldSet::fromJson(*fields);
    }
    if (json::Value const* inputs = r.find("inputs"))
    {
        for (json::Value const& in : inputs->items())
        {
            InputRequest input;
            input.type = dataTypeFromName(in.at("dtype").asString());
            input.dims = toDims(in.at("dims").asInts(), "input dims");
            auto point = [&](char const* key)
            {
                json::Value const* v = in.find(key);
                return v != nullptr && !v->isNull() ? toDims(v->asInts(), key) : input.dims;
            };
            input.min = point("min");
            input.opt = point("opt");
            input.max = point("max");
            json::Value const* ptr = in.find("ptr");
            input.ptr = ptr != nullptr && !ptr->isNull() ? static_cast<uint64_t>(ptr->asInt()) : 0;
            out.inputs.push_back(input);
        }
    }
    if (json::Value const* shapes = r.find("shape_inputs"))
    {
        for (json::Value const& s : shapes->items())
        {
            ShapeInputRequest shape;
            shape.values = s.at("values").asInts();
            auto point = [&](char const* key)
            {
                json::Value const* v = s.find(key);
                return v != nullptr && !v->isNull() ? v->asInts() : shape.values;
            };
            shape.min = point("min");
            shape.opt = point("opt");
            shape.max = point("max");
            out.shapeInputs.push_back(shape);
        }
    }
    if (json::Value const* tactics = r.find("tactics"); tactics != nullptr && !tactics->isNull())
    {
        std::vector<int32_t> list;
        for (int64_t t : tactics->asInts())
        {
            list.push_back(static_cast<int32_t>(t));
        }
        out.tactics = list;
    }
    if (json::Value const* invalid = r.find("invalid_fields"))
    {
        for (json::Value const& set : invalid->items())
        {
            out.invalidFieldSets.push_back(FieldSet::fromJson(set));
        }
    }
    if (json::Value const* v = r.find("enqueue"))
    {
        out.enqueue = v->asBool();
    }
    if (json::Value const* v = r.find("compare_runtime_outputs"))
    {
        out.compareRuntimeOutputs = v->asBool();
    }
    if (json::Value const* v = r.find("instances"))
    {
        out.instances = static_cast<int32_t>(std::max<int64_t>(1, v->asInt()));
    }
    if (json::Value const* v = r.find("gate_timeout_s"))
    {
        out.gateTimeout = v->asDouble();
    }
    if (json::Value const* bench = r.find("bench"))
    {
        out.benchTactic = static_cast<int32_t>(bench->at("tactic").asInt());
        out.benchIters = static_cast<int32_t>(bench->at("iters").asInt());
        out.benchWarmup = static_cast<int32_t>(bench->at("warmup").asInt());
    }
    return out;
}

// ------------------------------------------------------------------------------------------ reporting

Run::Run(Request request, AllocateFn allocate, void* user)
    : mRequest(std::move(request))
    , mAllocate(allocate)
    , mUser(user)
    , mResourcesAtStart(pluginRegistry().heldResources())
    , mAcquiresAtStart(pluginRegistry().acquireCount())
    , mStatsAtStart(pluginRegistry().resourceStats())
{
    pluginRegistry().resetPeaks();
    loggerFinder().logger().begin(&mLog);
}

Run::~Run()
{
    destroy(mBuildPlugin);
    if (mStream != nullptr)
    {
        cudaStreamDestroy(mStream);
    }
    if (mSideStream != nullptr)
    {
        cudaStreamDestroy(mSideStream);
    }
    loggerFinder().logger().end();
}

std::string Run::pluginId() const
{
    return mRequest.ns + "::" + mRequest.name + " v" + mRequest.version;
}

void Run::violation(std::string const& rule, std::string const& method, std::string const& detail)
{
    std::string const message = "[" + rule + "] " + pluginId() + " " + method + ": " + detail;
    if (!mSeenViolations.insert(message).second)
    {
        return;
    }
    json::Value v = json::Value::object();
    v.set("rule", rule);
    v.set("plugin", pluginId());
    v.set("method", method);
    v.set("detail", detail);
    v.set("message", message);
    mViolations.push(std::move(v));
}

void Run::error(std::string const& step, std::string const& detail)
{
    json::Value e = json::Value::object();
    e.set("step", step);
    e.set("detail", detail);
    mErrors.push(std::move(e));
}

json::Value Run::logSince(size_t start) const
{
    json::Value out = json::Value::array();
    for (size_t i = start; i < mLog.size(); ++i)
    {
        json::Value line = json::Value::object();
        line.set("severity", severityName(mLog[i].severity));
        line.set("message", mLog[i].message);
        line.set("during", mLog[i].during);
        out.push(std::move(line));
    }
    return out;
}

// ------------------------------------------------------------------------------------------ creators

void Run::loadLibrary()
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
        violation("library", "setLoggerFinder", "the library does not export setLoggerFinder");
    }
    else
    {
        call("setLoggerFinder", [&] { setLoggerFinder(&loggerFinder()); });
    }
    if (getCreators == nullptr)
    {
        throw Stop(mRequest.library + " does not export getCreators");
    }
    int32_t count = 0;
    nvinfer1::IPluginCreatorInterface* const* creators = nullptr;
    if (!call("getCreators", [&] { creators = getCreators(count); }) || (creators == nullptr && count > 0))
    {
        throw Stop("getCreators failed");
    }
    std::vector<nvinfer1::IPluginCreatorInterface*> all(creators, creators + std::max(count, 0));
    pluginRegistry().setCreators(all);

    json::Value list = json::Value::array();
    std::string available;
    for (nvinfer1::IPluginCreatorInterface* creator : all)
    {
        json::Value entry = json::Value::object();
        nvinfer1::InterfaceInfo info{};
        call("IPluginCreatorInterface::getInterfaceInfo", [&] { info = creator->getInterfaceInfo(); });
        entry.set("interface", safeString(info.kind));
        entry.set("interface_version", std::to_string(info.major) + "." + std::to_string(info.minor));
        if (info.kind == nullptr || std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") != 0)
        {
            list.push(std::move(entry));
            continue;
        }
        auto* v3 = static_cast<nvinfer1::IPluginCreatorV3One*>(creator);
        std::string name, version, ns;
        call("IPluginCreatorV3One::getPluginName",
            [&]
            {
                name = safeString(v3->getPluginName());
                version = safeString(v3->getPluginVersion());
                ns = safeString(v3->getPluginNamespace());
            });
        entry.set("name", name);
        entry.set("version", version);
        entry.set("namespace", ns);
        nvinfer1::PluginFieldCollection const* fc = nullptr;
        json::Value fields = json::Value::array();
        if (call("IPluginCreatorV3One::getFieldNames", [&] { fc = v3->getFieldNames(); }) && fc != nullptr)
        {
            for (int32_t i = 0; i < fc->nbFields && fc->fields != nullptr; ++i)
            {
                json::Value f = json::Value::object();
                f.set("name", safeString(fc->fields[i].name));
                f.set("type", fieldTypeName(fc->fields[i].type));
                f.set("length", fc->fields[i].length);
                fields.push(std::move(f));
            }
        }
        entry.set("fields", std::move(fields));
        list.push(std::move(entry));
        available += (available.empty() ? "" : ", ") + ns + "::" + name + " v" + version;
        if (name == mRequest.name && version == mRequest.version && ns == mRequest.ns)
        {
            mCreator = v3;
        }
    }
    mResult.set("creators", std::move(list));
    if (mCreator == nullptr)
    {
        throw Stop("no IPluginCreatorV3One for " + pluginId() + " in " + mRequest.library
                   + "; available: " + (available.empty() ? std::string("none") : available));
    }
}

nvinfer1::IPluginV3* Run::createPlugin(FieldSet& fields, nvinfer1::TensorRTPhase phase, char const* what)
{
    nvinfer1::IPluginV3* plugin = nullptr;
    call(what, [&] { plugin = mCreator->createPlugin(mRequest.name.c_str(), fields.collection(), phase); });
    return plugin;
}

void Run::destroy(nvinfer1::IPluginV3*& plugin)
{
    if (plugin != nullptr)
    {
        nvinfer1::IPluginV3* doomed = plugin;
        plugin = nullptr;
        call("~IPluginV3", [&] { delete doomed; });
    }
}

void Run::checkInvalidFields()
{
    json::Value results = json::Value::array();
    for (FieldSet fields : mRequest.invalidFieldSets)
    {
        size_t const logStart = mLog.size();
        nvinfer1::IPluginV3* plugin = createPlugin(fields, nvinfer1::TensorRTPhase::kBUILD, "createPlugin");
        json::Value entry = json::Value::object();
        entry.set("fields", fields.toJson());
        entry.set("rejected", plugin == nullptr);
        entry.set("log", logSince(logStart));
        results.push(std::move(entry));
        if (plugin != nullptr)
        {
            violation("invalid-fields-accepted", "createPlugin",
                "returned a plugin for the invalid fields " + fields.describe() + " instead of nullptr");
            destroy(plugin);
        }
        else if (logStart == mLog.size())
        {
            violation("silent-rejection", "createPlugin",
                "rejected the invalid fields " + fields.describe() + " without logging why");
        }
    }
    mResult.set("invalid_fields", std::move(results));
}

Handles Run::resolve(nvinfer1::IPluginV3* plugin, char const* what, bool needBuild)
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
        bool const ok = call("getCapabilityInterface",
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
                violation("capability", "getCapabilityInterface",
                    std::string(what) + ": no " + w.kind + " interface (returned nullptr)");
            }
            continue;
        }
        if (info.kind == nullptr || std::strcmp(info.kind, w.kind) != 0)
        {
            violation("capability", "getCapabilityInterface",
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
    call("getPluginName",
        [&]
        {
            name = safeString(h.core->getPluginName());
            version = safeString(h.core->getPluginVersion());
            ns = safeString(h.core->getPluginNamespace());
        });
    if (name != mRequest.name || version != mRequest.version || ns != mRequest.ns)
    {
        violation("identity", "getPluginName",
            std::string(what) + " calls itself " + ns + "::" + name + " v" + version + ", but its creator is "
                + pluginId());
    }
    return h;
}

// ------------------------------------------------------------------------------------------ types and shapes

void Run::buildPhaseQueries()
{
    call("getNbOutputs", [&] { mNbOutputs = mBuild.build->getNbOutputs(); });
    if (mNbOutputs <= 0)
    {
        violation("outputs", "getNbOutputs", "must return a positive number, got " + std::to_string(mNbOutputs));
        throw Stop("getNbOutputs returned " + std::to_string(mNbOutputs));
    }
    mResult.set("nb_outputs", mNbOutputs);
    std::vector<DataType> inputTypes;
    for (InputRequest const& in : mRequest.inputs)
    {
        inputTypes.push_back(in.type);
    }
    mOutputTypes.assign(mNbOutputs, DataType::kFLOAT);
    int32_t status = 1;
    call("getOutputDataTypes",
        [&]
        {
            status = mBuild.build->getOutputDataTypes(
                mOutputTypes.data(), mNbOutputs, inputTypes.data(), static_cast<int32_t>(inputTypes.size()));
        });
    if (status != 0)
    {
        throw Stop("getOutputDataTypes returned " + std::to_string(status) + " for the input types");
    }
    json::Value types = json::Value::array();
    for (DataType t : mOutputTypes)
    {
        types.push(dataTypeName(t));
    }
    mResult.set("output_types", std::move(types));
    if (mBuild.buildV2 != nullptr)
    {
        // Per output, the input it aliases (-1: none), as TensorRT asks with kALIASED_PLUGIN_IO_10_03.
        json::Value aliases = json::Value::array();
        for (int32_t i = 0; i < mNbOutputs; ++i)
        {
            int32_t aliased = -1;
            call("getAliasedInput", [&] { aliased = mBuild.buildV2->getAliasedInput(i); });
            if (aliased >= 0)
            {
                mAliasedInputs[i] = aliased;
            }
            aliases.push(aliased);
        }
        mResult.set("aliased_inputs", std::move(aliases));
    }
    outputShapes();
}

void Run::outputShapes()
{
    // Symbols: an input dimension is a constant when the profile fixes it (as TensorRT does for static dims).
    std::vector<nvinfer1::DimsExprs> inputs(mRequest.inputs.size());
    for (size_t i = 0; i < mRequest.inputs.size(); ++i)
    {
        InputRequest const& in = mRequest.inputs[i];
        if (in.min.nbDims != in.dims.nbDims || in.opt.nbDims != in.dims.nbDims || in.max.nbDims != in.dims.nbDims)
        {
            throw Stop("input " + std::to_string(i) + ": min/opt/max must have the rank of dims " + dimsStr(in.dims));
        }
        inputs[i].nbDims = in.dims.nbDims;
        for (int32_t d = 0; d < in.dims.nbDims; ++d)
        {
            if (in.min.d[d] > in.opt.d[d] || in.opt.d[d] > in.max.d[d] || in.dims.d[d] < in.min.d[d]
                || in.dims.d[d] > in.max.d[d])
            {
                throw Stop("input " + std::to_string(i) + ": dims " + dimsStr(in.dims) + " outside the profile min "
                           + dimsStr(in.min) + " opt " + dimsStr(in.opt) + " max " + dimsStr(in.max));
            }
            DimExpr::Node node;
            if (in.min.d[d] == in.max.d[d])
            {
                node.value = in.min.d[d];
            }
            else
            {
                node.kind = DimExpr::Kind::kINPUT_DIM;
                node.tensor = static_cast<int32_t>(i);
                node.index = d;
            }
            inputs[i].d[d] = mExprs.make(node);
        }
        mMin.inputs.push_back(in.min);
        mOpt.inputs.push_back(in.opt);
        mMax.inputs.push_back(in.max);
        mConcrete.inputs.push_back(in.dims);
    }
    std::vector<nvinfer1::DimsExprs> shapeInputs(mRequest.shapeInputs.size());
    for (size_t i = 0; i < mRequest.shapeInputs.size(); ++i)
    {
        ShapeInputRequest const& s = mRequest.shapeInputs[i];
        if (s.values.size() > static_cast<size_t>(nvinfer1::Dims::MAX_DIMS) || s.min.size() != s.values.size()
            || s.opt.size() != s.values.size() || s.max.size() != s.values.size())
        {
            throw Stop("shape input " + std::to_string(i) + ": values/min/opt/max must have one length <= 8");
        }
        shapeInputs[i].nbDims = static_cast<int32_t>(s.values.size());
        for (size_t k = 0; k < s.values.size(); ++k)
        {
            DimExpr::Node node;
            if (s.min[k] == s.max[k])
            {
                node.value = s.min[k];
            }
            else
            {
                node.kind = DimExpr::Kind::kSHAPE_VALUE;
                node.tensor = static_cast<int32_t>(i);
                node.index = static_cast<int32_t>(k);
            }
            shapeInputs[i].d[k] = mExprs.make(node);
        }
        mMin.shapeValues.push_back(s.min);
        mOpt.shapeValues.push_back(s.opt);
        mMax.shapeValues.push_back(s.max);
        mConcrete.shapeValues.push_back(s.values);
    }
    mMin.sizeTensors = ShapePoint::SizeTensors::kZERO;
    mOpt.sizeTensors = ShapePoint::SizeTensors::kOPT;
    mMax.sizeTensors = ShapePoint::SizeTensors::kUPPER;
    mConcrete.sizeTensors = ShapePoint::SizeTensors::kUPPER;

    mExprs.setNbOutputs(mNbOutputs);
    mOutputExprs.assign(mNbOutputs, nvinfer1::DimsExprs{});
    int32_t status = 1;
    call("getOutputShapes",
        [&]
        {
            status = mBuild.build->getOutputShapes(inputs.data(), static_cast<int32_t>(inputs.size()),
                shapeInputs.data(), static_cast<int32_t>(shapeInputs.size()), mOutputExprs.data(), mNbOutputs, mExprs);
        });
    for (std::string const& problem : mExprs.problems())
    {
        violation("expr-builder", "getOutputShapes", problem);
    }
    if (status != 0)
    {
        throw Stop("getOutputShapes returned " + std::to_string(status));
    }
    json::Value symbolic = json::Value::array();
    for (int32_t o = 0; o < mNbOutputs; ++o)
    {
        nvinfer1::DimsExprs const& out = mOutputExprs[o];
        if (out.nbDims < 0 || out.nbDims > nvinfer1::Dims::MAX_DIMS)
        {
            violation("output-shapes", "getOutputShapes",
                "output " + std::to_string(o) + " has nbDims " + std::to_string(out.nbDims));
            throw Stop("getOutputShapes produced an invalid rank");
        }
        json::Value dims = json::Value::array();
        for (int32_t d = 0; d < out.nbDims; ++d)
        {
            DimExpr const* expr = mExprs.own(out.d[d]);
            if (expr == nullptr)
            {
                violation("output-shapes", "getOutputShapes",
                    "output " + std::to_string(o) + " dimension " + std::to_string(d)
                        + " is not an IDimensionExpr from the inputs or the IExprBuilder");
                throw Stop("getOutputShapes produced an invalid expression");
            }
            dims.push(expr->str());
        }
        symbolic.push(std::move(dims));
    }
    json::Value sizeTensors = json::Value::array();
    for (ExprBuilder::SizeTensorDecl const& decl : mExprs.sizeTensors())
    {
        mSizeTensorOutputs.insert(decl.output);
        std::string const which = "size tensor output " + std::to_string(decl.output);
        if (mOutputExprs[decl.output].nbDims != 0)
        {
            violation("size-tensor-rank", "getOutputShapes",
                which + " must be declared 0-D, got rank " + std::to_string(mOutputExprs[decl.output].nbDims));
        }
        DataType const type = mOutputTypes[decl.output];
        if (type != DataType::kINT32 && type != DataType::kINT64)
        {
            violation(
                "size-tensor-type", "getOutputDataTypes", which + " must be INT32 or INT64, got " + dataTypeName(type));
        }
        json::Value entry = json::Value::object();
        entry.set("output", decl.output);
        entry.set("opt", decl.opt->str());
        entry.set("upper", decl.upper->str());
        sizeTensors.push(std::move(entry));
    }
    json::Value shapes = json::Value::object();
    shapes.set("symbolic", std::move(symbolic));
    for (auto const& [key, point] : {std::pair<char const*, ShapePoint const*>{"min", &mMin}, {"opt", &mOpt},
             {"max", &mMax}, {"concrete", &mConcrete}})
    {
        json::Value list = json::Value::array();
        for (nvinfer1::Dims const& dims : outputDims(*point))
        {
            list.push(dimsJson(dims));
        }
        shapes.set(key, std::move(list));
    }
    mResult.set("output_shapes", std::move(shapes));
    mResult.set("size_tensors", std::move(sizeTensors));
}

std::vector<nvinfer1::Dims> Run::outputDims(ShapePoint const& point) const
{
    std::vector<nvinfer1::Dims> out;
    for (nvinfer1::DimsExprs const& exprs : mOutputExprs)
    {
        nvinfer1::Dims dims{};
        dims.nbDims = exprs.nbDims;
        for (int32_t d = 0; d < exprs.nbDims; ++d)
        {
            try
            {
                dims.d[d] = evaluate(*mExprs.own(exprs.d[d]), point);
            }
            catch (EvalError const& e)
            {
                throw Stop(std::string("evaluating output shapes: ") + e.what());
            }
        }
        out.push_back(dims);
    }
    return out;
}

// ------------------------------------------------------------------------------------------ formats

std::vector<nvinfer1::DynamicPluginTensorDesc> Run::dynamicDescs(Combination const& combination, bool useMinAsAll) const
{
    std::vector<nvinfer1::Dims> const outMin = outputDims(mMin);
    std::vector<nvinfer1::Dims> const outOpt = outputDims(mOpt);
    std::vector<nvinfer1::Dims> const outMax = outputDims(mMax);
    std::vector<nvinfer1::DynamicPluginTensorDesc> descs;
    size_t const nbInputs = mRequest.inputs.size();
    for (size_t i = 0; i < nbInputs + outMin.size(); ++i)
    {
        bool const isInput = i < nbInputs;
        nvinfer1::DynamicPluginTensorDesc desc{};
        desc.min = isInput ? mMin.inputs[i] : outMin[i - nbInputs];
        desc.opt = isInput ? mOpt.inputs[i] : outOpt[i - nbInputs];
        desc.max = isInput ? mMax.inputs[i] : outMax[i - nbInputs];
        if (useMinAsAll)
        {
            desc.opt = desc.min;
            desc.max = desc.min;
        }
        desc.desc.dims = desc.min;
        for (int32_t d = 0; d < desc.min.nbDims; ++d)
        {
            desc.desc.dims.d[d] = desc.min.d[d] == desc.max.d[d] ? desc.min.d[d] : -1;
        }
        desc.desc.type = i < combination.size() ? combination[i].type : DataType::kFLOAT;
        desc.desc.format = i < combination.size() ? combination[i].format : TensorFormat::kLINEAR;
        desc.desc.scale = desc.desc.type == DataType::kINT8 ? 1.0F : -1.0F;
        descs.push_back(desc);
    }
    return descs;
}

std::vector<nvinfer1::PluginTensorDesc> Run::concreteDescs(
    Combination const& combination, ShapePoint const& point) const
{
    std::vector<nvinfer1::Dims> const outs = outputDims(point);
    std::vector<nvinfer1::PluginTensorDesc> descs;
    for (size_t i = 0; i < combination.size(); ++i)
    {
        nvinfer1::PluginTensorDesc desc{};
        desc.dims = i < point.inputs.size() ? point.inputs[i] : outs[i - point.inputs.size()];
        desc.type = combination[i].type;
        desc.format = combination[i].format;
        desc.scale = desc.type == DataType::kINT8 ? 1.0F : -1.0F;
        descs.push_back(desc);
    }
    return descs;
}

void Run::enumerateFormats()
{
    call("getFormatCombinationLimit", [&] { mFormatLimit = mBuild.build->getFormatCombinationLimit(); });
    int32_t const nbInputs = static_cast<int32_t>(mRequest.inputs.size());
    int32_t const nbIO = nbInputs + mNbOutputs;
    std::vector<nvinfer1::DynamicPluginTensorDesc> descs = dynamicDescs(Combination{}, false);
    size_t const descSize = sizeof(nvinfer1::DynamicPluginTensorDesc);
    // Positions 0..pos are copied so that they end exactly at a PROT_NONE page: reading inOut[pos + 1] faults.
    GuardedWindow window(static_cast<size_t>(nbIO) * descSize);
    Combination current(nbIO, IOFormat{DataType::kFLOAT, TensorFormat::kLINEAR});
    int64_t queries = 0;
    bool truncated = false;
    bool crashed = false;
    FaultScope faults;
    loggerFinder().logger().setDuring("supportsFormatCombination");
    mCalls.push("supportsFormatCombination"); // once for the whole enumeration (thousands of queries)

    auto ask = [&](int32_t pos)
    {
        auto* view = static_cast<nvinfer1::DynamicPluginTensorDesc*>(window.endAligned((pos + 1) * descSize));
        std::memcpy(static_cast<void*>(view), descs.data(), (pos + 1) * descSize);
        bool supported = false;
        TrapOutcome const outcome
            = trapped([&] { supported = mBuild.build->supportsFormatCombination(pos, view, nbInputs, mNbOutputs); });
        ++queries;
        if (outcome.kind == TrapOutcome::Kind::kFAULT)
        {
            auto const address = outcome.faultAddress;
            if (window.isProtected(address))
            {
                int64_t const read = pos + 1 + static_cast<int64_t>((address - window.protectedBegin()) / descSize);
                violation("supports-format-reads-above-pos", "supportsFormatCombination",
                    "called with pos=" + std::to_string(pos) + " it read inOut[" + std::to_string(read)
                        + "]; only inOut[0..pos] hold valid values (TensorRT fills positions above pos later)");
            }
            else
            {
                violation("crash", "supportsFormatCombination",
                    "memory fault at address " + std::to_string(address) + " (pos=" + std::to_string(pos) + ")");
                crashed = true;
            }
            return false;
        }
        if (outcome.kind == TrapOutcome::Kind::kEXCEPTION)
        {
            violation("no-throw", "supportsFormatCombination", "an exception escaped: " + outcome.what);
            return false;
        }
        return supported;
    };

    // TensorRT's order: position by position, each position's candidates tried with positions below it fixed to
    // choices already accepted.
    auto search = [&](auto& self, int32_t pos) -> void
    {
        for (DataType type : kCANDIDATE_TYPES)
        {
            for (TensorFormat format : kCANDIDATE_FORMATS)
            {
                if (crashed || static_cast<int32_t>(mFormatTable.size()) >= mFormatLimit
                    || queries >= kMAX_FORMAT_QUERIES)
                {
                    truncated = truncated || !crashed;
                    return;
                }
                descs[pos].desc.type = type;
                descs[pos].desc.format = format;
                descs[pos].desc.scale = type == DataType::kINT8 ? 1.0F : -1.0F;
                current[pos] = IOFormat{type, format};
                if (!ask(pos))
                {
                    continue;
                }
                if (pos + 1 == nbIO)
                {
                    mFormatTable.push_back(current);
                }
                else
                {
                    self(self, pos + 1);
                }
            }
        }
    };
    if (nbIO > 0)
    {
        search(search, 0);
    }
    loggerFinder().logger().setDuring("");

    json::Value table = json::Value::array();
    for (Combination const& c : mFormatTable)
    {
        json::Value row = json::Value::array();
        for (IOFormat const& io : c)
        {
            json::Value cell = json::Value::array();
            cell.push(dataTypeName(io.type));
            cell.push(formatName(io.format));
            row.push(std::move(cell));
        }
        table.push(std::move(row));
    }
    mResult.set("formats", std::move(table));
    mResult.set("formats_truncated", truncated);
    mResult.set("format_queries", queries);
    mResult.set("format_combination_limit", mFormatLimit);
}

void Run::chooseCombination()
{
    size_t const nbInputs = mRequest.inputs.size();
    Combination wanted;
    for (InputRequest const& in : mRequest.inputs)
    {
        wanted.push_back({in.type, TensorFormat::kLINEAR});
    }
    for (DataType t : mOutputTypes)
    {
        wanted.push_back({t, TensorFormat::kLINEAR});
    }
    if (std::find(mFormatTable.begin(), mFormatTable.end(), wanted) != mFormatTable.end())
    {
        mCombination = wanted;
        return;
    }
    // The inputs are supported but not with the output types getOutputDataTypes announced.
    for (Combination const& c : mFormatTable)
    {
        bool linear = true;
        for (IOFormat const& io : c)
        {
            linear = linear && io.format == TensorFormat::kLINEAR;
        }
        if (linear && std::equal(wanted.begin(), wanted.begin() + nbInputs, c.begin()))
        {
            violation("output-types", "getOutputDataTypes",
                "announced output types " + combinationStr(wanted) + " but supportsFormatCombination accepts only "
                    + combinationStr(c) + " for these inputs");
            mCombination = c;
            return;
        }
    }
    throw Stop("supportsFormatCombination accepts no LINEAR combination " + combinationStr(wanted)
               + " for the requested input types; the supported combinations are in 'formats'");
}

nvinfer1::IPluginV3* Run::cloneForBuild()
{
    nvinfer1::IPluginV3* clone = nullptr;
    call("clone", [&] { clone = mNetworkPlugin->clone(); });
    if (clone == nullptr)
    {
        violation("clone", "clone", "returned nullptr when the builder cloned the network's plugin");
        throw Stop("clone() of the plugin created by createPlugin(kBUILD) returned nullptr");
    }
    return clone;
}

void Run::attachDuringBuild()
{
    timingCacheId(mBuild); // queried before attachToContext, as the builder does
    // The builder attaches the plugin to a (build-time) resource context before configuring it.
    nvinfer1::IPluginV3* attached = nullptr;
    call("attachToContext", [&] { attached = mBuild.runtime->attachToContext(&mResourceContext); });
    if (attached == nullptr)
    {
        violation("attach", "attachToContext", "returned nullptr during the build phase");
        return;
    }
    resolve(attached, "plugin attached during the build", false);
    destroy(attached);
}

void Run::configure()
{
    std::vector<nvinfer1::DynamicPluginTensorDesc> descs = dynamicDescs(mCombination, false);
    int32_t const nbInputs = static_cast<int32_t>(mRequest.inputs.size());
    int32_t status = 1;
    call("configurePlugin",
        [&] { status = mBuild.build->configurePlugin(descs.data(), nbInputs, descs.data() + nbInputs, mNbOutputs); });
    if (status != 0)
    {
        throw Stop("configurePlugin returned " + std::to_string(status) + " for " + combinationStr(mCombination));
    }
    call("getWorkspaceSize",
        [&]
        {
            mWorkspaceSize
                = mBuild.build->getWorkspaceSize(descs.data(), nbInputs, descs.data() + nbInputs, mNbOutputs);
        });
    mResult.set("workspace_size", static_cast<uint64_t>(mWorkspaceSize));
    json::Value chosen = json::Value::array();
    for (IOFormat const& io : mCombination)
    {
        json::Value cell = json::Value::array();
        cell.push(dataTypeName(io.type));
        cell.push(formatName(io.format));
        chosen.push(std::move(cell));
    }
    mResult.set("configured", std::move(chosen));
}

template <typename F>
json::Value Run::callForString(char const* method, F&& fn)
{
    char const* text = nullptr;
    std::string copy; // taken inside the trap: a bad pointer faults there
    call(method,
        [&]
        {
            text = fn();
            copy = text != nullptr ? text : "";
        });
    return text != nullptr ? json::Value(copy) : json::Value();
}

void Run::tacticQueries()
{
    int32_t count = 0;
    call("getNbTactics", [&] { count = mBuild.build->getNbTactics(); });
    if (count < 0)
    {
        violation("tactics", "getNbTactics", "returned " + std::to_string(count));
        count = 0;
    }
    // NVIDIA's builder calls getValidTactics even when getNbTactics() returned 0: getValidTactics(nullptr, 0).
    std::vector<int32_t> tactics(count, 0);
    int32_t status = 1;
    call("getValidTactics",
        [&] { status = mBuild.build->getValidTactics(count > 0 ? tactics.data() : nullptr, count); });
    if (status != 0)
    {
        violation("tactics", "getValidTactics",
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
                violation("tactics", "getValidTactics",
                    "tactic values must be unique and non-zero (0 is TensorRT's default tactic), got "
                        + json::Value::arrayOf(tactics).dump());
                break;
            }
        }
        mValidTactics = tactics;
    }
    // With a single candidate the builder times nothing and picks the default tactic.
    int32_t chosen = 1;
    call("setTactic", [&] { chosen = mBuild.runtime->setTactic(0); });
    if (chosen != 0)
    {
        violation(
            "tactics", "setTactic", "setTactic(0), TensorRT's default tactic, returned " + std::to_string(chosen));
    }
    mResult.set("tactics", json::Value::arrayOf(mValidTactics));
    mResult.set("timing_cache_id", callForString("getTimingCacheID", [&] { return mBuild.build->getTimingCacheID(); }));
    mResult.set("metadata", callForString("getMetadataString", [&] { return mBuild.build->getMetadataString(); }));

    if (mRequest.tactics)
    {
        mRunTactics = *mRequest.tactics;
    }
    else
    {
        mRunTactics = {0};
        mRunTactics.insert(mRunTactics.end(), mValidTactics.begin(), mValidTactics.end());
    }
}

// ------------------------------------------------------------------------------------------ clone, serialization

std::optional<FieldSet> Run::fieldsOf(Handles const& h, char const* what)
{
    nvinfer1::PluginFieldCollection const* fc = nullptr;
    std::optional<FieldSet> fields;
    std::string problem;
    call("getFieldsToSerialize",
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
        violation("serialization", "getFieldsToSerialize", std::string(what) + ": " + problem);
    }
    return fields;
}

std::string Run::timingCacheId(Handles const& h)
{
    std::string id = "(null)";
    if (h.build != nullptr)
    {
        call("getTimingCacheID",
            [&]
            {
                char const* s = h.build->getTimingCacheID();
                id = s != nullptr ? s : "(null)";
            });
    }
    return id;
}

void Run::checkCloneIndependence()
{
    // Clone twice (source X, clone Y), drive Y through another configuration, then check that X did not notice;
    // destroy X (freed bytes poisoned) and check that Y did not notice either.
    std::optional<FieldSet> const reference = fieldsOf(mBuild, "build plugin");
    std::string const referenceId = timingCacheId(mBuild);
    nvinfer1::IPluginV3* source = nullptr;
    call("clone", [&] { source = mBuild.plugin->clone(); });
    if (source == nullptr)
    {
        violation("clone", "clone", "returned nullptr");
        return;
    }
    Handles const x = resolve(source, "clone", true);
    nvinfer1::IPluginV3* cloned = nullptr;
    call("clone", [&] { cloned = x.plugin->clone(); });
    if (cloned == nullptr)
    {
        violation("clone", "clone", "clone of a clone returned nullptr");
        destroy(source);
        return;
    }
    Handles const y = resolve(cloned, "clone of a clone", true);

    Combination alternative = mCombination;
    for (Combination const& c : mFormatTable)
    {
        alternative = c != mCombination ? c : alternative;
    }
    std::vector<nvinfer1::DynamicPluginTensorDesc> descs = dynamicDescs(alternative, true);
    std::vector<nvinfer1::PluginTensorDesc> concrete = concreteDescs(alternative, mMin);
    int32_t const nbInputs = static_cast<int32_t>(mRequest.inputs.size());
    int32_t const otherTactic = mValidTactics.empty() ? 0 : mValidTactics.back();
    call("setTactic", [&] { y.runtime->setTactic(otherTactic); });
    call("configurePlugin",
        [&] { y.build->configurePlugin(descs.data(), nbInputs, descs.data() + nbInputs, mNbOutputs); });
    call("onShapeChange",
        [&] { y.runtime->onShapeChange(concrete.data(), nbInputs, concrete.data() + nbInputs, mNbOutputs); });

    auto const mutation = "setTactic(" + std::to_string(otherTactic) + ") and configurePlugin"
                          + combinationStr(alternative) + " on its clone";
    for (auto const& [handles, what] :
        {std::pair<Handles const*, char const*>{&mBuild, "the build plugin"}, {&x, "a clone"}})
    {
        std::optional<FieldSet> const after = fieldsOf(*handles, what);
        if (reference && after && *after != *reference)
        {
            violation("clone-shares-state", "clone",
                std::string("after ") + mutation + ", the fields of " + what + " changed from " + reference->describe()
                    + " to " + after->describe() + ": clone shares mutable state with its source");
        }
        std::string const id = timingCacheId(*handles);
        if (id != referenceId)
        {
            violation("clone-shares-state", "clone",
                std::string("after ") + mutation + ", the timing cache id of " + what + " changed from '" + referenceId
                    + "' to '" + id + "'");
        }
    }

    std::optional<FieldSet> const before = fieldsOf(y, "clone of a clone");
    std::string const idBefore = timingCacheId(y);
    // M_PERTURB fills memory released by free() (outside glibc's per-thread cache) with a pattern, so that a
    // clone still reading its source's memory sees garbage rather than stale but plausible values.
    mallopt(M_PERTURB, 0xA5);
    destroy(source);
    mallopt(M_PERTURB, 0);
    std::optional<FieldSet> const after = fieldsOf(y, "clone of a clone");
    if (before && after && *before != *after)
    {
        violation("clone-shares-state", "clone",
            "destroying a clone's source changed the clone's fields from " + before->describe() + " to "
                + after->describe() + ": the clone uses memory owned by its source");
    }
    if (timingCacheId(y) != idBefore)
    {
        violation("clone-shares-state", "clone", "destroying a clone's source changed the clone's timing cache id");
    }
    destroy(cloned);
}

void Run::serializationRoundTrip()
{
    std::optional<FieldSet> const fields = fieldsOf(mBuild, "build plugin");
    if (!fields)
    {
        throw Stop("getFieldsToSerialize returned no usable fields");
    }
    mResult.set("serialized_fields", fields->toJson());
    // What a plan holds: bytes. The runtime plugin is created from what is read back.
    std::vector<uint8_t> const bytes = fields->serialize();
    mResult.set("serialized_bytes", static_cast<uint64_t>(bytes.size()));
    FieldSet restored = FieldSet::deserialize(bytes);
    nvinfer1::IPluginV3* runtimePlugin = createPlugin(restored, nvinfer1::TensorRTPhase::kRUNTIME, "createPlugin");
    if (runtimePlugin == nullptr)
    {
        violation("serialization", "getFieldsToSerialize",
            "createPlugin(kRUNTIME) rejected the serialized fields " + fields->describe());
        return;
    }
    Handles const runtime = resolve(runtimePlugin, "runtime plugin", false);
    std::optional<FieldSet> const again = fieldsOf(runtime, "runtime plugin");
    if (again && *again != *fields)
    {
        violation("serialization", "getFieldsToSerialize",
            "the plugin re-created from the serialized fields " + fields->describe() + " serializes "
                + again->describe() + ": the fields do not recreate an equivalent plugin");
    }
    mResult.set("runtime_fields", again ? again->toJson() : json::Value());
    runtimePhase(runtimePlugin, canExecute());
    destroy(runtimePlugin);
}

void Run::checkResourcesReleased()
{
    for (auto const& [key, stats] : pluginRegistry().resourceStats())
    {
        auto const before = mStatsAtStart.find(key);
        int64_t const failed
            = stats.failedReleases - (before != mStatsAtStart.end() ? before->second.failedReleases : 0);
        if (failed > 0)
        {
            violation("resource-release", "releasePluginResource",
                "shared resource '" + key + "': its release() returned non-zero " + std::to_string(failed)
                    + " time(s)");
        }
    }
    for (auto const& [key, count] : pluginRegistry().heldResources())
    {
        auto const before = mResourcesAtStart.find(key);
        int32_t const leaked = count - (before != mResourcesAtStart.end() ? before->second : 0);
        if (leaked <= 0)
        {
            continue;
        }
        violation("resource-leak", "releasePluginResource",
            "shared resource '" + key + "' is still held (" + std::to_string(leaked)
                + " reference(s)) after every plugin object was destroyed");
        // Dropped here so that later runs start clean.
        for (int32_t i = 0; i < leaked; ++i)
        {
            pluginRegistry().releasePluginResource(key.c_str());
        }
    }
}

// ------------------------------------------------------------------------------------------ the run

json::Value Run::conformance()
{
    json::Value stopped;
    try
    {
        loadLibrary();
        checkInvalidFields();
        mNetworkPlugin = createPlugin(mRequest.fields, nvinfer1::TensorRTPhase::kBUILD, "createPlugin");
        if (mNetworkPlugin == nullptr)
        {
            throw Stop(
                "createPlugin(kBUILD) returned nullptr for the fields " + mRequest.fields.describe() + "; see 'log'");
        }
        // The order NVIDIA's builder was observed to use (TensorRT-RTX 1.5-1.7): clone, output types and shapes,
        // supportsFormatCombination, getTimingCacheID, attachToContext, configurePlugin, getWorkspaceSize,
        // getNbTactics, getValidTactics, setTactic, then getFieldsToSerialize.
        mBuildPlugin = cloneForBuild();
        mBuild = resolve(mBuildPlugin, "build plugin", true);
        buildPhaseQueries();
        enumerateFormats();
        chooseCombination();
        attachDuringBuild();
        configure();
        tacticQueries();
        checkCloneIndependence();
        if (canExecute())
        {
            buildPhaseExecutions();
        }
        serializationRoundTrip();
        destroy(mBuildPlugin);
        destroy(mNetworkPlugin);
        checkResourcesReleased();
    }
    catch (Stop const& stop)
    {
        stopped = json::Value(stop.what());
    }
    catch (std::exception const& e)
    {
        stopped = json::Value(std::string("harness error: ") + e.what());
    }
    destroy(mBuildPlugin);
    destroy(mNetworkPlugin);
    mResult.set("calls", mCalls);
    mResult.set("resource_acquires", pluginRegistry().acquireCount() - mAcquiresAtStart);
    json::Value resources = json::Value::object();
    for (auto const& [key, stats] : pluginRegistry().resourceStats())
    {
        auto const found = mStatsAtStart.find(key);
        HarnessPluginRegistry::ResourceStats const before
            = found != mStatsAtStart.end() ? found->second : HarnessPluginRegistry::ResourceStats{};
        if (stats.acquires == before.acquires)
        {
            continue;
        }
        json::Value entry = json::Value::object();
        entry.set("acquires", stats.acquires - before.acquires);
        entry.set("builds", stats.clones - before.clones);
        entry.set("releases", stats.releases - before.releases);
        entry.set("peak", static_cast<int64_t>(stats.peak));
        int32_t held = 0;
        for (auto const& [heldKey, count] : pluginRegistry().heldResources())
        {
            held = heldKey == key ? count : held;
        }
        entry.set("held", static_cast<int64_t>(held));
        resources.set(key, entry);
    }
    mResult.set("resources", resources);
    mResult.set("stopped", stopped);
    mResult.set("runs", mRuns);
    mResult.set("violations", mViolations);
    mResult.set("errors", mErrors);
    mResult.set("log", logSince(0));
    return mResult;
}

} // namespace ttp::harness
