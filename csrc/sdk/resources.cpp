#include "resources.h"

#include <cstdio>

namespace ttp::sdk
{

std::vector<double> resourceKeyValues(ResourceDecl const& decl, double const* scalars)
{
    std::vector<double> keys;
    for (int32_t k = 0; k < decl.nbKeyFields; ++k)
    {
        keys.push_back(scalars[decl.keyFields[k]]);
    }
    return keys;
}

std::string resourceKey(char const* owner, ResourceDecl const& decl, std::vector<double> const& keys, int32_t device)
{
    std::string key = std::string(owner) + "/" + decl.name + "(";
    char value[32];
    for (size_t k = 0; k < keys.size(); ++k)
    {
        std::snprintf(value, sizeof(value), "%.17g", keys[k]); // exact: two keys are equal only if their values are
        key += (k == 0 ? "" : ",") + std::string(value);
    }
    return key + ")@cuda:" + std::to_string(device);
}

cudaError_t buildResourceTable(
    ResourceDecl const& decl, std::vector<double> const& keys, void** table, size_t* bytes, std::string& why)
{
    *table = nullptr;
    LaunchArgs args{nullptr, 0, nullptr, 0, keys.data(), static_cast<int32_t>(keys.size()), nullptr, 0, 0, nullptr};
    size_t const size = decl.size(args);
    *bytes = size;
    if (size == 0)
    {
        why = "its size function returned 0 bytes";
        return cudaErrorInvalidValue;
    }
    void* memory = nullptr;
    cudaStream_t stream = nullptr;
    cudaError_t err = cudaMalloc(&memory, size);
    if (err == cudaSuccess)
    {
        err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    }
    if (err == cudaSuccess)
    {
        Tensor out{memory, DType::kINT8, 1, {static_cast<int64_t>(size)}};
        args.outputs = &out;
        args.nbOutputs = 1;
        args.stream = stream;
        err = decl.init(args);
        cudaError_t const synced = cudaStreamSynchronize(stream);
        err = err != cudaSuccess ? err : synced;
        why = err != cudaSuccess ? std::string("launcher '") + decl.initName + "' failed" : "";
    }
    else
    {
        why = "allocating " + std::to_string(size) + " bytes";
    }
    if (stream != nullptr)
    {
        cudaStreamDestroy(stream);
    }
    if (err != cudaSuccess)
    {
        cudaFree(memory);
        why += std::string(": ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
        return err;
    }
    *table = memory;
    return cudaSuccess;
}

} // namespace ttp::sdk
