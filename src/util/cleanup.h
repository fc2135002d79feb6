/*
 * cleanup.h - scope-bound cleanup for heap memory and file descriptors.
 *
 * Declare a variable with one of the _cleanup_ attributes, initialised, at the
 * top of its block; it is released when the block is left. Hand ownership out
 * with TAKE_PTR()/TAKE_FD(). This is a header of macros only; it has no state.
 */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f)    __attribute__((cleanup(f)))
#define _cleanup_free_  _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _unused_        __attribute__((unused))
#define _printf_(a, b)  __attribute__((format(printf, a, b)))
#define _pure_          __attribute__((pure))
#define _noreturn_      __attribute__((noreturn))
#define _likely_(x)     __builtin_expect(!!(x), 1)
#define _unlikely_(x)   __builtin_expect(!!(x), 0)

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* Returns the value of *p and sets *p to its "empty" value. */
#define TAKE_GENERIC(var, type, nullvalue) \
    __extension__({                        \
        type *_pvar_ = &(var);             \
        type _var_ = *_pvar_;              \
        type _nullvalue_ = nullvalue;      \
        *_pvar_ = _nullvalue_;             \
        _var_;                             \
    })
#define TAKE_PTR(p) TAKE_GENERIC(p, __typeof__(p), NULL)
#define TAKE_FD(fd) TAKE_GENERIC(fd, int, -EBADF)

static inline void
freep(void *p)
{
    free(*(void **)p);
}

/* Closes fd if it is valid, keeping errno intact; returns -EBADF for assignment. */
static inline int
safe_close(int fd)
{
    if (fd >= 0) {
        int saved = errno;
        (void)close(fd);
        errno = saved;
    }
    return -EBADF;
}

static inline void
closep(int *fd)
{
    (void)safe_close(*fd);
}

/* Defines name##p(type **p) calling func(*p) when *p is not NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
    static inline void func##p(type *p)         \
    {                                           \
        if (*p)                                 \
            func(*p);                           \
    }

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
