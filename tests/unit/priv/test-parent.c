/*
 * test-parent.c - the privileged parent (priv/parent.h) with a real jail
 * host, served in a child process over a unix socket, driven by the
 * client (priv/client.h) and by raw packets standing in for a taken-over
 * network process.
 *
 * As root with namespaces only (else exit 77). The good client creates a
 * sandbox, runs /bin/true with pipes (exit 0), opens its terminal, a
 * socket in its network, a file helper (a fake one), an idmapped mount;
 * then the hostile peer tries another connection's id, an id never made,
 * spawn and kill after kill (every refused SPAWN answered by exactly one
 * EV_SPAWNED with its token and errno, and no reply; through the client
 * the refusal comes as the spawned callback, also amid calls that wait),
 * host paths as layer names, an oversized
 * body, a cut header, wrong descriptor counts, directories as stdio, an
 * unknown type, requests before HELLO, a flood without reading, a peer of
 * another uid. After every case the good client's sandbox still answers
 * and its init lives. Finally kill -> gone.
 *
 * Re-adoption: a network process (a child) creates a sandbox, spawns a
 * long sleep, stores a record and is killed -9; a new client lists it
 * (with its record), adopts it, kills the sleep through SIGNAL and gets
 * its EXITED, spawns anew, also with argv past a body (SPAWN_LARGE).
 * Hostile: ADOPT of a live-owned, a never-made id and twice, an
 * oversized record, KILL_HELPER of another sandbox's helper or a made-up
 * number, SPAWN_LARGE with an unsealed or oversized memfd, a regular
 * file, a pipe, a block that does not decode, a directory as stdio (each
 * one EV_SPAWNED), a body that does not decode (the connection ends). An
 * orphan nobody adopts is killed after the grace. A worker thread opens
 * and kills helpers through the thread-safe calls while the loop spawns,
 * has a spawn refused before each, and handles events.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv/client.h"
#include "priv/parent.h"
#include "priv/serve.h"
#include "util/fd.h"
#include "util/fdpass.h"
#include "util/timeutil.h"

#define GRACE_MS 3000

static char dir[64], sock_path[100];
static pid_t server = -1;
static int ctl = -1; /* closing it stops the server */

/* --- the server: a jail host and the parent, in a child process --- */

static int
fake_helper(void *ud, struct jail *j, int view_fd, bool as_root, int *ret_sock, int *ret_pidfd,
            struct err *err)
{
    int sv[2];
    (void)ud;
    (void)j;
    (void)view_fd;
    (void)as_root;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return err_setx(err, errno, "socketpair");
    pid_t pid = fork();
    if (pid == 0) {
        char b[64];
        safe_close(sv[0]); /* else it never sees its peer's EOF */
        while (read(sv[1], b, sizeof(b)) > 0)
            ;
        _exit(0);
    }
    safe_close(sv[1]);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    *ret_sock = sv[0];
    *ret_pidfd = pidfd;
    return pidfd < 0 ? -errno : 0;
}

/* serve.h's configure: the fake helper, and a short orphan grace. */
static void
configure(struct jail_host *h, struct priv_parent_config *pc)
{
    (void)h;
    pc->start_helper = fake_helper;
    pc->orphan_grace_ms = GRACE_MS;
}

static _noreturn_ void
serve(int ready_fd, int ctl_fd)
{
    static const struct serve_opts o = {
            .uid_base = 0x51000000u, .uid_slots = 4, .configure = configure};
    serve_parent(dir, sock_path, ready_fd, ctl_fd, &o);
}

/* --- the good client --- */

struct watch {
    int ready, spawned, exited, gone;
    int ready_r, spawned_r;
    uint64_t token;
    pid_t pid;
    int status;
};

static void
w_ready(struct priv_jail *j, int r, const struct err *err, void *ud)
{
    struct watch *w = ud;
    (void)j;
    if (r < 0)
        fprintf(stderr, "ready: %s\n", err ? err->msg : "");
    w->ready++;
    w->ready_r = r;
}

static void
w_spawned(struct priv_jail *j, uint64_t token, pid_t pid, int r, const char *step, void *ud)
{
    struct watch *w = ud;
    (void)j;
    (void)step;
    w->spawned++;
    w->spawned_r = r;
    w->token = token;
    w->pid = pid;
}

static void
w_exited(struct priv_jail *j, pid_t pid, int status, void *ud)
{
    struct watch *w = ud;
    (void)j;
    if (pid == w->pid) {
        w->exited++;
        w->status = status;
    }
}

static void
w_gone(struct priv_jail *j, void *ud)
{
    struct watch *w = ud;
    (void)j;
    w->gone++;
}

static const struct priv_jail_callbacks wcb = {w_ready, w_spawned, w_exited, w_gone};

static struct loop *loop;
static struct priv_client *good;
static struct priv_jail *gj;
static struct watch gw;

static void
run_until(int *counter, int want)
{
    uint64_t end = now_msec() + 30000;
    while (*counter < want && now_msec() < end)
        (void)loop_run_once(loop, 100);
    assert_int_equal(*counter, want);
}

static int
dial(void)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* The good client's sandbox still answers and its init lives. */
static void
check_alive(void)
{
    struct cgroup_stats st;
    (void)loop_run_once(loop, 0);
    assert_true(priv_client_connected(good));
    assert_int_equal(priv_jail_stats(gj, &st), 0);
    assert_true(priv_jail_is_ready(gj));
    assert_int_equal(kill(priv_jail_init_pid(gj), 0), 0);
}

static void
check_alive_j(struct priv_client *c, struct priv_jail *j)
{
    struct cgroup_stats st;
    (void)loop_run_once(loop, 0);
    assert_true(priv_client_connected(c));
    assert_int_equal(priv_jail_stats(j, &st), 0);
    assert_int_equal(kill(priv_jail_init_pid(j), 0), 0);
}

/* --- raw packets --- */

static char rbuf[PRIV_MSG_MAX * 2];
static struct priv_msg rm;

static void
raw_send(int fd, const struct priv_msg *m, const int *fds, unsigned nfds)
{
    long n = priv_encode(rbuf, sizeof(rbuf), m);
    assert_true(n > 0);
    assert_int_equal(fdpass_send(fd, rbuf, (size_t)n, fds, nfds, 0), 0);
}

/* The next answer that is not an event (events are skipped); 0 if the
 * parent ended the connection. fds has room for PRIV_FDS_MAX. */
