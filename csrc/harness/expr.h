// The harness's IExprBuilder: dimension expressions built by a plugin's getOutputShapes are kept as a small
// expression tree, printed symbolically and evaluated for each point of interest (min/opt/max of the profile,
// concrete shapes, with the values of shape inputs and, once known, of size tensors).
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ttp::harness
{

class DimExpr final : public nvinfer1::IDimensionExpr
{
public:
    enum class Kind
    {
        kCONSTANT,
        kINPUT_DIM,   // dimension `index` of tensor input `tensor`
        kSHAPE_VALUE, // element `index` of shape input `tensor`
        kOPERATION,
        kSIZE_TENSOR // the value of size-tensor output `tensor`
    };

    struct Node
    {
        Kind kind{Kind::kCONSTANT};
        int64_t value{0};
        int32_t tensor{0};
        int32_t index{0};
        nvinfer1::DimensionOperation op{nvinfer1::DimensionOperation::kSUM};
        DimExpr const* first{nullptr};  // operation operands; size tensor: opt
        DimExpr const* second{nullptr}; // size tensor: upper bound
    };

    explicit DimExpr(Node const& node);
    ~DimExpr() noexcept override = default;

    Node const& node() const noexcept
    {
        return mNode;
    }
    bool dependsOnSizeTensor() const noexcept;
    std::string str() const;

private:
    class Impl final : public nvinfer1::apiv::VDimensionExpr
    {
    public:
        explicit Impl(Node const& node)
            : mNode(node)
        {
        }
        bool isConstant() const override
        {
            return mNode.kind == Kind::kCONSTANT;
        }
        int64_t getConstantValue() const override;
        bool isSizeTensor() const override
        {
            return mNode.kind == Kind::kSIZE_TENSOR;
        }

    private:
        Node const& mNode;
    };

    Node mNode;
    Impl mImplementation;
};

// Values of the symbols at one point.
struct ShapePoint
{
    enum class SizeTensors
    {
        kZERO,  // min: a data-dependent extent may be 0
        kOPT,   // the declared opt formula
        kUPPER, // the declared upper bound (what buffers are allocated for)
        kVALUE  // values read back after enqueue (upper bound where none was read)
    };
    std::vector<nvinfer1::Dims> inputs;
    std::vector<std::vector<int64_t>> shapeValues;
    SizeTensors sizeTensors{SizeTensors::kUPPER};
    std::map<int32_t, int64_t> sizeValues;
};

class EvalError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

int64_t evaluate(DimExpr const& expr, ShapePoint const& point);

class ExprBuilder final : public nvinfer1::IExprBuilder
{
public:
    struct SizeTensorDecl
    {
        int32_t output;
        DimExpr const* opt;
        DimExpr const* upper;
    };

    ExprBuilder();
    ~ExprBuilder() noexcept override = default;

    DimExpr const* make(DimExpr::Node const& node);
    // nullptr for a pointer that did not come from this builder.
    DimExpr const* own(nvinfer1::IDimensionExpr const* expr) const;

    void setNbOutputs(int32_t nbOutputs) noexcept
    {
        mNbOutputs = nbOutputs;
    }
    std::vector<SizeTensorDecl> const& sizeTensors() const noexcept
    {
        return mSizeTensors;
    }
    // Misuse of the builder seen while the plugin built its expressions (reported as violations).
    std::vector<std::string> const& problems() const noexcept
    {
        return mProblems;
    }

private:
    class Impl final : public nvinfer1::apiv::VExprBuilder
    {
    public:
        explicit Impl(ExprBuilder& owner)
            : mOwner(owner)
        {
        }
        nvinfer1::IDimensionExpr const* constant(int64_t value) override;
        nvinfer1::IDimensionExpr const* operation(nvinfer1::DimensionOperation op,
            nvinfer1::IDimensionExpr const& first, nvinfer1::IDimensionExpr const& second) override;
        nvinfer1::IDimensionExpr const* declareSizeTensor(
            int32_t outputIndex, nvinfer1::IDimensionExpr const& opt, nvinfer1::IDimensionExpr const& upper) override;

    private:
        ExprBuilder& mOwner;
    };

    std::vector<std::unique_ptr<DimExpr>> mArena;
    std::set<nvinfer1::IDimensionExpr const*> mOwned;
    std::vector<SizeTensorDecl> mSizeTensors;
    std::vector<std::string> mProblems;
    int32_t mNbOutputs{0};
    Impl mImplementation;
};

char const* operationName(nvinfer1::DimensionOperation op) noexcept;

} // namespace ttp::harness
