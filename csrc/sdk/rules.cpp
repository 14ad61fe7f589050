#include "rules.h"

#include <cmath>

namespace ttp::sdk::rules
{
namespace
{

int64_t floorDiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Every operand in range and the postfix stack well formed; an ARG leaf reads an integer field.
void checkExpr(
    Expr const& e, std::vector<int32_t> const& inputRanks, int32_t nbSizes, OpShape const& op, std::string const& where)
{
    int32_t depth = 0;
    for (size_t i = 0; i < e.size(); ++i)
    {
        int64_t const token = e[i];
        if (isBinary(token))
        {
            if (depth < 2)
            {
                throw RuleError(concat(where, ": operator without operands"));
            }
            --depth;
            continue;
        }
        if ((token != kCONST && token != kDIM && token != kSIZE && token != kARG)
            || i + operandCount(token) >= e.size())
        {
            throw RuleError(concat(where, ": bad token ", token));
        }
        int64_t const a = e[i + 1];
        auto const nbFields = static_cast<int64_t>(op.fields.size());
        bool ok = true;
        switch (token)
        {
        case kDIM:
            ok = a >= 0 && a < static_cast<int64_t>(inputRanks.size()) && e[i + 2] >= 0 && e[i + 2] < inputRanks[a];
            break;
        case kSIZE: ok = a >= 0 && a < nbSizes; break;
        case kARG: ok = a >= 0 && a < nbFields && !op.fields[static_cast<size_t>(a)].isFloat; break;
        default: break;
        }
        if (!ok)
        {
            throw RuleError(concat(where, ": operand out of range in token ", token));
        }
        i += static_cast<size_t>(operandCount(token));
        ++depth;
    }
    if (depth != 1)
    {
        throw RuleError(concat(where, ": expression leaves ", depth, " values"));
    }
}

} // namespace

// `where` names the program in errors. The tables are generated, but a library built from a stale or edited table
// must fail here rather than index out of range later.
ShapeProgram ShapeProgram::parse(int64_t const* tokens, size_t length, OpShape const& op, std::string const& where)
{
    ShapeProgram program;
    auto const nbInputs = static_cast<int32_t>(op.inputs.size());
    size_t pos = 0;
    auto take = [&]() -> int64_t
    {
        if (pos >= length)
        {
            throw RuleError(concat(where, " ends early (", length, " tokens)"));
        }
        return tokens[pos++];
    };
    auto count = [&](char const* what, int64_t limit) -> int32_t
    {
        int64_t const n = take();
        if (n < 0 || n > limit)
        {
            throw RuleError(concat(where, ": ", what, " must be in [0, ", limit, "], got ", n));
        }
        return static_cast<int32_t>(n);
    };
    if (take() != kMAGIC || take() != kVERSION)
    {
        throw RuleError(concat(where, " is not a version-", kVERSION, " shape program (regenerate the tables)"));
    }
    if (count("the input count", nbInputs) != nbInputs)
    {
        throw RuleError(concat(where, " describes another number of inputs than the op's ", nbInputs));
    }
    for (int32_t i = 0; i < nbInputs; ++i)
    {
        program.inputRanks.push_back(count("an input rank", kMAX_RANK));
    }
    count("the per-call shape input count", 0);
    int32_t const nbSizes = count("the size tensor count", 64);
    auto expr = [&](bool sizesAllowed) -> Expr
    {
        int64_t const n = take();
        if (n <= 0 || pos + static_cast<size_t>(n) > length)
        {
            throw RuleError(concat(where, " has a malformed expression"));
        }
        Expr e(tokens + pos, tokens + pos + n);
        pos += static_cast<size_t>(n);
        checkExpr(e, program.inputRanks, sizesAllowed ? nbSizes : 0, op, where);
        return e;
    };
    for (int32_t s = 0; s < nbSizes; ++s)
    {
        Expr opt = expr(false);
        program.sizes.emplace_back(std::move(opt), expr(false));
    }
    if (count("the output count", op.nbOutputs) != op.nbOutputs)
    {
        throw RuleError(concat(where, " describes another number of outputs than the op's ", op.nbOutputs));
    }
    for (int32_t o = 0; o < op.nbOutputs; ++o)
    {
        Output out;
        out.dtypeCode = take();
        if (out.dtypeCode < -static_cast<int64_t>(nbInputs) || out.dtypeCode > 16)
        {
            throw RuleError(concat(where, ": output ", o, " has dtype code ", out.dtypeCode));
        }
        int32_t const rank = count("an output rank", kMAX_RANK);
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
        throw RuleError(concat(where, " has ", length - pos, " trailing tokens"));
    }
    return program;
}

FieldValues::FieldValues(OpShape const& op, std::vector<double> scalars)
    : values(std::move(scalars))
{
    for (size_t f = 0; f < op.fields.size(); ++f)
    {
        bool const marker = values.at(f) == op.fields[f].shapeInputSentinel;
        shapeInput.push_back(marker ? nbShapeInputs++ : -1);
    }
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

int64_t applyConcrete(int64_t op, int64_t x, int64_t y)
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
            throw RuleError("division by zero in a shape expression");
        }
        return op == kFLOORDIV ? floorDiv(x, y) : -floorDiv(-x, y);
    case kMIN: return x < y ? x : y;
    default: return x > y ? x : y;
    }
}

