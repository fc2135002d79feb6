/*
 * daemon.c - abxd's assembly root: configuration, state directory, API key,
 * the jail host, warm pool, api and HTTP server wired onto one loop;
 * a start-up self-test that decides readiness; signals and sweeps.
 *
 * SIGTERM/SIGINT drain: no new sandboxes, every sandbox killed, then exit.
 * If abxd dies instead, every sandbox's init dies with it (parent-death
 * signal and control-socket hang-up), and the next start reclaims what was
 * left on disk and in cgroupfs.
 */
#include "abxd/daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "abxd/config.h"
#include "abxd/split.h"
#include "api/api.h"
#include "http/server.h"
#include "jail/jail.h"
#include "priv/client.h"
#include "sandbox/sandbox-local.h"
#include "sync/sync.h"
#include "template/set.h"
#include "tools/registry.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/rand.h"
#include "util/reserve.h"
#include "util/timeutil.h"
#include "workspace/workspace.h"

#define SWEEP_MS_MAX      10000 /* idle sweeps run at most this far apart */
#define SHUTDOWN_GRACE_MS 15000
#define PROBE_TIMEOUT_MS  15000
#define GC_LEASE_MS       (10 * 60 * 1000)
#define HTTP_CONNS_MAX    4096 /* HTTP connections, and at most 1/8 of RLIMIT_NOFILE */
#define FDS_PER_CONN      2    /* its socket and what it may hold: a file, inotify, upstream */
#define FD_RESERVE        128  /* past what is open at start: store, uploads' dirs, accept */

static uint32_t
count_open_fds(void)
{
    uint32_t n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));)
        if (de->d_name[0] != '.')
            n++;
    (void)closedir(d);
    return n > 0 ? n - 1 : 0; /* not the one reading it */
}

/* abxd's descriptors, RLIMIT_NOFILE, are split three ways: HTTP
 * connections (MHD accepts no more) with what each may hold besides its
 * socket, jails and their processes' pipes (sandbox.h: exec and create
 * answer "unavailable" past the budget), and a reserve for what is open
 * when we start serving plus FD_RESERVE (the store, accept() itself). So
 * no number of sandboxes or processes can take the descriptors that health
 * checks, other sandboxes' requests and the store need. */
static uint32_t
fd_connections(uint32_t nofile)
{
    return MAX(16u, MIN((uint32_t)HTTP_CONNS_MAX, nofile / 8));
}

static void
set_fd_budget(struct daemon *d, uint32_t nofile, uint32_t connections)
{
    uint32_t open_now = count_open_fds();
    uint32_t keep = open_now + connections * FDS_PER_CONN + FD_RESERVE;
    uint32_t budget = nofile > keep + 64 ? nofile - keep : 64;
    sandbox_host_set_fd_budget(d->sh, budget);
    if (nofile <= keep + 64)
        log_warn("RLIMIT_NOFILE is %u: too low for %u connections and sandboxes; "
                 "sandboxes get only %u descriptors",
                 nofile, connections, budget);
    log_info("descriptors: %u (RLIMIT_NOFILE), %u open, %u for HTTP connections, %u for sandboxes "
             "and processes (%u per sandbox), %u reserve",
             nofile, open_now, connections, budget, sandbox_fd_limit(d->sh), FD_RESERVE);
}

/* --- start-up self-test: one real sandbox, one real process --- */

struct probe {
    struct sandbox *sb;
    bool done;
    int r;
    struct err err;
};

static void
probe_started(struct sandbox *sb, struct proc *p, int r, const struct err *err, void *ud)
{
    struct probe *pr = ud;
    (void)sb;
    (void)p;
    if (r < 0) {
        pr->r = r;
        if (err)
            pr->err = *err;
        pr->done = true;
    }
}

static void
probe_ready(struct sandbox *sb, int r, const struct err *err, void *ud)
{
    struct probe *pr = ud;
    if (r < 0) {
        pr->r = r;
        if (err)
            pr->err = *err;
        pr->done = true;
        return;
    }
    static const char *const argv[] = {"/bin/sh", "-c", "test -d /proc/self && exit 0", NULL};
    struct sandbox_exec x = {.argv = argv, .timeout_ms = 10000};
    r = sandbox_exec(sb, &x, probe_started, pr, &pr->err);
    if (r < 0) {
        pr->r = r;
        pr->done = true;
    }
}

