/*
 * test-helper.c - file helpers started by the privileged parent: the
 * parent (priv/parent.h) serves a real ns sandbox in a child process and
 * answers OPEN_HELPER with the real abx-fileops through
 * fileops_parent_helper(); this process, standing in for the network
 * process, holds no descriptor of the sandbox and reaches its files only
 * through fileops handles whose start hook is priv_jail_open_helper().
 *
 * As root with namespaces only (else exit 77). Through the handles: a
 * file written into the workspace belongs to the sandbox user's host uid
 * and reads back, stat and listings agree, the view names it the user's;
 * a file only sandbox root may read is refused to "user" and read by
 * root; a file only host root may read, in the workspace or reached
 * through a link the sandbox planted to a host path, is refused to both.
 * A helper killed while idle is replaced on the next call, more times
 * than the parent has slots (it reaps and frees them); one that hangs
 * fails its call at the deadline and is replaced too. Once the sandbox
 * is gone the parent has ended its helpers and a call fails cleanly.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv/client.h"
#include "priv/parent.h"
#include "priv/serve.h"
#include "sandbox/fileops-helper.h"
#include "sandbox/fileops.h"
#include "util/fd.h"
#include "util/timeutil.h"

/* client.h's ready-made hooks have fileops.h's types (priv/ cannot say so). */
_Static_assert(__builtin_types_compatible_p(__typeof__(&priv_fileops_start), fileops_start_fn),
               "priv_fileops_start is a fileops_start_fn");
_Static_assert(__builtin_types_compatible_p(__typeof__(&priv_fileops_idmap), fileops_idmap_fn),
               "priv_fileops_idmap is a fileops_idmap_fn");
_Static_assert(__builtin_types_compatible_p(__typeof__(&priv_fileops_stop), fileops_stop_fn),
               "priv_fileops_stop is a fileops_stop_fn");

static char dir[64], sock_path[100];
static int image = -1;

/* --- the server: a jail host and the parent, in a child process --- */

/* serve.h's configure: the real file helper, started by the parent. */
static void
configure(struct jail_host *h, struct priv_parent_config *pc)
{
    static struct fileops_parent fp;
    fp = (struct fileops_parent){.image_fd = image, .host = h};
    pc->start_helper = fileops_parent_helper;
    pc->helper_ud = &fp;
}

static _noreturn_ void
serve(int ready_fd, int ctl_fd)
{
    static const struct serve_opts o = {
            .uid_base = 0x52000000u, .uid_slots = 2, .configure = configure};
    serve_parent(dir, sock_path, ready_fd, ctl_fd, &o);
}

/* --- the network process's side --- */

static struct loop *loop;
static struct priv_client *client;
static struct priv_jail *pj;
static int readies, gones, ready_r;

static void
w_ready(struct priv_jail *j, int r, const struct err *err, void *ud)
{
    (void)j;
    (void)ud;
    if (r < 0)
        fprintf(stderr, "ready: %s\n", err ? err->msg : "");
    readies++;
    ready_r = r;
}

static void
w_spawned(struct priv_jail *j, uint64_t token, pid_t pid, int r, const char *step, void *ud)
{
    (void)j;
    (void)token;
    (void)pid;
    (void)r;
    (void)step;
    (void)ud;
}

static void
w_exited(struct priv_jail *j, pid_t pid, int status, void *ud)
{
    (void)j;
    (void)pid;
    (void)status;
    (void)ud;
}

static void
w_gone(struct priv_jail *j, void *ud)
{
    (void)j;
    (void)ud;
    gones++;
}

static const struct priv_jail_callbacks wcb = {w_ready, w_spawned, w_exited, w_gone};

static void
run_until(int *counter, int want)
{
    uint64_t end = now_msec() + 30000;
    while (*counter < want && now_msec() < end)
        (void)loop_run_once(loop, 100);
    assert_int_equal(*counter, want);
}

/* The hooks: client.h's ready-made ones, counted. */
static unsigned starts, stops;
static struct priv_fileops pf;

