/*
 * abx-bench.c - the HTTP-side benchmarks: abxd driven through libabx, timed per call.
 *
 * One verb per measurement of `make bench` (bench/run.sh): exec latency in a
 * live sandbox, create -> first exec -> delete rounds, filling the host with
 * idle sandboxes and reading their memory, exec throughput from concurrent
 * clients, file transfers with abxd's peak RSS, and the libabx side of the
 * E2B SDK comparison (bench/e2b-bench.mjs). Every verb prints its
 * figures as "name.key=value" lines (see bench-util.h) and exits non-zero on
 * the first failed call, saying which call and why. It talks to the abxd at
 * ABX_URL with the key in ABX_API_KEY, like the abx CLI, and removes every
 * sandbox it created itself unless told to keep them (fill). It is a
 * measuring tool, not a load generator: one request in flight per client.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "abx/abx.h"
#include "bench-util.h"

#define MAX_THREADS  256
#define MAX_IDS      60000
#define POOL_WAIT_MS 10000 /* lifecycle: longest wait for the warm pool to refill */
#define POOL_POLL_MS 2

static const char *arg_name = "bench";
static const char *arg_id;
static const char *arg_ids;
static const char *arg_file;
static const char *arg_path = "/bench.bin";
static uint64_t arg_n = 2000;
static uint64_t arg_warmup = 200;
static uint64_t arg_threads = 16;
static uint64_t arg_seconds = 10;
static uint64_t arg_sandboxes;
static uint64_t arg_wait_pool;
static uint64_t arg_pid;
static uint64_t arg_create_n = 200;
static uint64_t arg_create_w = 10;
static uint64_t arg_size = 1024 * 1024;

static const char *url;
static const char *api_key;

static const char *const true_argv[] = {"/bin/true", NULL};

/* --- helpers --- */

static int
client_open(struct abx_client **ret)
{
    int r = abx_client_new(url, api_key, ret);
    if (r < 0)
        fprintf(stderr, "abx-bench: cannot make a client for '%s': %s\n", url, strerror(-r));
    return r;
}

static int
fail_call(struct abx_client *c, const char *what, int r)
{
    fprintf(stderr, "abx-bench: %s failed: %s (%s)\n", what, abx_client_error(c), strerror(-r));
    return r;
}

/* One foreground exec of argv that must exit 0. */
static int
exec_argv(struct abx_client *c, const char *id, const char *const *argv)
{
    struct abx_exec_spec spec = {.argv = argv};
    struct abx_exec_result res = {0};
    int r = abx_exec(c, id, &spec, NULL, NULL, NULL, &res);
    if (r < 0)
        return fail_call(c, "exec", r);
    if (res.exit_code != 0) {
        fprintf(stderr, "abx-bench: %s exited %d in sandbox '%s'\n", argv[0], res.exit_code, id);
        r = -EIO;
    }
    abx_exec_result_done(&res);
    return r;
}

/* One foreground exec of /bin/true that must exit 0. */
static int
exec_true(struct abx_client *c, const char *id)
{
    return exec_argv(c, id, true_argv);
}

static int
create_id(struct abx_client *c, char **ret_id, struct abx_sandbox_info **ret_info)
{
    struct abx_sandbox_info *info = NULL;
    int r = abx_sandbox_create(c, NULL, &info);
    if (r < 0)
        return fail_call(c, "create", r);
    char *id = strdup(info->id);
    if (!id) {
        abx_sandbox_info_free(info);
        return -ENOMEM;
    }
    *ret_id = id;
    if (ret_info)
        *ret_info = info;
    else
        abx_sandbox_info_free(info);
    return 0;
}

/* Reads a number from the create answer's "timings" object; -1 when absent. */
static double
timing_ms(const struct abx_sandbox_info *info, const char *key, bool *ret_from_pool)
{
    json_error_t jerr;
    json_t *o = json_loads(info->json, 0, &jerr);
    json_t *t = json_object_get(o, "timings");
    json_t *v = json_object_get(t, key);
    double ms = json_is_number(v) ? json_number_value(v) : -1.0;
    if (ret_from_pool)
        *ret_from_pool = json_is_true(json_object_get(t, "from_pool"));
    json_decref(o);
    return ms;
}

/* Reads "abx_<name> N" from abxd's metrics; -1 when absent. */
static long long
metric(struct abx_client *c, const char *name)
{
    char *text = NULL;
    long long v = -1;
    char key[128];
    (void)snprintf(key, sizeof(key), "\nabx_%s ", name);
    if (abx_metrics(c, &text) < 0)
        return -1;
    const char *p = strstr(text, key);
    if (p) {
        uint64_t x = 0;
        char num[32];
        size_t i = 0;
        p += strlen(key);
        while (i + 1 < sizeof(num) && p[i] >= '0' && p[i] <= '9') {
            num[i] = p[i];
            i++;
        }
        num[i] = '\0';
        if (bench_parse_u64(num, &x) == 0)
            v = (long long)x;
    }
    free(text);
    return v;
}

