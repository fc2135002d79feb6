/*
 * test-disk.c - the sandboxes' bounded disk on a real loop-mounted btrfs
 * (root only): an image made fully allocated and mounted at the directory,
 * areas created, limited and destroyed, EDQUOT at the bound for root and
 * for another uid (and more after raising it), an area's quota group gone
 * with it, a nested subvolume no obstacle to destroying, reclaim of what an
 * earlier run left (areas, plain directories, files beneath the mount
 * point, a mount an earlier run did not undo), the image reused across
 * opens and made anew when its size changes, the state file system's
 * floor, and every mount and loop device gone after each test. Exits 77
 * without root, loop devices, btrfs or mkfs.btrfs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/magic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "jail/disk.h"
#include "util/fd.h"

#define MIB        (1ull << 20)
#define IMAGE_SIZE (256 * MIB)

static char tmp[256];
static char dir[320];
static char image[320];

static void
msleep(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    (void)nanosleep(&ts, NULL);
}

static struct disk_config
config(uint64_t image_bytes, uint64_t floor_bytes)
{
    return (struct disk_config){
            .dir = dir, .image = image, .image_bytes = image_bytes, .floor_bytes = floor_bytes};
}

static bool
is_btrfs(const char *path)
{
    struct statfs sf;
    return statfs(path, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC;
}

/* Whether a loop device still has our image behind it. */
static bool
loop_attached(void)
{
    bool found = false;
    DIR *d = opendir("/sys/block");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char p[300];
        struct buf b;
        if (strncmp(de->d_name, "loop", 4) != 0)
            continue;
        (void)snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", de->d_name);
        buf_init(&b, 4096);
        if (read_file_at(AT_FDCWD, p, 4096, &b) == 0 && strstr(b.data, tmp))
            found = true;
        buf_done(&b);
    }
    if (d)
        closedir(d);
    return found;
}

static int
setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (snprintf(tmp, sizeof(tmp), "%.200s/abx-test-disk-XXXXXX", t) >= (int)sizeof(tmp) ||
        !mkdtemp(tmp))
        return -1;
    (void)snprintf(dir, sizeof(dir), "%s/sandboxes", tmp);
    (void)snprintf(image, sizeof(image), "%s/disk.img", tmp);
    return 0;
}

/* Every test leaves no mount and no loop device behind. */
static int
teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 4 && is_btrfs(dir); i++)
        (void)umount2(dir, MNT_DETACH);
    bool attached = true;
    for (int i = 0; i < 250 && (attached = loop_attached()); i++)
        msleep(20);
    int r = rm_rf_at(AT_FDCWD, tmp);
    if (attached)
        fprintf(stderr, "a loop device is still attached to %s\n", image);
    return r == 0 && !attached ? 0 : -1;
}

/* Writes MiB blocks to dirfd/name until an error or max; returns the
 * errno that stopped it (0 = none) and the bytes written. */
static int
fill(int dirfd, const char *name, uint64_t max, uint64_t *ret_bytes)
{
    static char block[MIB];
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int e = 0;
    uint64_t n = 0;
    if (fd < 0)
        return errno;
    memset(block, 'x', sizeof(block));
    while (n < max) {
        ssize_t k = write(fd, block, sizeof(block));
        if (k < 0) {
            e = errno;
            break;
        }
        n += (uint64_t)k;
    }
    if (!e && fsync(fd) < 0)
        e = errno;
    close(fd);
    *ret_bytes = n;
    return e;
}

