// The tensor vocabulary of the harness's requests and reports: data type and format names, sizes, I/O formats.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "json_io.h"

namespace ttp::harness
{

char const* dataTypeName(nvinfer1::DataType type) noexcept;
nvinfer1::DataType dataTypeFromName(std::string const& name);
char const* formatName(nvinfer1::TensorFormat format) noexcept;
// Bytes of `count` elements (sub-byte types round up).
size_t storageBytes(nvinfer1::DataType type, int64_t count);
int64_t volume(nvinfer1::Dims const& dims) noexcept;
Json dimsJson(nvinfer1::Dims const& dims);
// "[2, 3]", for messages.
std::string dimsText(nvinfer1::Dims const& dims);

struct IOFormat
{
    nvinfer1::DataType type;
    nvinfer1::TensorFormat format;
    bool operator==(IOFormat const& o) const
    {
        return type == o.type && format == o.format;
    }
};
// One type and format per input, then per output.
using Combination = std::vector<IOFormat>;

// "(FLOAT/LINEAR, HALF/LINEAR)", for messages.
std::string combinationText(Combination const& c);
// [["FLOAT", "LINEAR"], ...], for reports.
Json combinationJson(Combination const& c);

} // namespace ttp::harness
