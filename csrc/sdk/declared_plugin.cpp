#include "declared_plugin.h"

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

// Shape program tokens (torchtrt_plugins/_derive.py).
constexpr int64_t kMAGIC = 0x54545053;
constexpr int64_t kVERSION = 2;                                // version 1: no checks section
constexpr int64_t kCONST = 1, kDIM = 2, kSHAPE = 3, kSIZE = 4; // leaves
constexpr int64_t kADD = 10, kSUB = 11, kMUL = 12, kFLOORDIV = 13, kCEILDIV = 14, kMIN = 15, kMAX = 16; // operators

bool isBinary(int64_t token)
{
    return token >= kADD && token <= kMAX;
}

int32_t operandCount(int64_t token)
{
    return token == kDIM || token == kSHAPE ? 2 : 1;
}

int64_t floorDiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

using Expr = std::vector<int64_t>;

struct Output
{
    int64_t dtypeCode; // >= 0: a DataType; -(i + 1): the type of input i
    std::vector<Expr> dims;
};

// A parsed, validated shape program.
struct ShapeProgram
{
    std::vector<int32_t> inputRanks;
    int32_t nbShapeInputs{0};
    std::vector<std::pair<Expr, Expr>> sizes; // (opt, upper)
    std::vector<Output> outputs;
    std::vector<std::pair<Expr, Expr>> checks; // input sizes the fake kernel requires to be equal

    static ShapeProgram parse(std::vector<int64_t> const& tokens, OpDecl const& decl)
    {
        ShapeProgram program;
        size_t pos = 0;
        auto take = [&]() -> int64_t
        {
            if (pos >= tokens.size())
            {
                throw PluginError(concat("field '", kSHAPE_PROGRAM_FIELD, "' ends early (", tokens.size(), " tokens)"));
            }
            return tokens[pos++];
        };
        auto count = [&](char const* what, int64_t limit) -> int32_t
        {
            int64_t const n = take();
            if (n < 0 || n > limit)
            {
                throw PluginError(
                    concat("field '", kSHAPE_PROGRAM_FIELD, "': ", what, " must be in [0, ", limit, "], got ", n));
            }
            return static_cast<int32_t>(n);
        };
        int64_t const magic = take();
        int64_t const version = take();
        if (magic != kMAGIC || version < 1 || version > kVERSION)
        {
            throw PluginError(concat("field '", kSHAPE_PROGRAM_FIELD, "' is not a version-1 to -", kVERSION,
                " shape program (emit it with torchtrt_plugins' converter)"));
        }
        int32_t const nbInputs = count("the input count", decl.nbInputs);
        if (nbInputs != decl.nbInputs)
        {
            throw PluginError(
                concat("field '", kSHAPE_PROGRAM_FIELD, "' describes ", nbInputs, " inputs, expected ", decl.nbInputs));
        }
        for (int32_t i = 0; i < nbInputs; ++i)
        {
            program.inputRanks.push_back(count("an input rank", kMAX_DIMS));
        }
        program.nbShapeInputs = count("the shape input count", decl.nbFields);
        int32_t const nbSizes = count("the size tensor count", 64);
        auto expr = [&](bool sizesAllowed) -> Expr
        {
            int64_t const n = take();
            if (n <= 0 || pos + static_cast<size_t>(n) > tokens.size())
            {
                throw PluginError(concat("field '", kSHAPE_PROGRAM_FIELD, "' has a malformed expression"));
            }
            Expr e(tokens.begin() + static_cast<ptrdiff_t>(pos), tokens.begin() + static_cast<ptrdiff_t>(pos + n));
            pos += static_cast<size_t>(n);
            program.check(e, sizesAllowed ? nbSizes : 0);
            return e;
        };
        for (int32_t s = 0; s < nbSizes; ++s)
        {
            Expr opt = expr(false);
            program.sizes.emplace_back(std::move(opt), expr(false));
        }
        int32_t const nbOutputs = count("the output count", decl.nbOutputs);
        if (nbOutputs != decl.nbOutputs)
        {
            throw PluginError(concat(
                "field '", kSHAPE_PROGRAM_FIELD, "' describes ", nbOutputs, " outputs, expected ", decl.nbOutputs));
        }
        for (int32_t o = 0; o < nbOutputs; ++o)
        {
            Output out;
            out.dtypeCode = take();
            if (out.dtypeCode < -static_cast<int64_t>(nbInputs) || out.dtypeCode > 16)
            {
                throw PluginError(
                    concat("field '", kSHAPE_PROGRAM_FIELD, "': output ", o, " has dtype code ", out.dtypeCode));
            }
            int32_t const rank = count("an output rank", kMAX_DIMS);
            for (int32_t d = 0; d < rank; ++d)
            {
                out.dims.push_back(expr(true));
            }
            program.outputs.push_back(std::move(out));
        }
        int32_t const nbChecks = version >= 2 ? count("the check count", 64) : 0;
        for (int32_t c = 0; c < nbChecks; ++c)
        {
            Expr lhs = expr(false);
            program.checks.emplace_back(std::move(lhs), expr(false));
        }
        if (pos != tokens.size())
        {
            throw PluginError(
                concat("field '", kSHAPE_PROGRAM_FIELD, "' has ", tokens.size() - pos, " trailing tokens"));
        }
        return program;
    }