static int
read_ids(const char *file, char ***ret_ids, size_t *ret_n)
{
    FILE *f = fopen(file, "re");
    char line[128];
    char **ids = NULL;
    size_t n = 0;

    if (!f)
        return -errno;
    ids = calloc(MAX_IDS, sizeof(*ids));
    if (!ids) {
        (void)fclose(f);
        return -ENOMEM;
    }
    while (n < MAX_IDS && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        ids[n] = strdup(line);
        if (!ids[n])
            break;
        n++;
    }
    (void)fclose(f);
    *ret_ids = ids;
    *ret_n = n;
    return 0;
}

static void
free_ids(char **ids, size_t n)
{
    for (size_t i = 0; ids && i < n; i++)
        free(ids[i]);
    free(ids);
}

/* --- exec: latency of a foreground /bin/true in one live sandbox --- */

/* Reads the parent pid from /proc/<pid>/stat; -errno. */
static long
proc_ppid(long pid)
{
    char path[64], b[512];
    (void)snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t k = read(fd, b, sizeof(b) - 1);
    (void)close(fd);
    if (k <= 0)
        return -EIO;
    b[k] = '\0';
    /* "pid (comm) state ppid ...": comm may hold anything, so from the last ')'. */
    char *p = strrchr(b, ')');
    uint64_t ppid = 0;
    char num[24];
    size_t i = 0;
    if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
        return -EBADMSG;
    for (p += 4; *p >= '0' && *p <= '9' && i + 1 < sizeof(num); p++)
        num[i++] = *p;
    num[i] = '\0';
    if (bench_parse_u64(num, &ppid) < 0)
        return -EBADMSG;
    return (long)ppid;
}

/* Finds the host pid of sandbox id's init: it is the parent of a process we
 * start there with a marker argument (sandbox ids are not cgroup names: a
 * pooled jail keeps the name it was made with). */
static int
find_init(struct abx_client *c, const char *id, long abxd, long *ret_pid)
{
    char marker[64], want[96], path[64], got[96];
    const char *argv[] = {"/bin/sleep", marker, NULL};
    struct abx_exec_spec spec = {.argv = argv};
    struct dirent *de;
    int r = -ENOENT;

    (void)snprintf(marker, sizeof(marker), "3600.%ld%llu", (long)getpid(),
                   (unsigned long long)(bench_now_ns() % 1000000000u));
    int n = snprintf(want, sizeof(want), "/bin/sleep%c%s", '\0', marker) + 1;
    int pid = abx_exec_background(c, id, &spec, NULL);
    if (pid < 0)
        return fail_call(c, "exec in the background", pid);
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    while ((de = readdir(d))) {
        uint64_t p;
        if (bench_parse_u64(de->d_name, &p) < 0)
            continue;
        (void)snprintf(path, sizeof(path), "/proc/%llu/cmdline", (unsigned long long)p);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, got, sizeof(got));
        (void)close(fd);
        if (k != n || memcmp(got, want, (size_t)n) != 0)
            continue;
        long init = proc_ppid((long)p);
        if (init > 0 && proc_ppid(init) == abxd) {
            *ret_pid = init;
            r = 0;
        }
        break;
    }
    (void)closedir(d);
    (void)abx_process_signal(c, id, pid, "KILL", true);
    return r;
}

/* CPU spent per exec by each party, from counters read before and after. */
struct cpu_mark {
    struct bench_sched abxd, init;
    uint64_t sandbox_ns, client_ns;
};

static int
cpu_mark(struct abx_client *c, const char *id, long abxd, long init, struct cpu_mark *m)
{
    struct abx_sandbox_info *info = NULL;
    int r;

    if ((r = bench_schedstat(abxd, &m->abxd)) < 0 || (r = bench_schedstat(init, &m->init)) < 0)
        return r;
    r = abx_sandbox_get(c, id, &info);
    if (r < 0)
        return fail_call(c, "get", r);
    m->sandbox_ns = info->has_usage ? info->usage.cpu_usec * 1000u : 0;
    abx_sandbox_info_free(info);
    m->client_ns = bench_self_cpu_ns();
    return 0;
}

static void
cpu_report(const struct cpu_mark *a, const struct cpu_mark *b, uint64_t n)
{
    double k = 1000.0 * (double)n;
    uint64_t init_ns = b->init.run_ns - a->init.run_ns;
    uint64_t sb_ns = b->sandbox_ns - a->sandbox_ns;

    bench_result(arg_name, "abxd_cpu_us", "%.1f", (double)(b->abxd.run_ns - a->abxd.run_ns) / k);
    bench_result(arg_name, "abxd_runq_wait_us", "%.1f",
                 (double)(b->abxd.wait_ns - a->abxd.wait_ns) / k);
    bench_result(arg_name, "init_cpu_us", "%.1f", (double)init_ns / k);
    bench_result(arg_name, "init_runq_wait_us", "%.1f",
                 (double)(b->init.wait_ns - a->init.wait_ns) / k);
    /* The sandbox's cpuacct counts init and everything it started. */
    bench_result(arg_name, "child_cpu_us", "%.1f",
                 sb_ns > init_ns ? (double)(sb_ns - init_ns) / k : 0.0);
    bench_result(arg_name, "client_cpu_us", "%.1f", (double)(b->client_ns - a->client_ns) / k);
}

