// The eager CUDA kernel of every declared op, written once: one boxed torch kernel that reads the op's generated
// table (csrc/sdk/op_table.h, handed out by the op library's `ttp_sdk_eager_op`), checks the arguments against the
// declaration with the Python path's messages, derives the output shapes with the plugin's shape-rule code
// (csrc/sdk/rules.h), allocates through torch's caching allocator on the current stream and calls the launcher. An
// argument the op updates in place (Tensor(a!)) is the launcher's aliased output, as in the plugin.
//
// Compiled in two flavours from this one file, which differ only in how they reach torch: against LibTorch's stable
// ABI (eager_stable.h; one binary serves torch 2.11 and later) or, with TTP_EAGER_NATIVE, against the full LibTorch
// ABI of one torch (eager_native.h; less host time a call). The current CUDA stream comes from libtorch_cuda, looked up
// when the first call needs it: either library loads next to a CPU-only torch too (where no CUDA kernel is ever
// called).
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sdk/op_table.h"
#include "sdk/rules.h"

namespace ttp::sdk::eager
{
namespace
{

using rules::concat;

constexpr int32_t kMAX_TENSORS = 32;
constexpr int32_t kMAX_SCALARS = 64;
constexpr int64_t kSCRATCH_ALIGN = 256;
// A data-dependent output whose upper-bound buffer wastes more than this (and more than it keeps) is copied into one
// of its actual size (ops that are not sizes_first; the Python path's rule).
constexpr int64_t kTRIM_BYTES = 1 << 20;

// Fake-kernel checks of a call signature not seen before: the declaring Python process runs the op's fake kernel on
// these shapes and scalars, so that its own messages reach the user. Returns 0, or non-zero with `message` written.
using CheckHook = int32_t (*)(int32_t token, int32_t nbInputs, int32_t const* dtypes, int32_t const* ranks,
    int64_t const* dims, int32_t nbScalars, double const* scalars, char* message, int32_t messageSize);

class EagerError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

// The torch dtypes the kernel names, whose codes each flavour reads from torch.
enum class TorchDType
{
    kFLOAT32,
    kFLOAT16,
    kBFLOAT16,
    kINT8,
    kINT32,
    kINT64,
    kBOOL,
    kFLOAT8_E4M3FN,
    kFLOAT64,
    kUINT8,
    kINT16,
    kUINT16,
    kUINT32,
    kUINT64,
    kCOMPLEX32,
    kCOMPLEX64,
    kCOMPLEX128,
    kFLOAT8_E5M2,
};

enum class TorchDevice
{
    kCUDA,
    kCPU,
    kMETA,
};

// A tensor's metadata as torch holds it (valid while the tensor lives).
struct TensorMeta
{
    int32_t dtype; // torch code
    int64_t rank;
    int64_t const* sizes;
    int64_t const* strides;
    int32_t deviceType;
    int32_t deviceIndex;
};

struct Registration;
class Arguments;
// One call of the op `registration` serves: checks, launches, and puts its outputs in place of the arguments.
void serve(Registration& registration, Arguments& arguments);

} // namespace
} // namespace ttp::sdk::eager

#if defined(TTP_EAGER_NATIVE)
#include "sdk/eager_native.h"
#else
#include "sdk/eager_stable.h"
#endif

namespace ttp::sdk::eager
{
namespace
{

// torch's dtype codes (read through the shim: the enum's values are not part of the stable ABI) and our names.
struct DTypes
{
    // ttp::DType -> torch code
    std::array<int32_t, 8> kernel{};
    std::vector<std::pair<int32_t, char const*>> names;

    DTypes()
    {
        using T = TorchDType;
        kernel = {dtypeCode(T::kFLOAT32), dtypeCode(T::kFLOAT16), dtypeCode(T::kBFLOAT16), dtypeCode(T::kINT8),
            dtypeCode(T::kINT32), dtypeCode(T::kINT64), dtypeCode(T::kBOOL), dtypeCode(T::kFLOAT8_E4M3FN)};
        names = {{dtypeCode(T::kFLOAT32), "float32"}, {dtypeCode(T::kFLOAT16), "float16"},
            {dtypeCode(T::kBFLOAT16), "bfloat16"}, {dtypeCode(T::kINT8), "int8"}, {dtypeCode(T::kINT32), "int32"},
            {dtypeCode(T::kINT64), "int64"}, {dtypeCode(T::kBOOL), "bool"}, {dtypeCode(T::kFLOAT64), "float64"},
            {dtypeCode(T::kUINT8), "uint8"}, {dtypeCode(T::kINT16), "int16"}, {dtypeCode(T::kUINT16), "uint16"},
            {dtypeCode(T::kUINT32), "uint32"}, {dtypeCode(T::kUINT64), "uint64"},
            {dtypeCode(T::kCOMPLEX32), "complex32"}, {dtypeCode(T::kCOMPLEX64), "complex64"},
            {dtypeCode(T::kCOMPLEX128), "complex128"}, {dtypeCode(T::kFLOAT8_E4M3FN), "float8_e4m3fn"},
            {dtypeCode(T::kFLOAT8_E5M2), "float8_e5m2"}};
    }

