/*
 * failalloc.c - the --wrap allocator behind failalloc.h.
 *
 * Not thread-safe: the tests that use it allocate from one thread.
 */
#include "failalloc.h"

#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t nmemb, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void __real_free(void *p);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t nmemb, size_t n);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
void __wrap_free(void *p);

static unsigned long countdown; /* 0 = disarmed */
static unsigned long calls;
static bool hit;
static long live;

void
failalloc_arm(unsigned long n)
{
    countdown = n;
    calls = 0;
    hit = false;
}

void
failalloc_disarm(void)
{
    countdown = 0;
}

bool
failalloc_hit(void)
{
    return hit;
}

long
failalloc_live(void)
{
    return live;
}

unsigned long
failalloc_calls(void)
{
    return calls;
}

static bool
should_fail(void)
{
    calls++;
    if (countdown == 0)
        return false;
    if (--countdown == 0) {
        hit = true;
        return true;
    }
    return false;
}

void *
__wrap_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    void *p = __real_malloc(n);
    if (p)
        live++;
    return p;
}

void *
__wrap_calloc(size_t nmemb, size_t n)
{
    if (should_fail())
        return NULL;
    void *p = __real_calloc(nmemb, n);
    if (p)
        live++;
    return p;
}

void *
__wrap_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    void *q = __real_realloc(p, n);
    if (q && !p)
        live++;
    return q;
}

char *
__wrap_strdup(const char *s)
{
    if (should_fail())
        return NULL;
    char *p = __real_strdup(s);
    if (p)
        live++;
    return p;
}

void
__wrap_free(void *p)
{
    if (p)
        live--;
    __real_free(p);
}

void *
failalloc_malloc(size_t n)
{
    return __wrap_malloc(n);
}

void
failalloc_free(void *p)
{
    __wrap_free(p);
}