static int
self_test(struct daemon *d, struct err *err)
{
    struct probe pr = {0};
    struct sandbox_spec spec = {.limits = {64ull << 20, 500, 64}};
    char id[21];
    int r = rand_id(id, 20);
    if (r < 0)
        return r;
    r = sandbox_create(d->sh, id, &spec, probe_ready, &pr, &pr.sb, err);
    if (r < 0)
        return r;
    uint64_t until = now_msec() + PROBE_TIMEOUT_MS;
    struct proc *p = NULL;
    while (!pr.done && now_msec() < until) {
        (void)loop_run_once(d->loop, 100);
        p = pr.sb && sandbox_is_ready(pr.sb) ? sandbox_proc_next(pr.sb, NULL) : NULL;
        if (p && proc_get_state(p) == PROC_EXITED)
            pr.done = true;
    }
    if (pr.r == 0 && !pr.done)
        pr.r = err_set(&pr.err, ETIMEDOUT, "self-test sandbox did not finish in time");
    if (pr.r == 0 && p) {
        const struct proc_result *res = proc_get_result(p);
        if (!res || res->exit_code != 0)
            pr.r = err_set(&pr.err, EIO, "self-test process exited with %d",
                           res ? res->exit_code : -1);
    }
    /* Freeing kills and reaps synchronously: fine before we serve. */
    sandbox_free(pr.sb);
    if (pr.r < 0) {
        *err = pr.err;
        return pr.r;
    }
    return 0;
}

/* --- signals, sweeps, shutdown --- */

static void
all_gone(void *ud)
{
    struct daemon *d = ud;
    log_info("all sandboxes are gone; exiting");
    loop_quit(d->loop, 0);
}

static void
on_shutdown_timeout(struct loop_timer *t, void *ud)
{
    struct daemon *d = ud;
    (void)t;
    log_warn("sandboxes did not all end within %d ms; exiting anyway", SHUTDOWN_GRACE_MS);
    loop_quit(d->loop, 0);
}

static void
workspaces_drained(void *ud)
{
    struct daemon *d = ud;
    log_info("warm workspaces are mirrored and closed; killing %u sandboxes",
             api_sandbox_count(d->api));
    api_kill_all(d->api, all_gone, d);
}

static void
begin_shutdown(struct daemon *d, const char *why)
{
    if (d->stopping)
        return;
    d->stopping = true;
    log_info("%s: draining (%u warm workspaces, %u sandboxes)", why,
             d->ws ? workspaces_warm_count(d->ws) : 0, api_sandbox_count(d->api));
    api_drain(d->api);
    (void)loop_timer_arm(d->shutdown_timer, now_msec() + SHUTDOWN_GRACE_MS);
    if (d->ws)
        workspaces_drain(d->ws, workspaces_drained, d);
    else
        api_kill_all(d->api, all_gone, d);
}

static void
on_signal(struct loop_io *io, uint32_t ev, void *ud)
{
    struct daemon *d = ud;
    struct signalfd_siginfo si;
    (void)io;
    (void)ev;
    while (read(d->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM)
            begin_shutdown(d, "SIGTERM");
        else if (si.ssi_signo == SIGINT)
            begin_shutdown(d, "SIGINT");
    }
}

static uint64_t
sweep_interval(const struct config *c)
{
    uint64_t ms = c->idle_timeout_s * 1000u / 2;
    /* Mirrors are due every window; sweep often enough to keep it. */
    uint64_t w = c->mirror_window_s * 1000u / 4;
    if (w < ms)
        ms = w;
    if (c->ws_idle_s && c->ws_idle_s * 1000u / 2 < ms)
        ms = c->ws_idle_s * 1000u / 2;
    return ms < 500 ? 500 : ms > SWEEP_MS_MAX ? SWEEP_MS_MAX : ms;
}

static void
on_sweep(struct loop_timer *t, void *ud)
{
    struct daemon *d = ud;
    if (d->role == ROLE_ONE)
        daemon_check_reserve(d, false);
    if (d->priv && !priv_client_connected(d->priv))
        begin_shutdown(d, "the privileged parent is gone");
    (void)api_sweep_idle(d->api);
    if (d->ws && !d->stopping)
        workspaces_sweep(d->ws);
    (void)loop_timer_arm(t, now_msec() + sweep_interval(&d->cfg));
}

static const char *
hostname_or(const char *dflt)
{
    static char name[65];
    if (gethostname(name, sizeof(name) - 1) < 0 || !name[0])
        return dflt;
    return name;
}

