#include "declared_plugin.h"

#include "cubin_launch.h"
#include "shared_tables.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ttp::sdk
{
namespace
{

using plugin::concat;
using plugin::PluginError;
using plugin::Severity;

using rules::evaluate;
using rules::Expr;
using rules::FieldValues;
using rules::kADD;
using rules::kARG;
using rules::kCEILDIV;
using rules::kCONST;
using rules::kDIM;
using rules::kFLOORDIV;
using rules::kMIN;
using rules::kMUL;
using rules::kSIZE;
using rules::kSUB;
using rules::ShapeProgram;
using rules::usesSize;

// The dims of TensorRT descriptors as the shared rules read them.
auto dimOf(nvinfer1::Dims const* dims)
{
    return [dims](int64_t input, int64_t axis) { return dims[input].d[axis]; };
}

nvinfer1::DimensionOperation dimensionOperation(int64_t op)
{
    switch (op)
    {
    case kADD: return nvinfer1::DimensionOperation::kSUM;
    case kSUB: return nvinfer1::DimensionOperation::kSUB;
    case kMUL: return nvinfer1::DimensionOperation::kPROD;
    case kFLOORDIV: return nvinfer1::DimensionOperation::kFLOOR_DIV;
    case kCEILDIV: return nvinfer1::DimensionOperation::kCEIL_DIV;
    case kMIN: return nvinfer1::DimensionOperation::kMIN;
    default: return nvinfer1::DimensionOperation::kMAX;
    }
}

bool accepts(uint32_t mask, nvinfer1::DataType type)
{
    auto const bit = static_cast<uint32_t>(type);
    return bit < 32 && (mask >> bit & 1U) != 0;
}

std::string typeList(uint32_t mask)
{
    std::string out;
    for (int32_t t = 0; t < 32; ++t)
    {
        if ((mask >> t & 1U) != 0)
        {
            out += concat(out.empty() ? "" : ", ", plugin::dataTypeName(static_cast<nvinfer1::DataType>(t)));
        }
    }
    return "{" + out + "}";
}

Tensor tensorOf(void const* data, nvinfer1::DataType type, nvinfer1::Dims const& dims, char const* what)
{
    if (dims.nbDims > kMAX_DIMS)
    {
        throw PluginError(concat(what, " has rank ", dims.nbDims, ", more than the SDK's ", kMAX_DIMS));
    }
    Tensor t{const_cast<void*>(data), plugin::toKernelDType(type), dims.nbDims, {}};
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        t.dims[i] = dims.d[i];
    }
    return t;
}

// The plugin name, version and namespace of a declared op, for its plugin (IPluginV3OneCore) and creator alike.
template <typename Interface>
class Named : public Interface
{
public:
    explicit Named(OpDecl const& decl)
        : mDecl(decl)
    {
    }
    char const* getPluginName() const noexcept override
    {
        return mDecl.pluginName;
    }
    char const* getPluginVersion() const noexcept override
    {
        return mDecl.pluginVersion;
    }
    char const* getPluginNamespace() const noexcept override
    {
        return mDecl.pluginNamespace;
    }

protected:
    OpDecl const& mDecl;
};

// The dims and types of a call's tensors: the profile's largest (build) or the actual ones (enqueue).
struct Descs
{
    std::vector<nvinfer1::Dims> dims;
    std::vector<nvinfer1::DataType> types;
};

template <typename Desc, typename Pick>
Descs collect(Desc const* descs, int32_t count, Pick&& pick)
{
    Descs out;
    for (int32_t i = 0; i < count; ++i)
    {
        auto const [dims, type] = pick(descs[i]);
        out.dims.push_back(dims);
        out.types.push_back(type);
    }
    return out;
}

Descs maxOf(nvinfer1::DynamicPluginTensorDesc const* descs, int32_t count)
{
    return collect(descs, count, [](auto const& d) { return std::make_pair(d.max, d.desc.type); });
}

// The dims a configurePlugin call describes (-1 where the profile leaves them open).
Descs currentOf(nvinfer1::DynamicPluginTensorDesc const* descs, int32_t count)
{
    return collect(descs, count, [](auto const& d) { return std::make_pair(d.desc.dims, d.desc.type); });
}

Descs actualOf(nvinfer1::PluginTensorDesc const* descs, int32_t count)
{
    return collect(descs, count, [](auto const& d) { return std::make_pair(d.dims, d.type); });
}

auto rankOf(Descs const& descs)
{
    return [&descs](int32_t i) { return descs.dims[static_cast<size_t>(i)].nbDims; };
}

// Why an op's tables of aliased and weight inputs are unusable (each input aliased to one output at most; a weight
// input is an input and never updated in place), or empty.
std::string aliasTableError(OpDecl const& decl)
{
    for (int32_t w = 0; w < decl.nbWeightInputs; ++w)
    {
        int32_t const input = decl.weightInputs[w];
        bool aliased = false;
        for (int32_t a = 0; a < decl.nbAliasedInputs; ++a)
        {
            aliased = aliased || decl.aliasedInputs[a] == input;
        }
        if (input < 0 || input >= decl.nbInputs || aliased)
        {
            return concat("weight input ", input, " is not a constant input (regenerate the tables)");
        }
    }
    for (int32_t a = 0; a < decl.nbAliasedInputs; ++a)
    {
        int32_t const input = decl.aliasedInputs[a];
        if (input < 0 || input >= decl.nbInputs)
        {
            return concat("aliased input ", input, " is not an input (regenerate the tables)");
        }
        for (int32_t b = 0; b < a; ++b)
        {
            if (decl.aliasedInputs[b] == input)
            {
                return concat("input ", input, " is aliased to two outputs (regenerate the tables)");
            }
        }
    }
    return {};
}

// The PluginFieldType holding elements of `type`; kUNKNOWN where none does.
nvinfer1::PluginFieldType fieldTypeOf(nvinfer1::DataType type)
{
    using FT = nvinfer1::PluginFieldType;
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT: return FT::kFLOAT32;
    case nvinfer1::DataType::kHALF: return FT::kFLOAT16;
    case nvinfer1::DataType::kBF16: return FT::kBF16;
    case nvinfer1::DataType::kINT8: return FT::kINT8;
    case nvinfer1::DataType::kINT32: return FT::kINT32;
    case nvinfer1::DataType::kINT64: return FT::kINT64;
    default: return FT::kUNKNOWN;
    }
}

