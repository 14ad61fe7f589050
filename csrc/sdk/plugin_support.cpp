#include "sdk/plugin_support.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <iterator>
#include <limits>
#include <sstream>

namespace ttp::plugin
{
namespace
{

std::atomic<nvinfer1::ILoggerFinder*> gLoggerFinder{nullptr};
// Whether the host that handed over gLoggerFinder lays ILogger/ILoggerFinder out unversioned (see below).
std::atomic<bool> gUnversionedHost{false};

// Calls virtual function number `slot` of `object` (Itanium C++ ABI: `this` is the first argument).
// Done by hand because a call through a stand-in abstract class with no implementation in this
// library is devirtualized by the compiler into __cxa_pure_virtual.
template <typename R, typename... Args>
R callVirtualSlot(void* object, int32_t slot, Args... args)
{
    using Fn = R (*)(void*, Args...);
    return (*static_cast<Fn const* const*>(object))[slot](object, args...);
}

// TensorRT 10's ILogger and ILoggerFinder are not IVersionedInterfaces: their first virtual is log() /
// findLogger(). TensorRT 11's are, so those sit behind getAPILanguage/getInterfaceInfo/destructors.
// TensorRT-RTX switched between 1.4 and 1.5 (found by loading this library into each PyPI release).
// The layout is the one of the host library that implements `finder` (its vtable lives there): one
// process may hold two hosts, e.g. TensorRT and TensorRT-RTX in one test run.
bool isUnversionedHost(void const* finder) noexcept
{
    Dl_info info{};
    if (dladdr(*static_cast<void const* const*>(finder), &info) == 0 || info.dli_fname == nullptr)
    {
        return false;
    }
    void* handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr)
    {
        return false;
    }
    using VersionFn = int32_t (*)();
    auto major = reinterpret_cast<VersionFn>(dlsym(handle, "getInferLibMajorVersion"));
    auto minor = reinterpret_cast<VersionFn>(dlsym(handle, "getInferLibMinorVersion"));
    bool unversioned = false;
    if (major != nullptr && minor != nullptr)
    {
        bool const rtx = std::strstr(info.dli_fname, "tensorrt_rtx") != nullptr;
        unversioned = rtx ? major() < 1 || (major() == 1 && minor() < 5) : major() < 11;
    }
    else
    {
        // A TensorRT without the per-part version functions predates 11.
        unversioned = dlsym(handle, "getInferLibVersion") != nullptr;
    }
    dlclose(handle);
    return unversioned;
}

char const* severityName(Severity severity) noexcept
{
    switch (severity)
    {
    case Severity::kINTERNAL_ERROR: return "INTERNAL_ERROR";
    case Severity::kERROR: return "ERROR";
    case Severity::kWARNING: return "WARNING";
    case Severity::kINFO: return "INFO";
    case Severity::kVERBOSE: return "VERBOSE";
    }
    return "LOG";
}

} // namespace

void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    gUnversionedHost.store(finder != nullptr && isUnversionedHost(finder));
    gLoggerFinder.store(finder);
}

void log(Severity severity, std::string const& message) noexcept
{
    nvinfer1::ILoggerFinder* finder = gLoggerFinder.load();
    bool const unversioned = gUnversionedHost.load();
    nvinfer1::ILogger* logger = nullptr;
    if (finder != nullptr)
    {
        try
        {
            logger = unversioned ? callVirtualSlot<nvinfer1::ILogger*>(finder, 0) : finder->findLogger();
        }
        catch (...)
        {
            logger = nullptr;
        }
    }
    if (logger == nullptr)
    {
        if (severity <= Severity::kWARNING)
        {
            std::fprintf(stderr, "[torchtrt_plugins] %s: %s\n", severityName(severity), message.c_str());
        }
        return;
    }
    if (unversioned)
    {
        callVirtualSlot<void>(logger, 0, severity, message.c_str());
    }
    else
    {
        logger->log(severity, message.c_str());
    }
}

// ------------------------------------------------------------------------------------------ fields

