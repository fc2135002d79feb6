/*
 * bench-util.h - clocks, latency samples and result lines for the benchmark tools.
 *
 * The tools print their figures as "name.key=value" lines on stdout, which
 * bench/run.sh collects into its table; progress and errors go to stderr.
 * This is not a statistics library: samples are kept in memory and
 * percentiles are nearest-rank over the sorted samples, nothing is smoothed
 * and nothing is judged against a threshold.
 *
 * Functions return 0 on success and -errno on failure, and never exit.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* Latency samples, in nanoseconds. */
struct samples {
    uint64_t *ns;
    size_t n, cap;
    bool sorted;
};

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);
void bench_sleep_ms(unsigned ms);

/* cap is a hint; the array grows. -ENOMEM. */
int samples_init(struct samples *s, size_t cap);
void samples_done(struct samples *s);
int samples_add(struct samples *s, uint64_t ns);
/* Moves every sample of from into to (from is emptied). -ENOMEM. */
int samples_merge(struct samples *to, struct samples *from);
/* Nearest-rank percentile (0 < p <= 100) in microseconds; 0 when empty. Sorts s. */
double samples_pct_us(struct samples *s, double p);
double samples_mean_us(const struct samples *s);
/* Prints name.n, min_us, p50_us, p90_us, p99_us, max_us and mean_us. Sorts s. */
void samples_report(struct samples *s, const char *name);

/* Prints one "name.key=value" line; value is printf-formatted. */
void bench_result(const char *name, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Decimal digits only: no sign, no blanks, no overflow. -EINVAL, -ERANGE. */
int bench_parse_u64(const char *s, uint64_t *ret);

/* Reads "<key>: <n> kB" from /proc/<pid>/status into bytes (VmRSS, VmHWM). */
int bench_proc_status_kb(long pid, const char *key, uint64_t *ret_bytes);
/* Resets /proc/<pid>'s peak RSS (VmHWM) to its current RSS ("5" > clear_refs). */
int bench_reset_hwm(long pid);

/* CPU time a process has run and has waited on a run queue, summed over its
 * threads, in nanoseconds (/proc/<pid>/task/<tid>/schedstat). */
struct bench_sched {
    uint64_t run_ns;
    uint64_t wait_ns;
};
int bench_schedstat(long pid, struct bench_sched *ret);
/* CPU time (user + system) of this process, or of its waited-for children, in ns. */
uint64_t bench_self_cpu_ns(void);
uint64_t bench_children_cpu_ns(void);
