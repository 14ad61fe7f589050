#include "expr.h"

#include <limits>

namespace ttp::harness
{
namespace
{

using Op = nvinfer1::DimensionOperation;

int64_t floorDiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
    {
        --q;
    }
    return q;
}

// Returns false (leaving `out` alone) for a division by zero.
bool apply(Op op, int64_t a, int64_t b, int64_t& out)
{
    switch (op)
    {
    case Op::kSUM: out = a + b; return true;
    case Op::kPROD: out = a * b; return true;
    case Op::kMAX: out = a > b ? a : b; return true;
    case Op::kMIN: out = a < b ? a : b; return true;
    case Op::kSUB: out = a - b; return true;
    case Op::kEQUAL: out = a == b ? 1 : 0; return true;
    case Op::kLESS: out = a < b ? 1 : 0; return true;
    case Op::kFLOOR_DIV:
        if (b == 0)
        {
            return false;
        }
        out = floorDiv(a, b);
        return true;
    case Op::kCEIL_DIV:
        if (b == 0)
        {
            return false;
        }
        out = -floorDiv(-a, b);
        return true;
    }
    return false;
}

bool validOperation(Op op)
{
    auto const v = static_cast<int32_t>(op);
    return v >= 0 && v < nvinfer1::EnumMax<Op>();
}

} // namespace

char const* operationName(nvinfer1::DimensionOperation op) noexcept
{
    switch (op)
    {
    case Op::kSUM: return "+";
    case Op::kPROD: return "*";
    case Op::kMAX: return "max";
    case Op::kMIN: return "min";
    case Op::kSUB: return "-";
    case Op::kEQUAL: return "==";
    case Op::kLESS: return "<";
    case Op::kFLOOR_DIV: return "floordiv";
    case Op::kCEIL_DIV: return "ceildiv";
    }
    return "?";
}

DimExpr::DimExpr(Node const& node)
    : mNode(node)
    , mImplementation(mNode)
{
    mImpl = &mImplementation;
}

int64_t DimExpr::Impl::getConstantValue() const
{
    return mNode.kind == Kind::kCONSTANT ? mNode.value : std::numeric_limits<int64_t>::min();
}

bool DimExpr::dependsOnSizeTensor() const noexcept
{
    switch (mNode.kind)
    {
    case Kind::kSIZE_TENSOR: return true;
    case Kind::kOPERATION: return mNode.first->dependsOnSizeTensor() || mNode.second->dependsOnSizeTensor();
    default: return false;
    }
}

// Built without iostreams: number formatting through the locale has crashed in processes that load torch
// (g++ 13, torch 2.11+cu130, inside a torch extension).
std::string DimExpr::str() const
{
    switch (mNode.kind)
    {
    case Kind::kCONSTANT: return std::to_string(mNode.value);
    case Kind::kINPUT_DIM: return "in" + std::to_string(mNode.tensor) + ".d" + std::to_string(mNode.index);
    case Kind::kSHAPE_VALUE: return "shape" + std::to_string(mNode.tensor) + "[" + std::to_string(mNode.index) + "]";
    case Kind::kSIZE_TENSOR:
        return "size(out" + std::to_string(mNode.tensor) + ", opt=" + mNode.first->str()
               + ", upper=" + mNode.second->str() + ")";
    case Kind::kOPERATION:
    {
        std::string const name = operationName(mNode.op);
        bool const infix = name == "+" || name == "*" || name == "-" || name == "==" || name == "<";
        if (infix)
        {
            return "(" + mNode.first->str() + " " + name + " " + mNode.second->str() + ")";
        }
        return name + "(" + mNode.first->str() + ", " + mNode.second->str() + ")";
    }
    }
    return "?";
}

