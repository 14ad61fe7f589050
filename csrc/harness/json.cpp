#include "json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace ttp::harness::json
{
namespace
{

char const* kindName(Value::Kind kind)
{
    switch (kind)
    {
    case Value::Kind::kNULL: return "null";
    case Value::Kind::kBOOL: return "a boolean";
    case Value::Kind::kINT: return "an integer";
    case Value::Kind::kDOUBLE: return "a number";
    case Value::Kind::kSTRING: return "a string";
    case Value::Kind::kARRAY: return "an array";
    case Value::Kind::kOBJECT: return "an object";
    }
    return "?";
}

[[noreturn]] void wrongKind(char const* wanted, Value::Kind got)
{
    throw Error(std::string("JSON: expected ") + wanted + ", got " + kindName(got));
}

void appendUtf8(std::string& out, uint32_t cp)
{
    if (cp < 0x80)
    {
        out += static_cast<char>(cp);
    }
    else if (cp < 0x800)
    {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    else if (cp < 0x10000)
    {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    else
    {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

void writeString(std::string& out, std::string const& s)
{
    out += '"';
    for (char c : s)
    {
        switch (c)
        {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20)
            {
                char buf[8];
                std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
                out += buf;
            }
            else
            {
                out += c;
            }
        }
    }
    out += '"';
}

class Parser
{
public:
    explicit Parser(std::string_view text)
        : mText(text)
    {
    }

    Value document()
    {
        Value value = parseValue(0);
        skipSpace();
        if (mPos != mText.size())
        {
            fail("trailing characters");
        }
        return value;
    }

private:
    static constexpr int kMAX_DEPTH = 256;

    [[noreturn]] void fail(std::string const& what) const
    {
        throw Error("JSON parse error at offset " + std::to_string(mPos) + ": " + what);
    }

    void skipSpace()
    {
        while (mPos < mText.size()
               && (mText[mPos] == ' ' || mText[mPos] == '\n' || mText[mPos] == '\r' || mText[mPos] == '\t'))
        {
            ++mPos;
        }
    }

    bool consume(std::string_view word)
    {
        if (mText.substr(mPos, word.size()) == word)
        {
            mPos += word.size();
            return true;
        }
        return false;
    }

    Value parseValue(int depth)
    {
        if (depth > kMAX_DEPTH)
        {
            fail("nesting too deep");
        }
        skipSpace();
        if (mPos >= mText.size())
        {
            fail("unexpected end of input");
        }
        char const c = mText[mPos];
        if (c == '{')
        {
            return parseObject(depth);
        }
        if (c == '[')
        {
            return parseArray(depth);
        }
        if (c == '"')
        {
            return Value(parseString());
        }
        if (consume("true"))
        {
            return Value(true);
        }
        if (consume("false"))
        {
            return Value(false);
        }
        if (consume("null"))
        {
            return Value();
        }
        if (consume("NaN"))
        {
            return Value(std::numeric_limits<double>::quiet_NaN());
        }
        if (consume("Infinity"))
        {
            return Value(std::numeric_limits<double>::infinity());
        }
        if (consume("-Infinity"))
        {
            return Value(-std::numeric_limits<double>::infinity());
        }
        return parseNumber();
    }

    Value parseObject(int depth)
    {
        Value out = Value::object();
        ++mPos;
        skipSpace();
        if (consume("}"))
        {
            return out;
        }
        while (true)
        {
            skipSpace();
            if (mPos >= mText.size() || mText[mPos] != '"')
            {
                fail("expected a member name");
            }
            std::string key = parseString();
            skipSpace();
            if (!consume(":"))
            {
                fail("expected ':'");
            }
            out.set(std::move(key), parseValue(depth + 1));
            skipSpace();
            if (consume("}"))
            {
                return out;
            }
            if (!consume(","))
            {
                fail("expected ',' or '}'");
            }
        }
    }

    Value parseArray(int depth)
    {
        Value out = Value::array();
        ++mPos;
        skipSpace();
        if (consume("]"))
        {
            return out;
        }
        while (true)
        {
            out.push(parseValue(depth + 1));
            skipSpace();
            if (consume("]"))
            {
                return out;
            }
            if (!consume(","))
            {
                fail("expected ',' or ']'");
            }
        }
    }

    uint32_t parseHex4()
    {
        if (mPos + 4 > mText.size())
        {
            fail("truncated \\u escape");
        }
        uint32_t value = 0;
        for (int i = 0; i < 4; ++i)
        {
            char const h = mText[mPos++];
            value <<= 4;
            if (h >= '0' && h <= '9')
            {
                value |= static_cast<uint32_t>(h - '0');
            }
            else if (h >= 'a' && h <= 'f')
            {
                value |= static_cast<uint32_t>(h - 'a' + 10);
            }
            else if (h >= 'A' && h <= 'F')
            {
                value |= static_cast<uint32_t>(h - 'A' + 10);
            }
            else
            {
                fail("bad \\u escape");
            }
        }
        return value;
    }

    std::string parseString()
    {
        std::string out;
        ++mPos;
        while (true)
        {
            if (mPos >= mText.size())
            {
                fail("unterminated string");
            }
            char const c = mText[mPos++];
            if (c == '"')
            {
                return out;
            }
            if (c != '\\')
            {
                out += c;
                continue;
            }
            if (mPos >= mText.size())
            {
                fail("unterminated escape");
            }
            char const e = mText[mPos++];
            switch (e)
            {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u':
            {
                uint32_t cp = parseHex4();
                if (cp >= 0xD800 && cp < 0xDC00 && consume("\\u"))
                {
                    uint32_t const low = parseHex4();
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                }
                appendUtf8(out, cp);
                break;
            }
            default: fail(std::string("bad escape \\") + e);
            }
        }
    }

    Value parseNumber()
    {
        size_t const start = mPos;
        bool integral = true;
        if (mPos < mText.size() && (mText[mPos] == '-' || mText[mPos] == '+'))
        {
            ++mPos;
        }
        while (mPos < mText.size())
        {
            char const c = mText[mPos];
            if (c >= '0' && c <= '9')
            {
                ++mPos;
            }
            else if (c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+')
            {
                integral = false;
                ++mPos;
            }
            else
            {
                break;
            }
        }
        std::string const token(mText.substr(start, mPos - start));
        if (token.empty() || token == "-" || token == "+")
        {
            mPos = start;
            fail("unexpected character");
        }
        char* end = nullptr;
        errno = 0;
        if (integral)
        {
            long long const value = std::strtoll(token.c_str(), &end, 10);
            if (errno == 0 && end != nullptr && *end == '\0')
            {
                return Value(static_cast<int64_t>(value));
            }
            errno = 0;
        }
        double const value = std::strtod(token.c_str(), &end);
        if (end == nullptr || *end != '\0')
        {
            mPos = start;
            fail("bad number '" + token + "'");
        }
        return Value(value);
    }

    std::string_view mText;
    size_t mPos{0};
};

} // namespace

Value Value::array()
{
    Value out;
    out.mKind = Kind::kARRAY;
    return out;
}

Value Value::object()
{
    Value out;
    out.mKind = Kind::kOBJECT;
    return out;
}

bool Value::asBool() const
{
    if (mKind != Kind::kBOOL)
    {
        wrongKind("a boolean", mKind);
    }
    return mBool;
}

int64_t Value::asInt() const
{
    if (mKind == Kind::kINT)
    {
        return mInt;
    }
    if (mKind == Kind::kDOUBLE && std::nearbyint(mDouble) == mDouble && std::fabs(mDouble) < 9.2e18)
    {
        return static_cast<int64_t>(mDouble);
    }
    wrongKind("an integer", mKind);
}

double Value::asDouble() const
{
    if (mKind == Kind::kINT)
    {
        return static_cast<double>(mInt);
    }
    if (mKind != Kind::kDOUBLE)
    {
        wrongKind("a number", mKind);
    }
    return mDouble;
}

std::string const& Value::asString() const
{
    if (mKind != Kind::kSTRING)
    {
        wrongKind("a string", mKind);
    }
    return mString;
}

std::vector<Value> const& Value::items() const
{
    if (mKind != Kind::kARRAY)
    {
        wrongKind("an array", mKind);
    }
    return mItems;
}

std::vector<int64_t> Value::asInts() const
{
    std::vector<int64_t> out;
    for (Value const& item : items())
    {
        out.push_back(item.asInt());
    }
    return out;
}

Value const* Value::find(std::string_view key) const
{
    if (mKind != Kind::kOBJECT)
    {
        wrongKind("an object", mKind);
    }
    for (size_t i = 0; i < mKeys.size(); ++i)
    {
        if (mKeys[i] == key)
        {
            return &mItems[i];
        }
    }
    return nullptr;
}

Value const& Value::at(std::string_view key) const
{
    Value const* found = find(key);
    if (found == nullptr)
    {
        throw Error("JSON: missing member '" + std::string(key) + "'");
    }
    return *found;
}

std::vector<std::string> const& Value::keys() const
{
    if (mKind != Kind::kOBJECT)
    {
        wrongKind("an object", mKind);
    }
    return mKeys;
}

Value& Value::set(std::string key, Value value)
{
    if (mKind != Kind::kOBJECT)
    {
        wrongKind("an object", mKind);
    }
    for (size_t i = 0; i < mKeys.size(); ++i)
    {
        if (mKeys[i] == key)
        {
            mItems[i] = std::move(value);
            return mItems[i];
        }
    }
    mKeys.push_back(std::move(key));
    mItems.push_back(std::move(value));
    return mItems.back();
}

Value& Value::push(Value value)
{
    if (mKind != Kind::kARRAY)
    {
        wrongKind("an array", mKind);
    }
    mItems.push_back(std::move(value));
    return mItems.back();
}

void Value::dumpTo(std::string& out) const
{
    switch (mKind)
    {
    case Kind::kNULL: out += "null"; break;
    case Kind::kBOOL: out += mBool ? "true" : "false"; break;
    case Kind::kINT: out += std::to_string(mInt); break;
    case Kind::kDOUBLE:
        if (std::isnan(mDouble))
        {
            out += "NaN";
        }
        else if (std::isinf(mDouble))
        {
            out += mDouble > 0 ? "Infinity" : "-Infinity";
        }
        else
        {
            char buf[32];
            std::snprintf(buf, sizeof(buf), "%.17g", mDouble);
            out += buf;
            // Keep it a float on the Python side.
            if (std::string_view(buf).find_first_of(".eE") == std::string_view::npos)
            {
                out += ".0";
            }
        }
        break;
    case Kind::kSTRING: writeString(out, mString); break;
    case Kind::kARRAY:
        out += '[';
        for (size_t i = 0; i < mItems.size(); ++i)
        {
            if (i)
            {
                out += ", ";
            }
            mItems[i].dumpTo(out);
        }
        out += ']';
        break;
    case Kind::kOBJECT:
        out += '{';
        for (size_t i = 0; i < mItems.size(); ++i)
        {
            if (i)
            {
                out += ", ";
            }
            writeString(out, mKeys[i]);
            out += ": ";
            mItems[i].dumpTo(out);
        }
        out += '}';
        break;
    }
}

std::string Value::dump() const
{
    std::string out;
    dumpTo(out);
    return out;
}

Value Value::parse(std::string_view text)
{
    return Parser(text).document();
}

} // namespace ttp::harness::json
