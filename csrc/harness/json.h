// A small JSON value with a parser and a writer: the harness's C API speaks JSON so that it needs no
// dependency beyond the C++ standard library. Integers keep 64 bits (device pointers travel as integers);
// NaN and Infinity are read and written the way Python's json module does.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ttp::harness::json
{

class Error : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

class Value
{
public:
    enum class Kind
    {
        kNULL,
        kBOOL,
        kINT,
        kDOUBLE,
        kSTRING,
        kARRAY,
        kOBJECT
    };

    Value() = default;
    Value(std::nullptr_t)
    {
    }
    Value(bool value)
        : mKind(Kind::kBOOL)
        , mBool(value)
    {
    }
    Value(int32_t value)
        : Value(static_cast<int64_t>(value))
    {
    }
    Value(int64_t value)
        : mKind(Kind::kINT)
        , mInt(value)
    {
    }
    Value(uint64_t value)
        : Value(static_cast<int64_t>(value))
    {
    }
    Value(double value)
        : mKind(Kind::kDOUBLE)
        , mDouble(value)
    {
    }
    Value(std::string value)
        : mKind(Kind::kSTRING)
        , mString(std::move(value))
    {
    }
    Value(char const* value)
        : Value(std::string(value == nullptr ? "" : value))
    {
    }

    static Value array();
    static Value object();
    template <typename Range>
    static Value arrayOf(Range const& range)
    {
        Value out = array();
        for (auto const& item : range)
        {
            out.push(Value(item));
        }
        return out;
    }

    Kind kind() const noexcept
    {
        return mKind;
    }
    bool isNull() const noexcept
    {
        return mKind == Kind::kNULL;
    }
    bool isNumber() const noexcept
    {
        return mKind == Kind::kINT || mKind == Kind::kDOUBLE;
    }
    bool isString() const noexcept
    {
        return mKind == Kind::kSTRING;
    }
    bool isArray() const noexcept
    {
        return mKind == Kind::kARRAY;
    }
    bool isObject() const noexcept
    {
        return mKind == Kind::kOBJECT;
    }

    // Typed access; throws Error naming the expected kind.
    bool asBool() const;
    int64_t asInt() const;
    double asDouble() const;
    std::string const& asString() const;
    std::vector<Value> const& items() const;
    std::vector<int64_t> asInts() const;

    // Objects: member lookup (nullptr / Error when missing) and ordered insertion.
    Value const* find(std::string_view key) const;
    Value const& at(std::string_view key) const;
    std::vector<std::string> const& keys() const;
    Value& set(std::string key, Value value);

    Value& push(Value value);
    size_t size() const noexcept
    {
        return mItems.size();
    }

    std::string dump() const;
    static Value parse(std::string_view text);

private:
    void dumpTo(std::string& out) const;

    Kind mKind{Kind::kNULL};
    bool mBool{false};
    int64_t mInt{0};
    double mDouble{0.0};
    std::string mString;
    std::vector<std::string> mKeys; // objects: mKeys[i] names mItems[i]
    std::vector<Value> mItems;
};

} // namespace ttp::harness::json