    int32_t toKernel(int32_t torchCode) const noexcept
    {
        for (size_t k = 0; k < kernel.size(); ++k)
        {
            if (kernel[k] == torchCode)
            {
                return static_cast<int32_t>(k);
            }
        }
        return -1;
    }

    std::string name(int32_t torchCode) const
    {
        for (auto const& [code, text] : names)
        {
            if (code == torchCode)
            {
                return text;
            }
        }
        return concat("dtype ", torchCode);
    }
};

DTypes const& dtypes()
{
    static DTypes const table;
    return table;
}

// TensorRT DataType value (a shape program's output type) -> ttp::DType.
int32_t kernelDTypeOfCode(int64_t code)
{
    switch (code)
    {
    case 0: return static_cast<int32_t>(DType::kFLOAT32);
    case 1: return static_cast<int32_t>(DType::kFLOAT16);
    case 2: return static_cast<int32_t>(DType::kINT8);
    case 3: return static_cast<int32_t>(DType::kINT32);
    case 4: return static_cast<int32_t>(DType::kBOOL);
    case 6: return static_cast<int32_t>(DType::kFLOAT8_E4M3);
    case 7: return static_cast<int32_t>(DType::kBFLOAT16);
    case 8: return static_cast<int32_t>(DType::kINT64);
    default: return -1;
    }
}

std::string deviceName(int32_t type, int32_t index)
{
    if (type == deviceTypeCode(TorchDevice::kCUDA))
    {
        return concat("cuda:", index);
    }
    if (type == deviceTypeCode(TorchDevice::kCPU))
    {
        return "cpu";
    }
    if (type == deviceTypeCode(TorchDevice::kMETA))
    {
        return "meta";
    }
    return concat("device type ", type, index >= 0 ? concat(":", index) : "");
}

using CurrentStream = int32_t (*)(int32_t, void**); // AOTITorchError (int32_t), success being 0
using ContextDevice = int (*)(int*); // the driver's cuCtxGetDevice: CUresult (CUdevice*), CUDA_SUCCESS being 0

// The device of the calling thread's current CUDA context, which is where a launch goes: the driver's
// cuCtxGetDevice, a thread-local read in the libcuda the process has loaded. torch's own query
// (aoti_torch_get_current_device_index) goes through the generic accelerator lookup, about 0.2 us a call; a thread
// with no current context (or no libcuda) takes that path.
int32_t currentDevice()
{
    static ContextDevice const contextDevice = []() -> ContextDevice
    {
        void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        return reinterpret_cast<ContextDevice>(library != nullptr ? dlsym(library, "cuCtxGetDevice") : nullptr);
    }();
    int device = -1;
    if (contextDevice != nullptr && contextDevice(&device) == 0)
    {
        return device;
    }
    return torchCurrentDevice();
}

// aoti_torch_get_current_cuda_stream, from the libtorch_cuda the process has loaded (null with a CPU-only torch).
CurrentStream currentStreamFunction()
{
    static CurrentStream const function = []() -> CurrentStream
    {
        void* library = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
        void* symbol = library != nullptr ? dlsym(library, "aoti_torch_get_current_cuda_stream") : nullptr;
        return reinterpret_cast<CurrentStream>(symbol);
    }();
    return function;
}

struct Registration
{
    EagerOp const* op;
    rules::Rules rules;
    CheckHook hook;
    int32_t hookToken;
    bool tacticArgument; // the op takes one more argument, last: the tactic's value (an op's `_tactic` variant)
    std::unique_ptr<KernelRegistration> kernel; // null once unregistered
    std::mutex mutex;
    // Call signatures whose fake-kernel checks passed, looked up by a view of the call's key (no allocation).
    std::set<std::string, std::less<>> checked;

