// The eager kernel's torch side in LibTorch's stable ABI (the C shims of torch/csrc/inductor/aoti_torch/c/shim.h and
// torch/csrc/stable/c/shim.h, targeting torch 2.11): one binary serves torch 2.11 and later. Included by eager.cpp
// only (after EagerError and `serve`'s declaration); eager_native.h is the same interface in the full LibTorch ABI.
//
// The shim's boxed kernels get no user data, so each registration takes one of kSLOTS instantiations of `boxed<I>`,
// which forwards to `serve` with its slot's registration. Every tensor argument arrives as a new handle the call owns
// (a heap at::Tensor, which the shim made from the dispatcher's IValue).
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/c/shim.h>
#include <torch/csrc/stable/stableivalue_conversions.h>

namespace ttp::sdk::eager
{
namespace
{

constexpr char const* kFLAVOUR = "stable";

void shim(AOTITorchError err, char const* what)
{
    if (err != AOTI_TORCH_SUCCESS)
    {
        throw EagerError(rules::concat("torchtrt_plugins eager kernel: torch's ", what, " failed"));
    }
}

using Handle = AtenTensorHandle;

// A tensor the call holds: an owned AtenTensorHandle.
class Owned
{
public:
    Owned() = default;
    explicit Owned(AtenTensorHandle handle)
        : mHandle(handle)
    {
    }
    Owned(Owned&& other) noexcept
        : mHandle(std::exchange(other.mHandle, nullptr))
    {
    }
    Owned& operator=(Owned&& other) noexcept
    {
        std::swap(mHandle, other.mHandle);
        return *this;
    }
    Owned(Owned const&) = delete;
    Owned& operator=(Owned const&) = delete;
    ~Owned()
    {
        if (mHandle != nullptr)
        {
            aoti_torch_delete_tensor_object(mHandle);
        }
    }
    Handle get() const noexcept
    {
        return mHandle;
    }
    AtenTensorHandle release() noexcept
    {
        return std::exchange(mHandle, nullptr);
    }

private:
    AtenTensorHandle mHandle{nullptr};
};

// An argument's tensor: the shim hands the call a handle of its own.
using ArgumentTensor = Owned;

int32_t dtypeCode(TorchDType type)
{
    switch (type)
    {
    case TorchDType::kFLOAT32: return aoti_torch_dtype_float32();
    case TorchDType::kFLOAT16: return aoti_torch_dtype_float16();
    case TorchDType::kBFLOAT16: return aoti_torch_dtype_bfloat16();
    case TorchDType::kINT8: return aoti_torch_dtype_int8();
    case TorchDType::kINT32: return aoti_torch_dtype_int32();
    case TorchDType::kINT64: return aoti_torch_dtype_int64();
    case TorchDType::kBOOL: return aoti_torch_dtype_bool();
    case TorchDType::kFLOAT8_E4M3FN: return aoti_torch_dtype_float8_e4m3fn();
    case TorchDType::kFLOAT64: return aoti_torch_dtype_float64();
    case TorchDType::kUINT8: return aoti_torch_dtype_uint8();
    case TorchDType::kINT16: return aoti_torch_dtype_int16();
    case TorchDType::kUINT16: return aoti_torch_dtype_uint16();
    case TorchDType::kUINT32: return aoti_torch_dtype_uint32();
    case TorchDType::kUINT64: return aoti_torch_dtype_uint64();
    case TorchDType::kCOMPLEX32: return aoti_torch_dtype_complex32();
    case TorchDType::kCOMPLEX64: return aoti_torch_dtype_complex64();
    case TorchDType::kCOMPLEX128: return aoti_torch_dtype_complex128();
    case TorchDType::kFLOAT8_E5M2: return aoti_torch_dtype_float8_e5m2();
    }
    return -1;
}

int32_t deviceTypeCode(TorchDevice type)
{
    switch (type)
    {
    case TorchDevice::kCUDA: return aoti_torch_device_type_cuda();
    case TorchDevice::kCPU: return aoti_torch_device_type_cpu();
    case TorchDevice::kMETA: return aoti_torch_device_type_meta();
    }
    return -1;
}

void describe(Handle h, TensorMeta& meta)
{
    shim(aoti_torch_get_dtype(h, &meta.dtype), "get_dtype");
    shim(aoti_torch_get_dim(h, &meta.rank), "get_dim");
    int64_t* sizes = nullptr;
    int64_t* strides = nullptr;
    shim(aoti_torch_get_sizes(h, &sizes), "get_sizes");
    shim(aoti_torch_get_strides(h, &strides), "get_strides");
    meta.sizes = sizes;
    meta.strides = strides;
    shim(aoti_torch_get_device_type(h, &meta.deviceType), "get_device_type");
    shim(aoti_torch_get_device_index(h, &meta.deviceIndex), "get_device_index");
}

// A new tensor on CUDA device `device` (the current one), through torch's caching allocator.
Owned emptyDevice(int32_t rank, int64_t const* dims, int64_t const* strides, int32_t torchDtype, int32_t device)
{
    AtenTensorHandle out = nullptr;
    shim(aoti_torch_empty_strided(rank, dims, strides, torchDtype, aoti_torch_device_type_cuda(), device, &out),
        "empty_strided");
    return Owned(out);
}

// A new host tensor of `bytes` bytes.
Owned emptyHost(int64_t bytes)
{
    int64_t const stride = 1;
    AtenTensorHandle out = nullptr;
    shim(aoti_torch_empty_strided(1, &bytes, &stride, aoti_torch_dtype_uint8(), aoti_torch_device_type_cpu(), 0, &out),
        "empty_strided");
    return Owned(out);
}

void* dataOf(Handle h)
{
    void* data = nullptr;
    shim(aoti_torch_get_data_ptr(h, &data), "get_data_ptr");
    return data;
}

int64_t numelOf(Handle h)
{
    int64_t numel = 0;
    shim(aoti_torch_get_numel(h, &numel), "get_numel");
    return numel;
}

// torch's copy_ (on the current stream).
void copyInto(Handle destination, Handle source)
{
    shim(aoti_torch_copy_(destination, source, 0), "copy_");
}

// A view of `h`'s storage from its start with these dims and strides.
Owned strided(Handle h, int32_t rank, int64_t const* dims, int64_t const* strides)
{
    AtenTensorHandle view = nullptr;
    shim(aoti_torch__reinterpret_tensor(h, rank, dims, strides, 0, &view), "reinterpret_tensor");
    return Owned(view);
}

Owned cloned(Handle h)
{
    AtenTensorHandle copy = nullptr;
    shim(aoti_torch_clone(h, &copy), "clone");
    return Owned(copy);
}

int32_t torchCurrentDevice()
{
    int32_t current = -1;
    shim(aoti_torch_get_current_device_index(&current), "get_current_device_index");
    return current;
}

// A shim object, deleted by its shim function.
template <typename Opaque>
using Held = std::unique_ptr<Opaque, AOTITorchError (*)(Opaque*)>;

// Makes `device` the current CUDA device for the guard's life.
class DeviceGuard
{
public:
    explicit DeviceGuard(int32_t device)
    {
        DeviceGuardHandle guard = nullptr;
        shim(aoti_torch_create_device_guard(device, &guard), "create_device_guard");
        mGuard.reset(guard);
    }

private:
    Held<DeviceGuardOpaque> mGuard{nullptr, &aoti_torch_delete_device_guard};
};

// A call's arguments on the shim's stack; its outputs replace them.
class Arguments
{
public:
    Arguments(StableIValue* stack, uint64_t count)
        : mStack(stack)
        , mCount(count)
    {
    }
    uint64_t count() const noexcept
    {
        return mCount;
    }
    ArgumentTensor tensor(int32_t a) const
    {
        return Owned(torch::stable::detail::to<AtenTensorHandle>(mStack[a]));
    }
    double real(int32_t a) const
    {
        return torch::stable::detail::to<double>(mStack[a]);
    }
    int64_t integer(int32_t a) const
    {
        return torch::stable::detail::to<int64_t>(mStack[a]);
    }
    bool boolean(int32_t a) const
    {
        return torch::stable::detail::to<bool>(mStack[a]);
    }
    void output(Owned* outputs, int32_t count)
    {
        for (int32_t o = 0; o < count; ++o)
        {
            mStack[o] = torch::stable::detail::from(outputs[o].release());
        }
    }

private:
    StableIValue* mStack;
    uint64_t mCount;
};

constexpr size_t kSLOTS = 1024;
std::array<std::atomic<Registration*>, kSLOTS> gSlots{};
std::atomic<size_t> gNextSlot{0};

template <size_t I>
void boxed(StableIValue* stack, uint64_t nbArguments, uint64_t /*nbOutputs*/)
{
    Arguments arguments(stack, nbArguments);
    serve(*gSlots[I].load(std::memory_order_acquire), arguments);
}

using Boxed = void (*)(StableIValue*, uint64_t, uint64_t);

template <size_t... I>
constexpr std::array<Boxed, sizeof...(I)> boxedTable(std::index_sequence<I...> /*slots*/)
{
    return {&boxed<I>...};
}

constexpr std::array<Boxed, kSLOTS> kBOXED = boxedTable(std::make_index_sequence<kSLOTS>{});

// A kernel's registration with torch's dispatcher (removed when destroyed), made at `file`:`line`.
class KernelRegistration
{
public:
    KernelRegistration(std::string const& ns, std::string const& name, char const* dispatchKey, Registration* served,
        char const* file, uint32_t line)
    {
        size_t const slot = gNextSlot.fetch_add(1);
        if (slot >= kSLOTS)
        {
            throw EagerError(rules::concat("the eager kernel serves at most ", kSLOTS, " registrations per process"));
        }
        TorchLibraryHandle library = nullptr;
        shim(aoti_torch_library_init_impl(ns.c_str(), dispatchKey, file, line, &library), "library_init_impl");
        mLibrary.reset(library);
        gSlots[slot].store(served, std::memory_order_release);
        if (torch_library_impl(library, name.c_str(), kBOXED[slot], TORCH_ABI_VERSION) != AOTI_TORCH_SUCCESS)
        {
            throw EagerError(
                rules::concat(ns, "::", name, ": torch refused the kernel registration for ", dispatchKey));
        }
    }

private:
    Held<TorchLibraryOpaque> mLibrary{nullptr, &aoti_torch_delete_library_object};
};

} // namespace
} // namespace ttp::sdk::eager
