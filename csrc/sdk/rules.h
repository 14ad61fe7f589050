// The shape rules of a declared op, evaluated in C++ by both its TensorRT plugin (symbolically, over IExprBuilder
// expressions) and its eager torch kernel (over integers): one parser, one interpreter, one rule selection by input
// ranks and one set of messages. No TensorRT and no torch here. The program encoding is torchtrt_plugins/_derive.py's.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ttp::sdk::rules
{

// An op whose call breaks its shape rules, or tables that cannot be read (thrown by everything below).
class RuleError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

template <typename... Args>
std::string concat(Args const&... args)
{
    std::ostringstream out;
    (out << ... << args);
    return out.str();
}

constexpr int64_t kMAGIC = 0x54545053;
constexpr int64_t kVERSION = 3;
// Leaves, then operators. The compiled programs never hold a per-call shape input leaf (3).
constexpr int64_t kCONST = 1, kDIM = 2, kSIZE = 4, kARG = 5;
constexpr int64_t kADD = 10, kSUB = 11, kMUL = 12, kFLOORDIV = 13, kCEILDIV = 14, kMIN = 15, kMAX = 16;
constexpr int32_t kMAX_RANK = 8;

inline bool isBinary(int64_t token)
{
    return token >= kADD && token <= kMAX;
}

inline int32_t operandCount(int64_t token)
{
    return token == kDIM ? 2 : 1;
}

using Expr = std::vector<int64_t>;

// What the rules know of an op: names for messages, counts, and which scalar arguments are floats.
struct OpShape
{
    struct Field
    {
        std::string name;
        bool isFloat;
        double shapeInputSentinel; // NaN: none
    };
    std::string op;
    std::vector<std::string> inputs;
    int32_t nbOutputs{0};
    std::vector<Field> fields;
};

struct Output
{
    int64_t dtypeCode; // >= 0: a TensorRT DataType value; -(i + 1): the type of input i
    std::vector<Expr> dims;
};

// One parsed, validated shape program (one combination of input ranks).
struct ShapeProgram
{
    std::vector<int32_t> inputRanks;
    std::vector<std::pair<Expr, Expr>> sizes; // data-dependent sizes: (opt, upper)
    std::vector<Output> outputs;
    std::vector<std::pair<Expr, Expr>> checks; // input sizes the fake kernel requires to be equal

    static ShapeProgram parse(int64_t const* tokens, size_t length, OpShape const& op, std::string const& where);
};

// The op's scalar arguments as the rules read them (ARG leaves): a value, or, for one holding the shape-input
// marker (plugin only), the index of the shape input it stands for.
struct FieldValues
{
    std::vector<double> values;
    std::vector<int32_t> shapeInput; // per field: its shape input, or -1
    int32_t nbShapeInputs{0};

    FieldValues() = default;
    FieldValues(OpShape const& op, std::vector<double> scalars);
};

// What the evaluators read of the fields, without owning them: the eager kernel points it at a call's scalars (no
// shape inputs there) instead of copying them into a FieldValues per call.
struct FieldView
{
    double const* values;
    int32_t const* shapeInput; // per field, or null: no field is a shape input

    explicit FieldView(double const* scalars, int32_t const* shapeInputs = nullptr) noexcept
        : values(scalars)
        , shapeInput(shapeInputs)
    {
    }
    FieldView(FieldValues const& fields) noexcept // NOLINT(google-explicit-constructor): the plugin passes its own
        : values(fields.values.data())
        , shapeInput(fields.shapeInput.data())
    {
    }

    bool isShapeInput(int64_t field) const noexcept
    {
        return shapeInput != nullptr && shapeInput[field] >= 0;
    }
};

// Evaluates a postfix expression over any value type: `leaf(token, a, b)` makes leaves, `apply(op, x, y)` combines.
// The operand stack lives on the C++ stack for the expressions rules are made of (the eager kernel evaluates several
// per call); a longer one takes the heap.
template <typename T, typename Leaf, typename Apply>
T evaluate(Expr const& e, Leaf&& leaf, Apply&& apply)
{
    constexpr size_t kLOCAL = 32;
    T local[kLOCAL];
    std::vector<T> heap;
    T* stack = local;
    if (e.size() > kLOCAL)
    {
        heap.resize(e.size());
        stack = heap.data();
    }
    size_t depth = 0;
    for (size_t i = 0; i < e.size(); ++i)
    {
        if (isBinary(e[i]))
        {
            --depth;
            stack[depth - 1] = apply(e[i], stack[depth - 1], stack[depth]);
            continue;
        }
        int64_t const b = operandCount(e[i]) == 2 ? e[i + 2] : 0;
        stack[depth++] = leaf(e[i], e[i + 1], b);
        i += static_cast<size_t>(operandCount(e[i]));
    }
    return stack[depth - 1];
}

bool usesSize(Expr const& e);
int64_t applyConcrete(int64_t op, int64_t x, int64_t y);

// The integer value of `e`: `dim(input, axis)` gives input dims, `sizes` the data-dependent sizes.
template <typename DimOf>
int64_t evaluateConcrete(Expr const& e, DimOf&& dim, FieldView fields, int64_t const* sizes = nullptr)
{
    return evaluate<int64_t>(
        e,
        [&](int64_t token, int64_t a, int64_t b) -> int64_t
        {
            switch (token)
            {
            case kCONST: return a;
            case kDIM: return dim(a, b);
            case kSIZE:
                if (sizes == nullptr)
                {
                    throw RuleError("a data-dependent size is not known here");
                }
                return sizes[a];
            default:
                if (fields.isShapeInput(a))
                {
                    throw RuleError("a shape input value is not known here");
                }
                return static_cast<int64_t>(fields.values[a]);
            }
        },
        applyConcrete);
}

// Whether every input dim and field `e` reads is known (a dim >= 0, a field not from a shape input).
template <typename DimOf>
bool known(Expr const& e, DimOf&& dim, FieldView fields)
{
    for (size_t i = 0; i < e.size(); ++i)
    {
        if (isBinary(e[i]))
        {
            continue;
        }
        if ((e[i] == kDIM && dim(e[i + 1], e[i + 2]) < 0) || (e[i] == kARG && fields.isShapeInput(e[i + 1])))
        {
            return false;
        }
        i += static_cast<size_t>(operandCount(e[i]));
    }
    return true;
}

// An op's shape programs, parsed once (per plugin creator, per eager registration).
class Rules
{
public:
    Rules(OpShape op, int64_t const* programs, int32_t nbTokens) noexcept;

    OpShape const& op() const noexcept
    {
        return mOp;
    }
    std::vector<ShapeProgram> const& programs() const noexcept
    {
        return mPrograms;
    }
    // Why the generated programs are unusable, or empty.
    std::string const& error() const noexcept
    {
        return mError;
    }
    size_t nbSizes() const noexcept
    {
        return mPrograms.empty() ? 0 : mPrograms.front().sizes.size();
    }

    // The program for these input ranks; a RuleError naming the accepted ones if the fake kernel takes none.
    template <typename RankOf>
    ShapeProgram const& programFor(RankOf&& rankOf) const
    {
        for (auto const& program : mPrograms)
        {
            bool match = true;
            for (size_t i = 0; match && i < mOp.inputs.size(); ++i)
            {
                match = rankOf(static_cast<int32_t>(i)) == program.inputRanks[i];
            }
            if (match)
            {
                return program;
            }
        }
        std::vector<int32_t> ranks;
        for (size_t i = 0; i < mOp.inputs.size(); ++i)
        {
            ranks.push_back(rankOf(static_cast<int32_t>(i)));
        }
        throw RuleError(rankMessage(ranks));
    }

    // The fake kernel's equalities between input sizes, where the dims are known; `which` says whose dims.
    template <typename DimOf>
    void checkSizes(ShapeProgram const& program, DimOf&& dim, FieldView fields, char const* which) const
    {
        for (auto const& [lhs, rhs] : program.checks)
        {
            if (!known(lhs, dim, fields) || !known(rhs, dim, fields))
            {
                continue;
            }
            int64_t const a = evaluateConcrete(lhs, dim, fields);
            int64_t const b = evaluateConcrete(rhs, dim, fields);
            if (a != b)
            {
                throw RuleError(concat("input sizes break the op's fake kernel check ", describe(lhs),
                    " == ", describe(rhs), ": ", which, " input dims give ", a, " and ", b));
            }
        }
    }

    std::string describe(Expr const& e) const;

private:
    std::string rankMessage(std::vector<int32_t> const& ranks) const;

    OpShape mOp;
    std::vector<ShapeProgram> mPrograms;
    std::string mError;
};

} // namespace ttp::sdk::rules
