// Counts heap allocations made by the calling thread, for allocation-budget tests.
//
// The test binary links this target, whose malloc family interposes the C library's and
// forwards to it. Counting is per thread and off until CAllocationCounter_begin().
#ifndef TETHER_CALLOCATIONCOUNTER_H
#define TETHER_CALLOCATIONCOUNTER_H

/// 1 when the interposer is active in this binary (not under a sanitizer, which owns malloc).
int CAllocationCounter_isAvailable(void);
/// Starts counting allocations on the calling thread from zero.
void CAllocationCounter_begin(void);
/// Stops counting on the calling thread and returns the number of allocations
/// (malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign) since begin.
long CAllocationCounter_end(void);
/// Frees (of non-null pointers) on the calling thread since begin: allocations less frees is
/// how many blocks the counted code kept (when it frees on the thread that allocated).
long CAllocationCounter_frees(void);
/// Pauses and resumes counting on the calling thread (to exclude a third-party library call).
void CAllocationCounter_pause(void);
void CAllocationCounter_resume(void);

#endif
