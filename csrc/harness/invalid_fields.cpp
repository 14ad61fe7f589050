// Creation with fields TensorRT's parsers can deliver but the plugin must refuse.
#include "run.h"

namespace ttp::harness
{

void checkInvalidFields(RunContext& run)
{
    Json results = Json::array();
    for (FieldSet fields : run.request.invalidFieldSets)
    {
        size_t const logStart = run.report.logSize();
        nvinfer1::IPluginV3* plugin = run.plugins.create(fields, nvinfer1::TensorRTPhase::kBUILD, "createPlugin");
        Json entry = Json::object();
        entry["fields"] = fields.toJson();
        entry["rejected"] = plugin == nullptr;
        entry["log"] = run.report.logSince(logStart);
        results.push_back(std::move(entry));
        if (plugin != nullptr)
        {
            run.report.violation("invalid-fields-accepted", "createPlugin",
                "returned a plugin for the invalid fields " + fields.describe() + " instead of nullptr");
            run.plugins.destroy(plugin);
        }
        else if (logStart == run.report.logSize())
        {
            run.report.violation("silent-rejection", "createPlugin",
                "rejected the invalid fields " + fields.describe() + " without logging why");
        }
    }
    run.report.result()["invalid_fields"] = std::move(results);
}

} // namespace ttp::harness