int64_t evaluate(DimExpr const& expr, ShapePoint const& point)
{
    DimExpr::Node const& n = expr.node();
    switch (n.kind)
    {
    case DimExpr::Kind::kCONSTANT: return n.value;
    case DimExpr::Kind::kINPUT_DIM:
        if (n.tensor >= static_cast<int32_t>(point.inputs.size()) || n.index >= point.inputs[n.tensor].nbDims)
        {
            throw EvalError("no value for " + expr.str());
        }
        return point.inputs[n.tensor].d[n.index];
    case DimExpr::Kind::kSHAPE_VALUE:
        if (n.tensor >= static_cast<int32_t>(point.shapeValues.size())
            || n.index >= static_cast<int32_t>(point.shapeValues[n.tensor].size()))
        {
            throw EvalError("no value for " + expr.str());
        }
        return point.shapeValues[n.tensor][n.index];
    case DimExpr::Kind::kSIZE_TENSOR:
        switch (point.sizeTensors)
        {
        case ShapePoint::SizeTensors::kZERO: return 0;
        case ShapePoint::SizeTensors::kOPT: return evaluate(*n.first, point);
        case ShapePoint::SizeTensors::kUPPER: return evaluate(*n.second, point);
        case ShapePoint::SizeTensors::kVALUE:
        {
            auto const found = point.sizeValues.find(n.tensor);
            return found != point.sizeValues.end() ? found->second : evaluate(*n.second, point);
        }
        }
        return 0;
    case DimExpr::Kind::kOPERATION:
    {
        int64_t result = 0;
        if (!apply(n.op, evaluate(*n.first, point), evaluate(*n.second, point), result))
        {
            throw EvalError("division by zero in " + expr.str());
        }
        return result;
    }
    }
    return 0;
}

ExprBuilder::ExprBuilder()
    : mImplementation(*this)
{
    mImpl = &mImplementation;
}

DimExpr const* ExprBuilder::make(DimExpr::Node const& node)
{
    mArena.push_back(std::make_unique<DimExpr>(node));
    DimExpr const* expr = mArena.back().get();
    mOwned.insert(expr);
    return expr;
}

DimExpr const* ExprBuilder::own(nvinfer1::IDimensionExpr const* expr) const
{
    return mOwned.count(expr) != 0 ? static_cast<DimExpr const*>(expr) : nullptr;
}

nvinfer1::IDimensionExpr const* ExprBuilder::Impl::constant(int64_t value)
{
    DimExpr::Node node;
    node.value = value;
    return mOwner.make(node);
}

nvinfer1::IDimensionExpr const* ExprBuilder::Impl::operation(
    nvinfer1::DimensionOperation op, nvinfer1::IDimensionExpr const& first, nvinfer1::IDimensionExpr const& second)
{
    DimExpr const* a = mOwner.own(&first);
    DimExpr const* b = mOwner.own(&second);
    if (a == nullptr || b == nullptr)
    {
        mOwner.mProblems.push_back("operation() was given an IDimensionExpr that did not come from this builder");
        return nullptr;
    }
    if (!validOperation(op))
    {
        // The documented answer to an invalid operation.
        return nullptr;
    }
    DimExpr::Node node;
    if (a->node().kind == DimExpr::Kind::kCONSTANT && b->node().kind == DimExpr::Kind::kCONSTANT
        && apply(op, a->node().value, b->node().value, node.value))
    {
        return mOwner.make(node);
    }
    node.kind = DimExpr::Kind::kOPERATION;
    node.op = op;
    node.first = a;
    node.second = b;
    return mOwner.make(node);
}

nvinfer1::IDimensionExpr const* ExprBuilder::Impl::declareSizeTensor(
    int32_t outputIndex, nvinfer1::IDimensionExpr const& opt, nvinfer1::IDimensionExpr const& upper)
{
    DimExpr const* o = mOwner.own(&opt);
    DimExpr const* u = mOwner.own(&upper);
    if (o == nullptr || u == nullptr)
    {
        mOwner.mProblems.push_back(
            "declareSizeTensor() was given an IDimensionExpr that did not come from this builder");
        return nullptr;
    }
    if (outputIndex < 0 || outputIndex >= mOwner.mNbOutputs)
    {
        mOwner.mProblems.push_back("declareSizeTensor(" + std::to_string(outputIndex) + ", ...): the plugin has "
                                   + std::to_string(mOwner.mNbOutputs) + " outputs");
        return nullptr;
    }
    if (o->dependsOnSizeTensor() || u->dependsOnSizeTensor())
    {
        mOwner.mProblems.push_back("declareSizeTensor(" + std::to_string(outputIndex)
                                   + ", ...): opt and upper must not depend on a size tensor, got opt=" + o->str()
                                   + ", upper=" + u->str());
    }
    bool known = false;
    for (SizeTensorDecl const& decl : mOwner.mSizeTensors)
    {
        known = known || decl.output == outputIndex;
    }
    if (!known)
    {
        mOwner.mSizeTensors.push_back({outputIndex, o, u});
    }
    DimExpr::Node node;
    node.kind = DimExpr::Kind::kSIZE_TENSOR;
    node.tensor = outputIndex;
    node.first = o;
    node.second = u;
    return mOwner.make(node);
}

} // namespace ttp::harness