size_t elementSize(nvinfer1::DataType type)
{
    switch (type)
    {
    case nvinfer1::DataType::kHALF:
    case nvinfer1::DataType::kBF16: return 2;
    case nvinfer1::DataType::kINT8:
    case nvinfer1::DataType::kFP8: return 1;
    case nvinfer1::DataType::kINT64: return 8;
    default: return 4;
    }
}

std::string fieldTypeList(uint32_t mask)
{
    std::string out;
    for (int32_t t = 0; t < 32; ++t)
    {
        auto const type = fieldTypeOf(static_cast<nvinfer1::DataType>(t));
        if ((mask >> t & 1U) != 0 && type != nvinfer1::PluginFieldType::kUNKNOWN)
        {
            out += concat(out.empty() ? "" : ", ", plugin::fieldTypeName(type));
        }
    }
    return "{" + out + "}";
}

// A weight input given as a field (OpDecl::weightInputs): a constant of the plan, not a network input.
struct WeightField
{
    int32_t input;
    std::string shapeName; // "<input>_shape"
    nvinfer1::DataType type;
    nvinfer1::Dims dims;
    std::vector<uint8_t> bytes;
};

std::string shapeFieldName(InputDecl const& in)
{
    return concat(in.name, "_shape");
}

// The dims a weight's `<name>_shape` field gives: INT64 (or INT32, as TensorRT's ONNX parser delivers INTS), each >= 0.
nvinfer1::Dims weightDims(InputDecl const& in, nvinfer1::PluginField const* shape, int32_t length)
{
    nvinfer1::Dims dims{};
    if (shape == nullptr)
    {
        dims.nbDims = 1;
        dims.d[0] = length;
        return dims;
    }
    using FT = nvinfer1::PluginFieldType;
    bool const wide = shape->type == FT::kINT64;
    if ((!wide && shape->type != FT::kINT32) || shape->length < 0 || shape->length > nvinfer1::Dims::MAX_DIMS
        || (shape->length > 0 && shape->data == nullptr))
    {
        throw PluginError(concat("field '", shapeFieldName(in),
            "' must be INT64 (or INT32, as TensorRT's ONNX parser "
            "delivers INTS) holding the 0 to ",
            nvinfer1::Dims::MAX_DIMS, " dims of argument '", in.name, "', got ", plugin::fieldTypeName(shape->type),
            " of length ", shape->length, shape->data == nullptr ? " and no data" : ""));
    }
    dims.nbDims = shape->length;
    for (int32_t d = 0; d < shape->length; ++d)
    {
        auto const* at = static_cast<uint8_t const*>(shape->data) + d * (wide ? 8 : 4);
        int64_t value = 0;
        if (wide)
        {
            std::memcpy(&value, at, sizeof(value));
        }
        else
        {
            int32_t narrow = 0;
            std::memcpy(&narrow, at, sizeof(narrow));
            value = narrow;
        }
        if (value < 0)
        {
            throw PluginError(concat("field '", shapeFieldName(in), "' gives argument '", in.name, "' dim ", d, " = ",
                value, " (expected >= 0)"));
        }
        dims.d[d] = value;
    }
    return dims;
}

// More elements than any PluginField's int32 length holds.
constexpr int64_t kMAX_LENGTH = int64_t{std::numeric_limits<int32_t>::max()} + 1;

