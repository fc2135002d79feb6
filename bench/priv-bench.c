/*
 * priv-bench.c - what the privileged hop (src/priv: the parent's protocol)
 * costs, measured on the modules themselves, without abxd.
 *
 * Three figures, each beside its baseline in the same run:
 *  - raw: a SOCK_SEQPACKET round trip between two processes, a 16-byte
 *    request carrying one descriptor and a 16-byte answer (the floor of any
 *    descriptor-passing protocol); as scheduled, both pinned to one CPU, and
 *    pinned to two;
 *  - stats: a sandbox's cgroup statistics through the parent
 *    (priv_jail_stats(): request, decode, state check, jail_stats(),
 *    answer) against jail_stats() called in-process on a jail of the same
 *    host;
 *  - spawn: /bin/true started in a sandbox and its exit seen, through the
 *    parent (SPAWN with three descriptors, EV_SPAWNED, EV_EXITED relayed)
 *    against jail_spawn() in-process; and spawn_call, the spawn call alone
 *    (how long it holds the caller's loop).
 * The parent runs in a child process that holds the jail host, as abxd's
 * parent will; the client is this process. Prints "priv.<what>.<key>=value"
 * lines (bench-util.h). Root only, in the ns mode; --dir holds the state
 * directory and is emptied of what it made.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"
#include "priv/client.h"
#include "priv/parent.h"
#include "util/buf.h"
#include "util/cleanup.h"

static const char *arg_dir;
static uint64_t arg_n = 2000;
static uint64_t arg_warmup = 200;

static int
fail(const char *what, const struct err *e, int r)
{
    fprintf(stderr, "priv-bench: %s: %s\n", what, e && e->msg[0] ? e->msg : strerror(-r));
    return 1;
}

/* --- raw: a round trip with one descriptor --- */

static int
pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set) < 0 ? -errno : 0;
}

static int
send_fd(int sock, int fd)
{
    char data[16] = "ping";
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } u = {0};
    struct iovec iov = {data, sizeof(data)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        mh.msg_control = u.b;
        mh.msg_controllen = sizeof(u.b);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(data) ? 0 : -EIO;
}

/* Receives one packet; a descriptor that came with it is closed. */
static int
recv_close(int sock)
{
    char data[16];
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } u;
    struct iovec iov = {data, sizeof(data)};
    struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
    ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    if (n <= 0)
        return -EIO;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int fd;
            memcpy(&fd, CMSG_DATA(c), sizeof(int));
            (void)close(fd);
        }
    return 0;
}

/* cpu_a / cpu_b: where this process and the echo run, -1 = anywhere. */
static int
raw(const char *name, int cpu_a, int cpu_b)
{
    int sv[2], devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    struct samples s;

    if (devnull < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        (void)close(sv[0]);
        if (cpu_b >= 0)
            (void)pin(cpu_b);
        while (recv_close(sv[1]) == 0)
            if (send_fd(sv[1], -1) < 0)
                break;
        _exit(0);
    }
    (void)close(sv[1]);
    cpu_set_t old;
    (void)sched_getaffinity(0, sizeof(old), &old);
    if (cpu_a >= 0)
        (void)pin(cpu_a);
    int r = samples_init(&s, arg_n);
    for (uint64_t i = 0; r == 0 && i < arg_warmup + arg_n; i++) {
        uint64_t t0 = bench_now_ns();
        if (send_fd(sv[0], devnull) < 0 || recv_close(sv[0]) < 0) {
            r = -EIO;
            break;
        }
        if (i >= arg_warmup)
            r = samples_add(&s, bench_now_ns() - t0);
    }
    (void)sched_setaffinity(0, sizeof(old), &old);
    (void)close(sv[0]);
    (void)close(devnull);
    (void)waitpid(pid, NULL, 0);
    if (r == 0)
        samples_report(&s, name);
    samples_done(&s);
    return r;
}

/* --- a jail host, here and in the parent --- */