static_assert(
    static_cast<int32_t>(nvinfer1::PluginFieldType::kFLOAT16) == static_cast<int32_t>(sdk::FieldType::kFLOAT16)
        && static_cast<int32_t>(nvinfer1::PluginFieldType::kFLOAT32) == static_cast<int32_t>(sdk::FieldType::kFLOAT32)
        && static_cast<int32_t>(nvinfer1::PluginFieldType::kFLOAT64) == static_cast<int32_t>(sdk::FieldType::kFLOAT64)
        && static_cast<int32_t>(nvinfer1::PluginFieldType::kINT8) == static_cast<int32_t>(sdk::FieldType::kINT8)
        && static_cast<int32_t>(nvinfer1::PluginFieldType::kINT16) == static_cast<int32_t>(sdk::FieldType::kINT16)
        && static_cast<int32_t>(nvinfer1::PluginFieldType::kINT32) == static_cast<int32_t>(sdk::FieldType::kINT32)
        && static_cast<int32_t>(nvinfer1::PluginFieldType::kCHAR) == static_cast<int32_t>(sdk::FieldType::kCHAR)
        && static_cast<int32_t>(nvinfer1::PluginFieldType::kBF16) == static_cast<int32_t>(sdk::FieldType::kBF16)
        && static_cast<int32_t>(nvinfer1::PluginFieldType::kINT64) == static_cast<int32_t>(sdk::FieldType::kINT64),
    "sdk::FieldType must hold nvinfer1::PluginFieldType's values");

namespace
{

// An integer field's value reaches the launchers as a double (LaunchArgs::scalars): it must be one exactly.
constexpr int64_t kLARGEST_EXACT_INTEGER = int64_t{1} << 53;

// "field 'eps'": how createPlugin's messages name a field.
std::string fieldSubject(FieldDecl const& field)
{
    return concat("field '", field.name, "'");
}

} // namespace

std::string fieldTypeName(nvinfer1::PluginFieldType type)
{
    static constexpr char const* kNAMES[] = {"FLOAT16", "FLOAT32", "FLOAT64", "INT8", "INT16", "INT32", "CHAR", "DIMS",
        "UNKNOWN", "BF16", "INT64", "FP8", "INT4", "FP4"};
    auto const index = static_cast<int32_t>(type);
    if (index >= 0 && index < static_cast<int32_t>(std::size(kNAMES)))
    {
        return kNAMES[index];
    }
    return concat("PluginFieldType ", index);
}

// TensorRT's ONNX parser picks a plugin field's type from the attribute, not from getFieldNames: onnx-tensorrt's
// loadFields (onnxOpImporters.cpp, importPluginFromRegistry's field loader; builtin_op_importers.cpp before TensorRT
// 10) makes an INT/INTS attribute kINT32 (read with get<int32_t>) and a FLOAT/FLOATS attribute kFLOAT32, and rejects
// an INT64 tensor attribute; TensorRT-RTX 1.7.1 also delivers a DOUBLE tensor as kFLOAT32 (torchtrt_plugins/onnx.py).
// So an INT64 field must take kINT32 and a FLOAT64 field kFLOAT32; no other type stands in for another.
bool acceptsType(FieldDecl const& field, nvinfer1::PluginFieldType given) noexcept
{
    using FT = nvinfer1::PluginFieldType;
    FT const type = pluginFieldType(field);
    return given == type || (type == FT::kINT64 && given == FT::kINT32)
           || (type == FT::kFLOAT64 && given == FT::kFLOAT32);
}

std::string typeExpectation(FieldDecl const& field)
{
    using FT = nvinfer1::PluginFieldType;
    switch (pluginFieldType(field))
    {
    case FT::kINT64: return "INT64 (or INT32, as TensorRT's ONNX parser delivers an INT attribute)";
    case FT::kFLOAT64: return "FLOAT64 (or FLOAT32, as TensorRT's ONNX parser delivers a FLOAT attribute)";
    default: return fieldTypeName(pluginFieldType(field));
    }
}