// The weight fields a collection gives: each of a type its argument accepts, with as many elements as its dims hold.
std::vector<WeightField> readWeights(OpDecl const& decl, plugin::FieldReader const& reader)
{
    std::vector<WeightField> weights;
    for (int32_t w = 0; w < decl.nbWeightInputs; ++w)
    {
        int32_t const input = decl.weightInputs[w];
        InputDecl const& in = decl.inputs[input];
        std::string const shapeName = shapeFieldName(in);
        nvinfer1::PluginField const* field = reader.find(in.name);
        nvinfer1::PluginField const* shape = reader.find(shapeName.c_str());
        if (field == nullptr)
        {
            if (shape != nullptr)
            {
                throw PluginError(concat("field '", shapeName, "' is given without field '", in.name, "' (argument '",
                    in.name, "' as a weight)"));
            }
            continue;
        }
        WeightField weight{input, shapeName, nvinfer1::DataType::kFLOAT, {}, {}};
        bool typed = false;
        for (int32_t t = 0; t < 32 && !typed; ++t)
        {
            auto const type = static_cast<nvinfer1::DataType>(t);
            typed = accepts(in.dtypeMask, type) && fieldTypeOf(type) == field->type;
            weight.type = typed ? type : weight.type;
        }
        if (!typed)
        {
            throw PluginError(
                concat("field '", in.name, "' (argument '", in.name, "' as a weight) must have a PluginFieldType in ",
                    fieldTypeList(in.dtypeMask), ", got ", plugin::fieldTypeName(field->type)));
        }
        weight.dims = weightDims(in, shape, std::max(field->length, 0));
        // The dims' volume, saturated past what a field's int32 length can hold (no dims may overflow it to a match).
        int64_t elements = 1;
        for (int32_t d = 0; d < weight.dims.nbDims; ++d)
        {
            elements = std::min<int64_t>(elements * std::min<int64_t>(weight.dims.d[d], kMAX_LENGTH), kMAX_LENGTH);
        }
        if (field->length != elements || (elements > 0 && field->data == nullptr))
        {
            throw PluginError(concat("field '", in.name, "' (argument '", in.name, "' as a weight of dims ",
                plugin::dimsString(weight.dims), ") must hold ", elements, " elements, got ", field->length,
                field->data == nullptr ? " and no data" : ""));
        }
        auto const* data = static_cast<uint8_t const*>(field->data);
        weight.bytes.assign(data, data + static_cast<size_t>(elements) * elementSize(weight.type));
        weights.push_back(std::move(weight));
    }
    return weights;
}

// What the shared shape rules know of a declared op.
rules::OpShape opShape(OpDecl const& decl)
{
    rules::OpShape op{decl.op, {}, decl.nbOutputs, {}};
    for (int32_t i = 0; i < decl.nbInputs; ++i)
    {
        op.inputs.emplace_back(decl.inputs[i].name);
    }
    for (int32_t f = 0; f < decl.nbFields; ++f)
    {
        FieldDecl const& field = decl.fields[f];
        op.fields.push_back({field.name, field.kind == ScalarKind::kFLOAT, field.shapeInputSentinel});
    }
    return op;
}

// The build capability: IPluginV3OneBuildV2, which reports itself as version 2 (getAliasedInput) only for an op
// with aliased outputs, so that a plugin without them presents the version-1 interface every TensorRT 10.x knows.
class AliasingBuild : public nvinfer1::IPluginV3OneBuildV2
{
public:
    explicit AliasingBuild(OpDecl const& decl)
        : mAliasDecl(decl)
    {
    }
    nvinfer1::InterfaceInfo getInterfaceInfo() const noexcept override
    {
        return nvinfer1::InterfaceInfo{"PLUGIN_V3ONE_BUILD", mAliasDecl.nbAliasedInputs > 0 ? 2 : 1, 0};
    }

protected:
    OpDecl const& mAliasDecl;
};

class DeclaredPlugin : public plugin::PluginInterfaces<Named<nvinfer1::IPluginV3OneCore>, AliasingBuild>
{
public:
    DeclaredPlugin(
        OpDecl const& decl, std::vector<double> scalars, std::vector<WeightField> weights, rules::Rules const& rules)
        : PluginInterfaces(std::in_place, decl, decl)
        , mFields(rules.op(), std::move(scalars))
        , mRules(rules)
        , mPrograms(rules.programs())
        , mWeights(std::move(weights))
        , mDeviceWeights(mWeights.size(), nullptr)
    {
        for (int32_t i = 0; i < decl.nbInputs; ++i)
        {
            if (weightOf(i) == nullptr)
            {
                mNetworkInputs.push_back(i);
            }
        }
    }
    // A clone copies the weights' host bytes only: it allocates no device memory.
    DeclaredPlugin(DeclaredPlugin const& other)
        : PluginInterfaces(other)
        , mFields(other.mFields)
        , mRules(other.mRules)
        , mPrograms(other.mPrograms)
        , mTactic(other.mTactic)
        , mWeights(other.mWeights)
        , mNetworkInputs(other.mNetworkInputs)
        , mDeviceWeights(mWeights.size(), nullptr)
    {
    }
    DeclaredPlugin& operator=(DeclaredPlugin const&) = delete;
    ~DeclaredPlugin() override
    {
        for (void* device : mDeviceWeights)
        {
            if (device != nullptr)
            {
                cudaFree(device);
            }
        }
    }

    nvinfer1::IPluginV3* clone() noexcept override
    {
        return guarded<nvinfer1::IPluginV3*>("clone", nullptr, [&] { return new DeclaredPlugin(*this); });
    }

    int32_t getNbOutputs() const noexcept override
    {
        return firstAliased() + mDecl.nbAliasedInputs;
    }

