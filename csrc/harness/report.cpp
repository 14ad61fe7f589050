#include "report.h"

#include <cstdio>
#include <cstdlib>

namespace ttp::harness
{

bool tracing() noexcept
{
    static bool const enabled = []
    {
        char const* value = std::getenv("TTP_HARNESS_TRACE");
        return value != nullptr && value[0] != '\0' && value[0] != '0';
    }();
    return enabled;
}

void trace(std::string const& what) noexcept
{
    if (tracing())
    {
        std::fprintf(stderr, "[harness] %s\n", what.c_str());
        std::fflush(stderr);
    }
}

Report::Report(std::string pluginId)
    : mPluginId(std::move(pluginId))
{
    loggerFinder().logger().begin(&mLog);
}

Report::~Report()
{
    loggerFinder().logger().end();
}

void Report::violation(std::string const& rule, std::string const& method, std::string const& detail)
{
    std::string const message = "[" + rule + "] " + mPluginId + " " + method + ": " + detail;
    if (!mSeenViolations.insert(message).second)
    {
        return;
    }
    mViolations.push_back(
        {{"rule", rule}, {"plugin", mPluginId}, {"method", method}, {"detail", detail}, {"message", message}});
}

void Report::error(std::string const& step, std::string const& detail)
{
    mErrors.push_back({{"step", step}, {"detail", detail}});
}

void Report::noteCall(char const* method)
{
    mCalls.push_back(method);
}

Json Report::logSince(size_t start) const
{
    Json out = Json::array();
    for (size_t i = start; i < mLog.size(); ++i)
    {
        out.push_back(
            {{"severity", severityName(mLog[i].severity)}, {"message", mLog[i].message}, {"during", mLog[i].during}});
    }
    return out;
}

} // namespace ttp::harness
