/*
 * test-rootfs.c - the shared /etc built into a temporary state directory:
 * the generated passwd/group/hosts/hostname/nsswitch/resolv contents,
 * that nothing named like a secret (shadow, ssh, private, secret, .key)
 * and nothing that is not world-readable was copied from the host, that
 * symlinks stay symlinks, and that a second call replaces the directory
 * atomically (a new inode, no leftovers, no window without an etc).
 * A third call after nothing changed keeps the directory as it is, and any
 * difference (an extra, missing or changed file, mode, owner, link target)
 * makes it rebuild. Also abx-sudo: written whole, 0555, kept when it is
 * already exactly that, else replaced by rename (a new inode, so running
 * sandboxes keep the file they bound). On a full file system both keep
 * what a previous start left instead of failing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "jail/rootfs.h"
#include "util/fd.h"

static char state_dir[256];
static int statefd = -1;

static int
setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(state_dir, sizeof(state_dir), "%.200s/abx-test-rootfs-XXXXXX", tmp) >=
                (int)sizeof(state_dir) ||
        !mkdtemp(state_dir))
        return -1;
    statefd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return statefd < 0 ? -1 : 0;
}

static int
teardown(void **state)
{
    (void)state;
    close(statefd);
    return rm_rf_at(AT_FDCWD, state_dir) == 0 ? 0 : -1;
}

static void
expect_file(const char *name, const char *content)
{
    struct buf b;
    struct stat st;
    char path[300];
    (void)snprintf(path, sizeof(path), "etc/%s", name);
    buf_init(&b, 65536);
    int r = read_file_at(statefd, path, 65536, &b);
    if (r < 0)
        fail_msg("cannot read %s: %s", path, strerror(-r));
    assert_string_equal(b.data, content);
    buf_done(&b);
    assert_int_equal(fstatat(statefd, path, &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0644);
}

static void
test_generated_files(void **state)
{
    struct err e = {0};
    struct stat st;
    (void)state;

    assert_int_equal(rootfs_prepare_etc(state_dir, &e), ROOTFS_WRITTEN);
    assert_false(err_isset(&e));
    assert_int_equal(fstatat(statefd, "etc", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0755);

    expect_file("passwd", "root:x:0:0:root:/root:/bin/bash\n"
                          "user:x:1000:1000:user:/home/user:/bin/bash\n"
                          "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    expect_file("group", "root:x:0:\n"
                         "tty:x:5:\n"
                         "users:x:100:user\n"
                         "user:x:1000:\n"
                         "nogroup:x:65534:\n");
    expect_file("hosts", "127.0.0.1\tlocalhost\n"
                         "::1\tlocalhost ip6-localhost ip6-loopback\n"
                         "127.0.1.1\t" ROOTFS_HOSTNAME "\n");
    expect_file("hostname", ROOTFS_HOSTNAME "\n");
    expect_file("resolv.conf", "# no network: sandboxes reach loopback only\n");
    struct buf b;
    buf_init(&b, 4096);
    assert_int_equal(read_file_at(statefd, "etc/nsswitch.conf", 4096, &b), 0);
    assert_non_null(strstr(b.data, "passwd: files\n"));
    assert_non_null(strstr(b.data, "hosts: files\n"));
    buf_done(&b);

    /* the generated users match the header's constants */
    assert_int_equal(ROOTFS_USER_UID, 1000);
    assert_int_equal(ROOTFS_TTY_GID, 5);
}

/* --- walking what was copied --- */

struct walk {
    int files, dirs, links;
    char bad[2048];
};

static bool
secret_name(const char *n)
{
    return !strcmp(n, "private") || strstr(n, "shadow") || strstr(n, "ssh") ||
           strstr(n, "secret") || strstr(n, ".key");
}

static void
note(struct walk *w, const char *what, const char *path)
{
    size_t n = strlen(w->bad);
    (void)snprintf(w->bad + n, sizeof(w->bad) - n, " %s: %s;", what, path);
}