    int32_t getAliasedInput(int32_t outputIndex) noexcept override
    {
        int32_t const a = outputIndex - firstAliased();
        return a >= 0 && a < mDecl.nbAliasedInputs ? networkIndex(mDecl.aliasedInputs[a]) : -1;
    }

    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,
        int32_t nbInputs) const noexcept override
    {
        return guarded("getOutputDataTypes", int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                auto const types = allInputs(inputTypes, [](WeightField const& w) { return w.type; });
                for (int32_t i = 0; i < mDecl.nbInputs; ++i)
                {
                    checkInputType(i, types.data());
                }
                for (int32_t o = 0; o < nbOutputs; ++o)
                {
                    outputTypes[o] = outputType(o, types.data());
                }
                return int32_t{0};
            });
    }

    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
        nvinfer1::IExprBuilder& builder) noexcept override
    {
        return guarded("getOutputShapes", int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                checkShapeInputs(shapeInputs, nbShapeInputs);
                auto const all = allInputs(inputs,
                    [&](WeightField const& w)
                    {
                        nvinfer1::DimsExprs exprs{};
                        exprs.nbDims = w.dims.nbDims;
                        for (int32_t d = 0; d < w.dims.nbDims; ++d)
                        {
                            exprs.d[d] = builder.constant(w.dims.d[d]);
                        }
                        return exprs;
                    });
                ShapeProgram const& program = programFor([&](int32_t i) { return all[i].nbDims; });
                std::vector<nvinfer1::IDimensionExpr const*> sizes;
                auto symbolic = [&](Expr const& e)
                {
                    return evaluate<nvinfer1::IDimensionExpr const*>(
                        e,
                        [&](int64_t token, int64_t a, int64_t b) -> nvinfer1::IDimensionExpr const*
                        {
                            switch (token)
                            {
                            case kCONST: return builder.constant(a);
                            case kDIM: return all[a].d[b];
                            case kSIZE: return sizes.at(static_cast<size_t>(a));
                            default:
                            {
                                int32_t const shapeInput = mFields.shapeInput[static_cast<size_t>(a)];
                                return shapeInput >= 0 ? shapeInputs[shapeInput].d[0]
                                                       : builder.constant(static_cast<int64_t>(
                                                             mFields.values[static_cast<size_t>(a)]));
                            }
                            }
                        },
                        [&](int64_t op, nvinfer1::IDimensionExpr const* x, nvinfer1::IDimensionExpr const* y)
                        {
                            if (x == nullptr || y == nullptr)
                            {
                                fail("the expression builder returned null");
                            }
                            return builder.operation(dimensionOperation(op), *x, *y);
                        });
                };
                for (size_t s = 0; s < program.sizes.size(); ++s)
                {
                    auto const* opt = symbolic(program.sizes[s].first);
                    auto const* upper = symbolic(program.sizes[s].second);
                    int32_t const index = mDecl.nbOutputs + static_cast<int32_t>(s);
                    auto const* size = opt && upper ? builder.declareSizeTensor(index, *opt, *upper) : nullptr;
                    if (size == nullptr)
                    {
                        fail("declareSizeTensor(", index, ") failed");
                    }
                    sizes.push_back(size);
                    outputs[index].nbDims = 0;
                }
                for (int32_t o = 0; o < mDecl.nbOutputs; ++o)
                {
                    auto const& dims = program.outputs[static_cast<size_t>(o)].dims;
                    outputs[o].nbDims = static_cast<int32_t>(dims.size());
                    for (size_t d = 0; d < dims.size(); ++d)
                    {
                        outputs[o].d[d] = symbolic(dims[d]);
                    }
                }
                for (int32_t a = 0; a < mDecl.nbAliasedInputs; ++a)
                {
                    outputs[firstAliased() + a] = all[mDecl.aliasedInputs[a]];
                }
                return int32_t{0};
            });
    }

    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override
    {
        return guarded("supportsFormatCombination", false,
            [&]
            {
                auto const& desc = inOut[pos].desc;
                if (desc.format != nvinfer1::TensorFormat::kLINEAR)
                {
                    return false;
                }
                if (nbInputs != nbNetworkInputs())
                {
                    return false;
                }
                if (pos < nbInputs)
                {
                    int32_t const i = mNetworkInputs[static_cast<size_t>(pos)];
                    InputDecl const& in = mDecl.inputs[i];
                    bool same = true;
                    if (in.sameDtypeAs >= 0)
                    {
                        WeightField const* weight = weightOf(in.sameDtypeAs);
                        int32_t const other = networkIndex(in.sameDtypeAs);
                        same = weight != nullptr ? desc.type == weight->type
                                                 : other >= pos || desc.type == inOut[other].desc.type;
                    }
                    // A weight field's type is fixed: the inputs that must share it take it.
                    for (auto const& weight : mWeights)
                    {
                        same = same && (mDecl.inputs[weight.input].sameDtypeAs != i || desc.type == weight.type);
                    }
                    return accepts(in.dtypeMask, desc.type) && same;
                }
                std::vector<nvinfer1::DataType> network;
                for (int32_t i = 0; i < nbInputs; ++i)
                {
                    network.push_back(inOut[i].desc.type);
                }
                auto const types = allInputs(network.data(), [](WeightField const& w) { return w.type; });
                return desc.type == outputType(pos - nbInputs, types.data());
            });
    }

    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override
    {
        return guarded("configurePlugin", int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                Descs const current = allInputs(currentOf(in, nbInputs));
                ShapeProgram const& program = programFor(rankOf(current));
                checkSizes(program, allInputs(maxOf(in, nbInputs)).dims, "the profile's largest");
                checkSizes(program, current.dims, "the");
                checkAliases(current, currentOf(out, nbOutputs));
                return int32_t{0};
            });
    }

    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override
    {
        return guarded("getWorkspaceSize", size_t{0},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                if (mDecl.workspace == nullptr)
                {
                    return size_t{0};
                }
                // At the profile's largest shapes.
                return launchArgsFor(allInputs(maxOf(inputs, nbInputs)), maxOf(outputs, nbOutputs), nullptr, nullptr,
                    nullptr, nullptr, [&](LaunchArgs const& args) { return mDecl.workspace(args); });
            });
    }

    int32_t getNbTactics() noexcept override
    {
        return static_cast<int32_t>(advertisedTactics().size());
    }

    int32_t getValidTactics(int32_t* tactics, int32_t nbTactics) noexcept override
    {
        auto const advertised = advertisedTactics();
        if (nbTactics == 0 && advertised.empty())
        {
            return 0;
        }
        if (tactics == nullptr || nbTactics != static_cast<int32_t>(advertised.size()))
        {
            log(concat("getValidTactics: expected room for ", advertised.size(), " tactics, got ", nbTactics));
            return 1;
        }
        for (size_t i = 0; i < advertised.size(); ++i)
        {
            tactics[i] = advertised[i];
        }
        return 0;
    }

    char const* getTimingCacheID() noexcept override
    {
        return guarded<char const*>("getTimingCacheID", nullptr,
            [&]
            {
                std::string id = concat(mDecl.op, "_v", mDecl.pluginVersion);
                for (double value : mFields.values)
                {
                    id += concat("_", value);
                }
                mTimingCacheId = id;
                return mTimingCacheId.c_str();
            });
    }

    int32_t setTactic(int32_t tactic) noexcept override
    {
        if (tactic != 0 && findTactic(tactic) == nullptr)
        {
            log(concat("setTactic: unknown tactic ", tactic));
            return 1;
        }
        mTactic = tactic;
        return 0;
    }

    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept override
    {
        return guarded("onShapeChange", int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                Descs const actual = allInputs(actualOf(in, nbInputs));
                checkSizes(programFor(rankOf(actual)), actual.dims, "the");
                checkAliases(actual, actualOf(out, nbOutputs));
                // Outside any graph capture; where it fails (no device yet), the first enqueue tries again.
                if (uploadWeights() != cudaSuccess)
                {
                    cudaGetLastError();
                }
                try
                {
                    acquireTables();
                }
                catch (PluginError const&)
                {
                    cudaGetLastError();
                }
                // Kernels compiled to cubin load here, so that the first enqueue launches without loading a module
                // (a CUDA graph may capture it); where it fails (no image for the device, a driver too old for the
                // PTX), the TensorRT logger says why, and their first launch tries again.
                if (loadCubinKernels(mDecl.op) != cudaSuccess)
                {
                    log(concat("onShapeChange: ", cubinLaunchError()));
                    cudaGetLastError();
                }
                return int32_t{0};
            });
    }

    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override
    {
        return guarded("enqueue", int32_t{1},
            [&]
            {
                TacticDecl const* tactic = findTactic(mTactic);
                if (tactic == nullptr || tactic->launch == nullptr)
                {
                    fail("no launcher for tactic ", mTactic);
                }
                cudaError_t const uploaded = uploadWeights();
                if (uploaded != cudaSuccess)
                {
                    fail("copying the weight fields to the device: ", cudaGetErrorName(uploaded), ": ",
                        cudaGetErrorString(uploaded));
                }
                if (!mTables.acquired(mDecl.nbResources))
                {
                    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
                    if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess
                        && capture != cudaStreamCaptureStatusNone)
                    {
                        fail("its shared tables were not acquired before this graph capture (onShapeChange failed)");
                    }
                    acquireTables();
                }
                auto const all = allInputs(inputs, [&](WeightField const& w) { return deviceWeight(w); });
                cudaError_t const err = launchArgsFor(allInputs(actualOf(inputDesc, nbNetworkInputs())),
                    actualOf(outputDesc, getNbOutputs()), all.data(), outputs, workspace, stream,
                    [&](LaunchArgs const& args) { return tactic->launch(args); });
                if (err != cudaSuccess)
                {
                    char const* why = cubinLaunchError();
                    fail("launcher '", tactic->launcherName, "' returned ", cudaGetErrorName(err), ": ",
                        cudaGetErrorString(err), *why != '\0' ? " (" : "", why, *why != '\0' ? ")" : "");
                }
                return int32_t{0};
            });
    }

    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* /*context*/) noexcept override
    {
        return clone();
    }

    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override
    {
        return guarded<nvinfer1::PluginFieldCollection const*>("getFieldsToSerialize", nullptr,
            [&]
            {
                mWriter.clear();
                for (int32_t f = 0; f < mDecl.nbFields; ++f)
                {
                    mWriter.add(mDecl.fields[f], mFields.values.at(static_cast<size_t>(f)));
                }
                for (auto const& w : mWeights)
                {
                    auto const elements = static_cast<int32_t>(w.bytes.size() / elementSize(w.type));
                    mWriter.addArray(mDecl.inputs[w.input].name, fieldTypeOf(w.type), w.bytes, elements);
                    std::vector<uint8_t> dims(sizeof(int64_t) * static_cast<size_t>(w.dims.nbDims));
                    std::memcpy(dims.data(), w.dims.d, dims.size());
                    mWriter.addArray(
                        w.shapeName.c_str(), nvinfer1::PluginFieldType::kINT64, std::move(dims), w.dims.nbDims);
                }
                return mWriter.collection();
            });
    }