static int
start_via_parent(void *ud, bool as_root, int *ret_sock, int *ret_pidfd, uint64_t *ret_token,
                 struct err *err)
{
    starts++;
    return priv_fileops_start(ud, as_root, ret_sock, ret_pidfd, ret_token, err);
}

static int
idmap_via_parent(void *ud, int dirfd, int *ret_fd, struct err *err)
{
    return priv_fileops_idmap(ud, dirfd, ret_fd, err);
}

static void
stop_via_parent(void *ud, uint64_t token)
{
    stops++;
    priv_fileops_stop(ud, token);
}

static struct fileops *
handle(bool as_root)
{
    struct fileops *f = NULL;
    struct err err = {0};
    struct fileops_remote c = {
            .image_fd = -1,
            .userns_fd = -1,
            .ws_fd = -1,
            .view_fd = -1,
            .ns = true,
            .as_root = as_root,
            .label = "sandbox 'ph1'",
            .start = start_via_parent,
            .idmap = idmap_via_parent,
            .stop = stop_via_parent,
            .start_ud = &pf,
            .has_view = true,
    };
    assert_int_equal(fileops_new_remote(&c, &f, &err), 0);
    return f;
}

static int
count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
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

/* Until the parent has reaped pid (a zombie still answers kill 0). */
static void
wait_reaped(pid_t pid)
{
    uint64_t end = now_msec() + 10000;
    while (kill(pid, 0) == 0 && now_msec() < end)
        usleep(5000);
    assert_int_equal(kill(pid, 0), -1);
    assert_int_equal(errno, ESRCH);
}

static void
read_back(struct fileops *f, const char *rel, const char *want, struct err *err)
{
    struct files_stat st;
    int fd = -1;
    char b[64] = {0};
    if (fileops_open_read(f, rel, &fd, &st, err) != 0)
        fail_msg("open_read '%s': %s", rel, err->msg);
    assert_int_equal(read(fd, b, sizeof(b) - 1), (ssize_t)strlen(want));
    assert_string_equal(b, want);
    assert_int_equal(st.size, strlen(want));
    safe_close(fd);
}

