// ttp_fuzz_fields: the harness's createPlugin fuzz (fuzz.h) as a process of its own, for sanitizers (AddressSanitizer
// with LeakSanitizer, compute-sanitizer) and for tests that must survive a crash.
//
//   ttp_fuzz_fields REQUEST.json    (or - for stdin)
//
// Prints the JSON report; exits 0 without violations, 1 with, 2 where the fuzz could not run (the report says why).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

extern "C" char* ttp_harness_fuzz_fields(char const* request);
extern "C" void ttp_harness_free(char* result);

int main(int argc, char** argv)
{
    if (argc != 2)
    {
        std::fprintf(stderr, "usage: %s REQUEST.json (or - for stdin); see csrc/harness/fuzz.h\n", argv[0]);
        return 2;
    }
    std::string request;
    if (std::string(argv[1]) == "-")
    {
        request.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    else
    {
        std::ifstream file(argv[1]);
        if (!file)
        {
            std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[1]);
            return 2;
        }
        request.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
    char* result = ttp_harness_fuzz_fields(request.c_str());
    if (result == nullptr)
    {
        return 2;
    }
    std::string const report(result);
    ttp_harness_free(result);
    std::puts(report.c_str());
    nlohmann::json const parsed = nlohmann::json::parse(report, nullptr, false);
    if (parsed.is_discarded() || !parsed.contains("violation_count"))
    {
        return 2; // {"fatal": ...}
    }
    return parsed["violation_count"] == 0 ? 0 : 1;
}