static int
host_new(struct loop *loop, const char *tag, struct jail_host **ret, struct err *err)
{
    char state[512], lock[512];
    (void)snprintf(state, sizeof(state), "%s/%s-state", arg_dir, tag);
    (void)snprintf(lock, sizeof(lock), "%s/%s-uid.lock", arg_dir, tag);
    struct jail_host_config jc = {.loop = loop,
                                  .mode = JAIL_NS,
                                  .state_dir = state,
                                  .cgroup = "auto",
                                  .uid_lockfile = lock,
                                  /* apart from abxd's default pool and the tests' */
                                  .uid_base = !strcmp(tag, "local") ? 0x52000000u : 0x53000000u,
                                  .uid_slots = 2,
                                  .root_bytes = 64 << 20,
                                  .tmp_bytes = 64 << 20,
                                  .shm_bytes = 16 << 20};
    struct buf miss;
    int r = jail_host_new(&jc, ret, err);
    if (r < 0)
        return r;
    buf_init(&miss, 4096);
    r = jail_host_missing(*ret, &miss);
    if (r >= 0 && miss.len)
        r = err_set(err, EOPNOTSUPP, "isolation missing: %s", miss.data);
    buf_done(&miss);
    return r < 0 ? r : 0;
}

struct counts {
    int ready, exited, gone;
    int ready_r;
    int spawn_r; /* the last failed spawn's, 0 = none */
};

static void
run_until(struct loop *loop, const int *counter, int want)
{
    for (int i = 0; i < 1000 && *counter < want; i++)
        (void)loop_run_once(loop, 10);
}

/* In-process: jail_stats and jail_spawn on a local jail. */
static void
l_ready(struct jail *j, int r, const struct err *err, void *ud)
{
    struct counts *c = ud;
    (void)j;
    (void)err;
    c->ready++;
    c->ready_r = r;
}
/* A failure comes only here: through the parent, even a refusal does. */
static void
l_spawned(struct jail *j, uint64_t token, pid_t pid, int r, const char *step, void *ud)
{
    struct counts *c = ud;
    (void)j;
    (void)token;
    (void)pid;
    (void)step;
    if (r < 0)
        c->spawn_r = r;
}
static void
l_exited(struct jail *j, pid_t pid, int status, void *ud)
{
    struct counts *c = ud;
    (void)j;
    (void)pid;
    (void)status;
    c->exited++;
}
static void
l_gone(struct jail *j, void *ud)
{
    struct counts *c = ud;
    (void)j;
    c->gone++;
}

