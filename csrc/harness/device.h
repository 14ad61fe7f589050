// Device-side tools of the harness: guarded buffers (writes outside a buffer land in guard bytes that are checked
// afterwards) and a stream gate (a kernel that holds a stream until the host opens it, so that work a plugin
// queues on the given stream cannot have run yet while the harness looks at its buffers from another stream).
// Nothing here runs without a device: callers check `deviceStatus()` first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ttp::harness
{

// "" when a CUDA device is usable, else why not. Never fails on a machine without a GPU.
std::string const& deviceStatus();

// Throws std::runtime_error "<what>: <CUDA error>" for a failed CUDA call.
void cudaCheck(cudaError_t status, char const* what);

constexpr uint8_t kGUARD_BYTE = 0xA5;
constexpr uint8_t kFILL_BYTE = 0xCD;

class GuardedBuffer
{
public:
    static constexpr size_t kGUARD = 256; // keeps data() 256-byte aligned, as TensorRT's buffers are

    GuardedBuffer() = default;
    explicit GuardedBuffer(size_t bytes);
    ~GuardedBuffer();
    GuardedBuffer(GuardedBuffer&& other) noexcept;
    GuardedBuffer& operator=(GuardedBuffer&& other) noexcept;
    GuardedBuffer(GuardedBuffer const&) = delete;
    GuardedBuffer& operator=(GuardedBuffer const&) = delete;

    void* data() const noexcept
    {
        return mBase == nullptr ? nullptr : mBase + kGUARD;
    }
    size_t size() const noexcept
    {
        return mBytes;
    }
    // Guards to kGUARD_BYTE, the data to kFILL_BYTE.
    void reset();
    void copyFrom(void const* device, size_t bytes);
    // "" when both guards are intact, else where the first and last modified guard bytes are.
    std::string guardDamage(cudaStream_t stream) const;
    std::vector<uint8_t> read(cudaStream_t stream) const;
    // Whether any byte (guards or data) differs from what reset() wrote.
    bool touched(cudaStream_t stream) const;

private:
    uint8_t* mBase{nullptr};
    size_t mBytes{0};
};

// A stream held closed by a spinning kernel until open() (or a timeout, so nothing can hang).
class StreamGate
{
public:
    explicit StreamGate(double timeoutSeconds);
    ~StreamGate();
    StreamGate(StreamGate const&) = delete;
    StreamGate& operator=(StreamGate const&) = delete;

    void close(cudaStream_t stream);
    void open();
    // Whether the last gate gave up waiting (someone blocked until the stream drained).
    bool timedOut() const noexcept;

private:
    int32_t volatile* mHost{nullptr}; // [0] open flag, [1] timed-out flag; host-mapped
    int32_t* mDevice{nullptr};
    uint64_t mTimeoutNs;
};

// Launched by StreamGate (gate.cu).
cudaError_t launchGate(int32_t* flags, uint64_t timeoutNs, cudaStream_t stream);

// Waits (bounded) for work queued so far on the legacy and per-thread default streams; false on timeout.
bool drainDefaultStreams(double timeoutSeconds);

// Free device memory in bytes (cudaMemGetInfo).
size_t freeDeviceMemory();

} // namespace ttp::harness
