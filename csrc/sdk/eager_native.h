// The eager kernel's torch side in the full LibTorch ABI: built for one torch (the running one), where eager_stable.h
// serves every torch from 2.11 on. Included by eager.cpp only (after EagerError and `serve`'s declaration), as the
// same interface.
//
// What the full ABI saves a call: the kernel is an IValue-boxed functor holding its registration, which reads the
// dispatcher's stack in place (the stable ABI converts every argument to a StableIValue, a heap at::Tensor per
// tensor, and every output back), reads tensor metadata inline, and allocates its outputs as torch's own CUDA
// kernels do (at::detail::empty_generic with the CUDA caching allocator), not through the dispatcher.
#pragma once

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace ttp::sdk::eager
{
namespace
{

constexpr char const* kFLAVOUR = "native";

using Handle = at::Tensor const*;

// A tensor the call holds.
class Owned
{
public:
    Owned() = default;
    explicit Owned(at::Tensor tensor)
        : mTensor(std::move(tensor))
    {
    }
    Handle get() const noexcept
    {
        return mTensor.defined() ? &mTensor : nullptr;
    }
    at::Tensor release() noexcept
    {
        return std::move(mTensor);
    }

private:
    at::Tensor mTensor;
};

// An argument's tensor: the dispatcher's stack holds it for the call.
class ArgumentTensor
{
public:
    ArgumentTensor() = default;
    explicit ArgumentTensor(at::Tensor const* tensor)
        : mTensor(tensor)
    {
    }
    Handle get() const noexcept
    {
        return mTensor;
    }

private:
    at::Tensor const* mTensor{nullptr};
};

int32_t dtypeCode(TorchDType type)
{
    auto code = [](at::ScalarType t) { return static_cast<int32_t>(t); };
    switch (type)
    {
    case TorchDType::kFLOAT32: return code(at::kFloat);
    case TorchDType::kFLOAT16: return code(at::kHalf);
    case TorchDType::kBFLOAT16: return code(at::kBFloat16);
    case TorchDType::kINT8: return code(at::kChar);
    case TorchDType::kINT32: return code(at::kInt);
    case TorchDType::kINT64: return code(at::kLong);
    case TorchDType::kBOOL: return code(at::kBool);
    case TorchDType::kFLOAT8_E4M3FN: return code(at::kFloat8_e4m3fn);
    case TorchDType::kFLOAT64: return code(at::kDouble);
    case TorchDType::kUINT8: return code(at::kByte);
    case TorchDType::kINT16: return code(at::kShort);
    case TorchDType::kUINT16: return code(at::kUInt16);
    case TorchDType::kUINT32: return code(at::kUInt32);
    case TorchDType::kUINT64: return code(at::kUInt64);
    case TorchDType::kCOMPLEX32: return code(at::kComplexHalf);
    case TorchDType::kCOMPLEX64: return code(at::kComplexFloat);
    case TorchDType::kCOMPLEX128: return code(at::kComplexDouble);
    case TorchDType::kFLOAT8_E5M2: return code(at::kFloat8_e5m2);
    }
    return -1;
}

int32_t deviceTypeCode(TorchDevice type)
{
    switch (type)
    {
    case TorchDevice::kCUDA: return static_cast<int32_t>(c10::DeviceType::CUDA);
    case TorchDevice::kCPU: return static_cast<int32_t>(c10::DeviceType::CPU);
    case TorchDevice::kMETA: return static_cast<int32_t>(c10::DeviceType::Meta);
    }
    return -1;
}

void describe(Handle h, TensorMeta& meta)
{
    meta.dtype = static_cast<int32_t>(h->scalar_type());
    meta.rank = h->dim();
    meta.sizes = h->sizes().data();
    meta.strides = h->strides().data();
    c10::Device const device = h->device();
    meta.deviceType = static_cast<int32_t>(device.type());
    meta.deviceIndex = device.index();
}

// A new tensor on CUDA device `device` (the current one), through torch's caching allocator (what torch's own CUDA
// kernels do to make their outputs: at::detail::empty_cuda is empty_generic with that allocator).
Owned emptyDevice(int32_t rank, int64_t const* dims, int64_t const* strides, int32_t torchDtype, int32_t /*device*/)
{
    static c10::Allocator* const allocator = c10::GetAllocator(c10::DeviceType::CUDA);
    return Owned(at::Tensor(at::detail::empty_strided_generic(c10::IntArrayRef(dims, static_cast<size_t>(rank)),
        c10::IntArrayRef(strides, static_cast<size_t>(rank)), allocator, c10::DispatchKeySet(c10::DispatchKey::CUDA),
        static_cast<at::ScalarType>(torchDtype))));
}

// A new host tensor of `bytes` bytes.
Owned emptyHost(int64_t bytes)
{
    return Owned(at::Tensor(at::detail::empty_cpu({bytes}, at::kByte, /*pin_memory=*/false, std::nullopt)));
}

void* dataOf(Handle h)
{
    return h->data_ptr();
}

int64_t numelOf(Handle h)
{
    return h->numel();
}

// torch's copy_ (on the current stream).
void copyInto(Handle destination, Handle source)
{
    destination->copy_(*source);
}

// A view of `h`'s storage from its start with these dims and strides.
Owned strided(Handle h, int32_t rank, int64_t const* dims, int64_t const* strides)
{
    return Owned(h->as_strided(
        c10::IntArrayRef(dims, static_cast<size_t>(rank)), c10::IntArrayRef(strides, static_cast<size_t>(rank)), 0));
}

Owned cloned(Handle h)
{
    return Owned(h->clone());
}

int32_t torchCurrentDevice()
{
    return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index();
}

// Makes `device` the current CUDA device for the guard's life.
class DeviceGuard
{
public:
    explicit DeviceGuard(int32_t device)
        : mGuard(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)))
    {
    }

private:
    c10::DeviceGuard mGuard;
};

