// One description of an op's scalar fields, shared by the generic plugin (createPlugin, getFieldsToSerialize, the
// creator's field names), the generic eager kernel (argument checks) and PluginBase: a declared op's FieldDecl rows
// are generated from its declaration into the library's fields header (op_fields.h: `<ns>::fields::<op>::kTABLE`),
// beside the index constants its launchers read LaunchArgs::scalars by (`<ns>::fields::<op>::kEPS`). The range check
// and the message formatter are these, written once; the Python checker (torchtrt_plugins.spec.FieldSpec.check) says
// the same. No torch, no TensorRT.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace ttp::sdk
{

// The PluginFieldType a field is advertised and serialized as, by nvinfer1::PluginFieldType's values (the plugin
// code checks that they agree).
enum class FieldType : int32_t
{
    kFLOAT16 = 0,
    kFLOAT32 = 1,
    kFLOAT64 = 2,
    kINT8 = 3,
    kINT16 = 4,
    kINT32 = 5,
    kCHAR = 6,
    kBF16 = 9,
    kINT64 = 10,
};

// How the op argument behind a field reads: LaunchArgs::scalars holds each as a double (a bool as 0 or 1).
enum class ScalarKind : int32_t
{
    kFLOAT = 0,
    kINT = 1,
    kBOOL = 2,
};

constexpr double kUNBOUNDED = std::numeric_limits<double>::infinity();
constexpr double kNO_SHAPE_INPUT = std::numeric_limits<double>::quiet_NaN();

struct FieldDecl
{
    char const* name;     // the plugin field
    char const* argument; // the op argument it carries (the name the eager op's messages use)
    FieldType type;
    ScalarKind kind;
    bool required;
    double defaultValue;
    double min; // -kUNBOUNDED / kUNBOUNDED when unbounded
    double max;
    bool minInclusive;
    // For an integer argument that may arrive as a shape input instead: the value the field then holds, accepted
    // outside [min, max]. kNO_SHAPE_INPUT (NaN) means none.
    double shapeInputSentinel = kNO_SHAPE_INPUT;
};

// Whether `value` is one the field takes: finite, within its range, 0 or 1 for a bool (the shape-input sentinel is
// the caller's to accept).
bool inRange(FieldDecl const& field, double value) noexcept;

// What the field's values must be: "a float > 0", "an integer >= 1 and <= 16777216", "a bool"; with
// `withShapeInput`, the sentinel a field takes in place of a shape input as well: "... (or -2147483648: from a
// shape input)".
std::string expectation(FieldDecl const& field, bool withShapeInput = false);

// "<subject> must be <expectation>, got <got>": the one message for a value out of a field's range.
std::string outOfRange(
    FieldDecl const& field, std::string_view subject, std::string_view got, bool withShapeInput = false);

// A value as Python's repr prints it (0.5, 1e-06, inf, 3, True): how the messages show what they got.
std::string pythonRepr(double value);
std::string pythonRepr(float value);
std::string valueRepr(FieldDecl const& field, double value);

} // namespace ttp::sdk