static int
spawn_fds(int fds[3])
{
    fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    fds[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
    fds[2] = open("/dev/null", O_WRONLY | O_CLOEXEC);
    return fds[0] < 0 || fds[1] < 0 || fds[2] < 0 ? -errno : 0;
}

/* One side's calls on its sandbox: jail.h in-process, or priv/client.h. */
struct side {
    const char *name; /* priv.stats_<name>, priv.spawn_<name> */
    int (*stats)(void *j, struct cgroup_stats *ret);
    int (*spawn)(void *j, uint64_t token, const struct jail_spawn *sp, struct err *err);
    void *j;
};

/* Times stats, then spawns of /bin/true until each exit is seen. */
static int
time_side(struct loop *loop, const struct side *sd, struct counts *c, struct err *err)
{
    static const char *const argv[] = {"/bin/true", NULL}, *const env[] = {NULL};
    struct samples st, sp, sc;
    char name[64];
    int fds[3], r = 0;

    if (spawn_fds(fds) < 0 || samples_init(&st, arg_n) < 0 || samples_init(&sp, arg_n) < 0 ||
        samples_init(&sc, arg_n) < 0)
        return -errno;
    for (uint64_t i = 0; r >= 0 && i < arg_warmup + arg_n; i++) {
        struct cgroup_stats cs;
        uint64_t t0 = bench_now_ns();
        r = sd->stats(sd->j, &cs);
        if (i >= arg_warmup)
            (void)samples_add(&st, bench_now_ns() - t0);
    }
    struct jail_spawn js = {.argv = argv, .env = env, .cwd = "/", .fds = {fds[0], fds[1], fds[2]}};
    for (uint64_t i = 0; r >= 0 && i < arg_warmup + arg_n; i++) {
        int want = c->exited + 1;
        uint64_t t0 = bench_now_ns();
        r = sd->spawn(sd->j, i + 1, &js, err);
        if (i >= arg_warmup)
            (void)samples_add(&sc, bench_now_ns() - t0);
        for (int k = 0; r >= 0 && k < 1000 && c->exited < want && !c->spawn_r; k++)
            (void)loop_run_once(loop, 10);
        if (r >= 0 && c->spawn_r)
            r = err_set(err, -c->spawn_r, "spawn %llu failed", (unsigned long long)(i + 1));
        if (r >= 0 && c->exited < want)
            r = -ETIMEDOUT;
        if (i >= arg_warmup)
            (void)samples_add(&sp, bench_now_ns() - t0);
    }
    if (r >= 0) {
        (void)snprintf(name, sizeof(name), "priv.stats_%s", sd->name);
        samples_report(&st, name);
        (void)snprintf(name, sizeof(name), "priv.spawn_%s", sd->name);
        samples_report(&sp, name);
        (void)snprintf(name, sizeof(name), "priv.spawn_call_%s", sd->name);
        samples_report(&sc, name);
    }
    samples_done(&st);
    samples_done(&sp);
    samples_done(&sc);
    for (int i = 0; i < 3; i++)
        (void)close(fds[i]);
    return r;
}

static int
l_stats(void *j, struct cgroup_stats *ret)
{
    return jail_stats(j, ret);
}
static int
l_spawn(void *j, uint64_t token, const struct jail_spawn *sp, struct err *err)
{
    return jail_spawn(j, token, sp, err);
}
static int
p_stats(void *j, struct cgroup_stats *ret)
{
    return priv_jail_stats(j, ret);
}
static int
p_spawn(void *j, uint64_t token, const struct jail_spawn *sp, struct err *err)
{
    return priv_jail_spawn(j, token, sp, err);
}

static int
local(struct loop *loop)
{
    static const struct jail_callbacks cb = {l_ready, l_spawned, l_exited, l_gone};
    struct jail_host *h = NULL;
    struct jail *j = NULL;
    struct counts c = {0};
    struct err err = {0};
    struct jail_limits lim = {0};
    int r;

    if ((r = host_new(loop, "local", &h, &err)) < 0)
        return fail("local jail host", &err, r);
    if ((r = jail_create(h, loop, "benchlocal", &lim, NULL, &cb, &c, &j, &err)) < 0)
        return fail("local create", &err, r);
    run_until(loop, &c.ready, 1);
    if (c.ready_r < 0)
        return fail("local ready", NULL, c.ready_r);
    struct side sd = {"local", l_stats, l_spawn, j};
    r = time_side(loop, &sd, &c, &err);
    jail_kill(j);
    run_until(loop, &c.gone, 1);
    jail_free(j);
    jail_host_flush(h);
    jail_host_free(h);
    return r < 0 ? fail("local", &err, r) : 0;
}

/* --- through the parent --- */

static _noreturn_ void
serve(int sock)
{
    struct loop *loop = NULL;
    struct jail_host *h = NULL;
    struct priv_parent *p = NULL;
    struct err err = {0};

    if (loop_new(&loop) < 0 || host_new(loop, "parent", &h, &err) < 0) {
        fprintf(stderr, "priv-bench: parent: %s\n", err.msg);
        _exit(2);
    }
    struct priv_parent_config pc = {
            .host = h, .loop = loop, .peer_uid = getuid(), .max_sandboxes = 2, .idmap_root_fd = -1};
    if (priv_parent_new(&pc, &p, &err) < 0 || priv_parent_serve(p, sock, &err) < 0) {
        fprintf(stderr, "priv-bench: parent: %s\n", err.msg);
        _exit(3);
    }
    /* Until the client hangs up. */
    while (priv_parent_conns(p) > 0)
        (void)loop_run_once(loop, 100);
    p = priv_parent_free(p);
    jail_host_flush(h);
    jail_host_free(h);
    _exit(0);
}

static void
p_ready(struct priv_jail *j, int r, const struct err *err, void *ud)
{
    l_ready(NULL, r, err, ud);
    (void)j;
}
static void
p_spawned(struct priv_jail *j, uint64_t token, pid_t pid, int r, const char *step, void *ud)
{
    (void)j;
    l_spawned(NULL, token, pid, r, step, ud);
}
static void
p_exited(struct priv_jail *j, pid_t pid, int status, void *ud)
{
    (void)j;
    l_exited(NULL, pid, status, ud);
}
static void
p_gone(struct priv_jail *j, void *ud)
{
    (void)j;
    l_gone(NULL, ud);
}

static int
through_parent(struct loop *loop)
{
    static const struct priv_jail_callbacks cb = {p_ready, p_spawned, p_exited, p_gone};
    struct priv_client *cl = NULL;
    struct priv_jail *j = NULL;
    struct counts c = {0};
    struct err err = {0};
    struct jail_limits lim = {0};
    int sv[2], r;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return fail("socketpair", NULL, -errno);
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork", NULL, -errno);
    if (pid == 0) {
        (void)close(sv[0]);
        serve(sv[1]);
    }
    (void)close(sv[1]);
    if ((r = priv_client_new(loop, sv[0], &cl, &err)) < 0)
        return fail("client", &err, r);
    if ((r = priv_jail_create(cl, "benchpriv", &lim, NULL, &cb, &c, &j, &err)) < 0)
        return fail("create through the parent", &err, r);
    run_until(loop, &c.ready, 1);
    if (c.ready_r < 0)
        return fail("ready through the parent", NULL, c.ready_r);
    struct side sd = {"parent", p_stats, p_spawn, j};
    r = time_side(loop, &sd, &c, &err);
    priv_jail_kill(j);
    run_until(loop, &c.gone, 1);
    priv_jail_free(j);
    cl = priv_client_free(cl); /* hangs up: the parent ends */
    (void)waitpid(pid, NULL, 0);
    return r < 0 ? fail("through the parent", &err, r) : 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {{"dir", required_argument, NULL, 'd'},
                                         {"n", required_argument, NULL, 'n'},
                                         {"warmup", required_argument, NULL, 'w'},
                                         {NULL, 0, NULL, 0}};
    struct loop *loop = NULL;
    int o, rc = 0;

    while ((o = getopt_long(argc, argv, "d:n:w:", opts, NULL)) != -1) {
        switch (o) {
        case 'd':
            arg_dir = optarg;
            break;
        case 'n':
            if (bench_parse_u64(optarg, &arg_n) < 0 || !arg_n)
                return fail("-n", NULL, -EINVAL);
            break;
        case 'w':
            if (bench_parse_u64(optarg, &arg_warmup) < 0)
                return fail("--warmup", NULL, -EINVAL);
            break;
        default:
            fprintf(stderr, "usage: priv-bench --dir DIR [-n N] [--warmup N]\n");
            return 2;
        }
    }
    if (!arg_dir)
        return fail("--dir", NULL, -EINVAL);
    if (getuid() != 0)
        return fail("needs root", NULL, -EPERM);
    (void)signal(SIGPIPE, SIG_IGN);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (raw("priv.raw", -1, -1) < 0 || raw("priv.raw_one_cpu", 0, 0) < 0 ||
        (cpus > 1 && raw("priv.raw_two_cpus", 0, 1) < 0))
        return fail("raw round trip", NULL, -EIO);
    if (loop_new(&loop) < 0)
        return fail("loop", NULL, -ENOMEM);
    rc = local(loop) || through_parent(loop);
    return rc;
}
