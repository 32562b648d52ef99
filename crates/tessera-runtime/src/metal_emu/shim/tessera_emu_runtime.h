// The Metal emulator's runtime: runs every threadgroup's threads as fibers on a few OS
// threads. A fiber runs until it reaches a barrier or a simdgroup collective (a rendezvous
// point) or finishes; when every lane of a simdgroup waits at one collective it is
// resolved, when every thread of the threadgroup waits at one barrier they all go on.
// A rendezvous that can never complete (reached by only part of the group, or by lanes at
// different call sites) is reported and the program exits: never a hang.
//
// Protocol with the host: `prog GX GY GZ GROUP_SIZE` reads its arguments from stdin (per
// kernel parameter: u64 byte count, then the bytes) and writes every tensor's bytes back
// to stdout in parameter order. Errors go to stderr as one line starting with
// `TESSERA_EMU_ERROR` and key=value fields, with exit status 3.
//
// Included by metal_stdlib.h before the Metal keyword macros, so std headers are safe here.
#ifndef TESSERA_EMU_RUNTIME_H
#define TESSERA_EMU_RUNTIME_H

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace tsr_emu {

using ResolveFn = void (*)(const void* const* ins, void* const* outs, const unsigned* args, int n);

// What the generated glue gets per thread to fill the kernel's attributes.
struct ThreadInfo {
    unsigned tid, group_size, lane, simd_id, simd_groups;
    unsigned gid[3], grid[3];
};

enum class State { Ready, AtBarrier, AtSimd, Done };

struct Fiber {
    void* sp = nullptr;
#if !defined(__x86_64__)
    ucontext_t ctx;
#endif
    char* stack = nullptr;
    State state = State::Ready;
    int line = 0;
    const void* in = nullptr;
    void* out = nullptr;
    unsigned arg = 0;
    ResolveFn fn = nullptr;
    ThreadInfo info{};
};

using EntryFn = void (*)(const ThreadInfo&);

struct Launch {
    unsigned grid[3] = {1, 1, 1};
    unsigned group_size = 1;
    EntryFn entry = nullptr;
    const char* kernel = "";
    size_t stack_bytes = 0;
    std::atomic<unsigned long> next_group{0};
    // Guard pages of the tensors and fiber stacks, for the fault report.
    std::mutex regions_lock;
    std::vector<std::pair<char*, std::string>> guards;
};

inline Launch g_launch;
inline thread_local Fiber* t_current = nullptr;
inline thread_local void* t_sched_sp = nullptr;
#if !defined(__x86_64__)
inline thread_local ucontext_t t_sched_ctx;
#endif
inline thread_local unsigned t_group[3] = {0, 0, 0};
inline std::mutex g_report_lock;

[[noreturn]] inline void fail(const std::string& fields) {
    std::lock_guard<std::mutex> lock(g_report_lock);
    std::string msg = "TESSERA_EMU_ERROR kernel=" + std::string(g_launch.kernel) + " " + fields + "\n";
    (void)!write(2, msg.data(), msg.size());
    _exit(3);
}

inline std::string group_field() {
    return "group=" + std::to_string(t_group[0]) + "," + std::to_string(t_group[1]) + "," +
           std::to_string(t_group[2]);
}

}  // namespace tsr_emu

// ── context switching ───────────────────────────────────────────────────────────
#if defined(__x86_64__)
extern "C" void tsr_ctx_switch(void** save_sp, void* to_sp);
extern "C" void tsr_fiber_trampoline();
asm(R"(
    .text
    .globl tsr_ctx_switch
    .type tsr_ctx_switch,@function
tsr_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size tsr_ctx_switch, .-tsr_ctx_switch
    .globl tsr_fiber_trampoline
    .type tsr_fiber_trampoline,@function
tsr_fiber_trampoline:
    andq $-16, %rsp
    call tsr_fiber_main
    ud2
    .size tsr_fiber_trampoline, .-tsr_fiber_trampoline
)");
#endif

