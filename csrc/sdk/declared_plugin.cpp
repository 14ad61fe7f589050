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

// Shape program tokens (torchtrt_plugins/_derive.py). The compiled programs are version 3: their leaves are
// constants, input dims, data-dependent sizes and integer fields (never a per-call shape input, token 3).
constexpr int64_t kMAGIC = 0x54545053;
constexpr int64_t kVERSION = 3;
constexpr int64_t kCONST = 1, kDIM = 2, kSIZE = 4, kARG = 5;                                            // leaves
constexpr int64_t kADD = 10, kSUB = 11, kMUL = 12, kFLOORDIV = 13, kCEILDIV = 14, kMIN = 15, kMAX = 16; // operators

bool isBinary(int64_t token)
{
    return token >= kADD && token <= kMAX;
}

int32_t operandCount(int64_t token)
{
    return token == kDIM ? 2 : 1;
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
    std::vector<std::pair<Expr, Expr>> sizes; // (opt, upper)
    std::vector<Output> outputs;
    std::vector<std::pair<Expr, Expr>> checks; // input sizes the fake kernel requires to be equal

    // `where` names the program in errors. The tables are generated, but a library built from a stale or edited
    // table must fail here rather than index out of range later.
    static ShapeProgram parse(int64_t const* tokens, size_t length, OpDecl const& decl, std::string const& where)
    {
        ShapeProgram program;
        size_t pos = 0;
        auto take = [&]() -> int64_t
        {
            if (pos >= length)
            {
                throw PluginError(concat(where, " ends early (", length, " tokens)"));
            }
            return tokens[pos++];
        };
        auto count = [&](char const* what, int64_t limit) -> int32_t
        {
            int64_t const n = take();
            if (n < 0 || n > limit)
            {
                throw PluginError(concat(where, ": ", what, " must be in [0, ", limit, "], got ", n));
            }
            return static_cast<int32_t>(n);
        };
        if (take() != kMAGIC || take() != kVERSION)
        {
            throw PluginError(concat(where, " is not a version-", kVERSION, " shape program (regenerate the tables)"));
        }
        if (count("the input count", decl.nbInputs) != decl.nbInputs)
        {
            throw PluginError(concat(where, " describes another number of inputs than the op's ", decl.nbInputs));
        }
        for (int32_t i = 0; i < decl.nbInputs; ++i)
        {
            program.inputRanks.push_back(count("an input rank", kMAX_DIMS));
        }
        count("the per-call shape input count", 0);
        int32_t const nbSizes = count("the size tensor count", 64);
        auto expr = [&](bool sizesAllowed) -> Expr
        {
            int64_t const n = take();
            if (n <= 0 || pos + static_cast<size_t>(n) > length)
            {
                throw PluginError(concat(where, " has a malformed expression"));
            }
            Expr e(tokens + pos, tokens + pos + n);
            pos += static_cast<size_t>(n);
            program.check(e, sizesAllowed ? nbSizes : 0, decl, where);
            return e;
        };
        for (int32_t s = 0; s < nbSizes; ++s)
        {
            Expr opt = expr(false);
            program.sizes.emplace_back(std::move(opt), expr(false));
        }
        if (count("the output count", decl.nbOutputs) != decl.nbOutputs)
        {
            throw PluginError(concat(where, " describes another number of outputs than the op's ", decl.nbOutputs));
        }
        for (int32_t o = 0; o < decl.nbOutputs; ++o)
        {
            Output out;
            out.dtypeCode = take();
            if (out.dtypeCode < -static_cast<int64_t>(decl.nbInputs) || out.dtypeCode > 16)
            {
                throw PluginError(concat(where, ": output ", o, " has dtype code ", out.dtypeCode));
            }
            int32_t const rank = count("an output rank", kMAX_DIMS);
            for (int32_t d = 0; d < rank; ++d)
            {
                out.dims.push_back(expr(true));
            }
            program.outputs.push_back(std::move(out));
        }
        int32_t const nbChecks = count("the check count", 64);
        for (int32_t c = 0; c < nbChecks; ++c)
        {
            Expr lhs = expr(false);
            program.checks.emplace_back(std::move(lhs), expr(false));
        }
        if (pos != length)
        {
            throw PluginError(concat(where, " has ", length - pos, " trailing tokens"));
        }
        return program;
    }

    // Every operand in range and the postfix stack well formed; an ARG leaf reads an integer field.
    void check(Expr const& e, int32_t nbSizes, OpDecl const& decl, std::string const& where) const
    {
        int32_t depth = 0;
        for (size_t i = 0; i < e.size(); ++i)
        {
            int64_t const token = e[i];
            if (isBinary(token))
            {
                if (depth < 2)
                {
                    throw PluginError(concat(where, ": operator without operands"));
                }
                --depth;
                continue;
            }
            if ((token != kCONST && token != kDIM && token != kSIZE && token != kARG)
                || i + operandCount(token) >= e.size())
            {
                throw PluginError(concat(where, ": bad token ", token));
            }
            int64_t const a = e[i + 1];
            bool ok = true;
            switch (token)
            {
            case kDIM:
                ok = a >= 0 && a < static_cast<int64_t>(inputRanks.size()) && e[i + 2] >= 0 && e[i + 2] < inputRanks[a];
                break;
            case kSIZE: ok = a >= 0 && a < nbSizes; break;
            case kARG: ok = a >= 0 && a < decl.nbFields && decl.fields[a].kind() != plugin::FieldKind::kFLOAT; break;
            default: break;
            }
            if (!ok)
            {
                throw PluginError(concat(where, ": operand out of range in token ", token));
            }
            i += static_cast<size_t>(operandCount(token));
            ++depth;
        }
        if (depth != 1)
        {
            throw PluginError(concat(where, ": expression leaves ", depth, " values"));
        }
    }
};