static int
verb_exec(void)
{
    struct abx_client *c = NULL;
    struct samples s;
    struct cpu_mark m0, m1;
    char *own = NULL;
    const char *id = arg_id;
    long init = 0;
    int r;

    if ((r = client_open(&c)) < 0)
        return r;
    if (samples_init(&s, (size_t)arg_n) < 0) {
        abx_client_free(c);
        return -ENOMEM;
    }
    if (!id) {
        r = create_id(c, &own, NULL);
        if (r < 0)
            goto out;
        id = own;
    }
    if (arg_pid && (r = find_init(c, id, (long)arg_pid, &init)) < 0) {
        fprintf(stderr, "abx-bench: cannot find the init of sandbox '%s': %s\n", id, strerror(-r));
        goto out;
    }
    for (uint64_t i = 0; i < arg_warmup + arg_n; i++) {
        if (i == arg_warmup && init && (r = cpu_mark(c, id, (long)arg_pid, init, &m0)) < 0)
            goto out;
        uint64_t t0 = bench_now_ns();
        r = exec_true(c, id);
        if (r < 0)
            goto out;
        if (i >= arg_warmup && (r = samples_add(&s, bench_now_ns() - t0)) < 0)
            goto out;
    }
    if (init && (r = cpu_mark(c, id, (long)arg_pid, init, &m1)) < 0)
        goto out;
    samples_report(&s, arg_name);
    if (init)
        cpu_report(&m0, &m1, arg_n);
    r = 0;
out:
    if (own && abx_sandbox_kill(c, own) < 0)
        fprintf(stderr, "abx-bench: cannot delete '%s': %s\n", own, abx_client_error(c));
    free(own);
    samples_done(&s);
    abx_client_free(c);
    return r;
}

/* --- lifecycle: create -> first exec done -> delete --- */

struct lifecycle {
    struct samples create, first_exec, exec, del, round, server_total;
    struct samples prepare, clone, init;
    uint64_t from_pool, pool_waits_timed_out;
};

static int
wait_pool(struct abx_client *c, struct lifecycle *L)
{
    uint64_t until = bench_now_ns() + (uint64_t)POOL_WAIT_MS * 1000000u;
    for (;;) {
        long long ready = metric(c, "pool_ready");
        if (ready < 0)
            return fail_call(c, "metrics", -EBADMSG);
        if ((uint64_t)ready >= arg_wait_pool)
            return 0;
        if (bench_now_ns() > until) {
            L->pool_waits_timed_out++;
            return 0;
        }
        bench_sleep_ms(POOL_POLL_MS);
    }
}

static int
lifecycle_round(struct abx_client *c, struct lifecycle *L, bool keep)
{
    struct abx_sandbox_info *info = NULL;
    char *id = NULL;
    bool pooled = false;
    int r;

    uint64_t t0 = bench_now_ns();
    r = create_id(c, &id, &info);
    if (r < 0)
        return r;
    uint64_t t1 = bench_now_ns();
    r = exec_true(c, id);
    uint64_t t2 = bench_now_ns();
    int k = abx_sandbox_kill(c, id);
    uint64_t t3 = bench_now_ns();
    if (r == 0 && k < 0)
        r = fail_call(c, "delete", k);
    if (r == 0 && keep) {
        double total = timing_ms(info, "total_ms", &pooled);
        if ((r = samples_add(&L->create, t1 - t0)) < 0 ||
            (r = samples_add(&L->first_exec, t2 - t0)) < 0 ||
            (r = samples_add(&L->exec, t2 - t1)) < 0 || (r = samples_add(&L->del, t3 - t2)) < 0 ||
            (r = samples_add(&L->round, t3 - t0)) < 0)
            goto out;
        if (total >= 0 && (r = samples_add(&L->server_total, (uint64_t)(total * 1e6))) < 0)
            goto out;
        if (pooled) {
            L->from_pool++;
        } else {
            double p = timing_ms(info, "prepare_ms", NULL);
            double cl = timing_ms(info, "clone_ms", NULL);
            double in = timing_ms(info, "init_ms", NULL);
            if ((p >= 0 && (r = samples_add(&L->prepare, (uint64_t)(p * 1e6))) < 0) ||
                (cl >= 0 && (r = samples_add(&L->clone, (uint64_t)(cl * 1e6))) < 0) ||
                (in >= 0 && (r = samples_add(&L->init, (uint64_t)(in * 1e6))) < 0))
                goto out;
        }
    }
out:
    abx_sandbox_info_free(info);
    free(id);
    return r;
}

