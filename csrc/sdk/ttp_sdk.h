// The launcher ABI of the torchtrt_plugins SDK: what a user's kernel launcher receives, from the eager torch op
// and from the generic TensorRT plugin alike. No torch and no TensorRT types: raw pointers, dims, dtypes,
// scalars, workspace and stream in; cudaError_t out.
//
//   cudaError_t myLauncher(ttp::sdk::LaunchArgs const& args);          // a kernel (one per tactic)
//   size_t myWorkspace(ttp::sdk::LaunchArgs const& args);              // optional: scratch bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "sdk/dtypes.h"

namespace ttp::sdk
{

constexpr int32_t kMAX_DIMS = 8;

// A SymInt argument's value when it reaches the plugin as a shape input (torchtrt_plugins.declare's
// SHAPE_INPUT_SENTINEL): INT32_MIN, which survives TensorRT's ONNX parser (it hands integer attributes over as
// kINT32), so a hand-written node marks a shape input with it too.
constexpr double kSHAPE_INPUT_MARKER = -2147483648.0;

struct Tensor
{
    void* data; // device memory; an input's is read-only
    DType dtype;
    int32_t rank;
    int64_t dims[kMAX_DIMS];

    int64_t numel() const noexcept
    {
        int64_t n = 1;
        for (int32_t i = 0; i < rank; ++i)
        {
            n *= dims[i];
        }
        return n;
    }
};

struct LaunchArgs
{
    // The op's tensor arguments, schema order, contiguous. A bool input is kBOOL from the eager op and kINT32 from
    // the plugin (TensorRT plugins take no BOOL tensors): a launcher taking one reads both.
    Tensor const* inputs;
    int32_t nbInputs;
    // The op's outputs, contiguous, at their shapes; a data-dependent dimension is at its upper bound (the
    // launcher writes the rows it produces compactly from the start). Then one 0-D kINT64 size tensor per
    // data-dependent size (ctx.new_dynamic_size in the fake kernel), which the launcher must write. Outputs and size
    // tensors arrive uninitialized (torch.empty, TensorRT's own buffers): the launcher writes every element the
    // caller reads. An output with no elements may have null data.
    Tensor const* outputs;
    int32_t nbOutputs;
    // The op's scalar arguments in schema order (bools as 0/1). A SymInt argument that reaches the plugin as a
    // shape input holds kSHAPE_INPUT_MARKER here: read the size from the output dims instead.
    double const* scalars;
    int32_t nbScalars;
    // Device scratch of workspaceSize bytes (what the declared workspace function returned), uninitialized; null
    // when workspaceSize is 0, i.e. when the op declares no workspace function or it returned 0.
    void* workspace;
    size_t workspaceSize;
    int32_t tactic; // the declared tactic being run (0: the default launcher)
    cudaStream_t stream;
    // kPHASE_ALL from the plugin, always. An op declared with sizes_first=True is called twice by the eager op:
    // kPHASE_SIZES (write the size tensors, and whatever the next phase needs into the workspace; the outputs' data
    // are null), then, its sizes read back, kPHASE_OUTPUTS (outputs at their exact shapes; the same workspace and
    // size tensors), so that eager allocates no upper-bound output.
    int32_t phase{0};
    // The op's shared device tables (declare(resources=...)), in declaration order: built once per key from the
    // declared fields by the resource's init launcher and shared by every call with the same key (read-only).
    void const* const* resources{nullptr};
    int32_t nbResources{0};
};

constexpr int32_t kPHASE_ALL = 0;
constexpr int32_t kPHASE_SIZES = 1;
constexpr int32_t kPHASE_OUTPUTS = 2;

using Launcher = cudaError_t (*)(LaunchArgs const& args);
// Called with null data pointers and the largest dims the call may see.
using WorkspaceSize = size_t (*)(LaunchArgs const& args);

// One (op, tactic) -> launcher row of a library's launcher table (generated from the declarations).
struct LauncherEntry
{
    char const* op;
    int32_t tactic;
    Launcher launch;
    WorkspaceSize workspace;
};

} // namespace ttp::sdk