static int
raw_answer(int fd, struct priv_msg *ret, int fds[static PRIV_FDS_MAX])
{
    for (;;) {
        unsigned nfds;
        ssize_t n = fdpass_recv(fd, rbuf, sizeof(rbuf), 0, fds, PRIV_FDS_MAX, &nfds);
        if (n <= 0)
            return 0;
        assert_int_equal(priv_decode_answer(rbuf, (size_t)n, nfds, ret), 0);
        if (!priv_is_event(ret->type))
            return 1;
        fdpass_close(fds, nfds);
    }
}

static int
hostile_hello(void)
{
    int fd = dial();
    int fds[PRIV_FDS_MAX];
    struct priv_msg m = {.type = PRIV_HELLO, .seq = 1, .a = PRIV_VERSION};
    raw_send(fd, &m, NULL, 0);
    assert_int_equal(raw_answer(fd, &rm, fds), 1);
    assert_int_equal(rm.type, PRIV_R_HELLO);
    return fd;
}

static void
expect_err(int fd, int errnum)
{
    int fds[PRIV_FDS_MAX];
    assert_int_equal(raw_answer(fd, &rm, fds), 1);
    assert_int_equal(rm.type, PRIV_R_ERR);
    assert_int_equal(rm.errnum, errnum);
}

static bool saw_ready; /* an EV_READY went by in expect_spawned() */

/* A SPAWN's one answer: reads until the EV_SPAWNED of token (a reply
 * before it fails: SPAWN gets none) and checks its errno is one of a or b
 * with pid 0 and a step; then sends STATS of a sandbox never made (seq
 * probe) and reads to its R_ERR. A refusal is made at once, so a second
 * EV_SPAWNED of token, or any reply to the SPAWN, would come before it:
 * exactly one. */
static void
expect_spawned(int fd, uint64_t token, int a, int b, uint32_t probe)
{
    int fds[PRIV_FDS_MAX];
    unsigned nf;
    int seen = 0;
    struct priv_msg pm = {.type = PRIV_STATS, .seq = probe, .id = "never"};

    while (!seen) {
        ssize_t n = fdpass_recv(fd, rbuf, sizeof(rbuf), 0, fds, PRIV_FDS_MAX, &nf);
        assert_true(n > 0);
        assert_int_equal(priv_decode_answer(rbuf, (size_t)n, nf, &rm), 0);
        fdpass_close(fds, nf);
        assert_true(priv_is_event(rm.type));
        saw_ready |= rm.type == PRIV_EV_READY;
        if (rm.type == PRIV_EV_SPAWNED && rm.u64 == token)
            seen++;
    }
    if (rm.errnum != a && rm.errnum != b)
        fail_msg("EV_SPAWNED errno %d, not %d or %d (step '%s')", rm.errnum, a, b, rm.text);
    assert_int_equal(rm.pid, 0);
    assert_true(rm.text[0]);
    raw_send(fd, &pm, NULL, 0);
    for (;;) {
        ssize_t n = fdpass_recv(fd, rbuf, sizeof(rbuf), 0, fds, PRIV_FDS_MAX, &nf);
        assert_true(n > 0);
        assert_int_equal(priv_decode_answer(rbuf, (size_t)n, nf, &rm), 0);
        fdpass_close(fds, nf);
        saw_ready |= rm.type == PRIV_EV_READY;
        if (rm.type == PRIV_EV_SPAWNED)
            assert_true(rm.u64 != token);
        if (priv_is_event(rm.type))
            continue;
        assert_int_equal(rm.type, PRIV_R_ERR);
        assert_int_equal(rm.seq, probe);
        assert_int_equal(rm.errnum, ENOENT);
        return;
    }
}

static void
expect_end(int fd)
{
    int fds[PRIV_FDS_MAX];
    struct timeval tv = {.tv_sec = 10};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(raw_answer(fd, &rm, fds), 0);
    safe_close(fd);
}

/* --- the test --- */

/* --- layers: an area's writable layer becomes a layer sandboxes stack --- */

struct layer_wait {
    int n, r;
    char msg[256];
};

static void
on_layer(int r, const struct err *err, void *ud)
{
    struct layer_wait *w = ud;
    w->n++;
    w->r = r;
    (void)snprintf(w->msg, sizeof(w->msg), "%s", err ? err->msg : "");
}

/* Runs argv as the sandbox's root in j; its exit status. */
static int
run_in(struct priv_jail *j, struct watch *w, const char *const *argv)
{
    struct err err = {0};
    int p[2];
    static const char *const env[] = {"PATH=/usr/bin:/bin", NULL};
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    struct jail_spawn sp = {
            .root = true, .cwd = "/", .argv = argv, .env = env, .fds = {p[0], p[1], p[1]}};
    int spawned = w->spawned, exited = w->exited;
    assert_int_equal(priv_jail_spawn(j, 700 + (uint64_t)spawned, &sp, &err), 0);
    run_until(&w->spawned, spawned + 1);
    assert_int_equal(w->spawned_r, 0);
    run_until(&w->exited, exited + 1);
    safe_close(p[0]);
    safe_close(p[1]);
    return w->status;
}

