#include "plugin_common.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <limits>

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

FieldKind FieldDesc::kind() const noexcept
{
    switch (type)
    {
    case nvinfer1::PluginFieldType::kFLOAT16:
    case nvinfer1::PluginFieldType::kFLOAT32:
    case nvinfer1::PluginFieldType::kFLOAT64:
    case nvinfer1::PluginFieldType::kBF16: return FieldKind::kFLOAT;
    default: return FieldKind::kINT;
    }
}

std::string FieldDesc::expectation() const
{
    std::ostringstream out;
    out << (kind() == FieldKind::kFLOAT ? "a float" : "an integer");
    if (std::isfinite(min))
    {
        out << (minInclusive ? " >= " : " > ") << min;
    }
    if (std::isfinite(max))
    {
        out << (std::isfinite(min) ? " and" : "") << " <= " << max;
    }
    if (!std::isnan(shapeInputSentinel))
    {
        out << " (or " << shapeInputSentinel << ": taken from a shape input)";
    }
    return out.str();
}

FieldReader::FieldReader(char const* plugin, nvinfer1::PluginFieldCollection const* fc)
    : mPlugin(plugin)
    , mFc(fc)
{
    if (fc != nullptr && fc->nbFields > 0 && fc->fields == nullptr)
    {
        throw PluginError(concat("field collection claims ", fc->nbFields, " fields but has none"));
    }
}

double FieldReader::number(FieldDesc const& desc) const
{
    nvinfer1::PluginField const* found = nullptr;
    for (int32_t i = 0; mFc != nullptr && i < mFc->nbFields; ++i)
    {
        if (mFc->fields[i].name != nullptr && std::strcmp(mFc->fields[i].name, desc.name) == 0)
        {
            found = &mFc->fields[i];
        }
    }
    if (found == nullptr)
    {
        if (desc.required)
        {
            throw PluginError(concat("missing field '", desc.name, "' (expected ", desc.expectation(), ")"));
        }
        return desc.defaultValue;
    }
    if (found->data == nullptr || found->length != 1)
    {
        throw PluginError(concat("field '", desc.name, "' must hold exactly one value, got length ", found->length,
            found->data == nullptr ? " and no data" : ""));
    }
    double value = 0;
    bool const wantFloat = desc.kind() == FieldKind::kFLOAT;
    switch (found->type)
    {
    case nvinfer1::PluginFieldType::kFLOAT32: value = *static_cast<float const*>(found->data); break;
    case nvinfer1::PluginFieldType::kFLOAT64: value = *static_cast<double const*>(found->data); break;
    case nvinfer1::PluginFieldType::kINT8: value = *static_cast<int8_t const*>(found->data); break;
    case nvinfer1::PluginFieldType::kINT16: value = *static_cast<int16_t const*>(found->data); break;
    case nvinfer1::PluginFieldType::kINT32: value = *static_cast<int32_t const*>(found->data); break;
    case nvinfer1::PluginFieldType::kINT64:
        value = static_cast<double>(*static_cast<int64_t const*>(found->data));
        break;
    default:
        throw PluginError(concat("field '", desc.name, "' has unsupported PluginFieldType ",
            static_cast<int32_t>(found->type), " (expected ", desc.expectation(), ")"));
    }
    bool const isFloatType
        = found->type == nvinfer1::PluginFieldType::kFLOAT32 || found->type == nvinfer1::PluginFieldType::kFLOAT64;
    if (!wantFloat && isFloatType)
    {
        throw PluginError(concat("field '", desc.name, "' must be ", desc.expectation(), ", got a float field"));
    }
    if (desc.isShapeInputSentinel(value))
    {
        return value;
    }
    bool const lowOk = desc.minInclusive ? value >= desc.min : value > desc.min;
    if (!std::isfinite(value) || !lowOk || value > desc.max)
    {
        throw PluginError(concat("field '", desc.name, "' must be ", desc.expectation(), ", got ", value));
    }
    return value;
}

void FieldWriter::clear()
{
    mStorage.clear();
    mFields.clear();
}

void FieldWriter::add(FieldDesc const& desc, double value)
{
    mStorage.emplace_back();
    uint8_t* bytes = mStorage.back().data();
    switch (desc.type)
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
        throw PluginError(concat("field '", desc.name, "': cannot serialize PluginFieldType ", int32_t(desc.type)));
    }
    mFields.emplace_back(desc.name, nullptr, desc.type, 1);
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