    Registration(EagerOp const* decl, rules::OpShape shape, CheckHook checkHook, int32_t token, bool tactic)
        : op(decl)
        , rules(std::move(shape), decl->programs, decl->nbProgramTokens)
        , hook(checkHook)
        , hookToken(token)
        , tacticArgument(tactic)
    {
    }
};

// One input tensor of a call: its metadata as read once.
struct Input : TensorMeta
{
    ArgumentTensor handle;
    Owned contiguous; // a contiguous copy, where the argument is not
    int32_t kernelDType;
};

// The call's input dims as the shared rules read them.
struct InputDims
{
    Input const* inputs;
    int64_t operator()(int64_t input, int64_t axis) const
    {
        return inputs[input].sizes[axis];
    }
};

bool isContiguous(Input const& in)
{
    int64_t expected = 1;
    for (int64_t d = in.rank - 1; d >= 0; --d)
    {
        if (in.sizes[d] != 1 && in.strides[d] != expected)
        {
            return false;
        }
        expected *= in.sizes[d];
    }
    return true;
}

Owned emptyTensor(int32_t rank, int64_t const* dims, int32_t torchDtype, int32_t device)
{
    int64_t strides[kMAX_DIMS];
    int64_t step = 1;
    for (int32_t d = rank - 1; d >= 0; --d)
    {
        strides[d] = step;
        step *= dims[d] > 1 ? dims[d] : 1;
    }
    return emptyDevice(rank, dims, strides, torchDtype, device);
}

// Why the launcher's launch failed, as its library says: the status's name (cudaGetErrorName of the CUDA runtime the
// library links, found through its handle; the status as a number where it cannot be), then ttp_sdk_last_error (a
// kernel compiled ahead of time names op, kernel and cause) where it says something. The library is found from the
// launcher's own address.
std::string launcherError(void const* launcher, cudaError_t status)
{
    std::string text = concat("cudaError ", static_cast<int32_t>(status));
    Dl_info info{};
    if (dladdr(launcher, &info) == 0 || info.dli_fname == nullptr)
    {
        return text;
    }
    void* library = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr)
    {
        return text;
    }
    using ErrorName = char const* (*)(cudaError_t);
    auto const errorName = reinterpret_cast<ErrorName>(dlsym(library, "cudaGetErrorName"));
    char const* name = errorName != nullptr ? errorName(status) : nullptr;
    if (name != nullptr)
    {
        text = concat(name, " (", static_cast<int32_t>(status), ")");
    }
    using LastError = char const* (*)();
    auto const lastError = reinterpret_cast<LastError>(dlsym(library, "ttp_sdk_last_error"));
    char const* why = lastError != nullptr ? lastError() : nullptr;
    if (why != nullptr && why[0] != '\0')
    {
        text = concat(text, ": ", why);
    }
    dlclose(library);
    return text;
}

// The call's one host synchronization: the size tensors (the first 8 * count bytes of the scratch tensor) copied to
// the host by torch's own copy_, on the current stream, so that torch's sync debug mode sees it as any other.
void readSizes(Handle scratch, int32_t count, int64_t* counts)
{
    int64_t const bytes = 8 * static_cast<int64_t>(count);
    int64_t const stride = 1;
    Owned const device = strided(scratch, 1, &bytes, &stride);
    Owned const host = emptyHost(bytes);
    copyInto(host.get(), device.get());
    std::memcpy(counts, dataOf(host.get()), static_cast<size_t>(bytes));
}

class Call
{
public:
    Call(Registration& registration, Arguments const& arguments)
        : mReg(registration)
        , mOp(*registration.op)
        , mTactic(mOp.tactics)
    {
        uint64_t const expected = static_cast<uint64_t>(mOp.nbArguments) + (registration.tacticArgument ? 1 : 0);
        if (arguments.count() != expected)
        {
            throw EagerError(concat(mOp.label, ": expected ", expected, " arguments, got ", arguments.count()));
        }
        if (registration.tacticArgument)
        {
            mTactic = findTactic(arguments.integer(mOp.nbArguments));
        }
        // Take every argument first (the stable flavour hands the tensors over as references the call owns).
        for (int32_t a = 0; a < mOp.nbArguments; ++a)
        {
            int32_t const slot = mOp.arguments[a];
            if (slot >= 0)
            {
                mInputs[slot].handle = arguments.tensor(a);
                continue;
            }
            int32_t const s = -slot - 1;
            switch (mOp.scalars[s].kind)
            {
            case ScalarKind::kFLOAT: mScalars[s] = arguments.real(a); break;
            case ScalarKind::kINT:
                mInts[s] = arguments.integer(a);
                mScalars[s] = static_cast<double>(mInts[s]);
                break;
            case ScalarKind::kBOOL: mScalars[s] = arguments.boolean(a) ? 1.0 : 0.0; break;
            }
        }
    }

