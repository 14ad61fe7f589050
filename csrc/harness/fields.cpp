#include "fields.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace ttp::harness
{
namespace
{

using FT = nvinfer1::PluginFieldType;

constexpr char kMAGIC[4] = {'T', 'T', 'P', 'F'};

struct FieldTypeName
{
    FT type;
    char const* name;
};

constexpr FieldTypeName kFIELD_TYPES[] = {{FT::kFLOAT16, "FLOAT16"}, {FT::kFLOAT32, "FLOAT32"},
    {FT::kFLOAT64, "FLOAT64"}, {FT::kINT8, "INT8"}, {FT::kINT16, "INT16"}, {FT::kINT32, "INT32"}, {FT::kCHAR, "CHAR"},
    {FT::kDIMS, "DIMS"}, {FT::kUNKNOWN, "UNKNOWN"}, {FT::kBF16, "BF16"}, {FT::kINT64, "INT64"}, {FT::kFP8, "FP8"},
    {FT::kINT4, "INT4"}, {FT::kFP4, "FP4"}};

float halfToFloat(uint16_t h)
{
    uint32_t const sign = (h >> 15) & 1U;
    int32_t const exponent = (h >> 10) & 0x1F;
    uint32_t const mantissa = h & 0x3FFU;
    float value;
    if (exponent == 0)
    {
        value = std::ldexp(static_cast<float>(mantissa), -24);
    }
    else if (exponent == 31)
    {
        value = mantissa != 0 ? NAN : INFINITY;
    }
    else
    {
        value = std::ldexp(static_cast<float>(mantissa | 0x400U), exponent - 25);
    }
    return sign ? -value : value;
}

uint16_t floatToHalf(float f)
{
    // Round-to-nearest-even through the float's bits; good enough for field values.
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    uint32_t const sign = (bits >> 16) & 0x8000U;
    int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xFF) - 127 + 15;
    uint32_t mantissa = bits & 0x7FFFFFU;
    if (((bits >> 23) & 0xFF) == 0xFF)
    {
        return static_cast<uint16_t>(sign | 0x7C00U | (mantissa ? 0x200U : 0U));
    }
    if (exponent >= 31)
    {
        return static_cast<uint16_t>(sign | 0x7C00U);
    }
    if (exponent <= 0)
    {
        if (exponent < -10)
        {
            return static_cast<uint16_t>(sign);
        }
        mantissa |= 0x800000U;
        uint32_t const shift = static_cast<uint32_t>(14 - exponent);
        uint32_t half = mantissa >> shift;
        uint32_t const rest = mantissa & ((1U << shift) - 1);
        uint32_t const mid = 1U << (shift - 1);
        half += (rest > mid || (rest == mid && (half & 1U))) ? 1U : 0U;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t half = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
    uint32_t const rest = mantissa & 0x1FFFU;
    half += (rest > 0x1000U || (rest == 0x1000U && (half & 1U))) ? 1U : 0U;
    return static_cast<uint16_t>(half);
}

template <typename T>
void put(std::vector<uint8_t>& out, T value)
{
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    out.insert(out.end(), raw, raw + sizeof(T));
}

class Reader
{
public:
    explicit Reader(std::vector<uint8_t> const& bytes)
        : mBytes(bytes)
    {
    }
    template <typename T>
    T get()
    {
        T value;
        std::memcpy(&value, take(sizeof(T)), sizeof(T));
        return value;
    }
    uint8_t const* take(size_t n)
    {
        if (mPos + n > mBytes.size())
        {
            throw std::runtime_error("serialized fields are truncated");
        }
        uint8_t const* p = mBytes.data() + mPos;
        mPos += n;
        return p;
    }

private:
    std::vector<uint8_t> const& mBytes;
    size_t mPos{0};
};

std::string hex(std::vector<uint8_t> const& bytes)
{
    static char const* digits = "0123456789abcdef";
    std::string out;
    for (uint8_t b : bytes)
    {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

std::vector<uint8_t> unhex(std::string const& text)
{
    if (text.size() % 2 != 0)
    {
        throw std::runtime_error("field 'hex' must have an even number of digits");
    }
    std::vector<uint8_t> out;
    for (size_t i = 0; i < text.size(); i += 2)
    {
        out.push_back(static_cast<uint8_t>(std::stoul(text.substr(i, 2), nullptr, 16)));
    }
    return out;
}

void encodeNumber(std::vector<uint8_t>& out, FT type, JsonReader const& v)
{
    switch (type)
    {
    case FT::kFLOAT16: put(out, floatToHalf(static_cast<float>(v.asDouble()))); break;
    case FT::kBF16:
    {
        float const f = static_cast<float>(v.asDouble());
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof(bits));
        bits += 0x7FFFU + ((bits >> 16) & 1U);
        put(out, static_cast<uint16_t>(bits >> 16));
        break;
    }
    case FT::kFLOAT32: put(out, static_cast<float>(v.asDouble())); break;
    case FT::kFLOAT64: put(out, v.asDouble()); break;
    case FT::kINT8: put(out, static_cast<int8_t>(v.asInt())); break;
    case FT::kINT16: put(out, static_cast<int16_t>(v.asInt())); break;
    case FT::kINT32: put(out, static_cast<int32_t>(v.asInt())); break;
    case FT::kINT64: put(out, static_cast<int64_t>(v.asInt())); break;
    case FT::kCHAR:
    case FT::kUNKNOWN:
    case FT::kFP8: put(out, static_cast<uint8_t>(v.asInt())); break;
    default: throw std::runtime_error(std::string("numbers cannot encode a ") + fieldTypeName(type) + " field");
    }
}

Json decodeNumber(FT type, uint8_t const* p)
{
    auto load = [p](auto value)
    {
        std::memcpy(&value, p, sizeof(value));
        return value;
    };
    switch (type)
    {
    case FT::kFLOAT16: return jsonNumber(static_cast<double>(halfToFloat(load(uint16_t{}))));
    case FT::kBF16:
    {
        uint32_t const bits = static_cast<uint32_t>(load(uint16_t{})) << 16;
        float f;
        std::memcpy(&f, &bits, sizeof(f));
        return jsonNumber(static_cast<double>(f));
    }
    case FT::kFLOAT32: return jsonNumber(static_cast<double>(load(float{})));
    case FT::kFLOAT64: return jsonNumber(load(double{}));
    case FT::kINT8: return static_cast<int64_t>(load(int8_t{}));
    case FT::kINT16: return static_cast<int64_t>(load(int16_t{}));
    case FT::kINT32: return static_cast<int64_t>(load(int32_t{}));
    case FT::kINT64: return load(int64_t{});
    default: return nullptr;
    }
}

bool isFloat(FT type)
{
    return type == FT::kFLOAT16 || type == FT::kBF16 || type == FT::kFLOAT32 || type == FT::kFLOAT64;
}

bool isNumeric(FT type)
{
    switch (type)
    {
    case FT::kFLOAT16:
    case FT::kBF16:
    case FT::kFLOAT32:
    case FT::kFLOAT64:
    case FT::kINT8:
    case FT::kINT16:
    case FT::kINT32:
    case FT::kINT64: return true;
    default: return false;
    }
}

} // namespace

char const* fieldTypeName(nvinfer1::PluginFieldType type) noexcept
{
    for (auto const& entry : kFIELD_TYPES)
    {
        if (entry.type == type)
        {
            return entry.name;
        }
    }
    return "INVALID";
}

nvinfer1::PluginFieldType fieldTypeFromName(std::string const& name)
{
    for (auto const& entry : kFIELD_TYPES)
    {
        if (name == entry.name)
        {
            return entry.type;
        }
    }
    throw std::runtime_error("unknown PluginFieldType '" + name + "'");
}

size_t fieldBytes(nvinfer1::PluginFieldType type, int32_t length)
{
    size_t const n = length > 0 ? static_cast<size_t>(length) : 0;
    switch (type)
    {
    case FT::kFLOAT16:
    case FT::kINT16:
    case FT::kBF16: return 2 * n;
    case FT::kFLOAT32:
    case FT::kINT32: return 4 * n;
    case FT::kFLOAT64:
    case FT::kINT64: return 8 * n;
    case FT::kDIMS: return sizeof(nvinfer1::Dims) * n;
    case FT::kINT4:
    case FT::kFP4: return (n + 1) / 2;
    default: return n;
    }
}

FieldSet FieldSet::fromJson(JsonReader const& fields)
{
    FieldSet out;
    for (JsonReader const& f : fields.items())
    {
        Field field;
        field.name = f.at("name").asString();
        field.type = fieldTypeFromName(f.at("type").asString());
        std::optional<JsonReader> const data = f.find("data");
        std::optional<JsonReader> const hexData = f.find("hex");
        if (hexData)
        {
            field.bytes = unhex(hexData->asString());
            field.length = static_cast<int32_t>(field.bytes.size());
        }
        else if (!data || data->isNull())
        {
            field.hasData = false;
        }
        else if (data->isString() && !(isFloat(field.type) && data->isNumber()))
        {
            std::string const& s = data->asString();
            field.bytes.assign(s.begin(), s.end());
            field.bytes.push_back(0);
            field.length = static_cast<int32_t>(s.size() + 1);
        }
        else if (data->isArray())
        {
            for (JsonReader const& v : data->items())
            {
                encodeNumber(field.bytes, field.type, v);
            }
            field.length = static_cast<int32_t>(data->size());
        }
        else
        {
            encodeNumber(field.bytes, field.type, *data);
            field.length = 1;
        }
        if (std::optional<JsonReader> const length = f.find("length"))
        {
            // Deliberately inconsistent lengths are allowed: invalid field sets test exactly that.
            field.length = static_cast<int32_t>(length->asInt());
            field.bytes.resize(std::max(field.bytes.size(), fieldBytes(field.type, field.length)));
        }
        out.mFields.push_back(std::move(field));
    }
    return out;
}

FieldSet FieldSet::fromCollection(nvinfer1::PluginFieldCollection const* fc)
{
    if (fc == nullptr)
    {
        throw std::runtime_error("the field collection is null");
    }
    if (fc->nbFields < 0 || (fc->nbFields > 0 && fc->fields == nullptr))
    {
        throw std::runtime_error("the field collection claims " + std::to_string(fc->nbFields) + " fields");
    }
    FieldSet out;
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        nvinfer1::PluginField const& pf = fc->fields[i];
        if (pf.name == nullptr)
        {
            throw std::runtime_error("field " + std::to_string(i) + " has no name");
        }
        Field field;
        field.name = pf.name;
        field.type = pf.type;
        field.length = pf.length;
        field.hasData = pf.data != nullptr;
        if (field.hasData)
        {
            auto const* p = static_cast<uint8_t const*>(pf.data);
            field.bytes.assign(p, p + fieldBytes(pf.type, pf.length));
        }
        out.mFields.push_back(std::move(field));
    }
    return out;
}

std::vector<uint8_t> FieldSet::serialize() const
{
    std::vector<uint8_t> out(kMAGIC, kMAGIC + 4);
    put(out, static_cast<uint32_t>(mFields.size()));
    for (Field const& f : mFields)
    {
        put(out, static_cast<uint32_t>(f.name.size()));
        out.insert(out.end(), f.name.begin(), f.name.end());
        put(out, static_cast<int32_t>(f.type));
        put(out, f.length);
        put(out, static_cast<uint8_t>(f.hasData ? 1 : 0));
        put(out, static_cast<uint64_t>(f.bytes.size()));
        out.insert(out.end(), f.bytes.begin(), f.bytes.end());
    }
    return out;
}

FieldSet FieldSet::deserialize(std::vector<uint8_t> const& bytes)
{
    Reader in(bytes);
    if (std::memcmp(in.take(4), kMAGIC, 4) != 0)
    {
        throw std::runtime_error("serialized fields: bad magic");
    }
    FieldSet out;
    uint32_t const count = in.get<uint32_t>();
    for (uint32_t i = 0; i < count; ++i)
    {
        Field f;
        uint32_t const nameSize = in.get<uint32_t>();
        auto const* name = in.take(nameSize);
        f.name.assign(name, name + nameSize);
        f.type = static_cast<FT>(in.get<int32_t>());
        f.length = in.get<int32_t>();
        f.hasData = in.get<uint8_t>() != 0;
        uint64_t const size = in.get<uint64_t>();
        auto const* data = in.take(size);
        f.bytes.assign(data, data + size);
        out.mFields.push_back(std::move(f));
    }
    return out;
}

Json FieldSet::toJson() const
{
    Json out = Json::array();
    for (Field const& f : mFields)
    {
        Json item = Json::object();
        item["name"] = f.name;
        item["type"] = fieldTypeName(f.type);
        item["length"] = f.length;
        if (!f.hasData)
        {
            item["data"] = nullptr;
        }
        else if (isNumeric(f.type) && f.bytes.size() >= fieldBytes(f.type, f.length))
        {
            Json values = Json::array();
            size_t const width = fieldBytes(f.type, 1);
            for (int32_t i = 0; i < f.length; ++i)
            {
                values.push_back(decodeNumber(f.type, f.bytes.data() + i * width));
            }
            item["data"] = std::move(values);
        }
        else if (f.type == FT::kCHAR)
        {
            std::string text(f.bytes.begin(), f.bytes.end());
            text = text.substr(0, text.find('\0'));
            item["data"] = text;
        }
        else
        {
            item["hex"] = hex(f.bytes);
        }
        out.push_back(std::move(item));
    }
    return out;
}

std::string FieldSet::describe() const
{
    std::string out = "{";
    Json const values = toJson();
    for (size_t i = 0; i < mFields.size(); ++i)
    {
        Json const& item = values[i];
        out += std::string(i ? ", " : "") + mFields[i].name + ": " + fieldTypeName(mFields[i].type) + " "
               + dumpJson(item.contains("data") ? item["data"] : item["hex"]);
    }
    return out + "}";
}

nvinfer1::PluginFieldCollection const* FieldSet::collection()
{
    mView.clear();
    for (Field const& f : mFields)
    {
        mView.emplace_back(f.name.c_str(), f.hasData ? f.bytes.data() : nullptr, f.type, f.length);
    }
    mCollection.nbFields = static_cast<int32_t>(mView.size());
    mCollection.fields = mView.data();
    return &mCollection;
}

bool FieldSet::operator==(FieldSet const& other) const
{
    if (mFields.size() != other.mFields.size())
    {
        return false;
    }
    for (size_t i = 0; i < mFields.size(); ++i)
    {
        Field const& a = mFields[i];
        Field const& b = other.mFields[i];
        if (a.name != b.name || a.type != b.type || a.length != b.length || a.hasData != b.hasData
            || a.bytes != b.bytes)
        {
            return false;
        }
    }
    return true;
}

} // namespace ttp::harness
