#include "request.h"

#include <algorithm>

#include "tensor_types.h"

namespace ttp::harness
{
namespace
{

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

// A member of an entry, converted; absent or null: `otherwise`.
template <typename T, typename Convert>
T member(JsonReader const& entry, char const* key, T const& otherwise, Convert&& convert)
{
    std::optional<JsonReader> const v = entry.find(key);
    return v && !v->isNull() ? convert(*v) : otherwise;
}

InputRequest inputFromJson(JsonReader const& in)
{
    InputRequest input;
    input.type = dataTypeFromName(in.at("dtype").asString());
    input.dims = toDims(in.at("dims").asInts(), "input dims");
    for (auto [key, dims] : {std::pair{"min", &input.min}, {"opt", &input.opt}, {"max", &input.max}})
    {
        *dims = member(in, key, input.dims, [key = key](JsonReader const& v) { return toDims(v.asInts(), key); });
    }
    input.ptr = member(in, "ptr", uint64_t{0}, [](JsonReader const& v) { return static_cast<uint64_t>(v.asInt()); });
    return input;
}

ShapeInputRequest shapeInputFromJson(JsonReader const& s)
{
    ShapeInputRequest shape;
    shape.values = s.at("values").asInts();
    for (auto [key, values] : {std::pair{"min", &shape.min}, {"opt", &shape.opt}, {"max", &shape.max}})
    {
        *values = member(s, key, shape.values, [](JsonReader const& v) { return v.asInts(); });
    }
    return shape;
}

} // namespace

Request Request::fromJson(JsonReader const& r)
{
    Request out;
    out.library = r.at("library").asString();
    JsonReader const plugin = r.at("plugin");
    out.name = plugin.at("name").asString();
    out.version = plugin.at("version").asString();
    out.ns = plugin.at("namespace").asString();
    if (auto const fields = r.find("fields"))
    {
        out.fields = FieldSet::fromJson(*fields);
    }
    if (auto const inputs = r.find("inputs"))
    {
        for (JsonReader const& in : inputs->items())
        {
            out.inputs.push_back(inputFromJson(in));
        }
    }
    if (auto const shapes = r.find("shape_inputs"))
    {
        for (JsonReader const& s : shapes->items())
        {
            out.shapeInputs.push_back(shapeInputFromJson(s));
        }
    }
    if (auto const tactics = r.find("tactics"); tactics && !tactics->isNull())
    {
        std::vector<int32_t> list;
        for (int64_t t : tactics->asInts())
        {
            list.push_back(static_cast<int32_t>(t));
        }
        out.tactics = list;
    }
    if (auto const invalid = r.find("invalid_fields"))
    {
        for (JsonReader const& set : invalid->items())
        {
            out.invalidFieldSets.push_back(FieldSet::fromJson(set));
        }
    }
    if (auto const v = r.find("enqueue"))
    {
        out.enqueue = v->asBool();
    }
    if (auto const v = r.find("compare_runtime_outputs"))
    {
        out.compareRuntimeOutputs = v->asBool();
    }
    if (auto const v = r.find("instances"))
    {
        out.instances = static_cast<int32_t>(std::max<int64_t>(1, v->asInt()));
    }
    if (auto const v = r.find("gate_timeout_s"))
    {
        out.gateTimeout = v->asDouble();
    }
    if (auto const v = r.find("enqueue_syncs_host"))
    {
        out.enqueueSyncsHost = v->asBool();
    }
    if (auto const v = r.find("capture_first_enqueue"))
    {
        out.captureFirstEnqueue = v->asBool();
    }
    if (auto const bench = r.find("bench"))
    {
        out.benchTactic = static_cast<int32_t>(bench->at("tactic").asInt());
        out.benchIters = static_cast<int32_t>(bench->at("iters").asInt());
        out.benchWarmup = static_cast<int32_t>(bench->at("warmup").asInt());
    }
    return out;
}

std::string Request::pluginId() const
{
    return ns + "::" + name + " v" + version;
}

} // namespace ttp::harness
