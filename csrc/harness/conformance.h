// One harness run over one plugin: the conformance run (conformance.cpp) or the enqueue benchmark (bench.cpp), each a
// sequence of the phases in run.h over one RunContext.
#pragma once

#include "execution.h"
#include "harness.h"
#include "run.h"

namespace ttp::harness
{

class Run
{
public:
    Run(Request request, AllocateFn allocate, void* user);
    ~Run();

    Json conformance();
    Json bench();

private:
    Request mRequest;
    Report mReport;
    ResourceBaseline mResources;
    PluginObjects mPlugins;
    RunContext mContext;
    Executor mExecutor;
};

} // namespace ttp::harness