static int
verb_lifecycle(void)
{
    struct abx_client *c = NULL;
    struct lifecycle L;
    struct samples *all[] = {&L.create,       &L.first_exec, &L.exec,  &L.del, &L.round,
                             &L.server_total, &L.prepare,    &L.clone, &L.init};
    static const char *const names[] = {"create",         "first_exec",   "exec",
                                        "delete",         "round",        "server_total",
                                        "server_prepare", "server_clone", "server_init"};
    char name[128];
    int r;

    memset(&L, 0, sizeof(L));
    if ((r = client_open(&c)) < 0)
        return r;
    for (size_t i = 0; i < ELEMENTSOF(all); i++)
        if (samples_init(all[i], (size_t)arg_n) < 0) {
            r = -ENOMEM;
            goto out;
        }
    for (uint64_t i = 0; i < arg_warmup + arg_n; i++) {
        if (arg_wait_pool && (r = wait_pool(c, &L)) < 0)
            goto out;
        r = lifecycle_round(c, &L, i >= arg_warmup);
        if (r < 0)
            goto out;
    }
    for (size_t i = 0; i < ELEMENTSOF(all); i++) {
        (void)snprintf(name, sizeof(name), "%s.%s", arg_name, names[i]);
        samples_report(all[i], name);
    }
    bench_result(arg_name, "from_pool", "%llu", (unsigned long long)L.from_pool);
    bench_result(arg_name, "pool_wait_timeouts", "%llu",
                 (unsigned long long)L.pool_waits_timed_out);
    r = 0;
out:
    for (size_t i = 0; i < ELEMENTSOF(all); i++)
        samples_done(all[i]);
    abx_client_free(c);
    return r;
}

/* --- fill, usage, kill: many idle sandboxes --- */

static int
verb_fill(void)
{
    struct abx_client *c = NULL;
    struct samples s;
    FILE *f = NULL;
    int r;

    if (!arg_ids) {
        fprintf(stderr, "abx-bench: fill needs --ids FILE\n");
        return -EINVAL;
    }
    if ((r = client_open(&c)) < 0)
        return r;
    if (samples_init(&s, (size_t)arg_n) < 0) {
        abx_client_free(c);
        return -ENOMEM;
    }
    f = fopen(arg_ids, "we");
    if (!f) {
        r = -errno;
        fprintf(stderr, "abx-bench: cannot create '%s': %s\n", arg_ids, strerror(-r));
        goto out;
    }
    for (uint64_t i = 0; i < arg_n; i++) {
        char *id = NULL;
        uint64_t t0 = bench_now_ns();
        r = create_id(c, &id, NULL);
        if (r < 0)
            goto out;
        (void)samples_add(&s, bench_now_ns() - t0);
        fprintf(f, "%s\n", id);
        (void)fflush(f);
        free(id);
    }
    samples_report(&s, arg_name);
    r = 0;
out:
    if (f && fclose(f) != 0 && r == 0)
        r = -errno;
    samples_done(&s);
    abx_client_free(c);
    return r;
}

static int
verb_usage(void)
{
    struct abx_client *c = NULL;
    char **ids = NULL;
    size_t n = 0;
    uint64_t sum = 0, lo = UINT64_MAX, hi = 0, pids = 0;
    int r;

    if (!arg_ids || (r = read_ids(arg_ids, &ids, &n)) < 0) {
        fprintf(stderr, "abx-bench: usage needs a readable --ids FILE\n");
        return -EINVAL;
    }
    if ((r = client_open(&c)) < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        struct abx_sandbox_info *info = NULL;
        r = abx_sandbox_get(c, ids[i], &info);
        if (r < 0) {
            fail_call(c, "get", r);
            goto out;
        }
        uint64_t m = info->has_usage ? info->usage.memory_bytes : 0;
        sum += m;
        lo = m < lo ? m : lo;
        hi = m > hi ? m : hi;
        pids += info->has_usage ? info->usage.pids : 0;
        abx_sandbox_info_free(info);
    }
    bench_result(arg_name, "sandboxes", "%zu", n);
    bench_result(arg_name, "memory_bytes_sum", "%llu", (unsigned long long)sum);
    bench_result(arg_name, "memory_bytes_min", "%llu", (unsigned long long)(n ? lo : 0));
    bench_result(arg_name, "memory_bytes_max", "%llu", (unsigned long long)hi);
    bench_result(arg_name, "memory_kib_per_sandbox", "%.1f",
                 n ? (double)sum / (double)n / 1024.0 : 0.0);
    bench_result(arg_name, "pids_sum", "%llu", (unsigned long long)pids);
    r = 0;
out:
    free_ids(ids, n);
    abx_client_free(c);
    return r;
}

