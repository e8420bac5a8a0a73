// CTetherSystem: GNU-only libc calls Swift's Glibc module does not expose.
#ifndef TETHER_CTETHERSYSTEM_H
#define TETHER_CTETHERSYSTEM_H
#include <semaphore.h>
#include <time.h>

/// sem_clockwait(sem, CLOCK_MONOTONIC, deadline): 0 when decremented, else -1 with errno set.
int CTetherSystem_sem_wait_monotonic(sem_t *sem, const struct timespec *deadline);
/// Names the calling thread (at most 15 bytes are kept). Returns 0 on success.
int CTetherSystem_set_thread_name(const char *name);
#include <stddef.h>
/// Fills `length` bytes from the system CSPRNG (getrandom(2), blocking until seeded, retrying EINTR).
/// Returns 0 on success, -1 with errno set otherwise.
int CTetherSystem_fill_random(void *buffer, size_t length);
/// Zeroes memory in a way the compiler may not remove (explicit_bzero).
void CTetherSystem_wipe(void *buffer, size_t length);
#include <sys/types.h>
/// Starts `argv[0]` (searched in PATH) with `argv` and the current environment: standard input
/// from /dev/null, standard output to `stdout_fd` and standard error to `stderr_fd` (each -1 for
/// /dev/null), every other descriptor closed, signal mask empty and dispositions default.
/// Returns the child's process ID, or -1 with errno set. The caller reaps it with waitpid.
pid_t CTetherSystem_spawn(char *const argv[], int stdout_fd, int stderr_fd);
#include <stdint.h>
/// An event count: a wake-up that costs its producers no system call unless the consumer sleeps.
/// The consumer takes a ticket (`prepare`), looks for work once more, and sleeps on the ticket
/// (`wait`) only if it found none; a producer publishes its data and then `signal`s, which
/// wakes the consumer only when a ticket is out. `state` starts at 0.
/// Returns the ticket (the state with the waiter bit set).
uint32_t CTetherSystem_eventcount_prepare(uint32_t *state);
/// Sixteen spin-wait hints (`pause`): a spinning thread's pace between two looks.
void CTetherSystem_relax(void);
/// Ends the wait of a consumer holding a ticket; returns 1 when it made the system call (the
/// consumer was asleep), 0 otherwise (nobody waited, or the consumer was still spinning).
int CTetherSystem_eventcount_signal(uint32_t *state);
/// Waits until a signal after `ticket` was taken, or the CLOCK_MONOTONIC instant `deadline`:
/// first spinning for up to `spin_nanoseconds` (0: none), then asleep in the kernel.
/// Returns 1 when signalled (at once if a signal already came), 0 on time-out (the ticket is
/// still out: it may be waited on again). `asleep_from` gets the CLOCK_MONOTONIC instant the
/// consumer went to sleep, in nanoseconds, or 0 when it did not sleep (the caller's spin
/// accounting: before it, the wait was awake).
int CTetherSystem_eventcount_wait(uint32_t *state, uint32_t ticket, const struct timespec *deadline, uint64_t spin_nanoseconds, uint64_t *asleep_from);
#endif