static void
test_make_and_bound(void **state)
{
    struct disk *d = NULL;
    struct err e = {0};
    struct disk_config c = config(IMAGE_SIZE, 0);
    uint64_t n = 0, used = 0;
    struct stat st;
    (void)state;

    assert_int_equal(disk_open(&c, &d, &e), 0);
    assert_true(disk_made_image(d));
    assert_true(is_btrfs(dir));
    assert_int_equal(disk_size(d), IMAGE_SIZE);
    assert_non_null(strstr(disk_describe(d), image));
    /* Fully allocated: the state file system's space is taken now. */
    assert_int_equal(stat(image, &st), 0);
    assert_int_equal((uint64_t)st.st_size, IMAGE_SIZE);
    assert_true((uint64_t)st.st_blocks * 512 >= IMAGE_SIZE);

    assert_int_equal(disk_area_create(d, "a1", 20 * MIB, &e), 0);
    assert_int_equal(disk_area_create(d, "a1", 20 * MIB, &e), -EEXIST);
    err_clear(&e);
    int afd = openat(disk_dir_fd(d), "a1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(afd >= 0);
    assert_int_equal(fstat(afd, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    /* Root is bounded too (abxd writes uploads). */
    assert_int_equal(fill(afd, "big", 50 * MIB, &n), EDQUOT);
    assert_true(n >= 15 * MIB && n <= 20 * MIB);
    /* A second area is not affected by the first being full. */
    assert_int_equal(disk_area_create(d, "a2", 0, &e), 0);
    int bfd = openat(disk_dir_fd(d), "a2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(fill(bfd, "f", 40 * MIB, &n), 0);
    assert_int_equal(n, 40 * MIB);
    close(bfd);

    /* Raised: more fits. Then the other uid, under the same bound. */
    assert_int_equal(disk_area_limit(d, "a1", 60 * MIB, &e), 0);
    assert_int_equal(fill(afd, "more", 20 * MIB, &n), 0);
    assert_int_equal(disk_area_limit(d, "a1", 45 * MIB, &e), 0);
    assert_int_equal(fchown(afd, 4242, 4242), 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (setresgid(4242, 4242, 4242) < 0 || setresuid(4242, 4242, 4242) < 0)
            _exit(100);
        _exit(fill(afd, "user", 50 * MIB, &n));
    }
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), EDQUOT);

    sync();
    assert_int_equal(disk_area_usage(d, "a1", &used, &e), 0);
    assert_true(used >= 38 * MIB && used <= 47 * MIB);
    close(afd);

    /* Names are checked. */
    assert_int_equal(disk_area_create(d, "../x", 0, &e), -EINVAL);
    err_clear(&e);
    assert_int_equal(disk_area_create(d, "", 0, &e), -EINVAL);
    err_clear(&e);
    assert_int_equal(disk_area_destroy(d, "A", &e), -EINVAL);
    err_clear(&e);

    assert_int_equal(disk_area_destroy(d, "a1", &e), 0);
    assert_int_equal(disk_area_destroy(d, "a2", &e), 0);
    assert_int_equal(disk_area_destroy(d, "a2", &e), 0); /* gone is fine */
    assert_int_equal(faccessat(disk_dir_fd(d), "a1", F_OK, 0), -1);
    d = disk_free(d);
    assert_false(is_btrfs(dir));
}

/* The quota group of a destroyed area does not stay (removed by us on
 * kernels that keep it, by the kernel itself on newer ones). */
static void
test_qgroup_goes(void **state)
{
    struct disk *d = NULL;
    struct err e = {0};
    struct disk_config c = config(IMAGE_SIZE, 0);
    (void)state;

    assert_int_equal(disk_open(&c, &d, &e), 0);
    assert_int_equal(disk_area_create(d, "q1", 10 * MIB, &e), 0);
    /* Find its group in sysfs: the one with max_rfer 10 MiB. */
    DIR *sys = opendir("/sys/fs/btrfs");
    struct dirent *de;
    char group[800] = "";
    while (sys && (de = readdir(sys)) && !group[0]) {
        char p[300];
        (void)snprintf(p, sizeof(p), "/sys/fs/btrfs/%s/qgroups", de->d_name);
        DIR *q = opendir(p);
        struct dirent *qe;
        while (q && (qe = readdir(q))) {
            char f[800];
            struct buf b;
            (void)snprintf(f, sizeof(f), "%s/%s/max_referenced", p, qe->d_name);
            buf_init(&b, 64);
            if (read_file_at(AT_FDCWD, f, 64, &b) == 0 && atoll(b.data) == (long long)(10 * MIB)) {
                (void)snprintf(group, sizeof(group), "%s/%s", p, qe->d_name);
            }
            buf_done(&b);
        }
        if (q)
            closedir(q);
    }
    if (sys)
        closedir(sys);
    assert_true(group[0]);
    assert_int_equal(disk_area_destroy(d, "q1", &e), 0);
    /* Newer kernels keep the group until the cleaner has dropped the
     * subvolume: BTRFS_IOC_SYNC commits and wakes it. */
    bool gone = false;
    for (int i = 0; i < 250 && !(gone = access(group, F_OK) < 0); i++) {
        assert_int_equal(ioctl(disk_dir_fd(d), BTRFS_IOC_SYNC, NULL), 0);
        msleep(20);
    }
    assert_true(gone);
    d = disk_free(d);
}

static void
test_reuse_and_reclaim(void **state)
{
    struct disk *d = NULL, *d2 = NULL;
    struct err e = {0};
    struct disk_config c = config(IMAGE_SIZE, 0);
    struct stat st;
    uint64_t n;
    (void)state;

    /* What an unbounded earlier run left beneath the mount point. */
    assert_int_equal(mkdir_p(dir, 0700), 0);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    assert_int_equal(mkdirat(dfd, "old1", 0700), 0);
    assert_int_equal(mkdirat(dfd, "old1/home", 0700), 0);
    assert_int_equal(write_file_at(dfd, "old1/home/f", "data", 0600), 0);
    assert_int_equal(write_file_at(dfd, "stray", "x", 0600), 0);

    assert_int_equal(disk_open(&c, &d, &e), 0);
    assert_true(disk_made_image(d));
    assert_int_equal(stat(image, &st), 0);
    ino_t ino = st.st_ino;
    assert_int_equal(disk_area_create(d, "s1", 10 * MIB, &e), 0);
    assert_int_equal(disk_area_create(d, "s2", 10 * MIB, &e), 0);
    int afd = openat(disk_dir_fd(d), "s2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(fill(afd, "f", 5 * MIB, &n), 0);
    close(afd);
    assert_int_equal(mkdirat(disk_dir_fd(d), "plain", 0700), 0);
    /* A subvolume inside an area (seccomp keeps sandboxes from this). */
    struct btrfs_ioctl_vol_args va;
    memset(&va, 0, sizeof(va));
    (void)snprintf(va.name, sizeof(va.name), "nested");
    afd = openat(disk_dir_fd(d), "s1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(ioctl(afd, BTRFS_IOC_SUBVOL_CREATE, &va), 0);
    close(afd);

    /* An earlier run that did not unmount: the next open uses its mount. */
    assert_int_equal(disk_open(&c, &d2, &e), 0);
    assert_false(disk_made_image(d2));
    assert_non_null(strstr(disk_describe(d2), "earlier run"));
    assert_int_equal(disk_reclaim(d2, &e), 3); /* s1 (with nested), s2, plain */
    assert_int_equal(faccessat(disk_dir_fd(d2), "s1", F_OK, 0), -1);
    d2 = disk_free(d2);
    close(dfd);
    d = disk_free(d); /* its lazy unmount finds nothing to do */
    assert_false(is_btrfs(dir));

    /* Beneath the mount point the leftovers went before the mount. */
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(faccessat(dfd, "old1", F_OK, 0), -1);
    assert_int_equal(faccessat(dfd, "stray", F_OK, 0), -1);
    close(dfd);

    /* Reused: same file, not made again. */
    assert_int_equal(disk_open(&c, &d, &e), 0);
    assert_false(disk_made_image(d));
    assert_int_equal(stat(image, &st), 0);
    assert_int_equal(st.st_ino, ino);
    assert_int_equal(disk_reclaim(d, &e), 0);
    d = disk_free(d);

    /* Another configured size: made anew. */
    c.image_bytes = IMAGE_SIZE + 64 * MIB;
    assert_int_equal(disk_open(&c, &d, &e), 0);
    assert_true(disk_made_image(d));
    assert_int_equal(disk_size(d), IMAGE_SIZE + 64 * MIB);
    d = disk_free(d);
}

static void
test_space(void **state)
{
    struct disk *d = NULL;
    struct err e = {0};
    struct statvfs sv;
    (void)state;

    assert_int_equal(statvfs(tmp, &sv), 0);
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;

    /* Larger than the file system: refused, nothing left behind. */
    struct disk_config c = config(1ull << 50, 0);
    assert_int_equal(disk_open(&c, &d, &e), -ENOSPC);
    assert_non_null(strstr(e.msg, "floor"));
    err_clear(&e);
    assert_false(is_btrfs(dir));
    assert_int_equal(access(image, F_OK), -1);

    /* Fits, but would eat into the floor. */
    c = config(IMAGE_SIZE, avail);
    assert_int_equal(disk_open(&c, &d, &e), -ENOSPC);
    err_clear(&e);
    assert_false(is_btrfs(dir));

    /* The default shrinks to half of what is above the floor (the disk is
     * shared: others may write meanwhile, hence the range). */
    c = config(0, avail - 1200 * MIB);
    assert_int_equal(disk_open(&c, &d, &e), 0);
    assert_true(disk_size(d) >= 256 * MIB && disk_size(d) <= 650 * MIB);
    d = disk_free(d);
    /* Even the smallest image does not fit above this floor. */
    assert_int_equal(unlink(image), 0);
    c = config(0, avail - 100 * MIB);
    assert_int_equal(disk_open(&c, &d, &e), -ENOSPC);
    assert_non_null(strstr(e.msg, "at least"));
}

int
main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skip: loop devices and mounts need root\n");
        return 77;
    }
    if (access("/dev/loop-control", F_OK) < 0) {
        fprintf(stderr, "skip: no loop devices\n");
        return 77;
    }
    if (access("/usr/sbin/mkfs.btrfs", X_OK) < 0 && access("/sbin/mkfs.btrfs", X_OK) < 0) {
        fprintf(stderr, "skip: no mkfs.btrfs (btrfs-progs)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_make_and_bound, setup, teardown),
            cmocka_unit_test_setup_teardown(test_qgroup_goes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_reuse_and_reclaim, setup, teardown),
            cmocka_unit_test_setup_teardown(test_space, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