static int
verb_kill(void)
{
    struct abx_client *c = NULL;
    struct samples s = {0};
    char **ids = NULL;
    size_t n = 0;
    int r;

    if (arg_id) {
        ids = calloc(1, sizeof(*ids));
        if (!ids || !(ids[0] = strdup(arg_id))) {
            free(ids);
            return -ENOMEM;
        }
        n = 1;
    } else if (!arg_ids || read_ids(arg_ids, &ids, &n) < 0) {
        fprintf(stderr, "abx-bench: kill needs --id ID or a readable --ids FILE\n");
        return -EINVAL;
    }
    if ((r = client_open(&c)) < 0)
        goto out;
    if ((r = samples_init(&s, n)) < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = bench_now_ns();
        r = abx_sandbox_kill(c, ids[i]);
        if (r < 0 && r != -ENOENT) {
            fail_call(c, "delete", r);
            goto out;
        }
        (void)samples_add(&s, bench_now_ns() - t0);
    }
    samples_report(&s, arg_name);
    r = 0;
out:
    samples_done(&s);
    free_ids(ids, n);
    abx_client_free(c);
    return r;
}

/* --- create: one sandbox for run.sh, its id on stdout --- */

static int
verb_create(void)
{
    struct abx_client *c = NULL;
    char *id = NULL;
    int r;

    if ((r = client_open(&c)) < 0)
        return r;
    r = create_id(c, &id, NULL);
    if (r == 0)
        printf("%s\n", id);
    free(id);
    abx_client_free(c);
    return r;
}

/* --- throughput: T clients, each with one request in flight --- */

struct worker {
    pthread_t thread;
    const char *id;
    uint64_t end_ns;
    uint64_t done;
    struct samples lat;
    int r;
    pthread_barrier_t *go;
};

static void *
worker_main(void *ud)
{
    struct worker *w = ud;
    struct abx_client *c = NULL;

    w->r = client_open(&c);
    if (w->r == 0)
        w->r = exec_true(c, w->id); /* connect and warm up before the clock starts */
    (void)pthread_barrier_wait(w->go);
    if (w->r < 0)
        goto out;
    while (bench_now_ns() < w->end_ns) {
        uint64_t t0 = bench_now_ns();
        w->r = exec_true(c, w->id);
        if (w->r < 0)
            break;
        uint64_t t1 = bench_now_ns();
        if (t1 <= w->end_ns) {
            w->done++;
            (void)samples_add(&w->lat, t1 - t0);
        }
    }
out:
    abx_client_free(c);
    return NULL;
}

static int
verb_throughput(void)
{
    struct abx_client *c = NULL;
    struct worker *ws = NULL;
    char **ids = NULL;
    size_t nsb = arg_sandboxes ? (size_t)arg_sandboxes : (size_t)arg_threads;
    size_t nt = (size_t)arg_threads, made = 0, started = 0;
    pthread_barrier_t go;
    struct samples all = {0};
    uint64_t total = 0, start;
    int r;

    if (nt == 0 || nt > MAX_THREADS || nsb == 0 || nsb > nt) {
        fprintf(stderr, "abx-bench: need 1..%d threads and 1..threads sandboxes\n", MAX_THREADS);
        return -EINVAL;
    }
    if ((r = client_open(&c)) < 0)
        return r;
    ws = calloc(nt, sizeof(*ws));
    ids = calloc(nsb, sizeof(*ids));
    if (!ws || !ids || samples_init(&all, 4096) < 0) {
        r = -ENOMEM;
        goto out;
    }
    for (; made < nsb; made++)
        if ((r = create_id(c, &ids[made], NULL)) < 0)
            goto out;
    if (pthread_barrier_init(&go, NULL, (unsigned)nt + 1) != 0) {
        r = -EAGAIN;
        goto out;
    }
    for (; started < nt; started++) {
        struct worker *w = &ws[started];
        w->id = ids[started % nsb];
        w->go = &go;
        w->end_ns = UINT64_MAX;
        if (samples_init(&w->lat, 4096) < 0 ||
            pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            /* The barrier needs every party: give up loudly rather than hang. */
            fprintf(stderr, "abx-bench: cannot start thread %zu\n", started);
            abort();
        }
    }
    /* Every thread sees the same window; the barrier publishes it. */
    start = bench_now_ns();
    for (size_t i = 0; i < nt; i++)
        ws[i].end_ns = start + arg_seconds * 1000000000u;
    (void)pthread_barrier_wait(&go);
    r = 0;
    for (size_t i = 0; i < nt; i++) {
        (void)pthread_join(ws[i].thread, NULL);
        if (ws[i].r < 0 && r == 0)
            r = ws[i].r;
        total += ws[i].done;
        (void)samples_merge(&all, &ws[i].lat);
        samples_done(&ws[i].lat);
    }
    (void)pthread_barrier_destroy(&go);
    if (r < 0)
        goto out;
    bench_result(arg_name, "threads", "%zu", nt);
    bench_result(arg_name, "sandboxes", "%zu", nsb);
    bench_result(arg_name, "seconds", "%llu", (unsigned long long)arg_seconds);
    bench_result(arg_name, "execs", "%llu", (unsigned long long)total);
    bench_result(arg_name, "execs_per_s", "%.1f", (double)total / (double)arg_seconds);
    samples_report(&all, arg_name);
out:
    for (size_t i = 0; i < made; i++) {
        if (abx_sandbox_kill(c, ids[i]) < 0)
            fprintf(stderr, "abx-bench: cannot delete '%s': %s\n", ids[i], abx_client_error(c));
        free(ids[i]);
    }
    free(ids);
    free(ws);
    samples_done(&all);
    abx_client_free(c);
    return r;
}