static void
walk(int dfd, const char *rel, int depth, struct walk *w)
{
    int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    assert_true(dup >= 0);
    DIR *d = fdopendir(dup);
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char path[PATH_MAX];
        (void)snprintf(path, sizeof(path), "%s/%s", rel, de->d_name);
        if (secret_name(de->d_name) && strcmp(path, "etc/nsswitch.conf") != 0)
            note(w, "secret name", path);
        struct stat st;
        assert_int_equal(fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW), 0);
        if (S_ISLNK(st.st_mode)) {
            w->links++;
        } else if (S_ISDIR(st.st_mode)) {
            w->dirs++;
            int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            assert_true(sub >= 0);
            walk(sub, path, depth + 1, w);
            close(sub);
        } else if (S_ISREG(st.st_mode)) {
            w->files++;
            if (!(st.st_mode & S_IROTH))
                note(w, "not world-readable", path);
            if (st.st_mode & (S_ISUID | S_ISGID | S_IWGRP | S_IWOTH))
                note(w, "odd mode", path);
        } else {
            note(w, "special file", path);
        }
    }
    closedir(d);
}

static void
test_nothing_secret_copied(void **state)
{
    struct walk w = {0};
    (void)state;

    assert_int_equal(rootfs_prepare_etc(state_dir, NULL), ROOTFS_WRITTEN);
    int etc = openat(statefd, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(etc >= 0);
    walk(etc, "etc", 0, &w);
    close(etc);
    if (w.bad[0])
        fail_msg("copied what it must not:%s", w.bad);
    assert_true(w.files >= 6);

    /* host files that exist and must not be there, whatever the walk saw */
    static const char *const never[] = {"shadow",      "gshadow",    "shadow-", "sudoers", "ssh",
                                        "ssl/private", "machine-id", "fstab",   "crontab", NULL};
    for (const char *const *n = never; *n; n++) {
        char path[64];
        (void)snprintf(path, sizeof(path), "etc/%s", *n);
        if (faccessat(statefd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            fail_msg("%s was copied", path);
    }

    /* what the allowlist names and the host has is there; symlinks stay
     * symlinks with the same target */
    struct stat st;
    /* the CA bundle, so TLS clients in sandboxes verify servers */
    if (stat("/etc/ssl/certs/ca-certificates.crt", &st) == 0 && (st.st_mode & S_IROTH)) {
        struct stat cp;
        assert_int_equal(fstatat(statefd, "etc/ssl/certs/ca-certificates.crt", &cp, 0), 0);
        assert_int_equal(cp.st_size, st.st_size);
    }
    if (lstat("/etc/ld.so.cache", &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_IROTH))
        assert_int_equal(faccessat(statefd, "etc/ld.so.cache", F_OK, 0), 0);
    char host_target[PATH_MAX], copy_target[PATH_MAX];
    ssize_t k = readlink("/etc/localtime", host_target, sizeof(host_target) - 1);
    if (k > 0) {
        host_target[k] = '\0';
        ssize_t c = readlinkat(statefd, "etc/localtime", copy_target, sizeof(copy_target) - 1);
        assert_int_equal(c, k);
        copy_target[c] = '\0';
        assert_string_equal(copy_target, host_target);
    }
}

/* Watches the state directory while the second call runs: etc must exist
 * at every moment. */
struct watcher {
    atomic_bool stop;
    atomic_int missing;
    atomic_int looks;
};

static void *
watch(void *ud)
{
    struct watcher *w = ud;
    while (!atomic_load(&w->stop)) {
        struct stat st;
        if (fstatat(statefd, "etc/passwd", &st, 0) < 0)
            atomic_fetch_add(&w->missing, 1);
        atomic_fetch_add(&w->looks, 1);
    }
    return NULL;
}

static void
test_second_call_replaces(void **state)
{
    struct stat a, b;
    (void)state;

    assert_int_equal(rootfs_prepare_etc(state_dir, NULL), ROOTFS_WRITTEN);
    assert_int_equal(fstatat(statefd, "etc", &a, AT_SYMLINK_NOFOLLOW), 0);
    /* something changed in the old one: it must not survive */
    assert_int_equal(write_file_at(statefd, "etc/stale-marker", "x", 0644), 0);
    assert_int_equal(write_file_at(statefd, "etc/passwd", "evil::0:0::/:/bin/sh\n", 0644), 0);

    struct watcher w = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, watch, &w), 0);
    int r = rootfs_prepare_etc(state_dir, NULL);
    atomic_store(&w.stop, true);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(r, ROOTFS_WRITTEN);
    assert_true(atomic_load(&w.looks) > 0);
    assert_int_equal(atomic_load(&w.missing), 0);

    assert_int_equal(fstatat(statefd, "etc", &b, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(a.st_ino != b.st_ino);
    assert_int_equal(faccessat(statefd, "etc/stale-marker", F_OK, 0), -1);
    expect_file("hostname", ROOTFS_HOSTNAME "\n");
    struct buf pw;
    buf_init(&pw, 4096);
    assert_int_equal(read_file_at(statefd, "etc/passwd", 4096, &pw), 0);
    assert_null(strstr(pw.data, "evil"));
    buf_done(&pw);

    /* no temporary directories left: the state directory holds etc only */
    int dup = fcntl(statefd, F_DUPFD_CLOEXEC, 3);
    DIR *d = fdopendir(dup);
    assert_non_null(d);
    rewinddir(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (strcmp(de->d_name, "etc") != 0)
            fail_msg("left in the state directory: %s", de->d_name);
        n++;
    }
    closedir(d);
    assert_int_equal(n, 1);
}

static void
test_etc_was_a_file(void **state)
{
    struct stat st;
    (void)state;
    /* whatever sits at etc is replaced, not followed or merged */
    assert_int_equal(write_file_at(statefd, "etc", "not a directory", 0644), 0);
    assert_int_equal(rootfs_prepare_etc(state_dir, NULL), ROOTFS_WRITTEN);
    assert_int_equal(fstatat(statefd, "etc", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISDIR(st.st_mode));
    expect_file("hostname", ROOTFS_HOSTNAME "\n");
}

static void
test_missing_state_dir(void **state)
{
    struct err e = {0};
    char path[300];
    (void)state;
    (void)snprintf(path, sizeof(path), "%s/does-not-exist", state_dir);
    assert_int_equal(rootfs_prepare_etc(path, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "does-not-exist"));
    assert_int_equal(faccessat(statefd, "does-not-exist", F_OK, 0), -1);
}

static void
test_sudo_binary(void **state)
{
    struct stat st, st2;
    char path[PATH_MAX], buf[4];
    (void)state;

    assert_int_equal(rootfs_prepare_sudo(state_dir, path, sizeof(path), NULL), ROOTFS_WRITTEN);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0555);
    assert_true(st.st_size > 4096);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, 4), 4);
    close(fd);
    assert_memory_equal(buf, "\177ELF", 4);

    /* the same file again: kept as it is, nothing written */
    assert_int_equal(rootfs_prepare_sudo(state_dir, path, sizeof(path), NULL), ROOTFS_KEPT);
    assert_int_equal(stat(path, &st2), 0);
    assert_int_equal(st2.st_ino, st.st_ino);
    assert_int_equal(st2.st_mtim.tv_nsec, st.st_mtim.tv_nsec);

    /* one byte off: replaced by rename (a new inode, so running sandboxes
     * keep the file they bound), with the right content */
    fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, st.st_size / 2), 1);
    close(fd);
    assert_int_equal(rootfs_prepare_sudo(state_dir, path, sizeof(path), NULL), ROOTFS_WRITTEN);
    assert_int_equal(stat(path, &st2), 0);
    assert_true(st2.st_ino != st.st_ino);
    assert_int_equal(st2.st_size, st.st_size);
    assert_int_equal(rootfs_prepare_sudo(state_dir, path, sizeof(path), NULL), ROOTFS_KEPT);

    /* truncated, another mode, hard-linked, or a symlink to a good copy:
     * each is replaced */
    assert_int_equal(truncate(path, st.st_size - 1), 0);
    assert_int_equal(rootfs_prepare_sudo(state_dir, path, sizeof(path), NULL), ROOTFS_WRITTEN);
    assert_int_equal(chmod(path, 0755), 0);
    assert_int_equal(rootfs_prepare_sudo(state_dir, path, sizeof(path), NULL), ROOTFS_WRITTEN);
    assert_int_equal(stat(path, &st2), 0);
    assert_int_equal(st2.st_mode & 07777, 0555);
    assert_int_equal(linkat(statefd, "abx-sudo", statefd, "sudo-link", 0), 0);
    assert_int_equal(rootfs_prepare_sudo(state_dir, path, sizeof(path), NULL), ROOTFS_WRITTEN);
    assert_int_equal(renameat(statefd, "sudo-link", statefd, "good-copy"), 0);
    assert_int_equal(unlinkat(statefd, "abx-sudo", 0), 0);
    assert_int_equal(symlinkat("good-copy", statefd, "abx-sudo"), 0);
    assert_int_equal(rootfs_prepare_sudo(state_dir, path, sizeof(path), NULL), ROOTFS_WRITTEN);
    assert_int_equal(lstat(path, &st2), 0);
    assert_true(S_ISREG(st2.st_mode));
    assert_int_equal(unlinkat(statefd, "good-copy", 0), 0);

    /* no temporary left behind */
    DIR *d = opendir(state_dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.' || strncmp(de->d_name, ".abx-sudo", 9) == 0;
    closedir(d);
    assert_int_equal(n, 1);
}

