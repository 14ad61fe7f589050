#include "tensor_types.h"

#include <algorithm>

#include "request.h"

namespace ttp::harness
{
namespace
{

using nvinfer1::DataType;
using nvinfer1::TensorFormat;

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

} // namespace

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

Json dimsJson(nvinfer1::Dims const& dims)
{
    return std::vector<int64_t>(dims.d, dims.d + std::clamp(dims.nbDims, 0, nvinfer1::Dims::MAX_DIMS));
}

std::string dimsText(nvinfer1::Dims const& dims)
{
    return listText(std::vector<int64_t>(dims.d, dims.d + std::clamp(dims.nbDims, 0, nvinfer1::Dims::MAX_DIMS)));
}

std::string combinationText(Combination const& c)
{
    std::string out = "(";
    for (size_t i = 0; i < c.size(); ++i)
    {
        out += std::string(i ? ", " : "") + dataTypeName(c[i].type) + "/" + formatName(c[i].format);
    }
    return out + ")";
}

Json combinationJson(Combination const& c)
{
    Json out = Json::array();
    for (IOFormat const& io : c)
    {
        out.push_back({dataTypeName(io.type), formatName(io.format)});
    }
    return out;
}

} // namespace ttp::harness