static void
test_layers(void)
{
    struct err err = {0};
    struct layer_wait lw = {0};
    struct watch bw = {0}, uw = {0};
    struct priv_jail *bj = NULL, *uj = NULL;
    char path[600];
    struct stat st;

    /* no such area; an area no sandbox wrote into */
    assert_int_equal(priv_layer_install(good, "build-none", "lt1", on_layer, &lw, &err), -ENOENT);
    assert_int_equal(priv_area_create(good, "build-lt", 0, &err), 0);
    assert_int_equal(priv_layer_install(good, "build-lt", "lt1", on_layer, &lw, &err), -EBUSY);
    assert_int_equal(priv_layer_install(good, "build-lt", "../x", on_layer, &lw, &err), -EINVAL);
    /* a build sandbox writes into it: busy while it lives */
    const char *const layers_none[] = {NULL};
    struct priv_fs fs = {.layers = layers_none, .upper = "build-lt"};
    struct jail_limits lim = {.memory_bytes = 256 << 20, .pids = 64};
    assert_int_equal(priv_jail_create(good, "plb", &lim, &fs, &wcb, &bw, &bj, &err), 0);
    run_until(&bw.ready, 1);
    assert_int_equal(bw.ready_r, 0);
    static const char *const write_argv[] = {
            "/bin/sh", "-c",
            "mkdir -p /usr/local/lt && echo built > /usr/local/lt/f && chmod 4755 /usr/local/lt/f",
            NULL};
    int status = run_in(bj, &bw, write_argv);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(priv_layer_install(good, "build-lt", "lt1", on_layer, &lw, &err), -EBUSY);
    assert_int_equal(priv_area_destroy(good, "build-lt", &err), -EBUSY);
    priv_jail_kill(bj);
    run_until(&bw.gone, 1);
    priv_jail_free(bj);
    /* a top that leads elsewhere (as if the build had made opt/ a link to
     * the host's root) is replaced by a directory */
    char opt[600], optx[610];
    (void)snprintf(opt, sizeof(opt), "%s/state/sandboxes/build-lt/fs/opt", dir);
    (void)snprintf(optx, sizeof(optx), "%s.x", opt);
    (void)rename(opt, optx);
    assert_int_equal(symlink("/", opt), 0);
    /* installed: the sandbox's root's files are root's, set-id bits gone */
    assert_int_equal(priv_layer_install(good, "build-lt", "lt1", on_layer, &lw, &err), 0);
    assert_int_equal(priv_layer_install(good, "build-lt", "lt1", on_layer, &lw, &err), -EEXIST);
    run_until(&lw.n, 1);
    assert_int_equal(lw.r, 0);
    (void)snprintf(path, sizeof(path), "%s/state/" JAIL_LAYERS_DIR "/lt1/usr/local/lt/f", dir);
    assert_int_equal(lstat(path, &st), 0);
    assert_int_equal(st.st_uid, 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    (void)snprintf(path, sizeof(path), "%s/state/" JAIL_LAYERS_DIR "/lt1/etc", dir);
    assert_int_equal(lstat(path, &st), 0);
    (void)snprintf(path, sizeof(path), "%s/state/" JAIL_LAYERS_DIR "/lt1/opt", dir);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    /* the same name again: refused by the worker, the layer unchanged */
    assert_int_equal(priv_layer_install(good, "build-lt", "lt1", on_layer, &lw, &err), 0);
    run_until(&lw.n, 2);
    assert_true(lw.r == -EEXIST || lw.r == -ENOENT);
    assert_int_equal(priv_area_destroy(good, "build-lt", &err), 0);
    /* a sandbox stacks it; a layer that is not there is refused */
    const char *const stack[] = {"lt1"};
    struct priv_fs ufs = {.layers = stack, .nlayers = 1};
    const char *const missing[] = {"lt-none"};
    struct priv_fs mfs = {.layers = missing, .nlayers = 1};
    assert_int_equal(priv_jail_create(good, "plm", &lim, &mfs, &wcb, &uw, &uj, &err), -ENOENT);
    assert_int_equal(priv_jail_create(good, "plu", &lim, &ufs, &wcb, &uw, &uj, &err), 0);
    run_until(&uw.ready, 1);
    assert_int_equal(uw.ready_r, 0);
    static const char *const read_argv[] = {"/bin/sh", "-c",
                                            "test \"$(cat /usr/local/lt/f)\" = built", NULL};
    status = run_in(uj, &uw, read_argv);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    priv_jail_kill(uj);
    run_until(&uw.gone, 1);
    priv_jail_free(uj);
}

static void
test_parent(void **state)
{
    (void)state;
    struct err err = {0};
    int pin[2], pout[2];

    assert_int_equal(priv_client_new(loop, dial(), &good, &err), 0);
    assert_int_equal(priv_client_host(good)->mode, JAIL_NS);
    assert_int_equal(priv_client_host(good)->uid_slots, 4);
    struct jail_limits lim = {.memory_bytes = 256 << 20, .pids = 64};
    assert_int_equal(priv_jail_create(good, "pa1", &lim, NULL, &wcb, &gw, &gj, &err), 0);
    assert_int_equal(priv_jail_create(good, "pa1", &lim, NULL, &wcb, &gw, &gj, &err), -EEXIST);
    run_until(&gw.ready, 1);
    assert_int_equal(gw.ready_r, 0);
    assert_string_equal(priv_jail_home(gj, false), "/home/user");

    /* /bin/true with pipes */
    assert_int_equal(pipe2(pin, O_CLOEXEC), 0);
    assert_int_equal(pipe2(pout, O_CLOEXEC), 0);
    static const char *const argv[] = {"/bin/true", NULL};
    static const char *const env[] = {"PATH=/usr/bin:/bin", NULL};
    struct jail_spawn sp = {
            .cwd = "/", .argv = argv, .env = env, .fds = {pin[0], pout[1], pout[1]}};
    assert_int_equal(priv_jail_spawn(gj, 7, &sp, &err), 0);
    run_until(&gw.spawned, 1);
    assert_int_equal(gw.spawned_r, 0);
    assert_true(gw.pid > 0);
    assert_int_equal(gw.token, 7);
    run_until(&gw.exited, 1);
    assert_true(WIFEXITED(gw.status) && WEXITSTATUS(gw.status) == 0);
    check_alive();
    assert_int_equal(gw.spawned, 1); /* exactly one */

    /* The parent's refusal comes as the callback, not the return: a
     * directory as stdout. The STATS right after reads the refusal's
     * EV_SPAWNED as an event and still gets its own reply. */
    int dirfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    sp.fds[1] = dirfd;
    assert_int_equal(priv_jail_spawn(gj, 8, &sp, &err), 0);
    check_alive();
    run_until(&gw.spawned, 2);
    assert_int_equal(gw.spawned_r, -EINVAL);
    assert_int_equal(gw.token, 8);
    assert_int_equal(gw.pid, 0);
    /* many in a row, each refused once, between calls that wait */
    for (uint64_t t = 9; t < 9 + 50; t++) {
        assert_int_equal(priv_jail_spawn(gj, t, &sp, &err), 0);
        if (t % 5 == 0)
            check_alive();
    }
    run_until(&gw.spawned, 2 + 50);
    assert_int_equal(gw.token, 58); /* in order */
    check_alive();
    assert_int_equal(gw.spawned, 2 + 50);
    safe_close(dirfd);
    sp.fds[1] = pout[1];
    safe_close(pin[0]);
    safe_close(pin[1]);
    safe_close(pout[0]);
    safe_close(pout[1]);

    /* descriptors from the parent */
    int a = -1, b = -1;
    assert_int_equal(priv_jail_open_pty(gj, false, 24, 80, &a, &b, &err), 0);
    assert_true(isatty(b));
    safe_close(a);
    safe_close(b);
    assert_int_equal(priv_jail_netns_socket(gj, AF_INET, SOCK_STREAM, &a, &err), 0);
    int dom = 0;
    socklen_t dl = sizeof(dom);
    assert_int_equal(getsockopt(a, SOL_SOCKET, SO_DOMAIN, &dom, &dl), 0);
    assert_int_equal(dom, AF_INET);
    safe_close(a);
    assert_int_equal(priv_jail_open_helper(gj, true, &a, &b, &err), 0);
    safe_close(a);
    safe_close(b);
    /* idmap: never a directory outside the configured root */
    int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(priv_jail_idmap(gj, root, &a, &err), -EPERM);
    safe_close(root);
    char idm[300];
    (void)snprintf(idm, sizeof(idm), "%s/idmap", dir);
    int idfd = open(idm, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int r = priv_jail_idmap(gj, idfd, &a, &err);
    assert_true(r == 0 || (r != -EPERM && r != -ENOTCONN));
    if (r == 0)
        safe_close(a);
    /* tree_empty: never the root itself nor anything outside it; a
     * directory below it is emptied in the background */
    assert_int_equal(priv_client_tree_empty(good, idfd, &err), -EPERM);
    root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(priv_client_tree_empty(good, root, &err), -EPERM);
    safe_close(root);
    char sub[400], deep[500];
    (void)snprintf(sub, sizeof(sub), "%s/t", idm);
    (void)snprintf(deep, sizeof(deep), "%s/t/a/b", idm);
    assert_int_equal(mkdir_p(deep, 0755), 0);
    int keep = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(keep >= 0);
    assert_int_equal(priv_client_tree_empty(good, keep, &err), 0);
    for (int i = 0; i < 200 && access(deep, F_OK) == 0; i++)
        (void)usleep(10000);
    assert_int_equal(access(deep, F_OK), -1);
    assert_int_equal(access(sub, F_OK), 0); /* emptied, not removed */
    safe_close(keep);
    (void)rmdir(sub);
    safe_close(idfd);
    uint64_t used;
    assert_int_equal(priv_area_usage(good, "build-x", &used), -ENOENT);
    check_alive();
    test_layers();
    check_alive();

    /* --- the hostile peer --- */
    int fds3[PRIV_FDS_MAX];
    int h = hostile_hello();
    /* another connection's sandbox, one never made */
    struct priv_msg m = {.type = PRIV_STATS, .seq = 2, .id = "pa1"};
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT);
    m.id = "never";
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT);
    m = (struct priv_msg){.type = PRIV_KILL, .seq = 3, .id = "pa1"};
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT);
    check_alive();
    /* its own sandbox: directories as stdio, then spawn and kill after kill */
    m = (struct priv_msg){.type = PRIV_CREATE, .seq = 4, .id = "pb1"};
    raw_send(h, &m, NULL, 0);
    assert_int_equal(raw_answer(h, &rm, fds3), 1);
    assert_int_equal(rm.type, PRIV_R_OK);
    static struct priv_msg sm;
    memset(&sm, 0, sizeof(sm));
    sm.type = PRIV_SPAWN;
    sm.seq = 5;
    sm.id = "pb1";
    sm.cwd = "/";
    sm.argv[0] = "/bin/true";
    sm.u64 = 50;
    int d = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int dirs[3] = {d, d, d};
    raw_send(h, &sm, dirs, 3);
    saw_ready = false;
    expect_spawned(h, 50, EBUSY, EINVAL, 100); /* not ready yet, or not a pipe */
    if (!saw_ready) {
        /* wait for its ready */
        unsigned nf;
        for (;;) {
            ssize_t n = fdpass_recv(h, rbuf, sizeof(rbuf), 0, fds3, 3, &nf);
            assert_true(n > 0);
            assert_int_equal(priv_decode_answer(rbuf, (size_t)n, nf, &rm), 0);
            if (rm.type == PRIV_EV_READY)
                break;
        }
        assert_int_equal(rm.errnum, 0);
    }
    sm.seq = 6;
    sm.u64 = 51;
    raw_send(h, &sm, dirs, 3);
    expect_spawned(h, 51, EINVAL, EINVAL, 101);
    /* another connection's sandbox, one never made: refused alike */
    sm.id = "pa1";
    sm.u64 = 52;
    raw_send(h, &sm, dirs, 3);
    expect_spawned(h, 52, ENOENT, ENOENT, 102);
    sm.id = "never";
    sm.u64 = 53;
    raw_send(h, &sm, dirs, 3);
    expect_spawned(h, 53, ENOENT, ENOENT, 103);
    sm.id = "pb1";
    m = (struct priv_msg){.type = PRIV_KILL, .seq = 7, .id = "pb1"};
    raw_send(h, &m, NULL, 0);
    assert_int_equal(raw_answer(h, &rm, fds3), 1);
    assert_int_equal(rm.type, PRIV_R_OK);
    m.seq = 8;
    raw_send(h, &m, NULL, 0);
    expect_err(h, ESRCH);
    sm.seq = 9;
    sm.u64 = 54;
    assert_int_equal(pipe2(pin, O_CLOEXEC), 0);
    int pp[3] = {pin[0], pin[1], pin[1]};
    raw_send(h, &sm, pp, 3);
    expect_spawned(h, 54, ESRCH, ENOENT, 104); /* dying, or gone already */
    safe_close(pin[0]);
    safe_close(pin[1]);
    check_alive();
    /* layers: another connection's area, one never made; a sandbox's
     * file system from an area it does not own */
    assert_int_equal(priv_area_create(good, "build-good", 0, &err), 0);
    m = (struct priv_msg){
            .type = PRIV_LAYER_INSTALL, .seq = 9, .name = "build-good", .layer = "evil"};
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT);
    m.name = "build-never";
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT);
    m = (struct priv_msg){.type = PRIV_CREATE, .seq = 9, .id = "pb2", .upper = "build-good"};
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT);
    const char *const other[] = {"lt1-none"};
    m = (struct priv_msg){.type = PRIV_CREATE, .seq = 9, .id = "pb2", .nlayers = 1};
    m.layers[0] = other[0];
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT);
    assert_int_equal(priv_area_destroy(good, "build-good", &err), 0);
    check_alive();
    /* host paths as layer names: ended */
    {
        char body[256];
        size_t k = 0;
        uint32_t l = 3;
        memcpy(body, &l, 4);
        memcpy(body + 4, "px1", 4);
        k = 8;
        memset(body + k, 0, 24);
        k += 24;
        l = 1;
        memcpy(body + k, &l, 4);
        k += 4;
        l = 9;
        memcpy(body + k, &l, 4);
        memcpy(body + k + 4, "../../etc", 10);
        k += 14;
        l = 0;
        memcpy(body + k, &l, 4);
        body[k + 4] = 0;
        k += 5;
        memset(body + k, 0, 8);
        k += 8;
        struct priv_hdr hd = {PRIV_MAGIC, PRIV_CREATE, 0, (uint32_t)k, 10};
        memcpy(rbuf, &hd, sizeof(hd));
        memcpy(rbuf + sizeof(hd), body, k);
        assert_int_equal(fdpass_send(h, rbuf, sizeof(hd) + k, NULL, 0, 0), 0);
        expect_end(h);
    }
    check_alive();
    /* an oversized body */
    h = hostile_hello();
    {
        struct priv_hdr hd = {PRIV_MAGIC, PRIV_STATS, 0, PRIV_BODY_MAX + 100, 2};
        memset(rbuf, 'a', sizeof(rbuf));
        memcpy(rbuf, &hd, sizeof(hd));
        assert_int_equal(fdpass_send(h, rbuf, sizeof(hd) + PRIV_BODY_MAX + 100, NULL, 0, 0), 0);
        expect_end(h);
    }
    check_alive();
    /* a cut header */
    h = hostile_hello();
    assert_int_equal(fdpass_send(h, rbuf, 10, NULL, 0, 0), 0);
    expect_end(h);
    check_alive();
    /* too many descriptors, too few */
    h = hostile_hello();
    m = (struct priv_msg){.type = PRIV_STATS, .seq = 2, .id = "pa1"};
    {
        long n = priv_encode(rbuf, sizeof(rbuf), &m);
        int one[1] = {0};
        assert_int_equal(fdpass_send(h, rbuf, (size_t)n, one, 1, 0), 0);
        expect_end(h);
    }
    check_alive();
    h = hostile_hello();
    {
        long n = priv_encode(rbuf, sizeof(rbuf), &sm);
        int two[2] = {0, 1};
        assert_int_equal(fdpass_send(h, rbuf, (size_t)n, two, 2, 0), 0);
        expect_end(h);
    }
    check_alive();
    /* an unknown type */
    h = hostile_hello();
    {
        struct priv_hdr hd = {PRIV_MAGIC, 77, 0, 0, 3};
        assert_int_equal(fdpass_send(h, &hd, sizeof(hd), NULL, 0, 0), 0);
        expect_end(h);
    }
    check_alive();
    /* a request before HELLO */
    h = dial();
    m = (struct priv_msg){.type = PRIV_STATS, .seq = 1, .id = "pa1"};
    raw_send(h, &m, NULL, 0);
    expect_end(h);
    check_alive();
    /* a flood without reading: the parent drops the connection, not grows */
    h = hostile_hello();
    {
        long n;
        m = (struct priv_msg){.type = PRIV_STATS, .seq = 1, .id = "never"};
        n = priv_encode(rbuf, sizeof(rbuf), &m);
        int sent = 0;
        bool ended = false;
        for (int i = 0; i < 20000 && !ended; i++) {
            int rr = fdpass_send(h, rbuf, (size_t)n, NULL, 0, MSG_DONTWAIT);
            if (rr == -EAGAIN) {
                usleep(1000);
                continue;
            }
            if (rr < 0)
                ended = true;
            else
                sent++;
        }
        /* read what came: the connection ends before every request got its answer */
        int answers = 0;
        int fds[PRIV_FDS_MAX];
        struct timeval tv = {.tv_sec = 10};
        (void)setsockopt(h, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        while (raw_answer(h, &rm, fds) == 1)
            answers++;
        assert_true(answers < sent);
        safe_close(h);
    }
    check_alive();
    /* a peer of another uid */
    {
        pid_t pid = fork();
        if (pid == 0) {
            if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                _exit(2);
            int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
            struct sockaddr_un sa = {.sun_family = AF_UNIX};
            memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
            if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                _exit(3);
            struct priv_msg hm = {.type = PRIV_HELLO, .seq = 1, .a = PRIV_VERSION};
            long n = priv_encode(rbuf, sizeof(rbuf), &hm);
            (void)send(fd, rbuf, (size_t)n, MSG_NOSIGNAL);
            char c;
            _exit(recv(fd, &c, 1, 0) <= 0 ? 0 : 1);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    check_alive();

    /* kill -> gone */
    priv_jail_kill(gj);
    run_until(&gw.gone, 1);
    assert_false(priv_jail_is_ready(gj));
    struct cgroup_stats st;
    assert_int_equal(priv_jail_stats(gj, &st), -ESRCH);
    assert_int_equal(priv_jail_spawn(gj, 99, &sp, &err), -ESRCH);
    priv_jail_free(gj);
    good = priv_client_free(good);
}

/* --- re-adoption --- */

#define REFUSED_TOKEN 10000 /* test_adopt's spawns from here on are refused */

struct count {
    int ready, spawned, spawn_err, exited, gone;
    int refused, mixed; /* refusals of REFUSED_TOKEN+ spawns; outcomes of the wrong kind */
    pid_t last_pid;
    int last_status;
};

static void
c_ready(struct priv_jail *j, int r, const struct err *err, void *ud)
{
    struct count *k = ud;
    (void)j;
    (void)err;
    k->ready += r == 0;
}

static void
c_spawned(struct priv_jail *j, uint64_t token, pid_t pid, int r, const char *step, void *ud)
{
    struct count *k = ud;
    (void)j;
    (void)step;
    if (token >= REFUSED_TOKEN) {
        k->refused++;
        k->mixed += r != -EINVAL || pid != 0;
        return;
    }
    k->spawned++;
    k->spawn_err += r != 0;
    k->last_pid = pid;
}

static void
c_exited(struct priv_jail *j, pid_t pid, int status, void *ud)
{
    struct count *k = ud;
    (void)j;
    k->exited++;
    k->last_pid = pid;
    k->last_status = status;
}

static void
c_gone(struct priv_jail *j, void *ud)
{
    struct count *k = ud;
    (void)j;
    k->gone++;
}

static const struct priv_jail_callbacks ccb = {c_ready, c_spawned, c_exited, c_gone};

/* The network process that dies: creates ad1, runs a sleep, stores its
 * pid in the record, says so on out and waits for its SIGKILL. */
static _noreturn_ void
doomed(int out)
{
    struct loop *l = NULL;
    struct priv_client *c = NULL;
    struct priv_jail *j = NULL;
    struct count k = {0};
    int p[2];
    char rec[64];
    if (loop_new(&l) < 0 || priv_client_new(l, dial(), &c, NULL) < 0)
        _exit(2);
    struct jail_limits lim = {.memory_bytes = 256 << 20, .pids = 64};
    if (priv_jail_create(c, "ad1", &lim, NULL, &ccb, &k, &j, NULL) < 0)
        _exit(3);
    for (uint64_t end = now_msec() + 30000; !k.ready && now_msec() < end;)
        (void)loop_run_once(l, 100);
    static const char *const argv[] = {"/bin/sleep", "1000", NULL};
    struct jail_spawn sp = {.cwd = "/", .argv = argv, .fds = {0, 0, 0}};
    if (pipe2(p, O_CLOEXEC) < 0)
        _exit(4);
    sp.fds[0] = p[0];
    sp.fds[1] = sp.fds[2] = p[1];
    if (priv_jail_spawn(j, 1, &sp, NULL) < 0)
        _exit(5);
    for (uint64_t end = now_msec() + 30000; !k.spawned && now_msec() < end;)
        (void)loop_run_once(l, 100);
    int n = snprintf(rec, sizeof(rec), "pid=%d", (int)k.last_pid);
    if (k.spawn_err || priv_jail_set_record(j, rec, (size_t)n, NULL) < 0)
        _exit(6);
    if (write(out, "R", 1) != 1)
        _exit(7);
    for (;;)
        pause();
}

struct found {
    bool ad1, gr1;
    pid_t sleep_pid;
};

static int
on_orphan(const struct priv_entry *e, void *ud)
{
    struct found *f = ud;
    if (!strcmp(e->id, "ad1")) {
        int pid = 0;
        char rec[64] = "";
        f->ad1 = e->ready && e->facts.init_pid > 0;
        memcpy(rec, e->record, e->record_len < 63 ? e->record_len : 63);
        if (sscanf(rec, "pid=%d", &pid) == 1)
            f->sleep_pid = pid;
    }
    if (!strcmp(e->id, "gr1"))
        f->gr1 = true;
    return 0;
}

static void
raw_ok(int fd, const struct priv_msg *m, enum priv_type want)
{
    int fds[PRIV_FDS_MAX];
    raw_send(fd, m, NULL, 0);
    assert_int_equal(raw_answer(fd, &rm, fds), 1);
    assert_int_equal(rm.type, want);
}

/* A raw connection creating id and waiting for its ready. */
static int
raw_create(const char *id)
{
    int h = hostile_hello(), fds[PRIV_FDS_MAX];
    unsigned nf;
    struct priv_msg m = {.type = PRIV_CREATE, .seq = 2, .id = id};
    raw_ok(h, &m, PRIV_R_OK);
    for (;;) {
        ssize_t n = fdpass_recv(h, rbuf, sizeof(rbuf), 0, fds, PRIV_FDS_MAX, &nf);
        assert_true(n > 0);
        assert_int_equal(priv_decode_answer(rbuf, (size_t)n, nf, &rm), 0);
        if (rm.type == PRIV_EV_READY)
            break;
    }
    assert_int_equal(rm.errnum, 0);
    return h;
}

static int
sealed_memfd(size_t size, bool seal)
{
    int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    if (seal)
        assert_int_equal(
                fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL),
                0);
    return fd;
}

struct worker {
    struct priv_client *c;
    int opened, failed;
    char why[300];
};

static void *
worker_main(void *ud)
{
    struct worker *w = ud;
    struct priv_fileops t;
    priv_fileops_init(&t, w->c, "ad1");
    for (int i = 0; i < 200; i++) {
        struct err err = {0};
        int sock = -1, pidfd = -1;
        uint32_t number = 0;
        uint64_t token = 0;
        int r = i % 2 ? priv_fileops_start(&t, false, &sock, &pidfd, &token, &err)
                      : priv_client_open_helper(w->c, "ad1", true, &sock, &pidfd, &number, &err);
        if (r < 0) {
            w->failed++;
            (void)snprintf(w->why, sizeof(w->why), "%d: %s", r, err.msg);
            continue;
        }
        w->opened++;
        if (i % 2 && token == 0) {
            w->failed++;
            (void)snprintf(w->why, sizeof(w->why), "no helper number from the start hook");
        }
        if (number) {
            /* while it still runs: once its socket is closed it may end first */
            r = priv_client_kill_helper(w->c, "ad1", number, &err);
            if (r < 0) {
                w->failed++;
                (void)snprintf(w->why, sizeof(w->why), "kill: %d: %s", r, err.msg);
            }
            safe_close(sock);
        } else {
            safe_close(sock); /* the fake helper exits on EOF */
            /* it has ended when its pidfd says so; the parent may not know yet */
            struct pollfd p = {.fd = pidfd, .events = POLLIN};
            (void)poll(&p, 1, 5000);
        }
        safe_close(pidfd);
    }
    return NULL;
}

static void
test_adopt(void **state)
{
    (void)state;
    struct err err = {0};
    struct priv_client *b = NULL;
    struct priv_jail *bj = NULL;
    struct count k = {0};
    int p[2], fds[PRIV_FDS_MAX];

    /* a network process creates ad1, runs a sleep and dies by SIGKILL */
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t a = fork();
    if (a == 0) {
        safe_close(p[0]);
        doomed(p[1]);
    }
    safe_close(p[1]);
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    safe_close(p[0]);
    assert_int_equal(kill(a, SIGKILL), 0);
    int st;
    assert_int_equal(waitpid(a, &st, 0), a);

    /* its successor lists the orphan (with the record), adopts it */
    assert_int_equal(priv_client_new(loop, dial(), &b, &err), 0);
    struct found f = {0};
    for (uint64_t end = now_msec() + 10000; !f.ad1 && now_msec() < end; usleep(20000))
        assert_int_equal(priv_client_orphans(b, on_orphan, &f, &err), 0);
    assert_true(f.ad1);
    assert_true(f.sleep_pid > 0);
    assert_int_equal(kill(f.sleep_pid, 0), 0);
    assert_int_equal(priv_jail_adopt(b, "ad1", &ccb, &k, &bj, &err), 0);
    assert_true(priv_jail_is_ready(bj));
    assert_true(priv_jail_init_pid(bj) > 0);
    assert_int_equal(priv_jail_adopt(b, "ad1", &ccb, &k, &bj, &err), -EEXIST);
    /* the old process's exit comes to the adopter */
    assert_int_equal(priv_jail_signal(bj, f.sleep_pid, SIGKILL, false), 0);
    run_until(&k.exited, 1);
    assert_int_equal(k.last_pid, f.sleep_pid);
    assert_true(WIFSIGNALED(k.last_status) && WTERMSIG(k.last_status) == SIGKILL);
    /* a new one, and one with argv past a body (SPAWN_LARGE) */
    int pin[2];
    assert_int_equal(pipe2(pin, O_CLOEXEC), 0);
    static char big[40 * 1024];
    memset(big, 'x', sizeof(big) - 1);
    static const char *argv1[] = {"/bin/true", NULL};
    static const char *argv2[] = {"/bin/sh", "-c", "exit 3", big, NULL};
    struct jail_spawn sp = {.cwd = "/", .argv = argv1, .fds = {pin[0], pin[1], pin[1]}};
    assert_int_equal(priv_jail_spawn(bj, 2, &sp, &err), 0);
    run_until(&k.exited, 2);
    assert_true(WIFEXITED(k.last_status) && WEXITSTATUS(k.last_status) == 0);
    sp.argv = argv2;
    assert_int_equal(priv_jail_spawn(bj, 3, &sp, &err), 0);
    run_until(&k.exited, 3);
    assert_int_equal(k.spawn_err, 0);
    assert_true(WIFEXITED(k.last_status) && WEXITSTATUS(k.last_status) == 3);

    /* --- hostile --- */
    int h = hostile_hello();
    struct priv_msg m = {.type = PRIV_ADOPT, .seq = 2, .id = "ad1"};
    raw_send(h, &m, NULL, 0);
    expect_err(h, EBUSY); /* b owns it */
    m.id = "never";
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT);
    m = (struct priv_msg){.type = PRIV_KILL_HELPER, .seq = 3, .id = "ad1", .a = 1};
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT); /* not its sandbox */
    /* SET_RECORD is one-way: on another's sandbox or a made-up id it is
     * dropped without a word, and the next reply is the next request's */
    m = (struct priv_msg){
            .type = PRIV_SET_RECORD, .seq = 4, .id = "ad1", .record = "x", .record_len = 1};
    raw_send(h, &m, NULL, 0);
    m.id = "never";
    raw_send(h, &m, NULL, 0);
    m = (struct priv_msg){.type = PRIV_KILL_HELPER, .seq = 5, .id = "ad1", .a = 1};
    raw_send(h, &m, NULL, 0);
    expect_err(h, ENOENT);
    assert_int_equal(rm.seq, 5);
    check_alive_j(b, bj);
    /* a record one byte past the bound: the connection ends */
    {
        static char body[PRIV_RECORD_MAX + 64];
        uint32_t l = 3, rl = PRIV_RECORD_MAX + 1;
        memcpy(body, &l, 4);
        memcpy(body + 4, "ad1", 4);
        memcpy(body + 8, &rl, 4);
        memset(body + 12, 'r', rl);
        struct priv_hdr hd = {PRIV_MAGIC, PRIV_SET_RECORD, 0, (uint32_t)(12 + rl), 4};
        static char pkt[sizeof(hd) + sizeof(body)];
        memcpy(pkt, &hd, sizeof(hd));
        memcpy(pkt + sizeof(hd), body, 12 + rl);
        assert_int_equal(fdpass_send(h, pkt, sizeof(hd) + 12 + rl, NULL, 0, 0), 0);
        expect_end(h);
    }
    check_alive_j(b, bj);
    /* its own sandbox: a made-up helper number, another sandbox's helper */
    h = raw_create("ad2");
    int hs, hp;
    uint32_t number;
    assert_int_equal(priv_client_open_helper(b, "ad1", true, &hs, &hp, &number, &err), 0);
    assert_true(number > 0);
    m = (struct priv_msg){.type = PRIV_KILL_HELPER, .seq = 5, .id = "ad2", .a = 12345};
    raw_send(h, &m, NULL, 0);
    expect_err(h, ESRCH);
    m.a = number;
    raw_send(h, &m, NULL, 0);
    expect_err(h, ESRCH);
    assert_int_equal(priv_client_kill_helper(b, "ad1", number, &err), 0);
    assert_int_equal(priv_client_kill_helper(b, "ad1", number, &err), -ESRCH);
    safe_close(hs);
    safe_close(hp);
    /* SPAWN_LARGE: unsealed, oversized, a regular file, a pipe */
    {
        struct priv_msg lm = {
                .type = PRIV_SPAWN_LARGE, .seq = 6, .id = "ad2", .u64 = 1, .cwd = "/"};
        int pp[2];
        assert_int_equal(pipe2(pp, O_CLOEXEC), 0);
        int four[4] = {pp[0], pp[1], pp[1], sealed_memfd(64, false)};
        raw_send(h, &lm, four, 4);
        expect_spawned(h, 1, EPERM, EPERM, 100);
        safe_close(four[3]);
        four[3] = sealed_memfd(PRIV_ARGS_BYTES_MAX + 1, true);
        lm.u64 = 2;
        raw_send(h, &lm, four, 4);
        expect_spawned(h, 2, E2BIG, E2BIG, 101);
        safe_close(four[3]);
        char path[300];
        (void)snprintf(path, sizeof(path), "%s/args", dir);
        four[3] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        assert_true(four[3] >= 0);
        assert_int_equal(write(four[3], "\1\0\0\0\0\0\0\0\2\0\0\0/x\0", 15), 15);
        lm.u64 = 3;
        raw_send(h, &lm, four, 4);
        expect_spawned(h, 3, EPERM, EPERM, 102);
        safe_close(four[3]);
        four[3] = pp[0];
        lm.u64 = 4;
        raw_send(h, &lm, four, 4);
        expect_spawned(h, 4, EINVAL, EINVAL, 103);
        /* a sealed memfd whose block does not decode */
        four[3] = sealed_memfd(16, true);
        lm.u64 = 5;
        raw_send(h, &lm, four, 4);
        expect_spawned(h, 5, EINVAL, EINVAL, 104);
        safe_close(four[3]);
        /* a stdio descriptor that is a directory, with a sealed memfd */
        four[3] = sealed_memfd(64, true);
        int dd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        four[1] = dd;
        lm.u64 = 6;
        raw_send(h, &lm, four, 4);
        expect_spawned(h, 6, EINVAL, EINVAL, 105);
        four[1] = pp[1];
        safe_close(dd);
        safe_close(four[3]);
        /* a SPAWN_LARGE whose cwd runs past the packet: malformed, so the
         * connection ends (and ad2 is an orphan) */
        {
            long n = priv_encode(rbuf, sizeof(rbuf), &lm);
            assert_true(n > 0);
            four[3] = sealed_memfd(64, true);
            /* the body's cwd "/" becomes "/x": a length past the packet */
            uint32_t bad = 2;
            memcpy(rbuf + n - 6, &bad, 4);
            assert_int_equal(fdpass_send(h, rbuf, (size_t)n, four, 4, 0), 0);
            safe_close(four[3]);
            expect_end(h);
        }
        safe_close(pp[0]);
        safe_close(pp[1]);
    }
    check_alive_j(b, bj); /* h has ended: ad2 is an orphan now */
    /* adopting twice */
    h = hostile_hello();
    m = (struct priv_msg){.type = PRIV_ADOPT, .seq = 2, .id = "ad2"};
    raw_ok(h, &m, PRIV_R_LIST);
    assert_int_equal(rm.nlist, 1);
    assert_string_equal(rm.list[0].id, "ad2");
    assert_true(rm.list[0].ready);
    m.seq = 3;
    raw_send(h, &m, NULL, 0);
    expect_err(h, EALREADY);
    m = (struct priv_msg){.type = PRIV_KILL, .seq = 4, .id = "ad2"};
    raw_ok(h, &m, PRIV_R_OK);
    safe_close(h);

    /* nobody adopts gr1: the grace kills it, ad1 (adopted) lives on */
    h = raw_create("gr1");
    safe_close(h);
    f = (struct found){0};
    assert_int_equal(priv_client_orphans(b, on_orphan, &f, &err), 0);
    assert_true(f.gr1);
    uint64_t gone_at = now_msec() + GRACE_MS + 20000;
    while (f.gr1 && now_msec() < gone_at) {
        (void)loop_run_once(loop, 200);
        f = (struct found){0};
        assert_int_equal(priv_client_orphans(b, on_orphan, &f, &err), 0);
    }
    assert_false(f.gr1);
    check_alive_j(b, bj);

    /* a worker's helpers while the loop spawns and handles events, and
     * the parent refuses a spawn before each good one: the refusals'
     * EV_SPAWNED come between the worker's replies */
    struct worker w = {.c = b};
    pthread_t t;
    int dirfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct jail_spawn bad = {.cwd = "/", .argv = argv1, .fds = {pin[0], dirfd, pin[1]}};
    assert_int_equal(pthread_create(&t, NULL, worker_main, &w), 0);
    int spawns = 0;
    sp.argv = argv1;
    uint64_t end = now_msec() + 60000;
    while (w.opened + w.failed < 200 && now_msec() < end) {
        if (k.spawned - 2 == spawns && k.exited - 3 == spawns && spawns < 400) {
            assert_int_equal(priv_jail_spawn(bj, REFUSED_TOKEN + (uint64_t)spawns, &bad, &err), 0);
            assert_int_equal(priv_jail_spawn(bj, 100 + (uint64_t)spawns, &sp, &err), 0);
            spawns++;
        }
        (void)loop_run_once(loop, 5);
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    if (w.failed)
        fprintf(stderr, "worker: %s\n", w.why);
    assert_int_equal(w.failed, 0);
    assert_int_equal(w.opened, 200);
    run_until(&k.exited, 3 + spawns);
    assert_int_equal(k.spawned, 2 + spawns); /* the sleep's went to its creator */
    assert_int_equal(k.spawn_err, 0);
    assert_int_equal(k.refused, spawns); /* exactly one each */
    assert_int_equal(k.mixed, 0);
    assert_true(spawns > 0);
    safe_close(dirfd);
    check_alive_j(b, bj);
    safe_close(pin[0]);
    safe_close(pin[1]);

    priv_jail_kill(bj);
    run_until(&k.gone, 1);
    priv_jail_free(bj);
    b = priv_client_free(b);
    (void)fds;
}