/* Opens the store (SQLite under the state directory unless ABX_STORE
 * names another place) and the workspace lifecycle on top of it. */
static int
start_workspaces(struct daemon *d, int statefd)
{
    struct err err = {0};
    char store[4096 + 16], tmp[4096 + 16];
    int r;

    if (mkdirat(statefd, "tmp", 0700) < 0 && errno != EEXIST)
        return log_err_errno(-errno, "cannot create %s/tmp", d->cfg.state_dir);
    (void)snprintf(tmp, sizeof(tmp), "%s/tmp", d->cfg.state_dir);
    if (d->cfg.store[0])
        (void)snprintf(store, sizeof(store), "%s", d->cfg.store);
    else
        (void)snprintf(store, sizeof(store), "%s/store", d->cfg.state_dir);
    if ((r = sync_ignore_default(&d->ignore)) < 0)
        return log_err("out of memory"), r;
    d->ignore.max_file_bytes = d->cfg.sync_max_file_bytes;
    if (d->cfg.sync_ignore_set && (r = sync_ignore_parse(&d->ignore, d->cfg.sync_ignore, &err)) < 0)
        return log_err("ABX_SYNC_IGNORE: %s", err.msg), r;
    struct workspaces_config wc = {
            .store = store,
            .tmp_dir = tmp,
            .workers = d->cfg.store_workers,
            .mirror_window_ms = d->cfg.mirror_window_s * 1000u,
            .idle_ms = d->cfg.ws_idle_s * 1000u,
            .ignore = &d->ignore,
            .default_limits = {d->cfg.memory_bytes, d->cfg.cpu_millis, d->cfg.pids,
                               d->cfg.disk_bytes},
            .max_file_bytes = d->cfg.max_file_bytes,
            .floor_bytes = d->cfg.disk_floor_bytes,
            .holder = d->holder,
    };
    if (d->role == ROLE_NET)
        store_name_lock_pid(getppid()); /* the abxd the operator started */
    r = workspaces_new(d->loop, d->sh, &wc, &d->ws, &err);
    if (r < 0)
        return log_err("cannot open the workspace store: %s", err.msg), r;
    log_info("workspace store: %s (%s)", strncmp(store, "postgres", 8) ? store : "postgres://...",
             workspaces_store_kind(d->ws));
    return 0;
}

/* Loads the tool bundles (strictly: a bad bundle stops abxd) and says how
 * sandboxes see them: the directory read-only at /.tools and, with a carrier
 * bundle, its python/pip shims at /.toolbin, first on PATH. */
static int
load_tools(struct daemon *d, struct jail_bind *binds, size_t *ret_n, const char **ret_prefix)
{
    struct err err = {0};
    static char shims[PATH_MAX + 16];
    int r;

    memset(binds, 0, 2 * sizeof(*binds));
    *ret_n = 0;
    *ret_prefix = NULL;
    if (!d->cfg.tools_dir[0])
        return 0;
    if (!realpath(d->cfg.tools_dir, d->tools_real))
        return log_err_errno(-errno, "tools directory '%s'", d->cfg.tools_dir);
    r = tools_registry_load(d->tools_real, &d->tools, &err);
    if (r < 0) {
        log_err("%s", err.msg);
        return r;
    }
    const bool ns = d->cfg.isolation == JAIL_NS;
    /* Split, the network process owns toolbin/ (split.c), not the state
     * directory in which the shims' directory is replaced. */
    (void)snprintf(shims, sizeof(shims), "%s/%s", d->cfg.state_dir,
                   d->role == ROLE_ONE ? SHIMS_DIR : SHIMS_SPLIT_DIR);
    r = tools_write_shims(d->tools, shims, ns ? TOOLS_MOUNT : d->tools_real, &err);
    if (r < 0) {
        log_err("%s", err.msg);
        return r;
    }
    binds[0] = (struct jail_bind){.src = d->tools_real, .dst = TOOLS_MOUNT, .ro = true};
    *ret_n = 1;
    if (r == 1 && ns) {
        binds[1] = (struct jail_bind){.src = shims, .dst = TOOLS_SHIM_MOUNT, .ro = true};
        *ret_n = 2;
        *ret_prefix = TOOLS_SHIM_MOUNT;
    }
    const struct tools_package *carrier = tools_registry_carrier(d->tools);
    log_info("tools: %zu bundle(s), %zu command(s) from '%s'%s%s%s", tools_registry_count(d->tools),
             tools_registry_commands(d->tools), d->tools_real, carrier ? "; carrier '" : "",
             carrier ? carrier->name : "", carrier ? "' gives sandboxes python and pip" : "");
    return 0;
}

