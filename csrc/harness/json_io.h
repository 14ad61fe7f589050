// The harness's JSON, through nlohmann/json: a request read with errors that name the member and what it must be,
// and reports written as strict JSON. JSON has no NaN or infinity; like the Python side (harness.py), both
// directions spell non-finite floats as the strings Python's json module uses: "NaN", "Infinity", "-Infinity".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ttp::harness
{

// Objects keep the order their members were written in.
using Json = nlohmann::ordered_json;

// A request that is not JSON, or a member missing or of the wrong type.
class RequestError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

// One value of a request and where it sits ("inputs[1].dims"; the request itself: ""): typed reads throw
// RequestError naming both.
class JsonReader
{
public:
    explicit JsonReader(Json const& value, std::string path = "");

    // Parses `text`; RequestError with the position where it is not JSON.
    static Json parse(std::string_view text);

    // Required member; the value must be an object.
    JsonReader at(std::string const& key) const;
    // The member, or nullopt where it is absent; the value must be an object.
    std::optional<JsonReader> find(std::string const& key) const;
    // The elements; the value must be an array.
    std::vector<JsonReader> items() const;

    bool isNull() const noexcept
    {
        return mValue->is_null();
    }
    bool isString() const noexcept
    {
        return mValue->is_string();
    }
    // A number, or a string naming a non-finite one.
    bool isNumber() const;
    bool isArray() const noexcept
    {
        return mValue->is_array();
    }
    size_t size() const noexcept
    {
        return mValue->size();
    }

    bool asBool() const;
    // An integer, or a float with an integral value, within int64.
    int64_t asInt() const;
    // A number, or one of the strings "NaN", "Infinity", "-Infinity".
    double asDouble() const;
    std::string const& asString() const;
    std::vector<int64_t> asInts() const;

private:
    std::string member(std::string const& key) const;
    [[noreturn]] void wrongType(char const* expected) const;

    Json const* mValue;
    std::string mPath;
};

// A float for a report: a JSON number, or the string naming a non-finite value.
Json jsonNumber(double value);
// Compact JSON text; bytes that are not UTF-8 (a plugin's log line, a fuzzed name) become U+FFFD.
std::string dumpJson(Json const& value);
// "[2, 3, 4]": a list of integers for messages.
std::string listText(std::vector<int64_t> const& values);

} // namespace ttp::harness
