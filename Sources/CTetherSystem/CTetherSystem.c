#define _GNU_SOURCE
#include "CTetherSystem.h"
#include <pthread.h>
#include <string.h>
#include <errno.h>
#include <sys/random.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <limits.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>

int CTetherSystem_sem_wait_monotonic(sem_t *sem, const struct timespec *deadline) {
    return sem_clockwait(sem, CLOCK_MONOTONIC, deadline);
}

int CTetherSystem_set_thread_name(const char *name) {
    char shortName[16];
    strncpy(shortName, name, sizeof shortName - 1);
    shortName[sizeof shortName - 1] = 0;
    return pthread_setname_np(pthread_self(), shortName);
}

int CTetherSystem_fill_random(void *buffer, size_t length) {
    size_t filled = 0;
    while (filled < length) {
        ssize_t n = getrandom((char *)buffer + filled, length - filled, 0);
        if (n > 0) {
            filled += (size_t)n;
        } else if (n < 0 && errno != EINTR) {
            return -1;
        }
    }
    return 0;
}

void CTetherSystem_wipe(void *buffer, size_t length) {
    explicit_bzero(buffer, length);
}

extern char **environ;

pid_t CTetherSystem_spawn(char *const argv[], int stdout_fd, int stderr_fd) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    if (posix_spawn_file_actions_init(&actions) != 0) return -1;
    if (posix_spawnattr_init(&attributes) != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return -1;
    }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
    else posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    if (stderr_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2);
    else posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    sigset_t empty, all;
    sigemptyset(&empty);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attributes, &empty);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    int failure = posix_spawnp(&pid, argv[0], &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (failure != 0) {
        errno = failure;
        return -1;
    }
    return pid;
}

// Event count (see the header): bit 0 = a ticket is out (the consumer is looking for work a
// last time, spinning or asleep); bit 1 = the consumer is asleep in the kernel (or about to be);
// bits 2… = the epoch, advanced by each signal that found a ticket out.

enum { EVENTCOUNT_TICKET = 1u, EVENTCOUNT_PARKED = 2u, EVENTCOUNT_EPOCH = 4u };

static inline void eventcount_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void CTetherSystem_relax(void) {
    for (int j = 0; j < 16; j++) eventcount_relax();
}

static inline uint64_t eventcount_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint32_t CTetherSystem_eventcount_prepare(uint32_t *word) {
    _Atomic uint32_t *state = (_Atomic uint32_t *)word;
    uint32_t ticket = (atomic_fetch_or_explicit(state, EVENTCOUNT_TICKET, memory_order_seq_cst) | EVENTCOUNT_TICKET) & ~EVENTCOUNT_PARKED;
    // Store buffering: the consumer stores the ticket bit then reads the data (the rings); the
    // producer stores data then reads the ticket bit. Each side needs a seq_cst fence between
    // its store and its load, or both may miss the other's store (C11 7.17.4: the two fences
    // order them). The read-modify-write alone is not one on AArch64: clang makes it an
    // ldaxr/stlxr loop, and a later plain load may be satisfied before the stlxr's store is
    // visible; the fence adds a dmb ish. On x86 the locked instruction already orders them (the
    // fence adds one more locked instruction, a few nanoseconds).
    atomic_thread_fence(memory_order_seq_cst);
    return ticket;
}

int CTetherSystem_eventcount_signal(uint32_t *word) {
    _Atomic uint32_t *state = (_Atomic uint32_t *)word;
    // Orders the caller's earlier writes (the data it published) before the read of the ticket
    // bit; the consumer's prepare (a seq_cst read-modify-write) pairs with it.
    atomic_thread_fence(memory_order_seq_cst);
    uint32_t value = atomic_load_explicit(state, memory_order_relaxed);
    while (value & EVENTCOUNT_TICKET) {
        // Next epoch, both bits cleared: one producer of several ends the wait, the others see
        // no ticket. The system call only when the consumer sleeps: a spinning one sees the epoch.
        uint32_t next = (value + EVENTCOUNT_EPOCH) & ~(EVENTCOUNT_TICKET | EVENTCOUNT_PARKED);
        if (atomic_compare_exchange_weak_explicit(state, &value, next, memory_order_seq_cst, memory_order_relaxed)) {
            if (value & EVENTCOUNT_PARKED) {
                syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
                return 1;
            }
            return 0;
        }
    }
    return 0;
}

int CTetherSystem_eventcount_wait(uint32_t *word, uint32_t ticket, const struct timespec *deadline, uint64_t spin_nanoseconds, uint64_t *asleep_from) {
    _Atomic uint32_t *state = (_Atomic uint32_t *)word;
    *asleep_from = 0;
    if (atomic_load_explicit(state, memory_order_acquire) != ticket) return 1;
    if (spin_nanoseconds > 0) {
        // Spin first: a signal within the budget costs neither side a system call. The word is
        // read between bursts of pauses (under a microsecond), not at every one, so a producer
        // signalling at a high rate finds the line shared less often and the consumer takes its
        // messages in batches.
        uint64_t start = eventcount_now();
        do {
            for (int i = 0; i < 8; i++) {
                if (atomic_load_explicit(state, memory_order_acquire) != ticket) return 1;
                CTetherSystem_relax();
            }
        } while (eventcount_now() - start < spin_nanoseconds);
    }
    // Asleep from here: announced, so that a signal makes the system call.
    uint32_t expected = ticket;
    uint32_t parked = ticket | EVENTCOUNT_PARKED;
    if (!atomic_compare_exchange_strong_explicit(state, &expected, parked, memory_order_seq_cst, memory_order_acquire)) return 1;
    *asleep_from = eventcount_now();
    while (atomic_load_explicit(state, memory_order_acquire) == parked) {
        // Absolute CLOCK_MONOTONIC deadline (FUTEX_WAIT_BITSET without FUTEX_CLOCK_REALTIME).
        long r = syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, parked, deadline, NULL, FUTEX_BITSET_MATCH_ANY);
        if (r == -1 && errno == ETIMEDOUT) {
            // Awake again with the ticket still out (a later wait may use it), unless a signal
            // came meanwhile.
            expected = parked;
            return atomic_compare_exchange_strong_explicit(state, &expected, ticket, memory_order_seq_cst, memory_order_acquire) ? 0 : 1;
        }
    }
    return 1;
}