extern "C" void tsr_fiber_main() {
    using namespace tsr_emu;
    Fiber* f = t_current;
    g_launch.entry(f->info);
    f->state = State::Done;
#if defined(__x86_64__)
    void* dummy;
    tsr_ctx_switch(&dummy, t_sched_sp);
#else
    swapcontext(&f->ctx, &t_sched_ctx);
#endif
    __builtin_unreachable();
}

namespace tsr_emu {

// Runs `f` until it blocks or finishes.
inline void resume(Fiber* f) {
    t_current = f;
#if defined(__x86_64__)
    tsr_ctx_switch(&t_sched_sp, f->sp);
#else
    swapcontext(&t_sched_ctx, &f->ctx);
#endif
    t_current = nullptr;
}

// Back to the scheduler from inside a fiber.
inline void yield_to_scheduler() {
    Fiber* f = t_current;
#if defined(__x86_64__)
    tsr_ctx_switch(&f->sp, t_sched_sp);
#else
    swapcontext(&f->ctx, &t_sched_ctx);
#endif
}

inline void start_fiber(Fiber* f) {
#if defined(__x86_64__)
    uintptr_t top = (uintptr_t(f->stack) + g_launch.stack_bytes) & ~uintptr_t(15);
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;                                                 // keeps the alignment
    *--sp = reinterpret_cast<void*>(&tsr_fiber_trampoline);          // `ret` goes here
    for (int i = 0; i < 6; ++i) *--sp = nullptr;                     // rbp rbx r12-r15
    f->sp = sp;
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = g_launch.stack_bytes;
    f->ctx.uc_link = nullptr;
    makecontext(&f->ctx, reinterpret_cast<void (*)()>(&tsr_fiber_main), 0);
#endif
}

void simd_exchange(const void* in, void* out, unsigned arg, ResolveFn fn, int line) {
    Fiber* f = t_current;
    f->in = in;
    f->out = out;
    f->arg = arg;
    f->fn = fn;
    f->line = line;
    f->state = State::AtSimd;
    yield_to_scheduler();
}

void barrier_at(int line) {
    Fiber* f = t_current;
    f->line = line;
    f->state = State::AtBarrier;
    yield_to_scheduler();
}

unsigned current_lane() { return t_current ? t_current->info.lane : 0; }

[[noreturn]] void trap(int code, int line) {
    unsigned thread = t_current ? t_current->info.tid : 0;
    const char* what = code == 1 ? "division_by_zero" : code == 2 ? "non_positive_step"
                     : code == 3 ? "shuffle_lane" : "trap";
    fail(std::string("kind=") + what + " " + group_field() + " thread=" + std::to_string(thread) +
         " line=" + std::to_string(line));
}

// Runs one threadgroup to completion (or reports why it cannot complete).
inline void run_group(std::vector<Fiber>& fibers, const unsigned gid[3]) {
    const unsigned n = g_launch.group_size;
    const unsigned nsg = (n + 31) / 32;
    for (unsigned t = 0; t < n; ++t) {
        Fiber& f = fibers[t];
        f.state = State::Ready;
        f.info = ThreadInfo{t, n, t % 32, t / 32, nsg, {gid[0], gid[1], gid[2]},
                            {g_launch.grid[0], g_launch.grid[1], g_launch.grid[2]}};
        start_fiber(&f);
    }
    const void* ins[32];
    void* outs[32];
    unsigned args[32];
    for (;;) {
        for (unsigned t = 0; t < n; ++t)
            if (fibers[t].state == State::Ready) resume(&fibers[t]);
        unsigned done = 0, at_barrier = 0;
        for (unsigned t = 0; t < n; ++t) {
            done += fibers[t].state == State::Done;
            at_barrier += fibers[t].state == State::AtBarrier;
        }
        if (done == n) return;
        bool progressed = false;
        for (unsigned s = 0; s < nsg; ++s) {
            unsigned lo = s * 32, hi = lo + 32 < n ? lo + 32 : n, waiting = 0;
            for (unsigned t = lo; t < hi; ++t) waiting += fibers[t].state == State::AtSimd;
            if (waiting != hi - lo) continue;
            Fiber& first = fibers[lo];
            unsigned same = 0;
            for (unsigned t = lo; t < hi; ++t)
                same += fibers[t].line == first.line && fibers[t].fn == first.fn;
            if (same != hi - lo)
                fail("kind=divergent_simd " + group_field() + " thread=" + std::to_string(lo) +
                     " line=" + std::to_string(first.line) + " simdgroup=" + std::to_string(s) +
                     " active=" + std::to_string(same) + " detail=lanes_at_different_collectives");
            for (unsigned t = lo; t < hi; ++t) {
                ins[t - lo] = fibers[t].in;
                outs[t - lo] = fibers[t].out;
                args[t - lo] = fibers[t].arg;
            }
            first.fn(ins, outs, args, int(hi - lo));
            for (unsigned t = lo; t < hi; ++t) fibers[t].state = State::Ready;
            progressed = true;
        }
        if (progressed) continue;
        // No simdgroup can go on: a barrier everyone reached, or a divergence.
        for (unsigned s = 0; s < nsg; ++s) {
            unsigned lo = s * 32, hi = lo + 32 < n ? lo + 32 : n, waiting = 0, first = hi;
            for (unsigned t = lo; t < hi; ++t)
                if (fibers[t].state == State::AtSimd) {
                    waiting++;
                    if (first == hi) first = t;
                }
            if (waiting)
                fail("kind=divergent_simd " + group_field() + " thread=" + std::to_string(first) +
                     " line=" + std::to_string(fibers[first].line) + " simdgroup=" +
                     std::to_string(s) + " active=" + std::to_string(waiting) +
                     " lanes=" + std::to_string(hi - lo));
        }
        unsigned first = 0;
        while (fibers[first].state != State::AtBarrier) first++;
        unsigned same = 0;
        for (unsigned t = 0; t < n; ++t)
            same += fibers[t].state == State::AtBarrier && fibers[t].line == fibers[first].line;
        if (at_barrier != n || same != n)
            fail("kind=divergent_barrier " + group_field() + " thread=" + std::to_string(first) +
                 " line=" + std::to_string(fibers[first].line) + " active=" + std::to_string(same) +
                 " total=" + std::to_string(n));
        for (unsigned t = 0; t < n; ++t) fibers[t].state = State::Ready;
    }
}

// Maps `bytes` (a whole number of pages is added) followed by an inaccessible guard zone
// large enough that a read a long way past the end faults rather than landing in another
// buffer. Returns the mapping; `*guard_out` is where the guard zone starts.
constexpr size_t kGuardBytes = size_t(64) << 20;

inline char* map_with_guard(size_t bytes, char** guard_out, size_t guard = kGuardBytes) {
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t body = (bytes + page - 1) / page * page;
    char* base = static_cast<char*>(mmap(nullptr, body + guard, PROT_NONE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (base == MAP_FAILED) fail("kind=host detail=out_of_memory");
    if (body && mprotect(base, body, PROT_READ | PROT_WRITE) != 0)
        fail("kind=host detail=out_of_memory");
    *guard_out = base + body;
    return base;
}

inline void on_fault(int, siginfo_t* si, void*) {
    char* addr = static_cast<char*>(si->si_addr);
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    const char* what = "unknown";
    for (auto& g : g_launch.guards) {
        size_t zone = g.second == "fiber_stack_overflow" ? page : kGuardBytes;
        if (addr >= g.first && addr < g.first + zone) what = g.second.c_str();
    }
    unsigned thread = t_current ? t_current->info.tid : 0;
    char buf[512];
    int len = snprintf(buf, sizeof buf,
                       "TESSERA_EMU_ERROR kernel=%s kind=invalid_access group=%u,%u,%u thread=%u "
                       "region=%s\n",
                       g_launch.kernel, t_group[0], t_group[1], t_group[2], thread, what);
    (void)!write(2, buf, size_t(len > 0 ? len : 0));
    _exit(3);
}

inline void worker() {
    // Faults are reported from an alternate stack (a fiber's may be what overflowed).
    static thread_local char alt[1 << 16];
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = sizeof alt;
    sigaltstack(&ss, nullptr);
    const unsigned n = g_launch.group_size;
    std::vector<Fiber> fibers(n);
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t per = g_launch.stack_bytes + page;
    char* guard;
    char* stacks = map_with_guard(per * n, &guard, page);
    {
        std::lock_guard<std::mutex> lock(g_launch.regions_lock);
        for (unsigned t = 0; t < n; ++t) {
            fibers[t].stack = stacks + t * per + page;
            mprotect(stacks + t * per, page, PROT_NONE);
            g_launch.guards.push_back({stacks + t * per, "fiber_stack_overflow"});
        }
    }
    const unsigned long total = (unsigned long)g_launch.grid[0] * g_launch.grid[1] * g_launch.grid[2];
    for (;;) {
        unsigned long g = g_launch.next_group.fetch_add(1);
        if (g >= total) break;
        unsigned gid[3] = {unsigned(g % g_launch.grid[0]),
                           unsigned(g / g_launch.grid[0] % g_launch.grid[1]),
                           unsigned(g / g_launch.grid[0] / g_launch.grid[1])};
        t_group[0] = gid[0];
        t_group[1] = gid[1];
        t_group[2] = gid[2];
        run_group(fibers, gid);
    }
}

inline bool read_all(int fd, char* p, size_t n) {
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r <= 0) return false;
        p += r;
        n -= size_t(r);
    }
    return true;
}

inline void write_all(int fd, const char* p, size_t n) {
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r <= 0) fail("kind=host detail=cannot_write_outputs");
        p += r;
        n -= size_t(r);
    }
}