int
daemon_setup_loop(struct daemon *d)
{
    if (loop_new(&d->loop) < 0 || loop_timer_new(d->loop, on_sweep, d, &d->sweep) < 0 ||
        loop_timer_new(d->loop, on_shutdown_timeout, d, &d->shutdown_timer) < 0)
        return log_err("out of memory"), -ENOMEM;
    return 0;
}

int
daemon_setup_tools(struct daemon *d)
{
    return load_tools(d, d->binds, &d->nbinds, &d->path_prefix);
}

int
daemon_setup_templates(struct daemon *d)
{
    struct err err = {0};
    int r = template_set_load(d->cfg.templates_dir[0] ? d->cfg.templates_dir : NULL,
                              d->cfg.state_dir, &d->templates, &err);
    if (r < 0) {
        log_err("%s", err.msg[0] ? err.msg : strerror(-r));
        return r;
    }
    if (d->cfg.templates_dir[0])
        log_info("templates: %zu from '%s' besides 'base'", template_set_count(d->templates) - 1,
                 d->cfg.templates_dir);
    return 0;
}

int
daemon_setup_sandboxes(struct daemon *d)
{
    struct err err = {0};
    struct sandbox_host_config shc = {
            .pool_size = d->missing.len ? 0 : d->cfg.pool,
            .pool_limits = {d->cfg.memory_bytes, d->cfg.cpu_millis, d->cfg.pids, d->cfg.disk_bytes},
            .max_file_bytes = d->cfg.max_file_bytes,
            .path_prefix = d->path_prefix,
    };
    /* The pool starts after the self-test, so the test measures a cold create. */
    shc.pool_size = 0;
    if (sandbox_host_new(d->loop, d->jr, &shc, &d->sh) < 0)
        return log_err("out of memory"), -ENOMEM;

    if (!d->missing.len) {
        int r = self_test(d, &err);
        if (r < 0) {
            (void)buf_printf(&d->missing, "working sandboxes (self-test: %s)", err.msg);
        } else {
            log_debug("self-test passed");
        }
    }
    if (d->missing.len)
        log_err("isolation '%s' is not available; /readyz will fail and creates are refused. "
                "Missing: %s",
                jail_mode_name(d->cfg.isolation), d->missing.data);
    sandbox_host_free(d->sh);
    shc.pool_size = d->missing.len ? 0 : d->cfg.pool;
    if (sandbox_host_new(d->loop, d->jr, &shc, &d->sh) < 0)
        return log_err("out of memory"), -ENOMEM;
    return 0;
}

int
daemon_setup_api(struct daemon *d)
{
    struct sysinfo si;
    (void)sysinfo(&si);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* Names this process of this boot of this host, so that after a crash
     * the next abxd here may take the GC lease over at once. */
    int r = store_holder_name("abxd", d->holder, sizeof(d->holder));
    if (r < 0) {
        log_warn_errno(r, "cannot name this process for the GC lease; a restart waits for the "
                          "lease to expire");
        (void)snprintf(d->holder, sizeof(d->holder), "abxd-%.64s-%d", hostname_or(""),
                       (int)getpid());
    }
    struct api_config ac = {
            .gc_holder = d->holder,
            .gc_lease_ms = GC_LEASE_MS,
            .api_key = d->cfg.api_key,
            .isolation = jail_mode_name(d->cfg.isolation),
            .cgroup = d->cgroup_name,
            .default_memory_bytes = d->cfg.memory_bytes,
            .default_cpu_millis = d->cfg.cpu_millis,
            .default_pids = d->cfg.pids,
            .default_disk_bytes = d->cfg.disk_bytes,
            .disk_floor_bytes = d->cfg.disk_floor_bytes,
            .default_timeout_s = d->cfg.timeout_s,
            .max_timeout_s = d->cfg.max_timeout_s,
            .idle_timeout_s = d->cfg.idle_timeout_s,
            .exec_timeout_ms = d->cfg.exec_timeout_s * 1000u,
            .ready_timeout_ms = d->cfg.ready_timeout_s * 1000u,
            .max_sandboxes = d->cfg.max_sandboxes,
            .host_cpus = ncpu > 0 ? (unsigned)ncpu : 1,
            .host_memory_bytes = (uint64_t)si.totalram * si.mem_unit,
            .max_file_bytes = d->cfg.max_file_bytes,
            .e2b_domain = d->cfg.domain[0] ? d->cfg.domain : NULL,
            .state_dir = d->cfg.state_dir,
    };
    if (api_new(d->loop, d->sh, &ac, &d->api) < 0)
        return log_err("out of memory"), -ENOMEM;
    api_set_missing(d->api, d->missing.data);
    return 0;
}