    // The checks in the Python path's order: dtypes, scalar ranges, the fake kernel's shape checks, devices.
    void check()
    {
        auto const& table = dtypes();
        for (int32_t i = 0; i < mOp.nbInputs; ++i)
        {
            Input& in = mInputs[i];
            describe(in.handle.get(), in);
            in.kernelDType = table.toKernel(in.dtype);
            EagerInput const& decl = mOp.inputs[i];
            if (in.kernelDType < 0 || (decl.dtypeMask >> in.kernelDType & 1U) == 0)
            {
                throw EagerError(concat(mOp.label, ": argument '", decl.name, "' must have dtype in {", decl.dtypes,
                    "}, got ", table.name(in.dtype)));
            }
            if (decl.sameDtypeAs >= 0 && mInputs[decl.sameDtypeAs].dtype != in.dtype)
            {
                throw EagerError(concat(mOp.label, ": argument '", decl.name, "' must have the same dtype as '",
                    mOp.inputs[decl.sameDtypeAs].name, "' (torch.", table.name(mInputs[decl.sameDtypeAs].dtype),
                    "), got torch.", table.name(in.dtype)));
            }
        }
        // A signature this thread saw pass last passes again: only the devices are left to check.
        if (!recall())
        {
            for (int32_t s = 0; s < mOp.nbScalars; ++s)
            {
                checkScalar(s);
            }
            if (mReg.hook != nullptr)
            {
                checkWithFakeKernel();
            }
            mProgram = &mReg.rules.programFor([&](int32_t i) { return static_cast<int32_t>(mInputs[i].rank); });
            try
            {
                mReg.rules.checkSizes(*mProgram, dimOf(), mFields, "the");
            }
            catch (rules::RuleError const& e)
            {
                throw EagerError(concat(mOp.label, ": ", e.what()));
            }
            remember();
        }
        Input const& first = mInputs[0];
        for (int32_t i = 0; i < mOp.nbInputs; ++i)
        {
            Input const& in = mInputs[i];
            if (in.deviceType != deviceTypeCode(TorchDevice::kCUDA) || in.deviceType != first.deviceType
                || in.deviceIndex != first.deviceIndex)
            {
                throw EagerError(concat(mOp.label, ": argument '", mOp.inputs[i].name, "' must be a CUDA tensor on ",
                    deviceName(first.deviceType, first.deviceIndex), " (the device of '", mOp.inputs[0].name,
                    "'), got device ", deviceName(in.deviceType, in.deviceIndex)));
            }
        }
    }

