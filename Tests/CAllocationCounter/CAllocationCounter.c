#include "CAllocationCounter.h"
#include <stddef.h>

#if defined(__has_feature)
#  if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#    define TETHER_NO_INTERPOSE 1
#  endif
#endif

#ifdef TETHER_NO_INTERPOSE
int CAllocationCounter_isAvailable(void) { return 0; }
void CAllocationCounter_begin(void) {}
long CAllocationCounter_end(void) { return 0; }
long CAllocationCounter_frees(void) { return 0; }
void CAllocationCounter_pause(void) {}
void CAllocationCounter_resume(void) {}
#else
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static __thread int counting __attribute__((tls_model("initial-exec")));
static __thread long counted __attribute__((tls_model("initial-exec")));
static __thread long freed __attribute__((tls_model("initial-exec")));

static inline void note(void) { if (counting) counted++; }

void *malloc(size_t size) { note(); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { note(); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { note(); return __libc_realloc(p, size); }
void free(void *p) {
    if (counting && p != NULL) freed++;
    __libc_free(p);
}
void *memalign(size_t alignment, size_t size) { note(); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { note(); return __libc_memalign(alignment, size); }
int posix_memalign(void **out, size_t alignment, size_t size) {
    note();
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(alignment, size);
    if (p == NULL && size != 0) return ENOMEM;
    *out = p;
    return 0;
}

int CAllocationCounter_isAvailable(void) { return 1; }
void CAllocationCounter_begin(void) { counted = 0; freed = 0; counting = 1; }
long CAllocationCounter_frees(void) { return freed; }
long CAllocationCounter_end(void) { counting = 0; return counted; }
void CAllocationCounter_pause(void) { counting = 0; }
void CAllocationCounter_resume(void) { counting = 1; }
#endif