    // Every operand in range and the postfix stack well formed.
    void check(Expr const& e, int32_t nbSizes) const
    {
        int32_t depth = 0;
        for (size_t i = 0; i < e.size(); ++i)
        {
            int64_t const token = e[i];
            if (isBinary(token))
            {
                if (depth < 2)
                {
                    throw PluginError(concat("field '", kSHAPE_PROGRAM_FIELD, "': operator without operands"));
                }
                --depth;
                continue;
            }
            if (token < kCONST || token > kSIZE || i + operandCount(token) >= e.size())
            {
                throw PluginError(concat("field '", kSHAPE_PROGRAM_FIELD, "': bad token ", token));
            }
            int64_t const a = e[i + 1];
            bool ok = true;
            switch (token)
            {
            case kDIM:
                ok = a >= 0 && a < static_cast<int64_t>(inputRanks.size()) && e[i + 2] >= 0 && e[i + 2] < inputRanks[a];
                break;
            case kSHAPE: ok = a >= 0 && a < nbShapeInputs && e[i + 2] == 0; break;
            case kSIZE: ok = a >= 0 && a < nbSizes; break;
            default: break;
            }
            if (!ok)
            {
                throw PluginError(concat("field '", kSHAPE_PROGRAM_FIELD, "': operand out of range in token ", token));
            }
            i += static_cast<size_t>(operandCount(token));
            ++depth;
        }
        if (depth != 1)
        {
            throw PluginError(concat("field '", kSHAPE_PROGRAM_FIELD, "': expression leaves ", depth, " values"));
        }
    }
};

// Evaluates a postfix expression over any value type: `leaf(token, a, b)` makes leaves, `apply(op, x, y)` applies.
template <typename T, typename Leaf, typename Apply>
T evaluate(Expr const& e, Leaf&& leaf, Apply&& apply)
{
    std::vector<T> stack;
    for (size_t i = 0; i < e.size(); ++i)
    {
        if (isBinary(e[i]))
        {
            T const y = stack.back();
            stack.pop_back();
            stack.back() = apply(e[i], stack.back(), y);
            continue;
        }
        int64_t const b = operandCount(e[i]) == 2 ? e[i + 2] : 0;
        stack.push_back(leaf(e[i], e[i + 1], b));
        i += static_cast<size_t>(operandCount(e[i]));
    }
    return stack.back();
}

