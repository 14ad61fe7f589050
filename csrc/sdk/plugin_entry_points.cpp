// The two entry points TensorRT looks up in a plugin library (IPluginRegistry::loadLibrary,
// trtexec --dynamicPlugins, plugins serialized into a plan). Nothing else is exported (plugins.map).
#include "sdk/plugin_support.h"

extern "C" __attribute__((visibility("default"))) void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    ttp::plugin::setLoggerFinder(finder);
}

extern "C" __attribute__((visibility("default"))) nvinfer1::IPluginCreatorInterface* const* getCreators(
    int32_t& nbCreators) noexcept
{
    auto& creators = ttp::plugin::CreatorRegistry::creators();
    nbCreators = static_cast<int32_t>(creators.size());
    return creators.data();
}
