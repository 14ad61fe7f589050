#include "device.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace ttp::harness
{

std::string const& deviceStatus()
{
    static std::string const status = []
    {
        int32_t count = 0;
        cudaError_t const err = cudaGetDeviceCount(&count);
        if (err != cudaSuccess)
        {
            cudaGetLastError();
            return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(err) + ")";
        }
        return count > 0 ? std::string() : std::string("no CUDA device");
    }();
    return status;
}

void cudaCheck(cudaError_t status, char const* what)
{
    if (status != cudaSuccess)
    {
        cudaGetLastError();
        throw std::runtime_error(
            std::string(what) + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
    }
}

GuardedBuffer::GuardedBuffer(size_t bytes)
    : mBytes(bytes)
{
    void* base = nullptr;
    cudaCheck(cudaMalloc(&base, bytes + 2 * kGUARD), "cudaMalloc of a harness buffer");
    mBase = static_cast<uint8_t*>(base);
    reset();
}

GuardedBuffer::~GuardedBuffer()
{
    if (mBase != nullptr)
    {
        cudaFree(mBase);
    }
}

GuardedBuffer::GuardedBuffer(GuardedBuffer&& other) noexcept
    : mBase(other.mBase)
    , mBytes(other.mBytes)
{
    other.mBase = nullptr;
    other.mBytes = 0;
}

GuardedBuffer& GuardedBuffer::operator=(GuardedBuffer&& other) noexcept
{
    if (this != &other)
    {
        if (mBase != nullptr)
        {
            cudaFree(mBase);
        }
        mBase = other.mBase;
        mBytes = other.mBytes;
        other.mBase = nullptr;
        other.mBytes = 0;
    }
    return *this;
}

void GuardedBuffer::reset()
{
    cudaCheck(cudaMemset(mBase, kGUARD_BYTE, kGUARD), "cudaMemset");
    cudaCheck(cudaMemset(mBase + kGUARD, kFILL_BYTE, mBytes), "cudaMemset");
    cudaCheck(cudaMemset(mBase + kGUARD + mBytes, kGUARD_BYTE, kGUARD), "cudaMemset");
}

void GuardedBuffer::copyFrom(void const* device, size_t bytes)
{
    if (bytes > mBytes)
    {
        throw std::logic_error("harness: copy larger than its buffer");
    }
    cudaCheck(cudaMemcpy(data(), device, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy into a harness buffer");
}

namespace
{

std::vector<uint8_t> readRaw(uint8_t const* device, size_t bytes, cudaStream_t stream)
{
    std::vector<uint8_t> host(bytes);
    if (bytes != 0)
    {
        cudaCheck(cudaMemcpyAsync(host.data(), device, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
        cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    return host;
}

// Offsets (first, last) of bytes differing from `expected`, or (-1, -1).
std::pair<int64_t, int64_t> damage(std::vector<uint8_t> const& bytes, uint8_t expected)
{
    int64_t first = -1;
    int64_t last = -1;
    for (size_t i = 0; i < bytes.size(); ++i)
    {
        if (bytes[i] != expected)
        {
            first = first < 0 ? static_cast<int64_t>(i) : first;
            last = static_cast<int64_t>(i);
        }
    }
    return {first, last};
}

} // namespace

std::string GuardedBuffer::guardDamage(cudaStream_t stream) const
{
    std::vector<uint8_t> const raw = readRaw(mBase, mBytes + 2 * kGUARD, stream);
    std::vector<uint8_t> const before(raw.begin(), raw.begin() + kGUARD);
    std::vector<uint8_t> const after(raw.end() - kGUARD, raw.end());
    auto const [b0, b1] = damage(before, kGUARD_BYTE);
    auto const [a0, a1] = damage(after, kGUARD_BYTE);
    std::string out;
    if (b0 >= 0)
    {
        out += "bytes " + std::to_string(b0 - static_cast<int64_t>(kGUARD)) + ".."
               + std::to_string(b1 - static_cast<int64_t>(kGUARD)) + " (before the start)";
    }
    if (a0 >= 0)
    {
        out += std::string(out.empty() ? "" : " and ") + "bytes " + std::to_string(a0 + static_cast<int64_t>(mBytes))
               + ".." + std::to_string(a1 + static_cast<int64_t>(mBytes)) + " (past the end)";
    }
    return out;
}

std::vector<uint8_t> GuardedBuffer::read(cudaStream_t stream) const
{
    return readRaw(mBase + kGUARD, mBytes, stream);
}

bool GuardedBuffer::touched(cudaStream_t stream) const
{
    std::vector<uint8_t> const raw = readRaw(mBase, mBytes + 2 * kGUARD, stream);
    for (size_t i = 0; i < raw.size(); ++i)
    {
        bool const guard = i < kGUARD || i >= kGUARD + mBytes;
        if (raw[i] != (guard ? kGUARD_BYTE : kFILL_BYTE))
        {
            return true;
        }
    }
    return false;
}

StreamGate::StreamGate(double timeoutSeconds)
    : mTimeoutNs(static_cast<uint64_t>(timeoutSeconds * 1e9))
{
    void* host = nullptr;
    cudaCheck(cudaHostAlloc(&host, 2 * sizeof(int32_t), cudaHostAllocMapped), "cudaHostAlloc");
    mHost = static_cast<int32_t volatile*>(host);
    mHost[0] = 1;
    mHost[1] = 0;
    void* device = nullptr;
    cudaCheck(cudaHostGetDevicePointer(&device, host, 0), "cudaHostGetDevicePointer");
    mDevice = static_cast<int32_t*>(device);
}

StreamGate::~StreamGate()
{
    if (mHost != nullptr)
    {
        mHost[0] = 1;
        cudaFreeHost(const_cast<int32_t*>(mHost));
    }
}

void StreamGate::close(cudaStream_t stream)
{
    mHost[0] = 0;
    mHost[1] = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    cudaCheck(launchGate(mDevice, mTimeoutNs, stream), "launching the stream gate");
}

void StreamGate::open()
{
    std::atomic_thread_fence(std::memory_order_seq_cst);
    mHost[0] = 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool StreamGate::timedOut() const noexcept
{
    return mHost[1] != 0;
}

bool drainDefaultStreams(double timeoutSeconds)
{
    auto const deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
    for (cudaStream_t stream : {cudaStreamLegacy, cudaStreamPerThread})
    {
        cudaEvent_t event = nullptr;
        cudaCheck(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
        cudaCheck(cudaEventRecord(event, stream), "cudaEventRecord");
        cudaError_t status;
        while ((status = cudaEventQuery(event)) == cudaErrorNotReady && std::chrono::steady_clock::now() < deadline)
        {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        cudaEventDestroy(event);
        if (status != cudaSuccess)
        {
            cudaGetLastError();
            return false;
        }
    }
    return true;
}

size_t freeDeviceMemory()
{
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    cudaCheck(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
    return freeBytes;
}

} // namespace ttp::harness