/* --- upload, download: one file, abxd's peak RSS while it moves --- */

static int
verb_transfer(bool upload)
{
    struct abx_client *c = NULL;
    uint64_t rss0 = 0, hwm = 0, bytes = 0, t0, ns;
    int fd = -1, r;

    if (!arg_id || !arg_file || !arg_pid) {
        fprintf(stderr, "abx-bench: %s needs --id, --file and --pid\n",
                upload ? "upload" : "download");
        return -EINVAL;
    }
    fd = upload ? open(arg_file, O_RDONLY | O_CLOEXEC)
                : open(arg_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
        fprintf(stderr, "abx-bench: cannot open '%s': %s\n", arg_file, strerror(-r));
        return r;
    }
    if ((r = client_open(&c)) < 0)
        goto out;
    if ((r = bench_reset_hwm((long)arg_pid)) < 0 ||
        (r = bench_proc_status_kb((long)arg_pid, "VmRSS", &rss0)) < 0) {
        fprintf(stderr, "abx-bench: cannot read the RSS of pid %llu: %s\n",
                (unsigned long long)arg_pid, strerror(-r));
        goto out;
    }
    t0 = bench_now_ns();
    if (upload) {
        r = abx_file_upload(c, arg_id, arg_path, fd, NULL);
        if (r >= 0) {
            struct stat st;
            bytes = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        }
    } else {
        r = abx_file_download(c, arg_id, arg_path, fd, &bytes);
    }
    ns = bench_now_ns() - t0;
    if (r < 0) {
        fail_call(c, upload ? "upload" : "download", r);
        goto out;
    }
    if ((r = bench_proc_status_kb((long)arg_pid, "VmHWM", &hwm)) < 0)
        goto out;
    bench_result(arg_name, "bytes", "%llu", (unsigned long long)bytes);
    bench_result(arg_name, "seconds", "%.3f", (double)ns / 1e9);
    bench_result(arg_name, "mib_per_s", "%.1f", (double)bytes / 1048576.0 / ((double)ns / 1e9));
    bench_result(arg_name, "abxd_rss_before_kib", "%llu", (unsigned long long)(rss0 / 1024));
    bench_result(arg_name, "abxd_peak_rss_kib", "%llu", (unsigned long long)(hwm / 1024));
    r = 0;
out:
    if (fd >= 0)
        (void)close(fd);
    abx_client_free(c);
    return r;
}

/* --- e2b-baseline: what bench/e2b-bench.mjs times through the E2B SDK --- */

/* The E2B SDK's commands.run(cmd) starts "/bin/bash -l -c cmd" as "user". */
static const char *const bash_true_argv[] = {"/bin/bash", "-l", "-c", "true", NULL};

static void
report_as(struct samples *s, const char *what)
{
    char name[128];
    (void)snprintf(name, sizeof(name), "%s.%s", arg_name, what);
    samples_report(s, name);
}

/* Fills buf with len bytes from /dev/urandom. */
static int
random_fill(void *buf, size_t len)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    if (fd < 0)
        return -errno;
    while (got < len) {
        ssize_t k = read(fd, (char *)buf + got, len - got);
        if (k <= 0) {
            (void)close(fd);
            return k < 0 ? -errno : -EIO;
        }
        got += (size_t)k;
    }
    (void)close(fd);
    return 0;
}

/* Create -> first "bash -l -c true" done (the delete is not timed, as in
 * e2b-bench.mjs; with --wait-pool K each round first waits for K warm
 * sandboxes, so that both sides create from a full pool); then, on one sandbox, exec round trips of
 * "bash -l -c true" (what commands.run('true') runs) and of /bin/true, a PUT of arg_size random
 * bytes from memory and a GET of them into memory (a memfd, rewound each time) checked once against
 * what was written. */