FieldReader::FieldReader(
    char const* plugin, nvinfer1::PluginFieldCollection const* fc, nvinfer1::PluginFieldCollection const& known)
    : mPlugin(plugin)
    , mFc(fc)
{
    if (fc == nullptr)
    {
        return;
    }
    if (fc->nbFields < 0 || (fc->nbFields > 0 && fc->fields == nullptr))
    {
        throw PluginError(concat(
            "the field collection claims ", fc->nbFields, " fields", fc->fields == nullptr ? " but has none" : ""));
    }
    auto knownNames = [&]
    {
        std::string names;
        for (int32_t k = 0; k < known.nbFields; ++k)
        {
            names += concat(k == 0 ? "" : ", ", known.fields[k].name);
        }
        return names;
    };
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        char const* name = fc->fields[i].name;
        if (name == nullptr)
        {
            throw PluginError(concat("field ", i, " has no name (expected one of: ", knownNames(), ")"));
        }
        bool isKnown = false;
        for (int32_t k = 0; k < known.nbFields && !isKnown; ++k)
        {
            isKnown = std::strcmp(name, known.fields[k].name) == 0;
        }
        // An unknown (e.g. misspelled) field would otherwise be silently replaced by a default.
        if (!isKnown)
        {
            throw PluginError(concat("unknown field '", name, "' (expected one of: ", knownNames(), ")"));
        }
        int32_t count = 0;
        for (int32_t j = 0; j < fc->nbFields; ++j)
        {
            count += fc->fields[j].name != nullptr && std::strcmp(name, fc->fields[j].name) == 0 ? 1 : 0;
        }
        if (count > 1)
        {
            throw PluginError(concat("field '", name, "' is given ", count, " times (expected once)"));
        }
    }
}

nvinfer1::PluginField const* FieldReader::find(char const* name) const noexcept
{
    for (int32_t i = 0; mFc != nullptr && i < mFc->nbFields; ++i)
    {
        if (std::strcmp(mFc->fields[i].name, name) == 0)
        {
            return &mFc->fields[i];
        }
    }
    return nullptr;
}

double FieldReader::number(FieldDecl const& desc) const
{
    using FT = nvinfer1::PluginFieldType;
    nvinfer1::PluginField const* found = find(desc.name);
    if (found == nullptr)
    {
        if (desc.required)
        {
            throw PluginError(concat("missing field '", desc.name, "' (expected ", sdk::expectation(desc, true), ")"));
        }
        return desc.defaultValue;
    }
    if (found->data == nullptr || found->length != 1)
    {
        throw PluginError(concat("field '", desc.name, "' must hold exactly one value, got length ", found->length,
            found->data == nullptr ? " and no data" : ""));
    }
    if (!acceptsType(desc, found->type))
    {
        throw PluginError(concat("field '", desc.name, "' has unsupported PluginFieldType ", fieldTypeName(found->type),
            " (expected ", typeExpectation(desc), ")"));
    }
    if (found->type != FT::kINT32 && found->type != FT::kINT64 && found->type != FT::kFLOAT32
        && found->type != FT::kFLOAT64)
    {
        throw PluginError(concat("field '", desc.name, "': its PluginFieldType ", fieldTypeName(found->type),
            " cannot be read (fields are INT32, INT64, FLOAT32 or FLOAT64)"));
    }
    if (desc.kind != sdk::ScalarKind::kFLOAT)
    {
        int64_t const raw = found->type == FT::kINT64 ? *static_cast<int64_t const*>(found->data)
                                                      : *static_cast<int32_t const*>(found->data);
        auto const value = static_cast<double>(raw);
        // Compared as integers: -2^63 + 1 and -2^63 are one double.
        if (value == desc.shapeInputSentinel && raw == static_cast<int64_t>(desc.shapeInputSentinel))
        {
            return value;
        }
        if (!sdk::inRange(desc, value))
        {
            throw PluginError(sdk::outOfRange(desc, fieldSubject(desc), std::to_string(raw), true));
        }
        // The launchers take scalars as doubles (LaunchArgs::scalars).
        if (raw < -kLARGEST_EXACT_INTEGER || raw > kLARGEST_EXACT_INTEGER)
        {
            throw PluginError(concat(fieldSubject(desc), " must be ", sdk::expectation(desc, true),
                " and within +-2^53 (the launchers take it as a double), got ", raw));
        }
        return value;
    }
    double const value = found->type == FT::kFLOAT32 ? *static_cast<float const*>(found->data)
                                                     : *static_cast<double const*>(found->data);
    if (!sdk::inRange(desc, value))
    {
        // A FLOAT32 as given: through a double, 0.1f would read 0.10000000149011612.
        std::string const got = found->type == FT::kFLOAT32 ? sdk::pythonRepr(*static_cast<float const*>(found->data))
                                                            : sdk::pythonRepr(value);
        throw PluginError(sdk::outOfRange(desc, fieldSubject(desc), got, true));
    }
    return value;
}

