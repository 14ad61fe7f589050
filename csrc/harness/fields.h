// Plugin fields owned by the harness: built from JSON (including deliberately malformed ones), deep-copied from
// what a plugin returns, serialized to a byte buffer the way a plan holds them and read back.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "json_io.h"

namespace ttp::harness
{

char const* fieldTypeName(nvinfer1::PluginFieldType type) noexcept;
nvinfer1::PluginFieldType fieldTypeFromName(std::string const& name);
// Bytes held by `length` elements of `type`.
size_t fieldBytes(nvinfer1::PluginFieldType type, int32_t length);

class FieldSet
{
public:
    struct Field
    {
        std::string name;
        nvinfer1::PluginFieldType type{nvinfer1::PluginFieldType::kUNKNOWN};
        int32_t length{0};
        bool hasData{true};
        std::vector<uint8_t> bytes;
    };

    FieldSet() = default;
    FieldSet(FieldSet const& other)
        : mFields(other.mFields)
    {
    }
    FieldSet& operator=(FieldSet const& other)
    {
        mFields = other.mFields;
        return *this;
    }

    // [{"name", "type", "data": number | [numbers] | string | null, "hex": "..", "length": n}]
    static FieldSet fromJson(JsonReader const& fields);
    // Deep copy; throws std::runtime_error describing a malformed collection.
    static FieldSet fromCollection(nvinfer1::PluginFieldCollection const* fc);
    static FieldSet deserialize(std::vector<uint8_t> const& bytes);

    std::vector<uint8_t> serialize() const;
    Json toJson() const;
    std::string describe() const;
    // The collection points into this object; valid until it changes.
    nvinfer1::PluginFieldCollection const* collection();

    std::vector<Field> const& fields() const noexcept
    {
        return mFields;
    }
    bool operator==(FieldSet const& other) const;
    bool operator!=(FieldSet const& other) const
    {
        return !(*this == other);
    }

private:
    std::vector<Field> mFields;
    std::vector<nvinfer1::PluginField> mView;
    nvinfer1::PluginFieldCollection mCollection{};
};

} // namespace ttp::harness
