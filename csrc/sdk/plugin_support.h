// The TensorRT side of the generic plugin (sdk/declared_plugin.h), which PluginBase (plugins/plugin_base.h) shares:
// - logging through the TensorRT logger found via setLoggerFinder (stderr before one is set);
// - `guarded`: no exception crosses the TensorRT API; it is logged and turned into an error value;
// - FieldReader and FieldWriter over the fields' one description (sdk/fields.h), driving createPlugin parsing (with
//   range checks) and getFieldsToSerialize, so that the two cannot drift apart;
// - the four IPluginV3 interfaces of one object, and the creators getCreators hands out.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sdk/dtypes.h"
#include "sdk/fields.h"
#include "sdk/rules.h"

namespace ttp::plugin
{

constexpr char const* kNAMESPACE = "torchtrt";

using Severity = nvinfer1::ILogger::Severity;

void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept;
void log(Severity severity, std::string const& message) noexcept;

// An error a caller caused (bad field, unsupported shape): logged as kERROR by `guarded`.
class PluginError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

// Streams its arguments into one string (the SDK's shape rules, which plugins share, define it).
using sdk::rules::concat;

// Runs fn(); any exception is logged as "<plugin>::<method>: <what>" and `onError` returned.
template <typename R, typename F>
R guarded(char const* plugin, char const* method, R onError, F&& fn) noexcept
{
    try
    {
        return fn();
    }
    catch (std::exception const& e)
    {
        log(Severity::kERROR, concat(kNAMESPACE, "::", plugin, " ", method, ": ", e.what()));
    }
    catch (...)
    {
        log(Severity::kERROR, concat(kNAMESPACE, "::", plugin, " ", method, ": unknown exception"));
    }
    return onError;
}

// ------------------------------------------------------------------------------------------ fields

using sdk::FieldDecl;

// The PluginFieldType a field is advertised and serialized as.
inline nvinfer1::PluginFieldType pluginFieldType(FieldDecl const& field) noexcept
{
    return static_cast<nvinfer1::PluginFieldType>(field.type);
}

// Whether createPlugin takes `field` as `given`: its own type, or the one TensorRT's ONNX parser delivers it as.
bool acceptsType(FieldDecl const& field, nvinfer1::PluginFieldType given) noexcept;
// "FLOAT64 (or FLOAT32, as TensorRT's ONNX parser delivers a FLOAT attribute)"
std::string typeExpectation(FieldDecl const& field);

// "INT64", "FLOAT32", ...; "PluginFieldType <n>" for a value outside the enumeration.
std::string fieldTypeName(nvinfer1::PluginFieldType type);

// Reads and validates the fields of a PluginFieldCollection: they come from plans and ONNX graphs others wrote, so
// createPlugin is a trust boundary. The constructor checks the collection as a whole against `known` (the creator's
// getFieldNames): a valid count, and every field named, known and given once; number() checks one field's type,
// length and value. Both throw PluginError naming the field and what was expected.
class FieldReader
{
public:
    FieldReader(
        char const* plugin, nvinfer1::PluginFieldCollection const* fc, nvinfer1::PluginFieldCollection const& known);

    double number(FieldDecl const& desc) const;
    float getFloat(FieldDecl const& desc) const
    {
        return static_cast<float>(number(desc));
    }
    int64_t getInt(FieldDecl const& desc) const
    {
        return static_cast<int64_t>(number(desc));
    }
    // The field named `name` as given (nullptr when absent), for a caller that checks an array field itself.
    nvinfer1::PluginField const* find(char const* name) const noexcept;

private:
    char const* mPlugin;
    nvinfer1::PluginFieldCollection const* mFc;
};

// Owns the storage behind a PluginFieldCollection returned from getFieldsToSerialize.
class FieldWriter
{
public:
    void clear();
    void add(FieldDecl const& desc, double value);
    // An array field: `length` elements of `type` in `bytes` (copied).
    void addArray(char const* name, nvinfer1::PluginFieldType type, std::vector<uint8_t> bytes, int32_t length);
    nvinfer1::PluginFieldCollection const* collection();

private:
    std::vector<std::vector<uint8_t>> mStorage;
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mCollection{};
};

// ------------------------------------------------------------------------------------------ tensors

// Maps a TensorRT data type onto the kernel layer's; throws PluginError for types we never accept.
DType toKernelDType(nvinfer1::DataType type);
char const* dataTypeName(nvinfer1::DataType type) noexcept;
int64_t volume(nvinfer1::Dims const& dims) noexcept;
std::string dimsString(nvinfer1::Dims const& dims);

// ------------------------------------------------------------------------------------------ plugin base

// The four IPluginV3 interfaces of one plugin object and the capability lookup over them, shared by PluginBase
// and the SDK's generic plugin. `Core` is IPluginV3OneCore or a class deriving from it; `Build` is
// IPluginV3OneBuild or a class deriving from it (IPluginV3OneBuildV2 for aliased outputs).
template <typename Core = nvinfer1::IPluginV3OneCore, typename Build = nvinfer1::IPluginV3OneBuild>
class PluginInterfaces : public nvinfer1::IPluginV3, public Core, public Build, public nvinfer1::IPluginV3OneRuntime
{
public:
    PluginInterfaces() = default;
    template <typename Arg>
    PluginInterfaces(std::in_place_t /*tag*/, Arg&& coreArg)
        : Core(std::forward<Arg>(coreArg))
    {
    }
    template <typename CoreArg, typename BuildArg>
    PluginInterfaces(std::in_place_t /*tag*/, CoreArg&& coreArg, BuildArg&& buildArg)
        : Core(std::forward<CoreArg>(coreArg))
        , Build(std::forward<BuildArg>(buildArg))
    {
    }
    PluginInterfaces(PluginInterfaces const& other)
        : nvinfer1::IPluginV3(other)
        , Core(other)
        , Build(other)
        , nvinfer1::IPluginV3OneRuntime(other)
    {
    }
    PluginInterfaces& operator=(PluginInterfaces const&) = delete;

    nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept override
    {
        switch (type)
        {
        case nvinfer1::PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
        case nvinfer1::PluginCapabilityType::kBUILD: return static_cast<Build*>(this);
        case nvinfer1::PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
        }
        return nullptr;
    }
};

// ------------------------------------------------------------------------------------------ creators

class CreatorRegistry
{
public:
    static std::vector<nvinfer1::IPluginCreatorInterface*>& creators();
};

} // namespace ttp::plugin