// A call's arguments, the last `count` values on the dispatcher's stack; its outputs replace them.
class Arguments
{
public:
    Arguments(torch::jit::Stack* stack, size_t count)
        : mStack(stack)
        , mCount(count)
        , mFirst(stack->data() + (stack->size() - count))
    {
    }
    uint64_t count() const noexcept
    {
        return mCount;
    }
    ArgumentTensor tensor(int32_t a) const
    {
        return ArgumentTensor(&mFirst[a].toTensor());
    }
    double real(int32_t a) const
    {
        return mFirst[a].toDouble();
    }
    int64_t integer(int32_t a) const
    {
        return mFirst[a].toInt();
    }
    bool boolean(int32_t a) const
    {
        return mFirst[a].toBool();
    }
    void output(Owned* outputs, int32_t count)
    {
        torch::jit::drop(*mStack, mCount);
        for (int32_t o = 0; o < count; ++o)
        {
            mStack->emplace_back(outputs[o].release());
        }
    }

private:
    torch::jit::Stack* mStack;
    size_t mCount;
    c10::IValue* mFirst;
};

// The boxed kernel: the registration it serves is its own state.
class Kernel final : public c10::OperatorKernel
{
public:
    explicit Kernel(Registration* served)
        : mServed(served)
    {
    }
    void operator()(c10::OperatorHandle const& op, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack)
    {
        Arguments arguments(stack, op.schema().arguments().size());
        serve(*mServed, arguments);
    }

private:
    Registration* mServed;
};

// A kernel's registration with torch's dispatcher (removed when destroyed), made at `file`:`line`.
class KernelRegistration
{
public:
    KernelRegistration(std::string const& ns, std::string const& name, char const* dispatchKey, Registration* served,
        char const* file, uint32_t line)
        : mLibrary(torch::Library::IMPL, ns, c10::parseDispatchKey(dispatchKey), file, line)
    {
        mLibrary.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<Kernel>(served)));
    }

private:
    torch::Library mLibrary;
};

} // namespace
} // namespace ttp::sdk::eager
