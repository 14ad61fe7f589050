#include "trap.h"

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <pthread.h>
#include <stdexcept>
#include <sys/mman.h>
#include <unistd.h>

namespace ttp::harness
{
namespace
{

// One trapped call at a time (the harness serializes runs), so plain globals describe it; the handlers check
// the thread so that faults and terminations elsewhere in the process keep their usual behaviour.
sigjmp_buf* gJump = nullptr;
pthread_t gThread{};
std::atomic<bool> gArmed{false};
std::atomic<bool> gFaultsArmed{false};
TrapOutcome::Kind gKind = TrapOutcome::Kind::kNONE;
char gWhat[512];
uintptr_t gFaultAddress = 0;
std::terminate_handler gPreviousTerminate = nullptr;
struct sigaction gPreviousSegv;
struct sigaction gPreviousBus;
struct sigaction gPreviousAbort;

bool onTrappedThread() noexcept
{
    return gArmed.load() && pthread_equal(pthread_self(), gThread);
}

void setWhat(char const* what) noexcept
{
    std::strncpy(gWhat, what, sizeof(gWhat) - 1);
    gWhat[sizeof(gWhat) - 1] = '\0';
}

[[noreturn]] void onTerminate()
{
    if (!onTrappedThread())
    {
        if (gPreviousTerminate != nullptr)
        {
            gPreviousTerminate();
        }
        std::abort();
    }
    setWhat("std::terminate called without an active exception");
    if (std::exception_ptr current = std::current_exception())
    {
        try
        {
            std::rethrow_exception(current);
        }
        catch (std::exception const& e)
        {
            setWhat(e.what());
        }
        catch (...)
        {
            setWhat("exception of a type not derived from std::exception");
        }
        current = nullptr;
        // The runtime entered a handler for the escaping exception before calling terminate; end it so the
        // exception object is freed, since that handler will never complete.
        __cxxabiv1::__cxa_end_catch();
    }
    gKind = TrapOutcome::Kind::kEXCEPTION;
    siglongjmp(*gJump, 1);
}

// A plugin library with its own copy of the C++ runtime (statically linked libstdc++, common for plugins built to
// be portable) has its own terminate handler, which ours does not replace: it aborts. SIGABRT is caught instead.
void onAbort(int signal)
{
    if (onTrappedThread())
    {
        setWhat("std::terminate/abort() was called; the plugin's own C++ runtime reported the exception on stderr");
        gKind = TrapOutcome::Kind::kEXCEPTION;
        siglongjmp(*gJump, 1);
    }
    sigaction(signal, &gPreviousAbort, nullptr);
}

void onFault(int signal, siginfo_t* info, void* /*ucontext*/)
{
    if (gFaultsArmed.load() && onTrappedThread())
    {
        gKind = TrapOutcome::Kind::kFAULT;
        gFaultAddress = reinterpret_cast<uintptr_t>(info->si_addr);
        siglongjmp(*gJump, 1);
    }
    // Not ours: put the previous disposition back; returning re-executes the faulting access under it.
    sigaction(signal, signal == SIGSEGV ? &gPreviousSegv : &gPreviousBus, nullptr);
}

} // namespace

TrapOutcome runTrapped(void (*call)(void*), void* context) noexcept
{
    sigjmp_buf jump;
    TrapOutcome outcome;
    gPreviousTerminate = std::set_terminate(onTerminate);
    struct sigaction abortAction;
    std::memset(&abortAction, 0, sizeof(abortAction));
    abortAction.sa_handler = onAbort;
    abortAction.sa_flags = SA_NODEFER;
    sigemptyset(&abortAction.sa_mask);
    sigaction(SIGABRT, &abortAction, &gPreviousAbort);
    gJump = &jump;
    gThread = pthread_self();
    gKind = TrapOutcome::Kind::kNONE;
    gWhat[0] = '\0';
    if (sigsetjmp(jump, 1) == 0)
    {
        gArmed.store(true);
        try
        {
            call(context);
        }
        catch (std::exception const& e)
        {
            gKind = TrapOutcome::Kind::kEXCEPTION;
            setWhat(e.what());
        }
        catch (...)
        {
            gKind = TrapOutcome::Kind::kEXCEPTION;
            setWhat("exception of a type not derived from std::exception");
        }
    }
    gArmed.store(false);
    sigaction(SIGABRT, &gPreviousAbort, nullptr);
    std::set_terminate(gPreviousTerminate);
    gJump = nullptr;
    outcome.kind = gKind;
    outcome.what = gWhat;
    if (gKind == TrapOutcome::Kind::kFAULT)
    {
        outcome.faultAddress = gFaultAddress;
        outcome.what = "memory fault";
    }
    return outcome;
}

FaultScope::FaultScope()
{
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = onFault;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &gPreviousSegv);
    sigaction(SIGBUS, &action, &gPreviousBus);
    gFaultsArmed.store(true);
}

FaultScope::~FaultScope()
{
    gFaultsArmed.store(false);
    sigaction(SIGSEGV, &gPreviousSegv, nullptr);
    sigaction(SIGBUS, &gPreviousBus, nullptr);
}

GuardedWindow::GuardedWindow(size_t readableBytes)
{
    size_t const page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    mReadable = (readableBytes + page - 1) / page * page;
    mTotal = mReadable + page;
    void* base = mmap(nullptr, mTotal, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
    {
        throw std::runtime_error("harness: mmap of a guarded window failed");
    }
    mBase = static_cast<uint8_t*>(base);
    mProtected = mBase + mReadable;
    if (mprotect(mProtected, page, PROT_NONE) != 0)
    {
        munmap(mBase, mTotal);
        throw std::runtime_error("harness: mprotect of a guard page failed");
    }
}

GuardedWindow::~GuardedWindow()
{
    munmap(mBase, mTotal);
}

void* GuardedWindow::endAligned(size_t bytes) const
{
    if (bytes > mReadable)
    {
        throw std::logic_error("harness: guarded window too small");
    }
    return mProtected - bytes;
}

} // namespace ttp::harness
