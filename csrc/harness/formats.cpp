// Format negotiation: supportsFormatCombination enumerated the way TensorRT's builder walks it, and the descs the
// later calls take for the combination chosen.
#include "run.h"

#include <algorithm>
#include <cstring>

namespace ttp::harness
{
namespace
{

using nvinfer1::DataType;
using nvinfer1::TensorFormat;

constexpr DataType kCANDIDATE_TYPES[] = {DataType::kFLOAT, DataType::kHALF, DataType::kBF16, DataType::kINT8,
    DataType::kINT32, DataType::kINT64, DataType::kBOOL, DataType::kFP8};
constexpr TensorFormat kCANDIDATE_FORMATS[] = {TensorFormat::kLINEAR, TensorFormat::kCHW2, TensorFormat::kHWC8,
    TensorFormat::kCHW4, TensorFormat::kCHW16, TensorFormat::kCHW32, TensorFormat::kDHWC8, TensorFormat::kCDHW32,
    TensorFormat::kHWC, TensorFormat::kHWC16, TensorFormat::kDHWC};
// Bounds the enumeration for plugins that accept nearly everything.
constexpr int64_t kMAX_FORMAT_QUERIES = 200000;

} // namespace

std::vector<nvinfer1::DynamicPluginTensorDesc> dynamicDescs(
    RunContext const& run, Combination const& combination, bool useMinAsAll)
{
    std::vector<nvinfer1::Dims> const outMin = run.outputs.dims(run.outputs.min);
    std::vector<nvinfer1::Dims> const outOpt = run.outputs.dims(run.outputs.opt);
    std::vector<nvinfer1::Dims> const outMax = run.outputs.dims(run.outputs.max);
    std::vector<nvinfer1::DynamicPluginTensorDesc> descs;
    size_t const nbInputs = run.request.inputs.size();
    for (size_t i = 0; i < nbInputs + outMin.size(); ++i)
    {
        bool const isInput = i < nbInputs;
        nvinfer1::DynamicPluginTensorDesc desc{};
        desc.min = isInput ? run.outputs.min.inputs[i] : outMin[i - nbInputs];
        desc.opt = isInput ? run.outputs.opt.inputs[i] : outOpt[i - nbInputs];
        desc.max = isInput ? run.outputs.max.inputs[i] : outMax[i - nbInputs];
        if (useMinAsAll)
        {
            desc.opt = desc.min;
            desc.max = desc.min;
        }
        desc.desc.dims = desc.min;
        for (int32_t d = 0; d < desc.min.nbDims; ++d)
        {
            desc.desc.dims.d[d] = desc.min.d[d] == desc.max.d[d] ? desc.min.d[d] : -1;
        }
        desc.desc.type = i < combination.size() ? combination[i].type : DataType::kFLOAT;
        desc.desc.format = i < combination.size() ? combination[i].format : TensorFormat::kLINEAR;
        desc.desc.scale = desc.desc.type == DataType::kINT8 ? 1.0F : -1.0F;
        descs.push_back(desc);
    }
    return descs;
}

std::vector<nvinfer1::PluginTensorDesc> concreteDescs(
    RunContext const& run, Combination const& combination, ShapePoint const& point)
{
    std::vector<nvinfer1::Dims> const outs = run.outputs.dims(point);
    std::vector<nvinfer1::PluginTensorDesc> descs;
    for (size_t i = 0; i < combination.size(); ++i)
    {
        nvinfer1::PluginTensorDesc desc{};
        desc.dims = i < point.inputs.size() ? point.inputs[i] : outs[i - point.inputs.size()];
        desc.type = combination[i].type;
        desc.format = combination[i].format;
        desc.scale = desc.type == DataType::kINT8 ? 1.0F : -1.0F;
        descs.push_back(desc);
    }
    return descs;
}

void enumerateFormats(RunContext& run)
{
    run.report.call(
        "getFormatCombinationLimit", [&] { run.formats.limit = run.plugins.build.build->getFormatCombinationLimit(); });
    int32_t const nbInputs = static_cast<int32_t>(run.request.inputs.size());
    int32_t const nbIO = nbInputs + run.outputs.count;
    std::vector<nvinfer1::DynamicPluginTensorDesc> descs = dynamicDescs(run, Combination{}, false);
    size_t const descSize = sizeof(nvinfer1::DynamicPluginTensorDesc);
    // Positions 0..pos are copied so that they end exactly at a PROT_NONE page: reading inOut[pos + 1] faults.
    GuardedWindow window(static_cast<size_t>(nbIO) * descSize);
    Combination current(nbIO, IOFormat{DataType::kFLOAT, TensorFormat::kLINEAR});
    int64_t queries = 0;
    bool truncated = false;
    bool crashed = false;
    FaultScope faults;
    loggerFinder().logger().setDuring("supportsFormatCombination");
    run.report.noteCall("supportsFormatCombination"); // once for the whole enumeration (thousands of queries)

    auto ask = [&](int32_t pos)
    {
        auto* view = static_cast<nvinfer1::DynamicPluginTensorDesc*>(window.endAligned((pos + 1) * descSize));
        std::memcpy(static_cast<void*>(view), descs.data(), (pos + 1) * descSize);
        bool supported = false;
        TrapOutcome const outcome = trapped(
            [&]
            {
                supported = run.plugins.build.build->supportsFormatCombination(pos, view, nbInputs, run.outputs.count);
            });
        ++queries;
        if (outcome.kind == TrapOutcome::Kind::kFAULT)
        {
            auto const address = outcome.faultAddress;
            if (window.isProtected(address))
            {
                int64_t const read = pos + 1 + static_cast<int64_t>((address - window.protectedBegin()) / descSize);
                run.report.violation("supports-format-reads-above-pos", "supportsFormatCombination",
                    "called with pos=" + std::to_string(pos) + " it read inOut[" + std::to_string(read)
                        + "]; only inOut[0..pos] hold valid values (TensorRT fills positions above pos later)");
            }
            else
            {
                run.report.violation("crash", "supportsFormatCombination",
                    "memory fault at address " + std::to_string(address) + " (pos=" + std::to_string(pos) + ")");
                crashed = true;
            }
            return false;
        }
        if (outcome.kind == TrapOutcome::Kind::kEXCEPTION)
        {
            run.report.violation("no-throw", "supportsFormatCombination", "an exception escaped: " + outcome.what);
            return false;
        }
        return supported;
    };

    // TensorRT's order: position by position, each position's candidates tried with positions below it fixed to
    // choices already accepted.
    auto search = [&](auto& self, int32_t pos) -> void
    {
        for (DataType type : kCANDIDATE_TYPES)
        {
            for (TensorFormat format : kCANDIDATE_FORMATS)
            {
                if (crashed || static_cast<int32_t>(run.formats.table.size()) >= run.formats.limit
                    || queries >= kMAX_FORMAT_QUERIES)
                {
                    truncated = truncated || !crashed;
                    return;
                }
                descs[pos].desc.type = type;
                descs[pos].desc.format = format;
                descs[pos].desc.scale = type == DataType::kINT8 ? 1.0F : -1.0F;
                current[pos] = IOFormat{type, format};
                if (!ask(pos))
                {
                    continue;
                }
                if (pos + 1 == nbIO)
                {
                    run.formats.table.push_back(current);
                }
                else
                {
                    self(self, pos + 1);
                }
            }
        }
    };
    if (nbIO > 0)
    {
        search(search, 0);
    }
    loggerFinder().logger().setDuring("");

    Json table = Json::array();
    for (Combination const& c : run.formats.table)
    {
        table.push_back(combinationJson(c));
    }
    run.report.result()["formats"] = std::move(table);
    run.report.result()["formats_truncated"] = truncated;
    run.report.result()["format_queries"] = queries;
    run.report.result()["format_combination_limit"] = run.formats.limit;
}

void chooseCombination(RunContext& run)
{
    size_t const nbInputs = run.request.inputs.size();
    Combination wanted;
    for (InputRequest const& in : run.request.inputs)
    {
        wanted.push_back({in.type, TensorFormat::kLINEAR});
    }
    for (DataType t : run.outputs.types)
    {
        wanted.push_back({t, TensorFormat::kLINEAR});
    }
    if (std::find(run.formats.table.begin(), run.formats.table.end(), wanted) != run.formats.table.end())
    {
        run.formats.chosen = wanted;
        return;
    }
    // The inputs are supported but not with the output types getOutputDataTypes announced.
    for (Combination const& c : run.formats.table)
    {
        bool linear = true;
        for (IOFormat const& io : c)
        {
            linear = linear && io.format == TensorFormat::kLINEAR;
        }
        if (linear && std::equal(wanted.begin(), wanted.begin() + nbInputs, c.begin()))
        {
            run.report.violation("output-types", "getOutputDataTypes",
                "announced output types " + combinationText(wanted) + " but supportsFormatCombination accepts only "
                    + combinationText(c) + " for these inputs");
            run.formats.chosen = c;
            return;
        }
    }
    throw Stop("supportsFormatCombination accepts no LINEAR combination " + combinationText(wanted)
               + " for the requested input types; the supported combinations are in 'formats'");
}

} // namespace ttp::harness
