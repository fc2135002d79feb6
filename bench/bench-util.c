/*
 * bench-util.c - clocks, latency samples and result lines for the benchmark tools.
 */
#include "bench-util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

uint64_t
bench_now_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
bench_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int
samples_init(struct samples *s, size_t cap)
{
    *s = (struct samples){0};
    if (cap == 0)
        cap = 64;
    s->ns = calloc(cap, sizeof(*s->ns));
    if (!s->ns)
        return -ENOMEM;
    s->cap = cap;
    return 0;
}

void
samples_done(struct samples *s)
{
    free(s->ns);
    *s = (struct samples){0};
}

int
samples_add(struct samples *s, uint64_t ns)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        uint64_t *p = realloc(s->ns, cap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        s->ns = p;
        s->cap = cap;
    }
    s->ns[s->n++] = ns;
    s->sorted = false;
    return 0;
}

int
samples_merge(struct samples *to, struct samples *from)
{
    for (size_t i = 0; i < from->n; i++) {
        int r = samples_add(to, from->ns[i]);
        if (r < 0)
            return r;
    }
    from->n = 0;
    return 0;
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void
samples_sort(struct samples *s)
{
    if (!s->sorted && s->n > 1)
        qsort(s->ns, s->n, sizeof(*s->ns), cmp_u64);
    s->sorted = true;
}

double
samples_pct_us(struct samples *s, double p)
{
    if (s->n == 0)
        return 0.0;
    samples_sort(s);
    /* Nearest rank: the smallest sample with at least p% of all at or below it. */
    size_t rank = (size_t)((p / 100.0) * (double)s->n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > s->n)
        rank = s->n;
    return (double)s->ns[rank - 1] / 1000.0;
}

double
samples_mean_us(const struct samples *s)
{
    double sum = 0.0;
    if (s->n == 0)
        return 0.0;
    for (size_t i = 0; i < s->n; i++)
        sum += (double)s->ns[i];
    return sum / (double)s->n / 1000.0;
}

void
samples_report(struct samples *s, const char *name)
{
    bench_result(name, "n", "%zu", s->n);
    if (s->n == 0)
        return;
    samples_sort(s);
    bench_result(name, "min_us", "%.1f", (double)s->ns[0] / 1000.0);
    bench_result(name, "p50_us", "%.1f", samples_pct_us(s, 50));
    bench_result(name, "p90_us", "%.1f", samples_pct_us(s, 90));
    bench_result(name, "p99_us", "%.1f", samples_pct_us(s, 99));
    bench_result(name, "max_us", "%.1f", (double)s->ns[s->n - 1] / 1000.0);
    bench_result(name, "mean_us", "%.1f", samples_mean_us(s));
}

void
bench_result(const char *name, const char *key, const char *fmt, ...)
{
    va_list ap;
    printf("%s.%s=", name, key);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    (void)fflush(stdout);
}

int
bench_parse_u64(const char *s, uint64_t *ret)
{
    uint64_t v = 0;
    if (!s || !*s)
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

int
bench_proc_status_kb(long pid, const char *key, uint64_t *ret_bytes)
{
    char path[64], line[256];
    size_t kl = strlen(key);
    int r = -ENOENT;

    (void)snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, kl) != 0 || line[kl] != ':')
            continue;
        char *p = line + kl + 1;
        while (*p == ' ' || *p == '\t')
            p++;
        char *end = p;
        while (*end >= '0' && *end <= '9')
            end++;
        *end = '\0';
        uint64_t kb;
        r = bench_parse_u64(p, &kb);
        if (r == 0)
            *ret_bytes = kb * 1024u;
        break;
    }
    (void)fclose(f);
    return r;
}

int
bench_reset_hwm(long pid)
{
    char path[64];
    (void)snprintf(path, sizeof(path), "/proc/%ld/clear_refs", pid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t k = write(fd, "5", 1);
    int r = k == 1 ? 0 : -errno;
    (void)close(fd);
    return r;
}

int
bench_schedstat(long pid, struct bench_sched *ret)
{
    char path[96];
    struct bench_sched sum = {0};
    struct dirent *de;
    int n = 0;

    (void)snprintf(path, sizeof(path), "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    while ((de = readdir(d))) {
        unsigned long long run, wait;
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        (void)snprintf(path, sizeof(path), "/proc/%ld/task/%.20s/schedstat", pid, de->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue; /* the thread ended meanwhile */
        if (fscanf(f, "%llu %llu", &run, &wait) == 2) {
            sum.run_ns += run;
            sum.wait_ns += wait;
            n++;
        }
        (void)fclose(f);
    }
    (void)closedir(d);
    if (n == 0)
        return -ENOENT;
    *ret = sum;
    return 0;
}

static uint64_t
rusage_ns(int who)
{
    struct rusage ru;
    if (getrusage(who, &ru) < 0)
        return 0;
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

uint64_t
bench_self_cpu_ns(void)
{
    return rusage_ns(RUSAGE_SELF);
}

uint64_t
bench_children_cpu_ns(void)
{
    return rusage_ns(RUSAGE_CHILDREN);
}