static void
expect_etc(int want, ino_t *ino)
{
    struct stat st;
    assert_int_equal(rootfs_prepare_etc(state_dir, NULL), want);
    assert_int_equal(fstatat(statefd, "etc", &st, AT_SYMLINK_NOFOLLOW), 0);
    if (want == ROOTFS_KEPT)
        assert_int_equal(st.st_ino, *ino);
    else
        assert_true(st.st_ino != *ino);
    *ino = st.st_ino;
}

static void
test_etc_kept_when_current(void **state)
{
    struct stat st, st2;
    ino_t ino = 0;
    (void)state;

    expect_etc(ROOTFS_WRITTEN, &ino);
    assert_int_equal(fstatat(statefd, "etc/passwd", &st, 0), 0);
    /* nothing changed: the very same directory and files */
    expect_etc(ROOTFS_KEPT, &ino);
    assert_int_equal(fstatat(statefd, "etc/passwd", &st2, 0), 0);
    assert_int_equal(st2.st_ino, st.st_ino);
    /* under another umask too: modes are set, not masked */
    mode_t old = umask(077);
    expect_etc(ROOTFS_KEPT, &ino);
    umask(old);

    /* each kind of difference is seen and repaired, then kept again */
    assert_int_equal(write_file_at(statefd, "etc/extra", "x", 0644), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    expect_etc(ROOTFS_KEPT, &ino);
    assert_int_equal(unlinkat(statefd, "etc/hostname", 0), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    expect_file("hostname", ROOTFS_HOSTNAME "\n");
    assert_int_equal(write_file_at(statefd, "etc/hostname", "sandbox\n\n", 0644), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    assert_int_equal(write_file_at(statefd, "etc/hostname", "sandbOx\n", 0644), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    assert_int_equal(fchmodat(statefd, "etc/passwd", 0600, 0), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    assert_int_equal(fchownat(statefd, "etc/group", 12345, 0, AT_SYMLINK_NOFOLLOW), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    assert_int_equal(fchmodat(statefd, "etc/profile.d", 0700, 0), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    assert_int_equal(mkdirat(statefd, "etc/profile.d/empty", 0755), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    assert_int_equal(unlinkat(statefd, "etc/profile.d/zz-abx-tools.sh", 0), 0);
    assert_int_equal(symlinkat("/dev/null", statefd, "etc/profile.d/zz-abx-tools.sh"), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    struct stat host;
    if (lstat("/etc/localtime", &host) == 0 && S_ISLNK(host.st_mode)) {
        assert_int_equal(unlinkat(statefd, "etc/localtime", 0), 0);
        assert_int_equal(symlinkat("/elsewhere", statefd, "etc/localtime"), 0);
        expect_etc(ROOTFS_WRITTEN, &ino);
    }
    /* a copied host file whose bytes differ (same size) */
    if (fstatat(statefd, "etc/debian_version", &st, 0) == 0 && st.st_size > 0) {
        int fd = openat(statefd, "etc/debian_version", O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, "#", 1, 0), 1);
        close(fd);
        expect_etc(ROOTFS_WRITTEN, &ino);
    }
    /* etc itself: another mode, or not a directory */
    assert_int_equal(fchmodat(statefd, "etc", 0700, 0), 0);
    expect_etc(ROOTFS_WRITTEN, &ino);
    expect_etc(ROOTFS_KEPT, &ino);
}

/* A tmpfs of its own over the state directory, in a private mount
 * namespace of a child process (so nothing outlives the test), filled to
 * the last byte: what a previous start left must do for this one. */
static void
test_full_disk(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
        return;
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char path[PATH_MAX], sub[PATH_MAX + 8];
        int step = 1;
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            _exit(100);
        (void)snprintf(sub, sizeof(sub), "%s/fs", state_dir);
        if (mkdir(sub, 0700) < 0 || mount("tmpfs", sub, "tmpfs", 0, "size=8m") < 0)
            _exit(101);
        if (rootfs_prepare_etc(sub, NULL) != ROOTFS_WRITTEN)
            _exit(step);
        step++;
        if (rootfs_prepare_sudo(sub, path, sizeof(path), NULL) != ROOTFS_WRITTEN)
            _exit(step);
        step++;
        char fill[PATH_MAX + 16];
        (void)snprintf(fill, sizeof(fill), "%s/filler", sub);
        int fd = open(fill, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        static char zero[65536];
        while (fd >= 0 && write(fd, zero, sizeof(zero)) > 0)
            ;
        while (fd >= 0 && write(fd, zero, 1) > 0)
            ;
        struct statvfs vfs;
        if (fd < 0 || statvfs(sub, &vfs) < 0 || vfs.f_bavail != 0)
            _exit(step);
        step++;
        if (rootfs_prepare_etc(sub, NULL) != ROOTFS_KEPT)
            _exit(step);
        step++;
        if (rootfs_prepare_sudo(sub, path, sizeof(path), NULL) != ROOTFS_KEPT)
            _exit(step);
        step++;
        /* and a real change on the full disk fails cleanly, leaving the old
         * file and no temporary */
        int sfd = open(path, O_WRONLY | O_CLOEXEC);
        if (sfd < 0 || pwrite(sfd, "X", 1, 100) != 1)
            _exit(step);
        close(sfd);
        struct err e = {0};
        if (rootfs_prepare_sudo(sub, path, sizeof(path), &e) != -ENOSPC || !err_isset(&e))
            _exit(step);
        step++;
        DIR *d = opendir(sub);
        int n = 0;
        for (struct dirent *de; d && (de = readdir(d));)
            n += de->d_name[0] != '.' || strncmp(de->d_name, ".abx-sudo", 9) == 0;
        if (!d || n != 3 || access(path, F_OK) < 0) /* etc, abx-sudo, filler */
            _exit(step);
        closedir(d);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) >= 100) {
        skip(); /* no mount namespace or tmpfs here */
        return;
    }
    if (WEXITSTATUS(status) != 0)
        fail_msg("full-disk step %d failed", WEXITSTATUS(status));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_generated_files, setup, teardown),
            cmocka_unit_test_setup_teardown(test_nothing_secret_copied, setup, teardown),
            cmocka_unit_test_setup_teardown(test_second_call_replaces, setup, teardown),
            cmocka_unit_test_setup_teardown(test_etc_was_a_file, setup, teardown),
            cmocka_unit_test_setup_teardown(test_missing_state_dir, setup, teardown),
            cmocka_unit_test_setup_teardown(test_sudo_binary, setup, teardown),
            cmocka_unit_test_setup_teardown(test_etc_kept_when_current, setup, teardown),
            cmocka_unit_test_setup_teardown(test_full_disk, setup, teardown),
    };
    umask(022);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