    // Launches the op into `outputs` (its mOp.nbOutputs outputs).
    void run(Owned* outputs)
    {
        int32_t const device = mInputs[0].deviceIndex;
        std::optional<DeviceGuard> guard;
        if (currentDevice() != device)
        {
            guard.emplace(device);
        }
        CurrentStream const currentStream = currentStreamFunction();
        if (currentStream == nullptr)
        {
            throw EagerError(concat(mOp.label, ": this torch has no CUDA (libtorch_cuda is not loaded)"));
        }
        void* stream = nullptr;
        if (currentStream(device, &stream) != 0)
        {
            throw EagerError("torchtrt_plugins eager kernel: torch's get_current_cuda_stream failed");
        }

        Tensor in[kMAX_TENSORS];
        for (int32_t i = 0; i < mOp.nbInputs; ++i)
        {
            Input& input = mInputs[i];
            Handle h = input.handle.get();
            if (!isContiguous(input))
            {
                // Not torch's clone: it keeps a dense tensor's strides (a transposed input stays transposed).
                input.contiguous = emptyTensor(static_cast<int32_t>(input.rank), input.sizes, input.dtype, device);
                copyInto(input.contiguous.get(), h);
                h = input.contiguous.get();
            }
            in[i] = Tensor{nullptr, static_cast<DType>(input.kernelDType), static_cast<int32_t>(input.rank), {}};
            int64_t numel = 1;
            for (int64_t d = 0; d < input.rank; ++d)
            {
                in[i].dims[d] = input.sizes[d];
                numel *= input.sizes[d];
            }
            in[i].data = numel != 0 ? dataOf(h) : nullptr;
        }
        auto const nbSizes = static_cast<int32_t>(mProgram->sizes.size());
        int64_t uppers[64];
        for (int32_t s = 0; s < nbSizes; ++s)
        {
            uppers[s] = rules::evaluateConcrete(mProgram->sizes[static_cast<size_t>(s)].second, dimOf(), mFields);
        }
        // Output dims at their upper bounds (a data-dependent dim evaluated with the sizes' upper bounds).
        Tensor out[kMAX_TENSORS];
        int32_t outDtypes[kMAX_TENSORS];
        for (int32_t o = 0; o < mOp.nbOutputs; ++o)
        {
            auto const& decl = mProgram->outputs[static_cast<size_t>(o)];
            int64_t const code = decl.dtypeCode;
            int32_t const kernel = code < 0 ? mInputs[-code - 1].kernelDType : kernelDTypeOfCode(code);
            if (kernel < 0)
            {
                throw EagerError(concat(mOp.label, ": output ", o, " has TensorRT type ", code, ", no torch dtype"));
            }
            outDtypes[o] = dtypes().kernel[static_cast<size_t>(kernel)];
            out[o] = Tensor{nullptr, static_cast<DType>(kernel), static_cast<int32_t>(decl.dims.size()), {}};
            for (size_t d = 0; d < decl.dims.size(); ++d)
            {
                out[o].dims[d] = rules::evaluateConcrete(decl.dims[d], dimOf(), mFields, uppers);
            }
        }
        for (int32_t s = 0; s < nbSizes; ++s)
        {
            out[mOp.nbOutputs + s] = Tensor{nullptr, DType::kINT64, 0, {}};
        }
        // A mutated argument's output is the argument's own (contiguous) memory: the launcher updates it in place.
        for (int32_t k = 0; k < mOp.nbAliasedInputs; ++k)
        {
            out[mOp.nbOutputs + nbSizes + k] = in[mOp.aliasedInputs[k]];
        }
        LaunchArgs args{in, mOp.nbInputs, out, mOp.nbOutputs + nbSizes + mOp.nbAliasedInputs, mScalars, mOp.nbScalars,
            nullptr, 0, 0, static_cast<cudaStream_t>(stream), kPHASE_ALL};
        void const* tables[kMAX_TENSORS]{};
        if (mOp.nbResources > 0)
        {
            cudaError_t const built = mOp.nbResources <= kMAX_TENSORS && mOp.resourceTables != nullptr
                                          ? mOp.resourceTables(mOp, mScalars, tables)
                                          : cudaErrorInvalidValue;
            if (built != cudaSuccess)
            {
                throw EagerError(concat(mOp.label, ": building its shared tables (", mOp.resources[0].initName,
                    ") failed with cudaError ", static_cast<int32_t>(built),
                    " (the first call with new table fields must not be inside a CUDA graph capture)"));
            }
            args.resources = tables;
            args.nbResources = mOp.nbResources;
        }
        size_t const workspace = mOp.workspace != nullptr ? mOp.workspace(args) : 0;
        int64_t const sizesBytes = (8 * nbSizes + kSCRATCH_ALIGN - 1) / kSCRATCH_ALIGN * kSCRATCH_ALIGN;
        int64_t const scratchBytes = sizesBytes + static_cast<int64_t>(workspace);
        Owned scratch;
        if (scratchBytes != 0)
        {
            scratch = emptyTensor(1, &scratchBytes, dtypeCode(TorchDType::kUINT8), device);
            auto* base = static_cast<char*>(dataOf(scratch.get()));
            for (int32_t s = 0; s < nbSizes; ++s)
            {
                out[mOp.nbOutputs + s].data = base + 8 * s;
            }
            args.workspace = workspace != 0 ? base + sizesBytes : nullptr;
            args.workspaceSize = workspace;
        }
        bool const sizesFirst = nbSizes != 0 && mOp.sizesFirst != 0;
        if (!sizesFirst)
        {
            allocate(out, outDtypes, outputs, device);
        }
        args.phase = sizesFirst ? kPHASE_SIZES : kPHASE_ALL;
        launch(args);
        if (nbSizes != 0)
        {
            int64_t counts[64];
            readSizes(scratch.get(), nbSizes, counts);
            for (int32_t o = 0; o < mOp.nbOutputs; ++o)
            {
                auto const& decl = mProgram->outputs[static_cast<size_t>(o)];
                for (size_t d = 0; d < decl.dims.size(); ++d)
                {
                    if (rules::usesSize(decl.dims[d]))
                    {
                        out[o].dims[d] = rules::evaluateConcrete(decl.dims[d], dimOf(), mFields, counts);
                    }
                }
            }
            if (sizesFirst)
            {
                allocate(out, outDtypes, outputs, device);
                args.phase = kPHASE_OUTPUTS;
                launch(args);
            }
            else
            {
                trim(out, outputs);
            }
        }
        writeBack();
    }

private:
    InputDims dimOf() const
    {
        return InputDims{mInputs};
    }

    void checkScalar(int32_t s) const
    {
        FieldDecl const& decl = mOp.scalars[s];
        double const value = mScalars[s];
        if (!inRange(decl, value))
        {
            std::string const got = decl.kind == ScalarKind::kINT ? std::to_string(mInts[s]) : valueRepr(decl, value);
            throw EagerError(outOfRange(decl, concat(mOp.label, ": argument '", decl.argument, "'"), got));
        }
    }