static int
verb_e2b_baseline(void)
{
    struct abx_client *c = NULL;
    struct samples create_run = {0}, run = {0}, run_true = {0}, wr = {0}, rd = {0};
    struct samples *all[] = {&create_run, &run, &run_true, &wr, &rd};
    const char *path = "/e2b-baseline.bin";
    unsigned char *data = NULL, *back = NULL;
    struct lifecycle pace = {0}; /* only its pool_waits_timed_out */
    char *id = NULL;
    int mfd = -1, r;

    if ((r = client_open(&c)) < 0)
        return r;
    for (size_t i = 0; i < ELEMENTSOF(all); i++)
        if (samples_init(all[i], (size_t)arg_n) < 0) {
            r = -ENOMEM;
            goto out;
        }
    data = malloc((size_t)arg_size);
    back = malloc((size_t)arg_size);
    if (!data || !back) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = random_fill(data, (size_t)arg_size)) < 0) {
        fprintf(stderr, "abx-bench: cannot read /dev/urandom: %s\n", strerror(-r));
        goto out;
    }
    mfd = memfd_create("e2b-baseline", MFD_CLOEXEC);
    if (mfd < 0) {
        r = -errno;
        fprintf(stderr, "abx-bench: memfd_create: %s\n", strerror(-r));
        goto out;
    }

    for (uint64_t i = 0; i < arg_create_w + arg_create_n; i++) {
        char *one = NULL;
        if (arg_wait_pool && (r = wait_pool(c, &pace)) < 0)
            goto out;
        uint64_t t0 = bench_now_ns();
        if ((r = create_id(c, &one, NULL)) < 0)
            goto out;
        r = exec_argv(c, one, bash_true_argv);
        uint64_t t1 = bench_now_ns();
        int k = abx_sandbox_kill(c, one);
        free(one);
        if (r < 0)
            goto out;
        if (k < 0) {
            r = fail_call(c, "delete", k);
            goto out;
        }
        if (i >= arg_create_w && (r = samples_add(&create_run, t1 - t0)) < 0)
            goto out;
    }

    if ((r = create_id(c, &id, NULL)) < 0)
        goto out;
    for (uint64_t i = 0; i < arg_warmup + arg_n; i++) {
        uint64_t t0 = bench_now_ns();
        if ((r = exec_argv(c, id, bash_true_argv)) < 0)
            goto out;
        if (i >= arg_warmup && (r = samples_add(&run, bench_now_ns() - t0)) < 0)
            goto out;
    }
    for (uint64_t i = 0; i < arg_warmup + arg_n; i++) {
        uint64_t t0 = bench_now_ns();
        if ((r = exec_argv(c, id, true_argv)) < 0)
            goto out;
        if (i >= arg_warmup && (r = samples_add(&run_true, bench_now_ns() - t0)) < 0)
            goto out;
    }
    for (uint64_t i = 0; i < arg_warmup + arg_n; i++) {
        uint64_t t0 = bench_now_ns();
        r = abx_file_put(c, id, path, data, (size_t)arg_size, NULL);
        if (r < 0) {
            fail_call(c, "file put", r);
            goto out;
        }
        if (i >= arg_warmup && (r = samples_add(&wr, bench_now_ns() - t0)) < 0)
            goto out;
    }
    for (uint64_t i = 0; i < arg_warmup + arg_n; i++) {
        uint64_t bytes = 0;
        if (lseek(mfd, 0, SEEK_SET) < 0) {
            r = -errno;
            goto out;
        }
        uint64_t t0 = bench_now_ns();
        r = abx_file_download(c, id, path, mfd, &bytes);
        if (r < 0) {
            fail_call(c, "file download", r);
            goto out;
        }
        uint64_t t1 = bench_now_ns();
        if (bytes != arg_size) {
            fprintf(stderr, "abx-bench: download gave %llu bytes, not %llu\n",
                    (unsigned long long)bytes, (unsigned long long)arg_size);
            r = -EIO;
            goto out;
        }
        if (i >= arg_warmup && (r = samples_add(&rd, t1 - t0)) < 0)
            goto out;
    }
    if (pread(mfd, back, (size_t)arg_size, 0) != (ssize_t)arg_size ||
        memcmp(back, data, (size_t)arg_size) != 0) {
        fprintf(stderr, "abx-bench: the file came back different\n");
        r = -EIO;
        goto out;
    }
    report_as(&create_run, "create_run");
    report_as(&run, "run");
    report_as(&run_true, "run_bin_true");
    report_as(&wr, "write");
    report_as(&rd, "read");
    bench_result(arg_name, "bytes", "%llu", (unsigned long long)arg_size);
    bench_result(arg_name, "pool_wait_timeouts", "%llu",
                 (unsigned long long)pace.pool_waits_timed_out);
    r = 0;
out:
    if (id && abx_sandbox_kill(c, id) < 0)
        fprintf(stderr, "abx-bench: cannot delete '%s': %s\n", id, abx_client_error(c));
    free(id);
    if (mfd >= 0)
        (void)close(mfd);
    free(data);
    free(back);
    for (size_t i = 0; i < ELEMENTSOF(all); i++)
        samples_done(all[i]);
    abx_client_free(c);
    return r;
}

/* --- main --- */