// The op's scalar fields as the shape rules read them (ARG leaves): a field's value, or, for a field holding the
// shape-input marker, the shape input it stands for (they follow the tensor inputs in field order).
struct FieldValues
{
    std::vector<double> values;
    std::vector<int32_t> shapeInput; // per field: the index of its shape input, or -1
    int32_t nbShapeInputs{0};

    FieldValues(OpDecl const& decl, std::vector<double> scalars)
        : values(std::move(scalars))
    {
        for (int32_t f = 0; f < decl.nbFields; ++f)
        {
            bool const marker = decl.fields[f].isShapeInputSentinel(values.at(static_cast<size_t>(f)));
            shapeInput.push_back(marker ? nbShapeInputs++ : -1);
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

// Concrete value of an expression over input dims and fields; sizes take `sizes`.
int64_t evaluateConcrete(
    Expr const& e, nvinfer1::Dims const* inputs, FieldValues const& fields, std::vector<int64_t> const& sizes)
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
            default:
                if (fields.shapeInput[static_cast<size_t>(a)] >= 0)
                {
                    throw PluginError("a shape input value is not known here");
                }
                return static_cast<int64_t>(fields.values[static_cast<size_t>(a)]);
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

// Whether every input dim and field the expression reads is known (a dim >= 0, a field not from a shape input).
bool known(Expr const& e, nvinfer1::Dims const* inputs, FieldValues const& fields)
{
    for (size_t i = 0; i < e.size(); ++i)
    {
        if (isBinary(e[i]))
        {
            continue;
        }
        if ((e[i] == kDIM && inputs[e[i + 1]].d[e[i + 2]] < 0)
            || (e[i] == kARG && fields.shapeInput[static_cast<size_t>(e[i + 1])] >= 0))
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

// The shape programs of an op, parsed once per library (its creator owns them, for as long as the library lives).
struct Rules
{
    std::vector<ShapeProgram> programs;
    std::string error; // why the generated programs are unusable, or empty

    explicit Rules(OpDecl const& decl) noexcept
    {
        try
        {
            size_t pos = 0;
            auto const total = static_cast<size_t>(decl.nbProgramTokens);
            while (pos < total)
            {
                auto const length = static_cast<size_t>(decl.programs[pos]);
                std::string const where = concat("compiled shape program ", programs.size());
                if (decl.programs[pos] <= 0 || pos + 1 + length > total)
                {
                    throw PluginError(concat(where, " has a bad length"));
                }
                programs.push_back(ShapeProgram::parse(decl.programs + pos + 1, length, decl, where));
                pos += 1 + length;
            }
            if (programs.empty())
            {
                throw PluginError("the library holds no shape program for it (regenerate the tables)");
            }
            for (int32_t a = 0; a < decl.nbAliasedInputs; ++a)
            {
                int32_t const input = decl.aliasedInputs[a];
                for (int32_t b = 0; b < a; ++b)
                {
                    if (decl.aliasedInputs[b] == input)
                    {
                        throw PluginError(
                            concat("input ", input, " is aliased to two outputs (regenerate the tables)"));
                    }
                }
                if (input < 0 || input >= decl.nbInputs)
                {
                    throw PluginError(concat("aliased input ", input, " is not an input (regenerate the tables)"));
                }
            }
            for (auto const& program : programs)
            {
                // Output counts and types are asked before any rank is known: every program must agree on them.
                bool same = program.sizes.size() == programs.front().sizes.size();
                for (size_t o = 0; same && o < program.outputs.size(); ++o)
                {
                    same = program.outputs[o].dtypeCode == programs.front().outputs[o].dtypeCode;
                }
                if (!same)
                {
                    throw PluginError("its shape programs disagree on the output types or size tensors");
                }
            }
        }
        catch (std::exception const& e)
        {
            programs.clear();
            error = e.what();
        }
    }
};

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
    DeclaredPlugin(OpDecl const& decl, std::vector<double> scalars, std::vector<ShapeProgram> const& programs)
        : PluginInterfaces(std::in_place, decl, decl)
        , mFields(decl, std::move(scalars))
        , mPrograms(programs)
    {
    }
    DeclaredPlugin(DeclaredPlugin const& other)
        : PluginInterfaces(other)
        , mFields(other.mFields)
        , mPrograms(other.mPrograms)
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
        return firstAliased() + mDecl.nbAliasedInputs;
    }

    int32_t getAliasedInput(int32_t outputIndex) noexcept override
    {
        int32_t const a = outputIndex - firstAliased();
        return a >= 0 && a < mDecl.nbAliasedInputs ? mDecl.aliasedInputs[a] : -1;
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
                checkShapeInputs(shapeInputs, nbShapeInputs);
                ShapeProgram const& program = programFor([&](int32_t i) { return inputs[i].nbDims; });
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
                    outputs[firstAliased() + a] = inputs[mDecl.aliasedInputs[a]];
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
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override
    {
        auto const rankOf = [&](int32_t i) { return in[i].desc.dims.nbDims; };
        if (checkInputs("configurePlugin", nbInputs, nbOutputs, rankOf) != 0)
        {
            return 1;
        }
        return guarded("configurePlugin", int32_t{1},
            [&]
            {
                ShapeProgram const& program = programFor(rankOf);
                checkSizes(program, maxOf(in, nbInputs).dims, "the profile's largest");
                checkSizes(program, currentOf(in, nbInputs).dims, "the");
                checkAliases(currentOf(in, nbInputs), currentOf(out, nbOutputs));
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
        auto const rankOf = [&](int32_t i) { return in[i].dims.nbDims; };
        if (checkInputs("onShapeChange", nbInputs, nbOutputs, rankOf) != 0)
        {
            return 1;
        }
        return guarded("onShapeChange", int32_t{1},
            [&]
            {
                checkSizes(programFor(rankOf), actualOf(in, nbInputs).dims, "the");
                checkAliases(actualOf(in, nbInputs), actualOf(out, nbOutputs));
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
                    mWriter.add(mDecl.fields[f], mFields.values.at(static_cast<size_t>(f)));
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

    // The counts, and the inputs' ranks against those the op accepts: what configurePlugin and onShapeChange check.
    template <typename RankOf>
    int32_t checkInputs(char const* method, int32_t nbInputs, int32_t nbOutputs, RankOf&& rankOf) const noexcept
    {
        return guarded(method, int32_t{1},
            [&]
            {
                checkCounts(nbInputs, nbOutputs);
                programFor(rankOf);
                return int32_t{0};
            });
    }

    void checkCounts(int32_t nbInputs, int32_t nbOutputs) const
    {
        if (nbInputs != mDecl.nbInputs || nbOutputs != getNbOutputs())
        {
            fail("expected ", mDecl.nbInputs, " inputs and ", getNbOutputs(), " outputs (", mDecl.nbOutputs, ", ",
                mPrograms.front().sizes.size(), " size tensors and ", mDecl.nbAliasedInputs, " updated inputs), got ",
                nbInputs, " and ", nbOutputs);
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

    // The program for these input ranks; an error listing the accepted ranks if the fake kernel takes none.
    template <typename RankOf>
    ShapeProgram const& programFor(RankOf&& rankOf) const
    {
        for (auto const& program : mPrograms)
        {
            bool match = true;
            for (int32_t i = 0; match && i < mDecl.nbInputs; ++i)
            {
                match = rankOf(i) == program.inputRanks[static_cast<size_t>(i)];
            }
            if (match)
            {
                return program;
            }
        }
        std::string names;
        std::string got;
        for (int32_t i = 0; i < mDecl.nbInputs; ++i)
        {
            names += concat(i ? ", " : "", mDecl.inputs[i].name);
            got += concat(i ? ", " : "", rankOf(i));
        }
        std::string accepted;
        for (auto const& program : mPrograms)
        {
            std::string ranks;
            for (int32_t rank : program.inputRanks)
            {
                ranks += concat(ranks.empty() ? "" : ", ", rank);
            }
            accepted += concat(accepted.empty() ? "" : ", ", "(", ranks, ")");
        }
        fail("inputs (", names, ") have ranks (", got, "); the op's fake kernel accepts ", accepted);
    }

    // The fake kernel's equalities between input sizes (e.g. weight's length and x's last dim), where the dims are
    // known.
    void checkSizes(ShapeProgram const& program, std::vector<nvinfer1::Dims> const& dims, char const* which) const
    {
        for (auto const& [lhs, rhs] : program.checks)
        {
            if (!known(lhs, dims.data(), mFields) || !known(rhs, dims.data(), mFields))
            {
                continue;
            }
            int64_t const a = evaluateConcrete(lhs, dims.data(), mFields, {});
            int64_t const b = evaluateConcrete(rhs, dims.data(), mFields, {});
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
        if (e.size() == 2 && e[0] == kARG)
        {
            return concat("'", mDecl.fields[e[1]].name, "'");
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
            uppers.push_back(evaluateConcrete(size.second, inDims, mFields, {}));
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
                    dims.d[d] = known ? outDims[o].d[d] : evaluateConcrete(exprs[d], inDims, mFields, uppers);
                }
            }
            out.push_back(tensorOf(outputs ? outputs[o] : nullptr, outTypes[o], dims,
                o < mDecl.nbOutputs ? mDecl.outputs[o] : "a size tensor"));
        }
        LaunchArgs args{in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()),
            mFields.values.data(), static_cast<int32_t>(mFields.values.size()), workspace, 0, mTactic, stream};
        if (workspace != nullptr && mDecl.workspace != nullptr)
        {
            args.workspaceSize = mDecl.workspace(args);
        }
        return fn(args);
    }

    FieldValues mFields;
    std::vector<ShapeProgram> const& mPrograms;
    int32_t mTactic{0};
    std::string mTimingCacheId;
    plugin::FieldWriter mWriter;
};

class DeclaredCreator : public Named<nvinfer1::IPluginCreatorV3One>
{
public:
    explicit DeclaredCreator(OpDecl const& decl)
        : Named(decl)
        , mRules(decl)
    {
        for (int32_t f = 0; f < decl.nbFields; ++f)
        {
            mFields.emplace_back(decl.fields[f].name, nullptr, decl.fields[f].type, 1);
        }
        mCollection.nbFields = static_cast<int32_t>(mFields.size());
        mCollection.fields = mFields.data();
    }

    nvinfer1::IPluginV3* createPlugin(char const* /*name*/, nvinfer1::PluginFieldCollection const* fc,
        nvinfer1::TensorRTPhase /*phase*/) noexcept override
    {
        try
        {
            if (!mRules.error.empty())
            {
                throw PluginError(mRules.error);
            }
            plugin::FieldReader reader(mDecl.pluginName, fc, mCollection);
            std::vector<double> scalars;
            for (int32_t f = 0; f < mDecl.nbFields; ++f)
            {
                scalars.push_back(reader.number(mDecl.fields[f]));
            }
            return new DeclaredPlugin(mDecl, std::move(scalars), mRules.programs);
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
    Rules mRules;
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
