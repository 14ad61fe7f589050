// The harness's C API: JSON in, JSON out, so that any language can drive it (the Python API uses ctypes).
//
//   char* ttp_harness_run(char const* request, AllocateFn allocate, void* user);
//   char* ttp_harness_bench(char const* request);
//   char* ttp_harness_fuzz_fields(char const* request);   (fuzz.h)
//   void  ttp_harness_free(char* result);
//   int   ttp_harness_abi_version(void);
//
// Results are malloc'd JSON strings the caller frees with ttp_harness_free. `allocate` (may be null: outputs are
// then not copied out) returns device memory of the requested size, into which each output of each run is copied;
// the result names those copies by the order of the allocations ("buffer": 0, 1, ...).
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "fuzz.h"
#include "harness.h"
#include "run.h"

namespace ttp::harness
{
namespace
{

std::mutex& runLock()
{
    static std::mutex lock;
    return lock;
}

json::Value failure(std::string const& message)
{
    json::Value out = json::Value::object();
    out.set("fatal", message);
    return out;
}

// Request::fromJson plus the execution options read here: "enqueue_syncs_host" (bool, default false).
Request requestFrom(json::Value const& request)
{
    Request out = Request::fromJson(request);
    if (json::Value const* v = request.find("enqueue_syncs_host"))
    {
        out.enqueueSyncsHost = v->asBool();
    }
    return out;
}

} // namespace

json::Value runConformance(json::Value const& request, AllocateFn allocate, void* user)
{
    std::lock_guard<std::mutex> lock(runLock());
    Run run(requestFrom(request), allocate, user);
    return run.conformance();
}

json::Value runBench(json::Value const& request)
{
    std::lock_guard<std::mutex> lock(runLock());
    Run run(requestFrom(request), nullptr, nullptr);
    return run.bench();
}

namespace
{

template <typename F>
char* respond(char const* request, F&& fn)
{
    std::string text;
    try
    {
        text = fn(json::Value::parse(request != nullptr ? request : "")).dump();
    }
    catch (std::exception const& e)
    {
        text = failure(e.what()).dump();
    }
    catch (...)
    {
        text = failure("unknown error").dump();
    }
    char* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (out != nullptr)
    {
        std::memcpy(out, text.c_str(), text.size() + 1);
    }
    return out;
}

} // namespace
} // namespace ttp::harness

extern "C"
{

    __attribute__((visibility("default"))) char* ttp_harness_run(
        char const* request, ttp::harness::AllocateFn allocate, void* user) noexcept
    {
        return ttp::harness::respond(request,
            [&](ttp::harness::json::Value const& r) { return ttp::harness::runConformance(r, allocate, user); });
    }

    __attribute__((visibility("default"))) char* ttp_harness_bench(char const* request) noexcept
    {
        return ttp::harness::respond(
            request, [](ttp::harness::json::Value const& r) { return ttp::harness::runBench(r); });
    }

    __attribute__((visibility("default"))) char* ttp_harness_fuzz_fields(char const* request) noexcept
    {
        return ttp::harness::respond(request,
            [](ttp::harness::json::Value const& r)
            {
                std::lock_guard<std::mutex> lock(ttp::harness::runLock());
                return ttp::harness::runFieldFuzz(r);
            });
    }

    __attribute__((visibility("default"))) void ttp_harness_free(char* result) noexcept
    {
        std::free(result);
    }

    __attribute__((visibility("default"))) int ttp_harness_abi_version() noexcept
    {
        return 1;
    }

} // extern "C"
