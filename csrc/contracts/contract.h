// The vocabulary of our ops' generated contracts (contracts/ops.h, from torchtrt_plugins/ops/*.py): no torch and
// no TensorRT types, so the torch adapters and the plugins read the same declaration.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

#include "kernels/common.h"

namespace ttp::contract
{

constexpr double kINF = std::numeric_limits<double>::infinity();
constexpr double kNAN = std::numeric_limits<double>::quiet_NaN();

constexpr uint32_t bit(DType t)
{
    return 1U << static_cast<uint32_t>(t);
}

constexpr bool accepts(uint32_t mask, DType t)
{
    return (mask & bit(t)) != 0U;
}

// A tensor input: the dtypes the torch op takes, the ones its plugin takes (a bool input reaches the plugin as
// int32), the earlier input whose dtype it shares (-1: none), and the accepted dtypes as messages name them.
struct Input
{
    char const* name;
    uint32_t torchMask;
    uint32_t pluginMask;
    int32_t sameDtypeAs;
    char const* dtypeNames; // "in {float32, float16}" or "bool"
};

enum class FieldType : int32_t
{
    kFLOAT32,
    kFLOAT64,
    kINT32,
    kINT64,
};

// A scalar argument and its plugin field: type, default, valid range, and the value a shape-input argument's field
// holds (NaN: none). `expectation` is the declaration's own wording ("a float > 0").
struct Field
{
    char const* name;
    FieldType type;
    bool required;
    double defaultValue;
    double min;
    double max;
    bool minInclusive;
    double shapeInputSentinel;
    char const* expectation;

    constexpr bool inRange(double value) const
    {
        return (minInclusive ? value >= min : value > min) && value <= max;
    }
};

} // namespace ttp::contract
