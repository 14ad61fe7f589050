#include "sdk/fields.h"

#include <charconv>
#include <cmath>

#include "sdk/rules.h"

namespace ttp::sdk
{
namespace
{

using rules::concat;

// Python's repr of a float, which the Python path's messages print: shortest round trip, exponent form below 1e-4
// and from 1e16 on.
template <typename T>
std::string shortestRepr(T value)
{
    if (std::isnan(value))
    {
        return "nan";
    }
    if (std::isinf(value))
    {
        return value > 0 ? "inf" : "-inf";
    }
    char buffer[64];
    auto const result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
    std::string const text(buffer, result.ptr);
    size_t const e = text.find('e');
    std::string mantissa = text.substr(0, e);
    int const exponent = std::stoi(text.substr(e + 1));
    bool const negative = mantissa[0] == '-';
    std::string digits;
    for (char c : mantissa)
    {
        if (c >= '0' && c <= '9')
        {
            digits += c;
        }
    }
    std::string out = negative ? "-" : "";
    if (exponent >= -4 && exponent < 16)
    {
        if (exponent >= 0)
        {
            auto const whole = static_cast<size_t>(exponent) + 1;
            if (digits.size() < whole)
            {
                digits.append(whole - digits.size(), '0');
            }
            std::string const fraction = digits.substr(whole);
            return out + digits.substr(0, whole) + "." + (fraction.empty() ? "0" : fraction);
        }
        return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1)
    {
        out += "." + digits.substr(1);
    }
    int const magnitude = exponent < 0 ? -exponent : exponent;
    return out + (exponent < 0 ? "e-" : "e+") + (magnitude < 10 ? "0" : "") + std::to_string(magnitude);
}

// A range's bound as the messages print it: an integer field's as an integer ("16777216", not "1.67772e+07"),
// others as Python's repr without a trailing ".0" (0, 1e-06, 0.5).
std::string boundRepr(FieldDecl const& field, double value)
{
    if (field.kind != ScalarKind::kFLOAT && std::nearbyint(value) == value && std::fabs(value) < 9223372036854775808.0)
    {
        return std::to_string(static_cast<int64_t>(value));
    }
    std::string text = shortestRepr(value);
    if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0)
    {
        text.resize(text.size() - 2);
    }
    return text;
}

} // namespace

std::string pythonRepr(double value)
{
    return shortestRepr(value);
}

std::string pythonRepr(float value)
{
    return shortestRepr(value);
}

std::string valueRepr(FieldDecl const& field, double value)
{
    switch (field.kind)
    {
    case ScalarKind::kFLOAT: return pythonRepr(value);
    case ScalarKind::kBOOL:
        if (value == 0.0 || value == 1.0)
        {
            return value != 0.0 ? "True" : "False";
        }
        break;
    case ScalarKind::kINT: break;
    }
    return boundRepr(field, value);
}

bool inRange(FieldDecl const& field, double value) noexcept
{
    if (field.kind == ScalarKind::kBOOL)
    {
        return value == 0.0 || value == 1.0;
    }
    bool const lowOk = field.minInclusive ? value >= field.min : value > field.min;
    return std::isfinite(value) && lowOk && value <= field.max;
}

std::string expectation(FieldDecl const& field, bool withShapeInput)
{
    if (field.kind == ScalarKind::kBOOL)
    {
        return "a bool";
    }
    std::string out = field.kind == ScalarKind::kINT ? "an integer" : "a float";
    if (std::isfinite(field.min))
    {
        out += concat(field.minInclusive ? " >= " : " > ", boundRepr(field, field.min));
    }
    if (std::isfinite(field.max))
    {
        out += concat(std::isfinite(field.min) ? " and" : "", " <= ", boundRepr(field, field.max));
    }
    if (withShapeInput && !std::isnan(field.shapeInputSentinel))
    {
        out += concat(" (or ", boundRepr(field, field.shapeInputSentinel), ": from a shape input)");
    }
    return out;
}

std::string outOfRange(FieldDecl const& field, std::string_view subject, std::string_view got, bool withShapeInput)
{
    return concat(subject, " must be ", expectation(field, withShapeInput), ", got ", got);
}

} // namespace ttp::sdk