private:
    template <typename R, typename F>
    R guarded(char const* method, R onError, F&& fn) const noexcept
    {
        try
        {
            return fn();
        }
        catch (std::exception const& e)
        {
            log(concat(method, ": ", e.what()));
        }
        catch (...)
        {
            log(concat(method, ": unknown exception"));
        }
        return onError;
    }

    void log(std::string const& message) const noexcept
    {
        plugin::log(Severity::kERROR,
            concat(mDecl.op, " (plugin ", mDecl.pluginNamespace, "::", mDecl.pluginName, ") ", message));
    }

    template <typename... Args>
    [[noreturn]] static void fail(Args const&... args)
    {
        throw PluginError(concat(args...));
    }

    void checkCounts(int32_t nbInputs, int32_t nbOutputs) const
    {
        if (nbInputs != nbNetworkInputs() || nbOutputs != getNbOutputs())
        {
            fail("expected ", nbNetworkInputs(), " inputs",
                mWeights.empty() ? "" : concat(" (", mWeights.size(), " more given as weight fields)"), " and ",
                getNbOutputs(), " outputs (", mDecl.nbOutputs, ", ", mPrograms.front().sizes.size(),
                " size tensors and ", mDecl.nbAliasedInputs, " updated inputs), got ", nbInputs, " and ", nbOutputs);
        }
    }

    // One shape input per field holding the shape-input marker, each a 1-D shape tensor of one element or more.
    void checkShapeInputs(nvinfer1::DimsExprs const* shapeInputs, int32_t nbShapeInputs) const
    {
        std::string markers;
        for (int32_t f = 0; f < mDecl.nbFields; ++f)
        {
            if (mFields.shapeInput[static_cast<size_t>(f)] >= 0)
            {
                markers += concat(markers.empty() ? "" : ", ", "'", mDecl.fields[f].name, "'");
            }
        }
        if (nbShapeInputs != mFields.nbShapeInputs)
        {
            fail("expected ", mFields.nbShapeInputs, " shape inputs (one per field holding the shape-input marker",
                markers.empty() ? ": none does" : concat(": ", markers), "), got ", nbShapeInputs);
        }
        for (int32_t k = 0; k < nbShapeInputs; ++k)
        {
            if (shapeInputs[k].nbDims != 1 || shapeInputs[k].d[0] == nullptr)
            {
                fail("shape input ", k, " must be a 1-D shape tensor, got rank ", shapeInputs[k].nbDims);
            }
        }
    }

    template <typename RankOf>
    ShapeProgram const& programFor(RankOf&& rankOf) const
    {
        return mRules.programFor(rankOf);
    }

    // The fake kernel's equalities between input sizes (e.g. weight's length and x's last dim), where the dims are
    // known.
    void checkSizes(ShapeProgram const& program, std::vector<nvinfer1::Dims> const& dims, char const* which) const
    {
        mRules.checkSizes(program, dimOf(dims.data()), mFields, which);
    }

    void checkInputType(int32_t i, nvinfer1::DataType const* types) const
    {
        InputDecl const& in = mDecl.inputs[i];
        char const* what = weightOf(i) != nullptr ? "weight field '" : "input '";
        if (!accepts(in.dtypeMask, types[i]))
        {
            fail(what, in.name, "' must have a type in ", typeList(in.dtypeMask), ", got ",
                plugin::dataTypeName(types[i]));
        }
        if (in.sameDtypeAs >= 0 && types[in.sameDtypeAs] != types[i])
        {
            fail(what, in.name, "' must have the type of '", mDecl.inputs[in.sameDtypeAs].name, "' (",
                plugin::dataTypeName(types[in.sameDtypeAs]), "), got ", plugin::dataTypeName(types[i]));
        }
    }

    // Outputs: the op's returns, its size tensors, then one output per mutated input (aliased to it).
    int32_t firstAliased() const noexcept
    {
        return mDecl.nbOutputs + static_cast<int32_t>(mPrograms.front().sizes.size());
    }

    // An aliased output is its input, updated in place: the same type and dims (-1 where the dims are open).
    void checkAliases(Descs const& inputs, Descs const& outputs) const
    {
        for (int32_t a = 0; a < mDecl.nbAliasedInputs; ++a)
        {
            int32_t const i = mDecl.aliasedInputs[a];
            auto const& inDims = inputs.dims[static_cast<size_t>(i)];
            auto const& outDims = outputs.dims[static_cast<size_t>(firstAliased() + a)];
            nvinfer1::DataType const outType = outputs.types[static_cast<size_t>(firstAliased() + a)];
            bool same = inDims.nbDims == outDims.nbDims;
            for (int32_t d = 0; same && d < inDims.nbDims; ++d)
            {
                same = inDims.d[d] < 0 || outDims.d[d] < 0 || inDims.d[d] == outDims.d[d];
            }
            if (!same || outType != inputs.types[static_cast<size_t>(i)])
            {
                fail("output ", firstAliased() + a, " updates argument '", mDecl.inputs[i].name,
                    "' in place (aliased to input ", i, ") and must have its type ",
                    plugin::dataTypeName(inputs.types[static_cast<size_t>(i)]), " and dims ",
                    plugin::dimsString(inDims), ", got ", plugin::dataTypeName(outType), " and ",
                    plugin::dimsString(outDims));
            }
        }
    }

    nvinfer1::DataType outputType(int32_t o, nvinfer1::DataType const* inputTypes) const
    {
        if (o >= firstAliased())
        {
            return inputTypes[mDecl.aliasedInputs[o - firstAliased()]]; // a mutated input
        }
        if (o >= mDecl.nbOutputs)
        {
            return nvinfer1::DataType::kINT64; // a size tensor
        }
        int64_t const code = mPrograms.front().outputs[static_cast<size_t>(o)].dtypeCode;
        return code < 0 ? inputTypes[-code - 1] : static_cast<nvinfer1::DataType>(code);
    }

    std::vector<int32_t> advertisedTactics() const
    {
        std::vector<int32_t> values;
        for (int32_t t = 0; t < mDecl.nbTactics; ++t)
        {
            if (mDecl.tactics[t].value != 0)
            {
                values.push_back(mDecl.tactics[t].value);
            }
        }
        return values;
    }

    TacticDecl const* findTactic(int32_t value) const
    {
        for (int32_t t = 0; t < mDecl.nbTactics; ++t)
        {
            if (mDecl.tactics[t].value == value)
            {
                return &mDecl.tactics[t];
            }
        }
        return value == 0 && mDecl.nbTactics > 0 ? &mDecl.tactics[0] : nullptr;
    }

    WeightField const* weightOf(int32_t input) const noexcept
    {
        for (auto const& w : mWeights)
        {
            if (w.input == input)
            {
                return &w;
            }
        }
        return nullptr;
    }

    int32_t nbNetworkInputs() const noexcept
    {
        return static_cast<int32_t>(mNetworkInputs.size());
    }

    // The network input an op input is (-1: given as a weight field).
    int32_t networkIndex(int32_t input) const noexcept
    {
        for (size_t k = 0; k < mNetworkInputs.size(); ++k)
        {
            if (mNetworkInputs[k] == input)
            {
                return static_cast<int32_t>(k);
            }
        }
        return -1;
    }

    // Per op input, the network input's entry or, for a weight field, ofWeight(its weight).
    template <typename T, typename OfWeight>
    std::vector<T> allInputs(T const* network, OfWeight&& ofWeight) const
    {
        std::vector<T> all;
        size_t next = 0;
        for (int32_t i = 0; i < mDecl.nbInputs; ++i)
        {
            WeightField const* weight = weightOf(i);
            all.push_back(weight != nullptr ? ofWeight(*weight) : network != nullptr ? network[next] : T{});
            next += weight != nullptr ? 0 : 1;
        }
        return all;
    }

    Descs allInputs(Descs const& network) const
    {
        return Descs{allInputs(network.dims.data(), [](WeightField const& w) { return w.dims; }),
            allInputs(network.types.data(), [](WeightField const& w) { return w.type; })};
    }

    // Copies the weight fields to the device, once per plugin.
    cudaError_t uploadWeights()
    {
        for (size_t w = 0; w < mWeights.size(); ++w)
        {
            auto const& bytes = mWeights[w].bytes;
            if (mDeviceWeights[w] != nullptr || bytes.empty())
            {
                continue;
            }
            void* device = nullptr;
            cudaError_t err = cudaMalloc(&device, bytes.size());
            if (err == cudaSuccess)
            {
                err = cudaMemcpy(device, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
            }
            if (err != cudaSuccess)
            {
                cudaFree(device);
                return err;
            }
            mDeviceWeights[w] = device;
        }
        return cudaSuccess;
    }

    // The op's shared tables (OpDecl::resources), once per plugin: outside any graph capture.
    void acquireTables()
    {
        if (mDecl.nbResources > 0)
        {
            std::string const owner = concat(mDecl.pluginNamespace, "::", mDecl.pluginName, " v", mDecl.pluginVersion);
            mTables.acquire(owner.c_str(), mDecl.resources, mDecl.nbResources, mFields.values.data());
        }
    }

    void const* deviceWeight(WeightField const& weight) const noexcept
    {
        return mDeviceWeights[static_cast<size_t>(&weight - mWeights.data())];
    }

    // Builds the LaunchArgs of one call and passes them to `fn`. Output dims that depend on a data-dependent size
    // are at the size's upper bound (evaluated from the input dims); the others come from `outDims`.
    template <typename F>
    auto launchArgsFor(Descs const& inDescs, Descs const& outDescs, void const* const* inputs, void* const* outputs,
        void* workspace, cudaStream_t stream, F&& fn) const -> decltype(fn(std::declval<LaunchArgs const&>()))
    {
        nvinfer1::Dims const* inDims = inDescs.dims.data();
        nvinfer1::DataType const* inTypes = inDescs.types.data();
        nvinfer1::Dims const* outDims = outDescs.dims.data();
        nvinfer1::DataType const* outTypes = outDescs.types.data();
        ShapeProgram const& program = programFor([&](int32_t i) { return inDims[i].nbDims; });
        std::vector<int64_t> uppers;
        for (auto const& size : program.sizes)
        {
            uppers.push_back(evaluateConcrete(size.second, dimOf(inDims), mFields));
        }
        std::vector<Tensor> in;
        for (int32_t i = 0; i < mDecl.nbInputs; ++i)
        {
            in.push_back(tensorOf(inputs ? inputs[i] : nullptr, inTypes[i], inDims[i], mDecl.inputs[i].name));
        }
        std::vector<Tensor> out;
        for (int32_t o = 0; o < getNbOutputs(); ++o)
        {
            nvinfer1::Dims dims{};
            if (o >= firstAliased())
            {
                int32_t const i = mDecl.aliasedInputs[o - firstAliased()];
                out.push_back(tensorOf(outputs ? outputs[o] : nullptr, outTypes[o], inDims[i], mDecl.inputs[i].name));
                continue;
            }
            if (o < mDecl.nbOutputs)
            {
                auto const& exprs = program.outputs[static_cast<size_t>(o)].dims;
                dims.nbDims = static_cast<int32_t>(exprs.size());
                for (size_t d = 0; d < exprs.size(); ++d)
                {
                    bool const known
                        = !usesSize(exprs[d]) && outDims[o].nbDims > static_cast<int32_t>(d) && outDims[o].d[d] >= 0;
                    dims.d[d]
                        = known ? outDims[o].d[d] : evaluateConcrete(exprs[d], dimOf(inDims), mFields, uppers.data());
                }
            }
            out.push_back(tensorOf(outputs ? outputs[o] : nullptr, outTypes[o], dims,
                o < mDecl.nbOutputs ? mDecl.outputs[o] : "a size tensor"));
        }
        LaunchArgs args{in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()),
            mFields.values.data(), static_cast<int32_t>(mFields.values.size()), workspace, 0, mTactic, stream};
        if (mTables.acquired(mDecl.nbResources))
        {
            args.resources = mTables.pointers().data();
            args.nbResources = mDecl.nbResources;
        }
        if (workspace != nullptr && mDecl.workspace != nullptr)
        {
            args.workspaceSize = mDecl.workspace(args);
        }
        if (args.workspaceSize == 0)
        {
            args.workspace = nullptr; // the launcher ABI (ttp_sdk.h): no workspace, a null pointer
        }
        return fn(args);
    }

    FieldValues mFields;
    rules::Rules const& mRules;
    std::vector<ShapeProgram> const& mPrograms;
    int32_t mTactic{0};
    std::string mTimingCacheId;
    plugin::FieldWriter mWriter;
    std::vector<WeightField> mWeights;
    std::vector<int32_t> mNetworkInputs; // per network input, the op input it is
    std::vector<void*> mDeviceWeights;   // per weight, its device copy (null until uploaded)
    SharedTables mTables;                // a clone acquires its own (onShapeChange)
};

