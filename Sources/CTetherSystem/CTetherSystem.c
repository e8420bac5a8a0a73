#define _GNU_SOURCE
#include "CTetherSystem.h"
#include <pthread.h>
#include <string.h>
#include <errno.h>
#include <sys/random.h>

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