bool usesSize(Expr const& e)
{
    for (size_t i = 0; i < e.size(); ++i)
    {
        if (isBinary(e[i]))
        {
            continue;
        }
        if (e[i] == kSIZE)
        {
            return true;
        }
        i += static_cast<size_t>(operandCount(e[i]));
    }
    return false;
}

// Concrete value of an expression over input dims; sizes take `sizes`.
int64_t evaluateConcrete(Expr const& e, nvinfer1::Dims const* inputs, std::vector<int64_t> const& sizes)
{
    return evaluate<int64_t>(
        e,
        [&](int64_t token, int64_t a, int64_t b) -> int64_t
        {
            switch (token)
            {
            case kCONST: return a;
            case kDIM: return inputs[a].d[b];
            case kSIZE: return sizes.at(static_cast<size_t>(a));
            default: throw PluginError("a shape input value is not known here");
            }
        },
        [](int64_t op, int64_t x, int64_t y) -> int64_t
        {
            switch (op)
            {
            case kADD: return x + y;
            case kSUB: return x - y;
            case kMUL: return x * y;
            case kFLOORDIV:
            case kCEILDIV:
                if (y == 0)
                {
                    throw PluginError("division by zero in a shape expression");
                }
                return op == kFLOORDIV ? floorDiv(x, y) : -floorDiv(-x, y);
            case kMIN: return x < y ? x : y;
            default: return x > y ? x : y;
            }
        });
}