class DeclaredCreator : public Named<nvinfer1::IPluginCreatorV3One>
{
public:
    explicit DeclaredCreator(OpDecl const& decl)
        : Named(decl)
        , mRules(opShape(decl), decl.programs, decl.nbProgramTokens)
        , mAliasError(aliasTableError(decl))
    {
        for (int32_t f = 0; f < decl.nbFields; ++f)
        {
            mFields.emplace_back(decl.fields[f].name, nullptr, plugin::pluginFieldType(decl.fields[f]), 1);
        }
        int32_t const nbWeights = mAliasError.empty() ? decl.nbWeightInputs : 0;
        for (int32_t w = 0; w < nbWeights; ++w)
        {
            mShapeNames.push_back(shapeFieldName(decl.inputs[decl.weightInputs[w]]));
        }
        for (int32_t w = 0; w < nbWeights; ++w)
        {
            InputDecl const& in = decl.inputs[decl.weightInputs[w]];
            // No one type: the field's is its tensor's, any its input accepts (readWeights checks which).
            mFields.emplace_back(in.name, nullptr, nvinfer1::PluginFieldType::kUNKNOWN, 0);
            mFields.emplace_back(
                mShapeNames[static_cast<size_t>(w)].c_str(), nullptr, nvinfer1::PluginFieldType::kINT64, 0);
        }
        mCollection.nbFields = static_cast<int32_t>(mFields.size());
        mCollection.fields = mFields.data();
    }