    // The key of a call signature: per input its rank and dtype, then every dim, then the scalars, in one stack
    // buffer (the lookup of a signature seen before allocates nothing). Everything the checks before the devices' and
    // the shape program read; none with a rank above kMAX_DIMS (which no program takes).
    static constexpr size_t kMAX_KEY
        = kMAX_TENSORS * (2 * sizeof(int32_t) + kMAX_DIMS * sizeof(int64_t)) + kMAX_SCALARS * sizeof(double);

    // The signatures this thread saw pass last, with their shape program: a repeated call takes no lock and repeats
    // no check but the devices'.
    struct Recent
    {
        Registration const* registration{nullptr};
        rules::ShapeProgram const* program{nullptr};
        size_t length{0};
        char key[kMAX_KEY];
    };
    static constexpr size_t kRECENT = 4;
    struct RecentSignatures
    {
        std::array<Recent, kRECENT> entries{};
        size_t next{0};
    };
    static RecentSignatures& recentSignatures()
    {
        thread_local RecentSignatures recent;
        return recent;
    }

    // Builds this call's key; true (with mProgram set) where this thread saw the signature pass last.
    bool recall()
    {
        mKeyLength = 0;
        for (int32_t i = 0; i < mOp.nbInputs; ++i)
        {
            if (mInputs[i].rank > kMAX_DIMS)
            {
                return false;
            }
        }
        auto const append = [&](void const* data, size_t bytes)
        {
            std::memcpy(mKey + mKeyLength, data, bytes);
            mKeyLength += bytes;
        };
        for (int32_t i = 0; i < mOp.nbInputs; ++i)
        {
            auto const rank = static_cast<int32_t>(mInputs[i].rank);
            append(&rank, sizeof(rank));
            append(&mInputs[i].dtype, sizeof(int32_t));
        }
        mDimsAt = mKeyLength;
        for (int32_t i = 0; i < mOp.nbInputs; ++i)
        {
            append(mInputs[i].sizes, static_cast<size_t>(mInputs[i].rank) * sizeof(int64_t));
        }
        mDimsBytes = mKeyLength - mDimsAt;
        append(mScalars, static_cast<size_t>(mOp.nbScalars) * sizeof(double));
        for (Recent const& r : recentSignatures().entries)
        {
            if (r.registration == &mReg && r.length == mKeyLength && std::memcmp(r.key, mKey, mKeyLength) == 0)
            {
                mProgram = r.program;
                return true;
            }
        }
        return false;
    }

    void remember() const
    {
        if (mKeyLength == 0)
        {
            return;
        }
        RecentSignatures& recent = recentSignatures();
        Recent& slot = recent.entries[recent.next++ % kRECENT];
        slot.registration = &mReg;
        slot.program = mProgram;
        slot.length = mKeyLength;
        std::memcpy(slot.key, mKey, mKeyLength);
    }

    // The fake kernel runs once per signature in the process (a signature passed stays passed).
    void checkWithFakeKernel()
    {
        if (mKeyLength == 0) // a rank no program takes: the fake kernel (or the rank check) says why
        {
            std::vector<int64_t> dims;
            for (int32_t j = 0; j < mOp.nbInputs; ++j)
            {
                dims.insert(dims.end(), mInputs[j].sizes, mInputs[j].sizes + mInputs[j].rank);
            }
            runHook(dims.data());
            return;
        }
        std::string_view const signature(mKey, mKeyLength);
        bool passed = false;
        {
            std::lock_guard<std::mutex> lock(mReg.mutex);
            passed = mReg.checked.find(signature) != mReg.checked.end();
        }
        if (!passed)
        {
            int64_t dims[kMAX_TENSORS * kMAX_DIMS];
            std::memcpy(dims, mKey + mDimsAt, mDimsBytes);
            runHook(dims);
            std::lock_guard<std::mutex> lock(mReg.mutex);
            if (mReg.checked.size() >= 4096) // many distinct shapes (e.g. a varying batch): start over
            {
                mReg.checked.clear();
            }
            mReg.checked.emplace(signature);
        }
    }