int
daemon_setup_store(struct daemon *d)
{
    int r = start_workspaces(d, d->statefd);
    if (r < 0)
        return r;
    api_set_workspaces(d->api, d->ws);
    return 0;
}

int
daemon_setup_attach(struct daemon *d)
{
    struct err err = {0};
    api_set_templates(d->api, d->templates);
    if (d->cfg.keys_file[0]) {
        int r = api_load_keys(d->api, d->cfg.keys_file, &err);
        if (r < 0) {
            log_err("%s", err.msg[0] ? err.msg : strerror(-r));
            return r;
        }
        log_info("%d scoped key(s) from '%s'", r, d->cfg.keys_file);
    }
    api_set_tools(d->api, d->tools, d->cfg.isolation == JAIL_NS ? TOOLS_MOUNT : d->tools_real);
    return 0;
}

int
daemon_setup_http(struct daemon *d)
{
    struct err err = {0};
    struct http_server_config hc = {
            .host = d->cfg.listen_host,
            .port = d->cfg.listen_port,
            .listen_fd = d->role == ROLE_NET ? SPLIT_LISTEN_FD : -1,
            /* what the configuration asks, within what the descriptors allow;
             * one client never gets all of it */
            .max_connections = MIN(d->cfg.http_max_conns, fd_connections(d->nofile)),
            .max_per_client =
                    MIN(d->cfg.http_max_per_client,
                        MAX(1u, MIN(d->cfg.http_max_conns, fd_connections(d->nofile)) * 3 / 4)),
            .conn_timeout_s = 300,
            .conn_memory = 128 * 1024,
            .header_timeout_s = d->cfg.http_header_timeout_s,
            .body_timeout_s = d->cfg.http_body_timeout_s,
            .body_min_rate = d->cfg.http_body_min_rate,
            .begin = api_begin,
            .ud = d->api,
    };
    d->http_connections = hc.max_connections;
    int r = http_server_new(d->loop, &hc, &d->http, &err);
    if (r < 0) {
        log_err("%s", err.msg);
        return r;
    }
    return 0;
}

int
daemon_setup_signals(struct daemon *d)
{
    d->sig_fd = signalfd(-1, &d->sigmask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (d->sig_fd < 0 || loop_io_add(d->loop, d->sig_fd, EPOLLIN, on_signal, d, &d->sig_io) < 0)
        return log_err("cannot watch signals"), -EIO;
    return 0;
}

int
daemon_setup_sweeps(struct daemon *d)
{
    (void)loop_timer_arm(d->sweep, now_msec() + sweep_interval(&d->cfg));
    set_fd_budget(d, d->nofile, d->http_connections);
    return 0;
}

int
daemon_run(struct daemon *d)
{
    log_notice("listening on http://%s:%u (isolation %s, cgroup %s, state %s)%s",
               d->cfg.listen_host, http_server_port(d->http), jail_mode_name(d->cfg.isolation),
               d->cgroup_name, d->cfg.state_dir, d->missing.len ? " - NOT READY" : "");
    return loop_run(d->loop);
}

/* Not quite the reverse of set-up, and kept so: the api goes before the
 * workspaces it was given, and the jail host delivers pending teardowns
 * before either. */
void
daemon_teardown(struct daemon *d)
{
    loop_io_free(d->sig_io);
    safe_close(d->sig_fd);
    http_server_free(d->http);
    if (d->jh)
        jail_host_flush(d->jh); /* deliver pending teardowns before their owners go */
    api_free(d->api);
    workspaces_free(d->ws);
    sync_ignore_done(&d->ignore);
    tools_registry_free(d->tools);
    template_set_free(d->templates);
    sandbox_host_free(d->sh);
    d->jr = jailer_free(d->jr);
    d->priv = priv_client_free(d->priv);
    daemon_free_jail_host(d);
    loop_timer_free(d->sweep);
    loop_timer_free(d->shutdown_timer);
    loop_free(d->loop);
    buf_done(&d->missing);
    safe_close(d->statefd);
}
