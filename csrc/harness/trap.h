// Calling untrusted plugin code and surviving what it does wrong.
//
// Every interface method is `noexcept`, so an exception that escapes one does not reach the caller: the C++
// runtime calls std::terminate. While a trapped call runs, the harness's terminate handler turns that into a
// reported failure (the exception's what()) and jumps back to the call site instead of aborting the process; a
// plugin with its own copy of the C++ runtime ends in abort() instead, and SIGABRT is trapped the same way.
// Inside a FaultScope, a SIGSEGV/SIGBUS raised by the calling thread (a read of a PROT_NONE guard page, say) is
// turned into a failure with the faulting address the same way. Frames abandoned by the jump are not unwound:
// the plugin object involved may leak, which is acceptable for a plugin that has just broken a rule.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace ttp::harness
{

struct TrapOutcome
{
    enum class Kind
    {
        kNONE,      // the call returned
        kEXCEPTION, // an exception escaped it
        kFAULT      // it touched memory it must not (inside a FaultScope)
    };
    Kind kind{Kind::kNONE};
    std::string what;
    uintptr_t faultAddress{0};

    bool ok() const noexcept
    {
        return kind == Kind::kNONE;
    }
};

// Runs call(context) trapped. Not reentrant; calls are serialized by the harness's run lock.
TrapOutcome runTrapped(void (*call)(void*), void* context) noexcept;

template <typename F>
TrapOutcome trapped(F&& fn) noexcept
{
    return runTrapped([](void* ctx) { (*static_cast<std::remove_reference_t<F>*>(ctx))(); },
        const_cast<void*>(static_cast<void const*>(&fn)));
}

// While alive, memory faults of this thread inside trapped calls are caught; otherwise they crash as usual.
class FaultScope
{
public:
    FaultScope();
    ~FaultScope();
    FaultScope(FaultScope const&) = delete;
    FaultScope& operator=(FaultScope const&) = delete;
};

// A readable window followed by a PROT_NONE page: place data so that it ends exactly at the page, and any read
// past its end faults.
class GuardedWindow
{
public:
    explicit GuardedWindow(size_t readableBytes);
    ~GuardedWindow();
    GuardedWindow(GuardedWindow const&) = delete;
    GuardedWindow& operator=(GuardedWindow const&) = delete;

    // The address `bytes` before the protected page (bytes <= readable size).
    void* endAligned(size_t bytes) const;
    // Whether `address` lies in the protected page.
    bool isProtected(uintptr_t address) const noexcept
    {
        auto const begin = reinterpret_cast<uintptr_t>(mProtected);
        return address >= begin && address < begin + (mTotal - mReadable);
    }
    uintptr_t protectedBegin() const noexcept
    {
        return reinterpret_cast<uintptr_t>(mProtected);
    }

private:
    uint8_t* mBase{nullptr};
    size_t mReadable{0};
    size_t mTotal{0};
    uint8_t* mProtected{nullptr};
};

} // namespace ttp::harness