    // The op's fake kernel on this call (`dims`: every input's dims, in order); throws its message.
    void runHook(int64_t const* dims) const
    {
        int32_t ranks[kMAX_TENSORS];
        int32_t kernelDtypes[kMAX_TENSORS];
        for (int32_t i = 0; i < mOp.nbInputs; ++i)
        {
            ranks[i] = static_cast<int32_t>(mInputs[i].rank);
            kernelDtypes[i] = mInputs[i].kernelDType;
        }
        char message[2048] = {0};
        if (mReg.hook(mReg.hookToken, mOp.nbInputs, kernelDtypes, ranks, dims, mOp.nbScalars, mScalars, message,
                static_cast<int32_t>(sizeof(message)))
            != 0)
        {
            throw EagerError(message[0] != 0 ? message : concat(mOp.label, ": its fake kernel rejects the call"));
        }
    }

    void allocate(Tensor* out, int32_t const* outDtypes, Owned* outputs, int32_t device) const
    {
        for (int32_t o = 0; o < mOp.nbOutputs; ++o)
        {
            outputs[o] = emptyTensor(out[o].rank, out[o].dims, outDtypes[o], device);
            out[o].data = out[o].numel() != 0 ? dataOf(outputs[o].get()) : nullptr;
        }
    }

    // The written part of upper-bound outputs (their leading elements) at the actual shapes in `out`.
    void trim(Tensor const* out, Owned* outputs) const
    {
        for (int32_t o = 0; o < mOp.nbOutputs; ++o)
        {
            int64_t const upper = numelOf(outputs[o].get());
            int64_t const kept = out[o].numel();
            if (kept == upper)
            {
                continue;
            }
            int64_t strides[kMAX_DIMS];
            int64_t step = 1;
            for (int32_t d = out[o].rank - 1; d >= 0; --d)
            {
                strides[d] = step;
                step *= out[o].dims[d] > 1 ? out[o].dims[d] : 1;
            }
            Owned result = strided(outputs[o].get(), out[o].rank, out[o].dims, strides);
            int64_t const element = dtypeSize(out[o].dtype);
            int64_t const wasted = (upper - kept) * element;
            if (wasted > kTRIM_BYTES && wasted > kept * element)
            {
                result = cloned(result.get());
            }
            outputs[o] = std::move(result);
        }
    }

    // A mutated argument that is not contiguous was updated in its contiguous copy: copy that back (on the stream).
    void writeBack() const
    {
        for (int32_t k = 0; k < mOp.nbAliasedInputs; ++k)
        {
            Input const& input = mInputs[mOp.aliasedInputs[k]];
            if (input.contiguous.get() != nullptr)
            {
                copyInto(input.handle.get(), input.contiguous.get());
            }
        }
    }

    TacticDecl const* findTactic(int64_t value) const
    {
        for (int32_t t = 0; t < mOp.nbTactics; ++t)
        {
            if (mOp.tactics[t].value == value)
            {
                return &mOp.tactics[t];
            }
        }
        std::string values;
        for (int32_t t = 0; t < mOp.nbTactics; ++t)
        {
            values += concat(t != 0 ? ", " : "", mOp.tactics[t].value);
        }
        throw EagerError(concat(mOp.label, ": argument 'tactic' must be one of [", values, "], got ", value));
    }

    void launch(LaunchArgs const& args) const
    {
        cudaError_t const status = mTactic->launch(args);
        if (status != cudaSuccess)
        {
            throw EagerError(concat(mOp.label, ": launcher '", mTactic->launcherName, "' (tactic ", mTactic->value,
                args.phase != kPHASE_ALL ? concat(", phase ", args.phase) : "", ") returned ",
                launcherError(reinterpret_cast<void const*>(mTactic->launch), status)));
        }
    }

    Registration& mReg;
    EagerOp const& mOp;
    TacticDecl const* mTactic; // the launcher this call runs
    Input mInputs[kMAX_TENSORS];
    double mScalars[kMAX_SCALARS]{};
    int64_t mInts[kMAX_SCALARS]{};
    rules::ShapeProgram const* mProgram{nullptr};
    rules::FieldView const mFields{mScalars}; // an eager call has no shape inputs
    char mKey[kMAX_KEY];                      // the call's signature (recall), mKeyLength bytes; none when 0
    size_t mKeyLength{0};
    size_t mDimsAt{0};
    size_t mDimsBytes{0};
};

void serve(Registration& registration, Arguments& arguments)
{
    Owned outputs[kMAX_TENSORS];
    {
        Call call(registration, arguments);
        call.check();
        call.run(outputs);
    }
    arguments.output(outputs, registration.op->nbOutputs);
}

void write(char* error, int32_t size, std::string const& text)
{
    if (error != nullptr && size > 0)
    {
        std::strncpy(error, text.c_str(), static_cast<size_t>(size) - 1);
        error[size - 1] = '\0';
    }
}

} // namespace
} // namespace ttp::sdk::eager

using namespace ttp::sdk;

