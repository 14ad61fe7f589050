// Serialization: what a plan holds (the fields, as bytes) must re-create an equivalent plugin.
#include "execution.h"
#include "run.h"

namespace ttp::harness
{

void serializationRoundTrip(RunContext& run, Executor& executor)
{
    std::optional<FieldSet> const fields = run.plugins.fieldsOf(run.plugins.build, "build plugin");
    if (!fields)
    {
        throw Stop("getFieldsToSerialize returned no usable fields");
    }
    run.report.result()["serialized_fields"] = fields->toJson();
    // What a plan holds: bytes. The runtime plugin is created from what is read back.
    std::vector<uint8_t> const bytes = fields->serialize();
    run.report.result()["serialized_bytes"] = static_cast<uint64_t>(bytes.size());
    FieldSet restored = FieldSet::deserialize(bytes);
    nvinfer1::IPluginV3* runtimePlugin
        = run.plugins.create(restored, nvinfer1::TensorRTPhase::kRUNTIME, "createPlugin");
    if (runtimePlugin == nullptr)
    {
        run.report.violation("serialization", "getFieldsToSerialize",
            "createPlugin(kRUNTIME) rejected the serialized fields " + fields->describe());
        return;
    }
    Handles const runtime = run.plugins.resolve(runtimePlugin, "runtime plugin", false);
    std::optional<FieldSet> const again = run.plugins.fieldsOf(runtime, "runtime plugin");
    if (again && *again != *fields)
    {
        run.report.violation("serialization", "getFieldsToSerialize",
            "the plugin re-created from the serialized fields " + fields->describe() + " serializes "
                + again->describe() + ": the fields do not recreate an equivalent plugin");
    }
    run.report.result()["runtime_fields"] = again ? again->toJson() : Json();
    executor.runtimePhase(runtimePlugin, executor.canExecute());
    run.plugins.destroy(runtimePlugin);
}

} // namespace ttp::harness