    nvinfer1::IPluginV3* createPlugin(char const* /*name*/, nvinfer1::PluginFieldCollection const* fc,
        nvinfer1::TensorRTPhase /*phase*/) noexcept override
    {
        try
        {
            if (!mRules.error().empty() || !mAliasError.empty())
            {
                throw PluginError(mRules.error().empty() ? mAliasError : mRules.error());
            }
            plugin::FieldReader reader(mDecl.pluginName, fc, mCollection);
            std::vector<double> scalars;
            for (int32_t f = 0; f < mDecl.nbFields; ++f)
            {
                scalars.push_back(reader.number(mDecl.fields[f]));
            }
            return new DeclaredPlugin(mDecl, std::move(scalars), readWeights(mDecl, reader), mRules);
        }
        catch (std::exception const& e)
        {
            plugin::log(Severity::kERROR, concat(mDecl.op, " (plugin ", mDecl.pluginNamespace, "::", mDecl.pluginName,
                                              ") createPlugin: ", e.what()));
        }
        catch (...)
        {
            plugin::log(Severity::kERROR, concat(mDecl.op, " createPlugin: unknown exception"));
        }
        return nullptr;
    }

    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override
    {
        return &mCollection;
    }

private:
    rules::Rules mRules;
    std::string mAliasError;              // why the op's aliased-input table is unusable, or empty
    std::vector<std::string> mShapeNames; // "<input>_shape" per weight input, behind mFields' names
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mCollection{};
};

} // namespace

DeclaredOpRegistration::DeclaredOpRegistration(OpDecl const& decl)
{
    // Lives as long as the library: getCreators hands out raw pointers.
    static std::vector<std::unique_ptr<DeclaredCreator>> creators;
    creators.push_back(std::make_unique<DeclaredCreator>(decl));
    plugin::CreatorRegistry::creators().push_back(creators.back().get());
}

} // namespace ttp::sdk