static void
usage(FILE *f)
{
    fprintf(f, "Usage: abx-bench VERB [OPTIONS]\n"
               "\n"
               "Drives the abxd at $ABX_URL (key $ABX_API_KEY) through libabx and prints\n"
               "NAME.KEY=VALUE lines. Latencies are microseconds, nearest-rank percentiles.\n"
               "\n"
               "  exec        [--id ID] -n N -w W [--pid ABXD_PID]\n"
               "                                       foreground /bin/true in one sandbox; with\n"
               "                                       --pid also the CPU per exec of each party\n"
               "  lifecycle   -n N -w W [--wait-pool K] create, exec /bin/true, delete\n"
               "  fill        -n N --ids FILE          create N sandboxes, keep them\n"
               "  usage       --ids FILE               sum of their cgroup memory usage\n"
               "  kill        --ids FILE | --id ID     delete them\n"
               "  create                               create one sandbox, print its id\n"
               "  throughput  --threads T --seconds S [--sandboxes K]\n"
               "  upload      --id ID --file F --pid ABXD_PID [--path P]\n"
               "  download    --id ID --file F --pid ABXD_PID [--path P]\n"
               "  e2b-baseline -n N -w W [--create-n N] [--create-w W] [--size BYTES]\n"
               "               [--wait-pool K]\n"
               "                                       what bench/e2b-bench.mjs times through\n"
               "                                       the E2B SDK: create -> first bash -l -c\n"
               "                                       true; its round trip (and /bin/true's);\n"
               "                                       PUT and GET of BYTES (1 MiB) from memory\n"
               "\n"
               "  --name NAME   prefix of the result lines (default 'bench')\n");
}

static int
parse_num(const char *opt, uint64_t *v)
{
    if (bench_parse_u64(optarg, v) < 0) {
        fprintf(stderr, "abx-bench: %s must be a non-negative integer, not '%s'\n", opt, optarg);
        return -EINVAL;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
            {"name", required_argument, NULL, 'N'},
            {"id", required_argument, NULL, 'i'},
            {"ids", required_argument, NULL, 'I'},
            {"file", required_argument, NULL, 'f'},
            {"path", required_argument, NULL, 'P'},
            {"threads", required_argument, NULL, 't'},
            {"seconds", required_argument, NULL, 's'},
            {"sandboxes", required_argument, NULL, 'k'},
            {"wait-pool", required_argument, NULL, 'W'},
            {"pid", required_argument, NULL, 'p'},
            {"create-n", required_argument, NULL, 'C'},
            {"create-w", required_argument, NULL, 'c'},
            {"size", required_argument, NULL, 'S'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
    };
    int c, r = 0;

    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *verb = argv[1];
    optind = 2;
    while ((c = getopt_long(argc, argv, "n:w:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            r = parse_num("-n", &arg_n);
            break;
        case 'w':
            r = parse_num("-w", &arg_warmup);
            break;
        case 't':
            r = parse_num("--threads", &arg_threads);
            break;
        case 's':
            r = parse_num("--seconds", &arg_seconds);
            break;
        case 'k':
            r = parse_num("--sandboxes", &arg_sandboxes);
            break;
        case 'W':
            r = parse_num("--wait-pool", &arg_wait_pool);
            break;
        case 'p':
            r = parse_num("--pid", &arg_pid);
            break;
        case 'C':
            r = parse_num("--create-n", &arg_create_n);
            break;
        case 'c':
            r = parse_num("--create-w", &arg_create_w);
            break;
        case 'S':
            r = parse_num("--size", &arg_size);
            if (r == 0 && (arg_size == 0 || arg_size > (uint64_t)1 << 30)) {
                fprintf(stderr, "abx-bench: --size must be 1..%llu\n", 1ULL << 30);
                r = -EINVAL;
            }
            break;
        case 'N':
            arg_name = optarg;
            break;
        case 'i':
            arg_id = optarg;
            break;
        case 'I':
            arg_ids = optarg;
            break;
        case 'f':
            arg_file = optarg;
            break;
        case 'P':
            arg_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
        if (r < 0)
            return 2;
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    url = getenv("ABX_URL");
    if (!url || !*url)
        url = ABX_DEFAULT_URL;
    api_key = getenv("ABX_API_KEY");

    if (!strcmp(verb, "exec"))
        r = verb_exec();
    else if (!strcmp(verb, "lifecycle"))
        r = verb_lifecycle();
    else if (!strcmp(verb, "fill"))
        r = verb_fill();
    else if (!strcmp(verb, "usage"))
        r = verb_usage();
    else if (!strcmp(verb, "kill"))
        r = verb_kill();
    else if (!strcmp(verb, "create"))
        r = verb_create();
    else if (!strcmp(verb, "throughput"))
        r = verb_throughput();
    else if (!strcmp(verb, "upload"))
        r = verb_transfer(true);
    else if (!strcmp(verb, "download"))
        r = verb_transfer(false);
    else if (!strcmp(verb, "e2b-baseline"))
        r = verb_e2b_baseline();
    else {
        fprintf(stderr, "abx-bench: unknown verb '%s'\n", verb);
        usage(stderr);
        return 2;
    }
    return r < 0 ? 1 : 0;
}
