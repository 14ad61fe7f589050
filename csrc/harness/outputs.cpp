// Output count, types, aliasing and shapes: what the network asks of a plugin before building.
#include "run.h"

namespace ttp::harness
{
namespace
{

using nvinfer1::DataType;

void queryOutputShapes(RunContext& run)
{
    // Symbols: an input dimension is a constant when the profile fixes it (as TensorRT does for static dims).
    std::vector<nvinfer1::DimsExprs> inputs(run.request.inputs.size());
    for (size_t i = 0; i < run.request.inputs.size(); ++i)
    {
        InputRequest const& in = run.request.inputs[i];
        if (in.min.nbDims != in.dims.nbDims || in.opt.nbDims != in.dims.nbDims || in.max.nbDims != in.dims.nbDims)
        {
            throw Stop("input " + std::to_string(i) + ": min/opt/max must have the rank of dims " + dimsText(in.dims));
        }
        inputs[i].nbDims = in.dims.nbDims;
        for (int32_t d = 0; d < in.dims.nbDims; ++d)
        {
            if (in.min.d[d] > in.opt.d[d] || in.opt.d[d] > in.max.d[d] || in.dims.d[d] < in.min.d[d]
                || in.dims.d[d] > in.max.d[d])
            {
                throw Stop("input " + std::to_string(i) + ": dims " + dimsText(in.dims) + " outside the profile min "
                           + dimsText(in.min) + " opt " + dimsText(in.opt) + " max " + dimsText(in.max));
            }
            DimExpr::Node node;
            if (in.min.d[d] == in.max.d[d])
            {
                node.value = in.min.d[d];
            }
            else
            {
                node.kind = DimExpr::Kind::kINPUT_DIM;
                node.tensor = static_cast<int32_t>(i);
                node.index = d;
            }
            inputs[i].d[d] = run.outputs.exprs.make(node);
        }
        run.outputs.min.inputs.push_back(in.min);
        run.outputs.opt.inputs.push_back(in.opt);
        run.outputs.max.inputs.push_back(in.max);
        run.outputs.concrete.inputs.push_back(in.dims);
    }
    std::vector<nvinfer1::DimsExprs> shapeInputs(run.request.shapeInputs.size());
    for (size_t i = 0; i < run.request.shapeInputs.size(); ++i)
    {
        ShapeInputRequest const& s = run.request.shapeInputs[i];
        if (s.values.size() > static_cast<size_t>(nvinfer1::Dims::MAX_DIMS) || s.min.size() != s.values.size()
            || s.opt.size() != s.values.size() || s.max.size() != s.values.size())
        {
            throw Stop("shape input " + std::to_string(i) + ": values/min/opt/max must have one length <= 8");
        }
        shapeInputs[i].nbDims = static_cast<int32_t>(s.values.size());
        for (size_t k = 0; k < s.values.size(); ++k)
        {
            DimExpr::Node node;
            if (s.min[k] == s.max[k])
            {
                node.value = s.min[k];
            }
            else
            {
                node.kind = DimExpr::Kind::kSHAPE_VALUE;
                node.tensor = static_cast<int32_t>(i);
                node.index = static_cast<int32_t>(k);
            }
            shapeInputs[i].d[k] = run.outputs.exprs.make(node);
        }
        run.outputs.min.shapeValues.push_back(s.min);
        run.outputs.opt.shapeValues.push_back(s.opt);
        run.outputs.max.shapeValues.push_back(s.max);
        run.outputs.concrete.shapeValues.push_back(s.values);
    }
    run.outputs.min.sizeTensors = ShapePoint::SizeTensors::kZERO;
    run.outputs.opt.sizeTensors = ShapePoint::SizeTensors::kOPT;
    run.outputs.max.sizeTensors = ShapePoint::SizeTensors::kUPPER;
    run.outputs.concrete.sizeTensors = ShapePoint::SizeTensors::kUPPER;

    run.outputs.exprs.setNbOutputs(run.outputs.count);
    run.outputs.shapes.assign(run.outputs.count, nvinfer1::DimsExprs{});
    int32_t status = 1;
    run.report.call("getOutputShapes",
        [&]
        {
            status = run.plugins.build.build->getOutputShapes(inputs.data(), static_cast<int32_t>(inputs.size()),
                shapeInputs.data(), static_cast<int32_t>(shapeInputs.size()), run.outputs.shapes.data(),
                run.outputs.count, run.outputs.exprs);
        });
    for (std::string const& problem : run.outputs.exprs.problems())
    {
        run.report.violation("expr-builder", "getOutputShapes", problem);
    }
    if (status != 0)
    {
        throw Stop("getOutputShapes returned " + std::to_string(status));
    }
    Json symbolic = Json::array();
    for (int32_t o = 0; o < run.outputs.count; ++o)
    {
        nvinfer1::DimsExprs const& out = run.outputs.shapes[o];
        if (out.nbDims < 0 || out.nbDims > nvinfer1::Dims::MAX_DIMS)
        {
            run.report.violation("output-shapes", "getOutputShapes",
                "output " + std::to_string(o) + " has nbDims " + std::to_string(out.nbDims));
            throw Stop("getOutputShapes produced an invalid rank");
        }
        Json dims = Json::array();
        for (int32_t d = 0; d < out.nbDims; ++d)
        {
            DimExpr const* expr = run.outputs.exprs.own(out.d[d]);
            if (expr == nullptr)
            {
                run.report.violation("output-shapes", "getOutputShapes",
                    "output " + std::to_string(o) + " dimension " + std::to_string(d)
                        + " is not an IDimensionExpr from the inputs or the IExprBuilder");
                throw Stop("getOutputShapes produced an invalid expression");
            }
            dims.push_back(expr->str());
        }
        symbolic.push_back(std::move(dims));
    }
    Json sizeTensors = Json::array();
    for (ExprBuilder::SizeTensorDecl const& decl : run.outputs.exprs.sizeTensors())
    {
        run.outputs.sizeTensors.insert(decl.output);
        std::string const which = "size tensor output " + std::to_string(decl.output);
        if (run.outputs.shapes[decl.output].nbDims != 0)
        {
            run.report.violation("size-tensor-rank", "getOutputShapes",
                which + " must be declared 0-D, got rank " + std::to_string(run.outputs.shapes[decl.output].nbDims));
        }
        DataType const type = run.outputs.types[decl.output];
        if (type != DataType::kINT32 && type != DataType::kINT64)
        {
            run.report.violation(
                "size-tensor-type", "getOutputDataTypes", which + " must be INT32 or INT64, got " + dataTypeName(type));
        }
        Json entry = Json::object();
        entry["output"] = decl.output;
        entry["opt"] = decl.opt->str();
        entry["upper"] = decl.upper->str();
        sizeTensors.push_back(std::move(entry));
    }
    Json shapes = Json::object();
    shapes["symbolic"] = std::move(symbolic);
    for (auto const& [key, point] : {std::pair<char const*, ShapePoint const*>{"min", &run.outputs.min},
             {"opt", &run.outputs.opt}, {"max", &run.outputs.max}, {"concrete", &run.outputs.concrete}})
    {
        Json list = Json::array();
        for (nvinfer1::Dims const& dims : run.outputs.dims(*point))
        {
            list.push_back(dimsJson(dims));
        }
        shapes[key] = std::move(list);
    }
    run.report.result()["output_shapes"] = std::move(shapes);
    run.report.result()["size_tensors"] = std::move(sizeTensors);
}

} // namespace

void queryOutputs(RunContext& run)
{
    run.report.call("getNbOutputs", [&] { run.outputs.count = run.plugins.build.build->getNbOutputs(); });
    if (run.outputs.count <= 0)
    {
        run.report.violation(
            "outputs", "getNbOutputs", "must return a positive number, got " + std::to_string(run.outputs.count));
        throw Stop("getNbOutputs returned " + std::to_string(run.outputs.count));
    }
    run.report.result()["nb_outputs"] = run.outputs.count;
    std::vector<DataType> inputTypes;
    for (InputRequest const& in : run.request.inputs)
    {
        inputTypes.push_back(in.type);
    }
    run.outputs.types.assign(run.outputs.count, DataType::kFLOAT);
    int32_t status = 1;
    run.report.call("getOutputDataTypes",
        [&]
        {
            status = run.plugins.build.build->getOutputDataTypes(run.outputs.types.data(), run.outputs.count,
                inputTypes.data(), static_cast<int32_t>(inputTypes.size()));
        });
    if (status != 0)
    {
        throw Stop("getOutputDataTypes returned " + std::to_string(status) + " for the input types");
    }
    Json types = Json::array();
    for (DataType t : run.outputs.types)
    {
        types.push_back(dataTypeName(t));
    }
    run.report.result()["output_types"] = std::move(types);
    if (run.plugins.build.buildV2 != nullptr)
    {
        // Per output, the input it aliases (-1: none), as TensorRT asks with kALIASED_PLUGIN_IO_10_03.
        Json aliases = Json::array();
        for (int32_t i = 0; i < run.outputs.count; ++i)
        {
            int32_t aliased = -1;
            run.report.call("getAliasedInput", [&] { aliased = run.plugins.build.buildV2->getAliasedInput(i); });
            if (aliased >= 0)
            {
                run.outputs.aliasedInputs[i] = aliased;
            }
            aliases.push_back(aliased);
        }
        run.report.result()["aliased_inputs"] = std::move(aliases);
    }
    queryOutputShapes(run);
}

std::vector<nvinfer1::Dims> Outputs::dims(ShapePoint const& point) const
{
    std::vector<nvinfer1::Dims> out;
    for (nvinfer1::DimsExprs const& output : shapes)
    {
        nvinfer1::Dims dims{};
        dims.nbDims = output.nbDims;
        for (int32_t d = 0; d < output.nbDims; ++d)
        {
            try
            {
                dims.d[d] = evaluate(*exprs.own(output.d[d]), point);
            }
            catch (EvalError const& e)
            {
                throw Stop(std::string("evaluating output shapes: ") + e.what());
            }
        }
        out.push_back(dims);
    }
    return out;
}

} // namespace ttp::harness