static void
test_helper(void **state)
{
    (void)state;
    struct err err = {0};
    struct files_stat st;
    struct stat sb;
    char ws[300], path[400];
    int fd = -1;

    assert_int_equal(priv_client_new(loop, dial(), &client, &err), 0);
    struct jail_limits lim = {.memory_bytes = 256 << 20, .pids = 64};
    assert_int_equal(priv_jail_create(client, "ph1", &lim, NULL, &wcb, NULL, &pj, &err), 0);
    priv_fileops_init(&pf, client, "ph1");
    run_until(&readies, 1);
    assert_int_equal(ready_r, 0);
    (void)snprintf(ws, sizeof(ws), "%s/state/sandboxes/ph1/home", dir);
    int wsfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(wsfd >= 0); /* the test's, as host root: to check and to plant */
    int fds0 = count_fds();

    /* write, read back, stat, list: as the sandbox's user */
    struct fileops *fu = handle(false);
    struct fileops *fr = handle(true);
    assert_int_equal(starts, 0);
    struct fileops_upload *up = NULL;
    bool created = false;
    assert_int_equal(fileops_upload_begin(fu, "notes/hello.txt", 1024, &up, &err), 0);
    assert_int_equal(starts, 1);
    assert_int_equal(fileops_upload_write(up, "hi there", 8, &err), 0);
    assert_int_equal(fileops_upload_commit(up, &st, &created, &err), 0);
    assert_true(created);
    assert_int_equal(fstatat(wsfd, "notes/hello.txt", &sb, 0), 0);
    assert_int_equal(sb.st_uid, priv_jail_user_uid(pj));
    assert_int_equal(sb.st_gid, priv_jail_user_gid(pj));
    read_back(fu, "notes/hello.txt", "hi there", &err);
    assert_int_equal(fileops_stat(fu, "notes/hello.txt", &st, &err), 0);
    assert_int_equal(st.type, FILES_FILE);
    assert_int_equal(st.size, 8);
    struct files_tree t;
    assert_int_equal(fileops_tree_list(fu, ".", NULL, &t, &err), 0);
    bool saw_dir = false, saw_file = false;
    for (size_t i = 0; i < t.n; i++) {
        saw_dir |= !strcmp(t.v[i].path, "/notes") && t.v[i].st.type == FILES_DIR;
        saw_file |= !strcmp(t.v[i].path, "/notes/hello.txt") && t.v[i].st.size == 8;
    }
    files_tree_free(&t);
    assert_true(saw_dir && saw_file);
    struct vfs_entry e;
    assert_int_equal(fileops_vstat(fu, "/home/user/notes/hello.txt", &e, &err), 0);
    assert_string_equal(e.owner, "user");
    assert_int_equal(starts, 1); /* one helper did it all */

    /* only sandbox root may read it: refused to "user", read by root */
    assert_int_equal(write_file_at(wsfd, "rootonly", "root's\n", 0600), 0);
    assert_int_equal(fchownat(wsfd, "rootonly", priv_jail_root_uid(pj), priv_jail_root_uid(pj), 0),
                     0);
    assert_int_equal(fileops_open_read(fu, "rootonly", &fd, &st, NULL), -EACCES);
    read_back(fr, "rootonly", "root's\n", &err);
    assert_int_equal(starts, 2);

    /* only host root may read it: refused to both, in the workspace ... */
    assert_int_equal(write_file_at(wsfd, "hostonly", "host's\n", 0600), 0);
    assert_int_equal(fileops_open_read(fu, "hostonly", &fd, &st, NULL), -EACCES);
    assert_int_equal(fileops_open_read(fr, "hostonly", &fd, &st, NULL), -EACCES);
    /* ... and at a host path the sandbox links to: the helper resolves in
     * the sandbox's view, where the host's file is not */
    char secret[300];
    (void)snprintf(secret, sizeof(secret), "%s/hostsecret", dir);
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(write_file_at(dfd, "hostsecret", "secret\n", 0600), 0);
    safe_close(dfd);
    assert_int_equal(symlinkat(secret, wsfd, "escape"), 0);
    assert_int_equal(fchownat(wsfd, "escape", priv_jail_user_uid(pj), priv_jail_user_gid(pj),
                              AT_SYMLINK_NOFOLLOW),
                     0);
    (void)snprintf(path, sizeof(path), "/proc/self/fd/%d/escape", wsfd);
    fd = open(path, O_RDONLY | O_CLOEXEC); /* host root would follow it */
    assert_true(fd >= 0);
    safe_close(fd);
    fd = -1;
    assert_true(fileops_open_read(fu, "escape", &fd, &st, NULL) < 0);
    assert_true(fileops_open_read(fr, "escape", &fd, &st, NULL) < 0);
    uint64_t size;
    assert_true(fileops_vopen_read(fr, "/home/user/escape", &fd, &size, NULL) < 0);
    assert_true(fileops_vopen_read(fr, secret, &fd, &size, NULL) < 0);
    assert_int_equal(fd, -1);

    /* a helper killed while idle: the next call asks the parent for a
     * new one, more times than the parent has slots for a sandbox */
    for (unsigned i = 0; i < PRIV_HELPERS_MAX + 2; i++) {
        pid_t pid = fileops_helper_pid(fu);
        assert_true(pid > 0);
        unsigned before = starts;
        assert_int_equal(kill(pid, SIGKILL), 0);
        wait_reaped(pid);
        err_clear(&err);
        if (fileops_stat(fu, "notes/hello.txt", &st, &err) != 0)
            fail_msg("after kill %u: %s", i, err.msg);
        assert_int_equal(starts, before + 1);
        assert_true(fileops_helper_pid(fu) != pid);
    }
    /* one that hangs: its call fails at the deadline, the handle asks the
     * parent to kill it (the stop hook: a network process could not signal
     * it), the next call gets a new one; a healthy helper's end needs no
     * stop (its socket's close ends it) */
    pid_t pid = fileops_helper_pid(fu);
    unsigned stops_before = stops;
    assert_int_equal(kill(pid, SIGSTOP), 0);
    fileops_set_timeouts(fu, 300, 300);
    err_clear(&err);
    assert_int_equal(fileops_stat(fu, "notes/hello.txt", &st, &err), -ETIMEDOUT);
    assert_non_null(strstr(err.msg, "in time"));
    assert_int_equal(stops, stops_before + 1);
    wait_reaped(pid);
    unsigned before = starts;
    read_back(fu, "notes/hello.txt", "hi there", &err);
    assert_int_equal(starts, before + 1);

    /* abxd's own storage, shown to root's helper through the parent's
     * idmapped mount, when the kernel has those for this file system */
    char idm[300];
    (void)snprintf(idm, sizeof(idm), "%s/idmap/tpl", dir);
    assert_int_equal(mkdir(idm, 0755), 0);
    int tpl = open(idm, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(write_file_at(tpl, "t.txt", "template\n", 0644), 0);
    int probe = -1;
    int r = priv_jail_idmap(pj, tpl, &probe, &err);
    if (r == 0) {
        safe_close(probe);
        if (fileops_vcopy_in(fr, tpl, "t.txt", "/tmp/t.txt", &err) != 0)
            fail_msg("copy in: %s", err.msg);
        assert_int_equal(fileops_vstat(fu, "/tmp/t.txt", &e, &err), 0);
        assert_string_equal(e.owner, "root");
    } else {
        fprintf(stderr, "# no idmapped mounts here (%s): copy-in not tried\n", err.msg);
    }
    safe_close(tpl);

    /* the sandbox goes: the parent ends its helpers, calls fail cleanly */
    pid_t last = fileops_helper_pid(fu);
    pid_t lastr = fileops_helper_pid(fr);
    priv_jail_kill(pj);
    run_until(&gones, 1);
    wait_reaped(last);
    wait_reaped(lastr);
    fileops_set_timeouts(fu, 2000, 2000);
    err_clear(&err);
    r = fileops_stat(fu, "notes/hello.txt", &st, &err);
    assert_true(r == -ESRCH || r == -ENOENT);
    fileops_shutdown(fu);
    fileops_unref(fu);
    fileops_unref(fr);
    assert_int_equal(count_fds(), fds0); /* nothing kept, nothing leaked */
    safe_close(wsfd);
    priv_jail_free(pj);
    client = priv_client_free(client);
}

static int
open_image(void)
{
    char p[4096];
    const char *b = getenv("ABX_BUILD_ROOT");
    (void)snprintf(p, sizeof(p), "%s/src/abx-fileops", b ? b : "build");
    return open(p, O_RDONLY | O_CLOEXEC);
}

int
main(void)
{
    int ready[2], c[2];
    const char *t = getenv("TMPDIR");

    if (geteuid() != 0) {
        fprintf(stderr, "skip: needs root\n");
        return 77;
    }
    image = open_image();
    if (image < 0) {
        fprintf(stderr, "no abx-fileops image: %s\n", strerror(errno));
        return 1;
    }
    (void)snprintf(dir, sizeof(dir), "%.40s/abx-privh-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    (void)chmod(dir, 0755);
    char idm[300];
    (void)snprintf(idm, sizeof(idm), "%s/idmap", dir);
    (void)mkdir(idm, 0755);
    (void)snprintf(sock_path, sizeof(sock_path), "%s/priv.sock", dir);
    if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(c, O_CLOEXEC) < 0)
        return 1;
    pid_t server = fork();
    if (server == 0) {
        safe_close(ready[0]);
        safe_close(c[1]);
        serve(ready[1], c[0]);
    }
    safe_close(ready[1]);
    safe_close(c[0]);
    char ok = 0;
    int rc;
    if (read(ready[0], &ok, 1) != 1 || ok != 'R') {
        rc = ok == 'S' ? 77 : 1;
    } else {
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_helper)};
        if (loop_new(&loop) < 0)
            return 1;
        rc = cmocka_run_group_tests(tests, NULL, NULL);
        loop = loop_free(loop);
    }
    safe_close(c[1]); /* stops the server */
    safe_close(ready[0]);
    int st;
    (void)waitpid(server, &st, 0);
    if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        rc = 1;
    safe_close(image);
    (void)rm_rf_at(AT_FDCWD, dir);
    return rc;
}