Rules::Rules(OpShape op, int64_t const* programs, int32_t nbTokens) noexcept
    : mOp(std::move(op))
{
    try
    {
        size_t pos = 0;
        auto const total = static_cast<size_t>(nbTokens);
        while (pos < total)
        {
            auto const length = static_cast<size_t>(programs[pos]);
            std::string const where = concat("compiled shape program ", mPrograms.size());
            if (programs[pos] <= 0 || pos + 1 + length > total)
            {
                throw RuleError(concat(where, " has a bad length"));
            }
            mPrograms.push_back(ShapeProgram::parse(programs + pos + 1, length, mOp, where));
            pos += 1 + length;
        }
        if (mPrograms.empty())
        {
            throw RuleError("the library holds no shape program for it (regenerate the tables)");
        }
        for (auto const& program : mPrograms)
        {
            // Output counts and types are asked before any rank is known: every program must agree on them.
            bool same = program.sizes.size() == mPrograms.front().sizes.size();
            for (size_t o = 0; same && o < program.outputs.size(); ++o)
            {
                same = program.outputs[o].dtypeCode == mPrograms.front().outputs[o].dtypeCode;
            }
            if (!same)
            {
                throw RuleError("its shape programs disagree on the output types or size tensors");
            }
        }
    }
    catch (std::exception const& e)
    {
        mPrograms.clear();
        mError = e.what();
    }
}

std::string Rules::describe(Expr const& e) const
{
    if (e.size() == 3 && e[0] == kDIM)
    {
        return concat("'", mOp.inputs[static_cast<size_t>(e[1])], "'.shape[", e[2], "]");
    }
    if (e.size() == 2 && e[0] == kARG)
    {
        return concat("'", mOp.fields[static_cast<size_t>(e[1])].name, "'");
    }
    if (e.size() == 2 && e[0] == kCONST)
    {
        return concat(e[1]);
    }
    return "(a size expression)";
}

std::string Rules::rankMessage(std::vector<int32_t> const& ranks) const
{
    std::string names;
    std::string got;
    for (size_t i = 0; i < mOp.inputs.size(); ++i)
    {
        names += concat(i ? ", " : "", mOp.inputs[i]);
        got += concat(i ? ", " : "", ranks[i]);
    }
    std::string accepted;
    for (auto const& program : mPrograms)
    {
        std::string list;
        for (int32_t rank : program.inputRanks)
        {
            list += concat(list.empty() ? "" : ", ", rank);
        }
        accepted += concat(accepted.empty() ? "" : ", ", "(", list, ")");
    }
    return concat("inputs (", names, ") have ranks (", got, "); the op's fake kernel accepts ", accepted);
}

} // namespace ttp::sdk::rules