// Which torch ABI this library is built against: "stable" or "native".
extern "C" __attribute__((visibility("default"))) char const* ttp_eager_flavour()
{
    return eager::kFLAVOUR;
}

// The table version this kernel reads (op libraries generate kEAGER_TABLE_VERSION tables).
extern "C" __attribute__((visibility("default"))) int32_t ttp_eager_table_version()
{
    return kEAGER_TABLE_VERSION;
}

// Registers the eager kernel of `op` (an op library's ttp_sdk_eager_op) with torch's dispatcher for `dispatchKey`
// ("CUDA"), under the op `name` ("ns::op", the table's own op when null: another op of the same schema, e.g. a test's).
// `hook` (may be null) runs the op's fake kernel on call signatures not seen before, `token` being what it
// is called with. With `tacticArgument` non-zero, the op takes one more argument, last, the value of the tactic whose
// launcher runs (an op's `<name>_tactic` variant). Returns 0 and a handle for ttp_eager_unregister, or non-zero with
// `error` written.
extern "C" __attribute__((visibility("default"))) int32_t ttp_eager_register(EagerOp const* op, char const* name,
    char const* dispatchKey, eager::CheckHook hook, int32_t token, int32_t tacticArgument, void** handle, char* error,
    int32_t errorSize)
{
    using namespace eager;
    try
    {
        if (op == nullptr || op->version != kEAGER_TABLE_VERSION)
        {
            throw EagerError(concat("the op library's eager table has version ", op ? op->version : -1,
                ", this kernel reads version ", kEAGER_TABLE_VERSION, " (rebuild the op library)"));
        }
        if (op->nbInputs < 1 || op->nbInputs > kMAX_TENSORS || op->nbOutputs > kMAX_TENSORS
            || op->nbScalars > kMAX_SCALARS)
        {
            throw EagerError(concat(op->op, ": the eager kernel takes 1 to ", kMAX_TENSORS, " tensor inputs, up to ",
                kMAX_TENSORS, " outputs and ", kMAX_SCALARS, " scalars"));
        }
        if (op->nbTactics < 1 || op->tactics[0].value != 0)
        {
            throw EagerError(concat(op->op, ": the eager table lists no default launcher (tactic 0) first"));
        }
        rules::OpShape shape{op->op, {}, op->nbOutputs, {}};
        for (int32_t i = 0; i < op->nbInputs; ++i)
        {
            shape.inputs.emplace_back(op->inputs[i].name);
        }
        for (int32_t s = 0; s < op->nbScalars; ++s)
        {
            shape.fields.push_back({op->scalars[s].argument, op->scalars[s].kind == ScalarKind::kFLOAT, std::nan("")});
        }
        auto registration = std::make_unique<Registration>(op, std::move(shape), hook, token, tacticArgument != 0);
        if (!registration->rules.error().empty())
        {
            throw EagerError(concat(op->op, ": ", registration->rules.error()));
        }
        if (registration->rules.nbSizes() > 64
            || op->nbOutputs + registration->rules.nbSizes() + op->nbAliasedInputs > kMAX_TENSORS)
        {
            throw EagerError(concat(op->op, ": too many outputs and data-dependent sizes for the eager kernel"));
        }
        for (int32_t k = 0; k < op->nbAliasedInputs; ++k)
        {
            if (op->aliasedInputs[k] < 0 || op->aliasedInputs[k] >= op->nbInputs)
            {
                throw EagerError(concat(op->op, ": aliased input ", op->aliasedInputs[k], " is not one of its ",
                    op->nbInputs, " tensor inputs"));
            }
        }
        std::string const qualified(name != nullptr ? name : op->op);
        size_t const split = qualified.find("::");
        if (split == std::string::npos)
        {
            throw EagerError(concat("expected an op name 'namespace::name', got '", qualified, "'"));
        }
        std::string const ns = qualified.substr(0, split);
        std::string const opName = qualified.substr(split + 2);
        registration->kernel
            = std::make_unique<KernelRegistration>(ns, opName, dispatchKey, registration.get(), __FILE__, __LINE__);
        *handle = registration.release(); // lives as long as its registration (and, unregistered, the process)
        return 0;
    }
    catch (std::exception const& e)
    {
        write(error, errorSize, e.what());
    }
    return 1;
}

// Removes the registration: the op has no such kernel afterwards (tests; a process otherwise keeps it).
extern "C" __attribute__((visibility("default"))) int32_t ttp_eager_unregister(void* handle)
{
    auto* registration = static_cast<eager::Registration*>(handle);
    if (registration == nullptr || registration->kernel == nullptr)
    {
        return 1;
    }
    registration->kernel.reset();
    return 0;
}