// Whether every input dim the expression reads is known (>= 0) in `inputs`.
bool known(Expr const& e, nvinfer1::Dims const* inputs)
{
    for (size_t i = 0; i < e.size(); ++i)
    {
        if (isBinary(e[i]))
        {
            continue;
        }
        if (e[i] == kDIM && inputs[e[i + 1]].d[e[i + 2]] < 0)
        {
            return false;
        }
        i += static_cast<size_t>(operandCount(e[i]));
    }
    return true;
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

class DeclaredPlugin : public plugin::PluginInterfaces<Named<nvinfer1::IPluginV3OneCore>>
{
public:
    DeclaredPlugin(OpDecl const& decl, std::vector<double> scalars, std::vector<int64_t> tokens)
        : PluginInterfaces(std::in_place, decl)
        , mScalars(std::move(scalars))
        , mTokens(std::move(tokens))
        , mProgram(ShapeProgram::parse(mTokens, decl))
    {
        plugin::checkShapeInputMarkers(
            decl.fields, mScalars.data(), decl.nbFields, mProgram.nbShapeInputs, "the shape program takes");
    }
    DeclaredPlugin(DeclaredPlugin const& other)
        : PluginInterfaces(other)
        , mScalars(other.mScalars)
        , mTokens(other.mTokens)
        , mProgram(other.mProgram)
        , mTactic(other.mTactic)
    {
    }
    DeclaredPlugin& operator=(DeclaredPlugin const&) = delete;

    nvinfer1::IPluginV3* clone() noexcept override
    {
        return guarded<nvinfer1::IPluginV3*>("clone", nullptr, [&] { return new DeclaredPlugin(*this); });
    }

    int32_t getNbOutputs() const noexcept override
    {
        return mDecl.nbOutputs + static_cast<int32_t>(mProgram.sizes.size());
    }

    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,
        int32_t nbInputs) const noexcept override
    {
        return guarded("getOutputDataTypes", int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                for (int32_t i = 0; i < nbInputs; ++i)
                {
                    checkInputType(i, inputTypes);
                }
                for (int32_t o = 0; o < nbOutputs; ++o)
                {
                    outputTypes[o] = outputType(o, inputTypes);
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
                plugin::checkShapeInputMarkers(
                    mDecl.fields, mScalars.data(), mDecl.nbFields, nbShapeInputs, "the call has");
                if (nbShapeInputs != mProgram.nbShapeInputs)
                {
                    fail("expected ", mProgram.nbShapeInputs, " shape inputs (the symbolic SymInt arguments), got ",
                        nbShapeInputs);
                }
                for (int32_t i = 0; i < nbInputs; ++i)
                {
                    checkRank(i, inputs[i].nbDims);
                }
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
                            case kDIM: return inputs[a].d[b];
                            case kSHAPE: return shapeInputs[a].d[b];
                            default: return sizes.at(static_cast<size_t>(a));
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
                for (size_t s = 0; s < mProgram.sizes.size(); ++s)
                {
                    auto const* opt = symbolic(mProgram.sizes[s].first);
                    auto const* upper = symbolic(mProgram.sizes[s].second);
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
                    auto const& dims = mProgram.outputs[static_cast<size_t>(o)].dims;
                    outputs[o].nbDims = static_cast<int32_t>(dims.size());
                    for (size_t d = 0; d < dims.size(); ++d)
                    {
                        outputs[o].d[d] = symbolic(dims[d]);
                    }
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
                if (pos < nbInputs)
                {
                    InputDecl const& in = mDecl.inputs[pos];
                    bool const same
                        = in.sameDtypeAs < 0 || in.sameDtypeAs >= pos || desc.type == inOut[in.sameDtypeAs].desc.type;
                    return accepts(in.dtypeMask, desc.type) && same;
                }
                std::vector<nvinfer1::DataType> inputTypes;
                for (int32_t i = 0; i < nbInputs; ++i)
                {
                    inputTypes.push_back(inOut[i].desc.type);
                }
                return desc.type == outputType(pos - nbInputs, inputTypes.data());
            });
    }

    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* /*out*/, int32_t nbOutputs) noexcept override
    {
        auto const rankOf = [&](int32_t i) { return in[i].desc.dims.nbDims; };
        if (checkInputs("configurePlugin", nbInputs, nbOutputs, rankOf) != 0)
        {
            return 1;
        }
        return guarded("configurePlugin", int32_t{1},
            [&]
            {
                checkSizes(maxOf(in, nbInputs).dims, "the profile's largest");
                checkSizes(currentOf(in, nbInputs).dims, "the");
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
                return launchArgsFor(maxOf(inputs, nbInputs), maxOf(outputs, nbOutputs), nullptr, nullptr, nullptr,
                    nullptr, [&](LaunchArgs const& args) { return mDecl.workspace(args); });
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
                for (double value : mScalars)
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

    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::PluginTensorDesc const* /*out*/, int32_t nbOutputs) noexcept override
    {
        if (checkInputs("onShapeChange", nbInputs, nbOutputs, [&](int32_t i) { return in[i].dims.nbDims; }) != 0)
        {
            return 1;
        }
        return guarded("onShapeChange", int32_t{1},
            [&]
            {
                checkSizes(actualOf(in, nbInputs).dims, "the");
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
                cudaError_t const err
                    = launchArgsFor(actualOf(inputDesc, mDecl.nbInputs), actualOf(outputDesc, getNbOutputs()), inputs,
                        outputs, workspace, stream, [&](LaunchArgs const& args) { return tactic->launch(args); });
                if (err != cudaSuccess)
                {
                    fail("launcher '", tactic->launcherName, "' returned ", cudaGetErrorName(err), ": ",
                        cudaGetErrorString(err));
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
                    mWriter.add(mDecl.fields[f], mScalars.at(static_cast<size_t>(f)));
                }
                auto const* scalars = mWriter.collection();
                mSerialFields.assign(scalars->fields, scalars->fields + scalars->nbFields);
                mSerialFields.emplace_back(kSHAPE_PROGRAM_FIELD, mTokens.data(), nvinfer1::PluginFieldType::kINT64,
                    static_cast<int32_t>(mTokens.size()));
                mSerialCollection.nbFields = static_cast<int32_t>(mSerialFields.size());
                mSerialCollection.fields = mSerialFields.data();
                return &mSerialCollection;
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

    // The counts, and each input's rank against the program's: what configurePlugin and onShapeChange check.
    template <typename RankOf>
    int32_t checkInputs(char const* method, int32_t nbInputs, int32_t nbOutputs, RankOf&& rankOf) const noexcept
    {
        return guarded(method, int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                for (int32_t i = 0; i < nbInputs; ++i)
                {
                    checkRank(i, rankOf(i));
                }
                return int32_t{0};
            });
    }

    void checkCounts(int32_t nbInputs, int32_t nbOutputs) const
    {
        if (nbInputs != mDecl.nbInputs || nbOutputs != getNbOutputs())
        {
            fail("expected ", mDecl.nbInputs, " inputs and ", getNbOutputs(), " outputs (", mDecl.nbOutputs, " and ",
                mProgram.sizes.size(), " size tensors), got ", nbInputs, " and ", nbOutputs);
        }
    }

    void checkRank(int32_t input, int32_t rank) const
    {
        if (rank != mProgram.inputRanks[static_cast<size_t>(input)])
        {
            fail("input '", mDecl.inputs[input].name, "' must have rank ",
                mProgram.inputRanks[static_cast<size_t>(input)], " (the rank its shape program was derived for), got ",
                rank);
        }
    }

    // The fake kernel's equalities between input sizes (e.g. weight's length and x's last dim), where the dims are
    // known.
    void checkSizes(std::vector<nvinfer1::Dims> const& dims, char const* which) const
    {
        for (auto const& [lhs, rhs] : mProgram.checks)
        {
            if (!known(lhs, dims.data()) || !known(rhs, dims.data()))
            {
                continue;
            }
            int64_t const a = evaluateConcrete(lhs, dims.data(), {});
            int64_t const b = evaluateConcrete(rhs, dims.data(), {});
            if (a != b)
            {
                fail("input sizes break the op's fake kernel check ", describe(lhs), " == ", describe(rhs), ": ", which,
                    " input dims give ", a, " and ", b);
            }
        }
    }

    std::string describe(Expr const& e) const
    {
        if (e.size() == 3 && e[0] == kDIM)
        {
            return concat("'", mDecl.inputs[e[1]].name, "'.shape[", e[2], "]");
        }
        if (e.size() == 2 && e[0] == kCONST)
        {
            return concat(e[1]);
        }
        return "(a size expression)";
    }

    void checkInputType(int32_t i, nvinfer1::DataType const* types) const
    {
        InputDecl const& in = mDecl.inputs[i];
        if (!accepts(in.dtypeMask, types[i]))
        {
            fail("input '", in.name, "' must have a type in ", typeList(in.dtypeMask), ", got ",
                plugin::dataTypeName(types[i]));
        }
        if (in.sameDtypeAs >= 0 && types[in.sameDtypeAs] != types[i])
        {
            fail("input '", in.name, "' must have the type of '", mDecl.inputs[in.sameDtypeAs].name, "' (",
                plugin::dataTypeName(types[in.sameDtypeAs]), "), got ", plugin::dataTypeName(types[i]));
        }
    }

    nvinfer1::DataType outputType(int32_t o, nvinfer1::DataType const* inputTypes) const
    {
        if (o >= mDecl.nbOutputs)
        {
            return nvinfer1::DataType::kINT64; // a size tensor
        }
        int64_t const code = mProgram.outputs[static_cast<size_t>(o)].dtypeCode;
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
        std::vector<int64_t> uppers;
        for (auto const& size : mProgram.sizes)
        {
            uppers.push_back(evaluateConcrete(size.second, inDims, {}));
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
            if (o < mDecl.nbOutputs)
            {
                auto const& exprs = mProgram.outputs[static_cast<size_t>(o)].dims;
                dims.nbDims = static_cast<int32_t>(exprs.size());
                for (size_t d = 0; d < exprs.size(); ++d)
                {
                    bool const known
                        = !usesSize(exprs[d]) && outDims[o].nbDims > static_cast<int32_t>(d) && outDims[o].d[d] >= 0;
                    dims.d[d] = known ? outDims[o].d[d] : evaluateConcrete(exprs[d], inDims, uppers);
                }
            }
            out.push_back(tensorOf(outputs ? outputs[o] : nullptr, outTypes[o], dims,
                o < mDecl.nbOutputs ? mDecl.outputs[o] : "a size tensor"));
        }
        LaunchArgs args{in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()),
            mScalars.data(), static_cast<int32_t>(mScalars.size()), workspace, 0, mTactic, stream};
        if (workspace != nullptr && mDecl.workspace != nullptr)
        {
            args.workspaceSize = mDecl.workspace(args);
        }
        return fn(args);
    }

    std::vector<double> mScalars;
    std::vector<int64_t> mTokens;
    ShapeProgram mProgram;
    int32_t mTactic{0};
    std::string mTimingCacheId;
    plugin::FieldWriter mWriter;
    std::vector<nvinfer1::PluginField> mSerialFields;
    nvinfer1::PluginFieldCollection mSerialCollection{};
};

class DeclaredCreator : public Named<nvinfer1::IPluginCreatorV3One>
{
public:
    explicit DeclaredCreator(OpDecl const& decl)
        : Named(decl)
    {
        for (int32_t f = 0; f < decl.nbFields; ++f)
        {
            mFields.emplace_back(decl.fields[f].name, nullptr, decl.fields[f].type, 1);
        }
        mFields.emplace_back(kSHAPE_PROGRAM_FIELD, nullptr, nvinfer1::PluginFieldType::kINT64, 0);
        mCollection.nbFields = static_cast<int32_t>(mFields.size());
        mCollection.fields = mFields.data();
    }

    nvinfer1::IPluginV3* createPlugin(char const* /*name*/, nvinfer1::PluginFieldCollection const* fc,
        nvinfer1::TensorRTPhase /*phase*/) noexcept override
    {
        try
        {
            plugin::FieldReader reader(mDecl.pluginName, fc, mCollection);
            std::vector<double> scalars;
            for (int32_t f = 0; f < mDecl.nbFields; ++f)
            {
                scalars.push_back(reader.number(mDecl.fields[f]));
            }
            return new DeclaredPlugin(mDecl, std::move(scalars), program(fc));
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
    static std::vector<int64_t> program(nvinfer1::PluginFieldCollection const* fc)
    {
        for (int32_t i = 0; fc != nullptr && fc->fields != nullptr && i < fc->nbFields; ++i)
        {
            auto const& field = fc->fields[i];
            if (field.name == nullptr || std::strcmp(field.name, kSHAPE_PROGRAM_FIELD) != 0)
            {
                continue;
            }
            // INT32 too: TensorRT's ONNX parser turns every INT/INTS attribute into a kINT32 field (the exporter
            // refuses a program whose tokens do not fit in 32 bits).
            bool const wide = field.type == nvinfer1::PluginFieldType::kINT64;
            if ((!wide && field.type != nvinfer1::PluginFieldType::kINT32) || field.data == nullptr
                || field.length <= 0)
            {
                throw PluginError(concat("field '", kSHAPE_PROGRAM_FIELD,
                    "' must be a non-empty INT64 (or INT32) array, got PluginFieldType ",
                    static_cast<int32_t>(field.type), " of length ", field.length));
            }
            if (!wide)
            {
                auto const* narrow = static_cast<int32_t const*>(field.data);
                return std::vector<int64_t>(narrow, narrow + field.length);
            }
            auto const* data = static_cast<int64_t const*>(field.data);
            return std::vector<int64_t>(data, data + field.length);
        }
        throw PluginError(concat("missing field '", kSHAPE_PROGRAM_FIELD,
            "' (the output shapes derived from the op's fake kernel; torchtrt_plugins' converter emits it)"));
    }

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
