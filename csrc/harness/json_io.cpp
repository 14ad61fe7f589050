#include "json_io.h"

#include <cmath>
#include <limits>

namespace ttp::harness
{
namespace
{

char const* typeName(Json const& value)
{
    switch (value.type())
    {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    default: return "an unsupported value";
    }
}

struct NonFinite
{
    char const* name;
    double value;
};
NonFinite const kNON_FINITE[] = {{"NaN", std::numeric_limits<double>::quiet_NaN()},
    {"Infinity", std::numeric_limits<double>::infinity()}, {"-Infinity", -std::numeric_limits<double>::infinity()}};

// The non-finite float a string names, or nullptr.
NonFinite const* nonFinite(Json const& value)
{
    for (NonFinite const& n : kNON_FINITE)
    {
        if (value.is_string() && value.get_ref<std::string const&>() == n.name)
        {
            return &n;
        }
    }
    return nullptr;
}

} // namespace

JsonReader::JsonReader(Json const& value, std::string path)
    : mValue(&value)
    , mPath(std::move(path))
{
}

Json JsonReader::parse(std::string_view text)
{
    try
    {
        return Json::parse(text);
    }
    catch (Json::parse_error const& e)
    {
        throw RequestError(std::string("the request is not valid JSON: ") + e.what());
    }
}

std::string JsonReader::member(std::string const& key) const
{
    return mPath.empty() ? key : mPath + "." + key;
}

void JsonReader::wrongType(char const* expected) const
{
    std::string const what = mPath.empty() ? std::string("the request") : "'" + mPath + "'";
    throw RequestError("request: " + what + " must be " + expected + ", got " + typeName(*mValue));
}

JsonReader JsonReader::at(std::string const& key) const
{
    std::optional<JsonReader> found = find(key);
    if (!found)
    {
        throw RequestError("request: '" + member(key) + "' is missing");
    }
    return *found;
}

std::optional<JsonReader> JsonReader::find(std::string const& key) const
{
    if (!mValue->is_object())
    {
        wrongType("an object");
    }
    auto const found = mValue->find(key);
    if (found == mValue->end())
    {
        return std::nullopt;
    }
    return JsonReader(*found, member(key));
}

std::vector<JsonReader> JsonReader::items() const
{
    if (!mValue->is_array())
    {
        wrongType("an array");
    }
    std::vector<JsonReader> out;
    for (size_t i = 0; i < mValue->size(); ++i)
    {
        out.emplace_back((*mValue)[i], mPath + "[" + std::to_string(i) + "]");
    }
    return out;
}

bool JsonReader::asBool() const
{
    if (!mValue->is_boolean())
    {
        wrongType("a boolean");
    }
    return mValue->get<bool>();
}

int64_t JsonReader::asInt() const
{
    if (mValue->is_number_unsigned())
    {
        uint64_t const value = mValue->get<uint64_t>();
        if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        {
            wrongType("an integer within int64");
        }
        return static_cast<int64_t>(value);
    }
    if (mValue->is_number_integer())
    {
        return mValue->get<int64_t>();
    }
    if (mValue->is_number_float())
    {
        double const value = mValue->get<double>();
        if (std::nearbyint(value) == value && std::fabs(value) < 9.2e18)
        {
            return static_cast<int64_t>(value);
        }
    }
    wrongType("an integer");
}

bool JsonReader::isNumber() const
{
    return mValue->is_number() || nonFinite(*mValue) != nullptr;
}

double JsonReader::asDouble() const
{
    if (mValue->is_number())
    {
        return mValue->get<double>();
    }
    if (NonFinite const* n = nonFinite(*mValue))
    {
        return n->value;
    }
    wrongType("a number (or \"NaN\", \"Infinity\", \"-Infinity\")");
}

std::string const& JsonReader::asString() const
{
    if (!mValue->is_string())
    {
        wrongType("a string");
    }
    return mValue->get_ref<std::string const&>();
}

std::vector<int64_t> JsonReader::asInts() const
{
    std::vector<int64_t> out;
    for (JsonReader const& item : items())
    {
        out.push_back(item.asInt());
    }
    return out;
}

Json jsonNumber(double value)
{
    if (std::isnan(value))
    {
        return kNON_FINITE[0].name;
    }
    if (std::isinf(value))
    {
        return value > 0 ? kNON_FINITE[1].name : kNON_FINITE[2].name;
    }
    return value;
}

std::string dumpJson(Json const& value)
{
    return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string listText(std::vector<int64_t> const& values)
{
    std::string out = "[";
    for (size_t i = 0; i < values.size(); ++i)
    {
        out += (i ? ", " : "") + std::to_string(values[i]);
    }
    return out + "]";
}

} // namespace ttp::harness
