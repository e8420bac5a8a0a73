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
#endif
