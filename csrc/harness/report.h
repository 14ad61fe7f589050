// What a harness run reports: the result object its phases fill, the violations and errors, the plugin methods called
// and the log lines captured, and the trapped call through which every plugin method is invoked.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "json_io.h"
#include "services.h"
#include "trap.h"

namespace ttp::harness
{

// TTP_HARNESS_TRACE=1 prints every plugin call to stderr (to find where a plugin crashes the process).
bool tracing() noexcept;
void trace(std::string const& what) noexcept;

class Report
{
public:
    // Captures the TensorRT log from here until destruction.
    explicit Report(std::string pluginId);
    ~Report();
    Report(Report const&) = delete;
    Report& operator=(Report const&) = delete;

    std::string const& pluginId() const noexcept
    {
        return mPluginId;
    }
    // The result's members; the run's own ("violations", "log", ...) are added by finish().
    Json& result() noexcept
    {
        return mResult;
    }
    // Reported once per distinct message.
    void violation(std::string const& rule, std::string const& method, std::string const& detail);
    void error(std::string const& step, std::string const& detail);
    size_t violationCount() const noexcept
    {
        return mViolations.size();
    }
    // Records a plugin method call for "calls" (call() does it for each method it invokes).
    void noteCall(char const* method);
    // Calls fn trapped, attributing log lines to `method`; an escaping exception is a violation. False if trapped.
    template <typename F>
    bool call(char const* method, F&& fn);
    // call() for a method returning a C string: a copy taken while trapped, or null where it returned nullptr.
    template <typename F>
    Json callForString(char const* method, F&& fn);

    // Log lines captured from index `start` on.
    size_t logSize() const noexcept
    {
        return mLog.size();
    }
    Json logSince(size_t start) const;
    Json const& violations() const noexcept
    {
        return mViolations;
    }
    Json const& calls() const noexcept
    {
        return mCalls;
    }
    Json const& errors() const noexcept
    {
        return mErrors;
    }

private:
    std::string mPluginId;
    Json mResult = Json::object();
    Json mViolations = Json::array();
    Json mErrors = Json::array();
    std::set<std::string> mSeenViolations;
    std::vector<LogLine> mLog;
    Json mCalls = Json::array(); // every plugin method called, in order
};

template <typename F>
bool Report::call(char const* method, F&& fn)
{
    trace(mPluginId + " " + method);
    noteCall(method);
    CapturingLogger& logger = loggerFinder().logger();
    logger.setDuring(method);
    TrapOutcome const outcome = trapped(fn);
    logger.setDuring("");
    if (outcome.kind == TrapOutcome::Kind::kEXCEPTION)
    {
        violation("no-throw", method, "an exception escaped the noexcept method: " + outcome.what);
    }
    else if (outcome.kind == TrapOutcome::Kind::kFAULT)
    {
        violation("crash", method, "memory fault at address " + std::to_string(outcome.faultAddress));
    }
    return outcome.ok();
}

template <typename F>
Json Report::callForString(char const* method, F&& fn)
{
    char const* text = nullptr;
    std::string copy; // taken inside the trap: a bad pointer faults there
    call(method,
        [&]
        {
            text = fn();
            copy = text != nullptr ? text : "";
        });
    return text != nullptr ? Json(copy) : Json();
}

} // namespace ttp::harness