int
main(void)
{
    int ready[2], c[2];
    char tmpl[] = "/tmp/abx-priv-XXXXXX";
    const char *t = getenv("TMPDIR");

    if (geteuid() != 0) {
        fprintf(stderr, "skip: needs root\n");
        return 77;
    }
    (void)snprintf(dir, sizeof(dir), "%.40s/abx-priv-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir) && !mkdtemp(strcpy(dir, tmpl)))
        return 1;
    (void)chmod(dir, 0755);
    (void)snprintf(sock_path, sizeof(sock_path), "%s/priv.sock", dir);
    if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(c, O_CLOEXEC) < 0)
        return 1;
    server = fork();
    if (server == 0) {
        safe_close(ready[0]);
        safe_close(c[1]);
        serve(ready[1], c[0]);
    }
    safe_close(ready[1]);
    safe_close(c[0]);
    ctl = c[1];
    char ok = 0;
    int rc;
    if (read(ready[0], &ok, 1) != 1 || ok != 'R') {
        rc = ok == 'S' ? 77 : 1;
    } else {
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_parent),
                                           cmocka_unit_test(test_adopt)};
        if (loop_new(&loop) < 0)
            return 1;
        rc = cmocka_run_group_tests(tests, NULL, NULL);
        loop = loop_free(loop);
    }
    safe_close(ctl);
    int st;
    (void)waitpid(server, &st, 0);
    if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        rc = 1;
    (void)rm_rf_at(AT_FDCWD, dir);
    return rc;
}