void FieldWriter::clear()
{
    mStorage.clear();
    mFields.clear();
}

void FieldWriter::add(FieldDecl const& desc, double value)
{
    mStorage.emplace_back(8);
    uint8_t* bytes = mStorage.back().data();
    switch (pluginFieldType(desc))
    {
    case nvinfer1::PluginFieldType::kFLOAT32:
    {
        float const v = static_cast<float>(value);
        std::memcpy(bytes, &v, sizeof(v));
        break;
    }
    case nvinfer1::PluginFieldType::kFLOAT64: std::memcpy(bytes, &value, sizeof(value)); break;
    case nvinfer1::PluginFieldType::kINT32:
    {
        int32_t const v = static_cast<int32_t>(value);
        std::memcpy(bytes, &v, sizeof(v));
        break;
    }
    case nvinfer1::PluginFieldType::kINT64:
    {
        int64_t const v = static_cast<int64_t>(value);
        std::memcpy(bytes, &v, sizeof(v));
        break;
    }
    default:
        throw PluginError(
            concat("field '", desc.name, "': cannot serialize PluginFieldType ", static_cast<int32_t>(desc.type)));
    }
    mFields.emplace_back(desc.name, nullptr, pluginFieldType(desc), 1);
}

void FieldWriter::addArray(char const* name, nvinfer1::PluginFieldType type, std::vector<uint8_t> bytes, int32_t length)
{
    mStorage.push_back(std::move(bytes));
    mFields.emplace_back(name, nullptr, type, length);
}

nvinfer1::PluginFieldCollection const* FieldWriter::collection()
{
    // Data pointers into mStorage are taken only now that it has stopped growing.
    for (size_t i = 0; i < mFields.size(); ++i)
    {
        mFields[i].data = mStorage[i].data();
    }
    mCollection.nbFields = static_cast<int32_t>(mFields.size());
    mCollection.fields = mFields.data();
    return &mCollection;
}

// ------------------------------------------------------------------------------------------ tensors

DType toKernelDType(nvinfer1::DataType type)
{
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT: return DType::kFLOAT32;
    case nvinfer1::DataType::kHALF: return DType::kFLOAT16;
    case nvinfer1::DataType::kBF16: return DType::kBFLOAT16;
    case nvinfer1::DataType::kINT8: return DType::kINT8;
    case nvinfer1::DataType::kINT32: return DType::kINT32;
    case nvinfer1::DataType::kINT64: return DType::kINT64;
    case nvinfer1::DataType::kBOOL: return DType::kBOOL;
    case nvinfer1::DataType::kFP8: return DType::kFLOAT8_E4M3;
    default: throw PluginError(concat("unsupported data type ", dataTypeName(type)));
    }
}

char const* dataTypeName(nvinfer1::DataType type) noexcept
{
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT: return "FLOAT";
    case nvinfer1::DataType::kHALF: return "HALF";
    case nvinfer1::DataType::kINT8: return "INT8";
    case nvinfer1::DataType::kINT32: return "INT32";
    case nvinfer1::DataType::kBOOL: return "BOOL";
    case nvinfer1::DataType::kUINT8: return "UINT8";
    case nvinfer1::DataType::kFP8: return "FP8";
    case nvinfer1::DataType::kBF16: return "BF16";
    case nvinfer1::DataType::kINT64: return "INT64";
    case nvinfer1::DataType::kINT4: return "INT4";
    default: return "UNKNOWN";
    }
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

std::string dimsString(nvinfer1::Dims const& dims)
{
    std::ostringstream out;
    out << "(";
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        out << (i ? ", " : "") << dims.d[i];
    }
    out << ")";
    return out.str();
}

std::vector<nvinfer1::IPluginCreatorInterface*>& CreatorRegistry::creators()
{
    static std::vector<nvinfer1::IPluginCreatorInterface*> all;
    return all;
}

} // namespace ttp::plugin
