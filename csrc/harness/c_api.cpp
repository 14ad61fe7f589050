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

#include "conformance.h"
#include "fuzz.h"
#include "harness.h"

namespace ttp::harness
{
namespace
{

std::mutex& runLock()
{
    static std::mutex lock;
    return lock;
}

Json failure(std::string const& message)
{
    return {{"fatal", message}};
}

} // namespace

Json runConformance(JsonReader const& request, AllocateFn allocate, void* user)
{
    std::lock_guard<std::mutex> lock(runLock());
    Run run(Request::fromJson(request), allocate, user);
    return run.conformance();
}

Json runBench(JsonReader const& request)
{
    std::lock_guard<std::mutex> lock(runLock());
    Run run(Request::fromJson(request), nullptr, nullptr);
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
        Json const parsed = JsonReader::parse(request != nullptr ? request : "");
        text = dumpJson(fn(JsonReader(parsed)));
    }
    catch (std::exception const& e)
    {
        text = dumpJson(failure(e.what()));
    }
    catch (...)
    {
        text = dumpJson(failure("unknown error"));
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
            [&](ttp::harness::JsonReader const& r) { return ttp::harness::runConformance(r, allocate, user); });
    }

    __attribute__((visibility("default"))) char* ttp_harness_bench(char const* request) noexcept
    {
        return ttp::harness::respond(
            request, [](ttp::harness::JsonReader const& r) { return ttp::harness::runBench(r); });
    }

    __attribute__((visibility("default"))) char* ttp_harness_fuzz_fields(char const* request) noexcept
    {
        return ttp::harness::respond(request,
            [](ttp::harness::JsonReader const& r)
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
