// The element types of the launcher ABI (sdk/ttp_sdk.h), which kernels share: no torch, no TensorRT types.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace ttp
{

// Element types the kernels understand. Adapters (torch, TensorRT) map their own enums onto this one.
enum class DType : int32_t
{
    kFLOAT32 = 0,
    kFLOAT16 = 1,
    kBFLOAT16 = 2,
    kINT8 = 3,
    kINT32 = 4,
    kINT64 = 5,
    kBOOL = 6,
    kFLOAT8_E4M3 = 7, // OCP FP8 E4M3 (torch.float8_e4m3fn, TensorRT kFP8)
};

inline int64_t dtypeSize(DType t)
{
    switch (t)
    {
    case DType::kFLOAT32: return 4;
    case DType::kFLOAT16: return 2;
    case DType::kBFLOAT16: return 2;
    case DType::kINT8: return 1;
    case DType::kINT32: return 4;
    case DType::kINT64: return 8;
    case DType::kBOOL: return 1;
    case DType::kFLOAT8_E4M3: return 1;
    }
    return 0;
}

} // namespace ttp