// `is_tensor[i]` says whether argument i is a tensor (else a scalar); `names[i]` names it.
inline int main(int argc, char** argv, int nargs, const bool* is_tensor, const char* const* names,
                void** slots, EntryFn entry, const char* kernel, size_t local_bytes) {
    g_launch.kernel = kernel;
    g_launch.entry = entry;
    if (argc != 5) fail("kind=host detail=usage:_prog_GX_GY_GZ_GROUP_SIZE");
    for (int i = 0; i < 3; ++i) g_launch.grid[i] = unsigned(strtoul(argv[1 + i], nullptr, 10));
    g_launch.group_size = unsigned(strtoul(argv[4], nullptr, 10));
    if (!g_launch.grid[0] || !g_launch.grid[1] || !g_launch.grid[2] || !g_launch.group_size)
        fail("kind=host detail=empty_launch");
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    g_launch.stack_bytes = (size_t(64) * 1024 + 2 * local_bytes + page - 1) / page * page;
    std::vector<std::pair<char*, size_t>> tensors;
    for (int i = 0; i < nargs; ++i) {
        unsigned long long len = 0;
        if (!read_all(0, reinterpret_cast<char*>(&len), 8)) fail("kind=host detail=short_input");
        if (is_tensor[i]) {
            size_t padded = (size_t(len) + 15) / 16 * 16;
            char* guard;
            map_with_guard(padded, &guard);
            char* data = guard - padded;
            if (!read_all(0, data, size_t(len))) fail("kind=host detail=short_input");
            slots[i] = data;
            tensors.push_back({data, size_t(len)});
            g_launch.guards.push_back({guard, std::string("past_the_end_of_") + names[i]});
        } else {
            char* data = static_cast<char*>(calloc(1, len < 16 ? 16 : len));
            if (!read_all(0, data, size_t(len))) fail("kind=host detail=short_input");
            slots[i] = data;
        }
    }
    struct sigaction sa{};
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    unsigned long total = (unsigned long)g_launch.grid[0] * g_launch.grid[1] * g_launch.grid[2];
    unsigned workers = std::thread::hardware_concurrency();
    if (const char* w = getenv("TESSERA_EMU_THREADS")) workers = unsigned(strtoul(w, nullptr, 10));
    if (workers == 0) workers = 1;
    if (workers > total) workers = unsigned(total);
    std::vector<std::thread> pool;
    for (unsigned w = 1; w < workers; ++w) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    for (auto& t : tensors) write_all(1, t.first, t.second);
    return 0;
}

}  // namespace tsr_emu

#endif  // TESSERA_EMU_RUNTIME_H
