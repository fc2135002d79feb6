/*
 * disk-bench.c - what the sandboxes' disk bound costs (src/jail/disk.h),
 * measured on the module itself, without abxd.
 *
 * In a directory of its own (--dir, on the disk whose cost matters): makes
 * the disk image (fallocate, mkfs.btrfs, loop, mount, quotas) and mounts it
 * again as a restart would; then per sandbox the area work abxd does (a
 * subvolume with a quota limit, created and destroyed), first on an empty
 * disk, then with --areas bounded areas existing (each holding a small
 * file, as a home would); the cost of a quota-bounded write against a
 * write in an unbounded area with those areas present; reading an area's
 * usage; destroying them all. Prints "disk.<what>.<key>=value" lines
 * (bench-util.h). Root only. Removes its image, mount and loop device
 * whatever happens, except when killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench-util.h"
#include "jail/disk.h"

#define AREA_LIMIT (64ull << 20) /* each area's bound */
#define SMALL_FILE 65536         /* what each of the many areas holds */

static const char *arg_dir;
static uint64_t arg_areas = 1000;
static uint64_t arg_rounds = 200;
static uint64_t arg_image_mb = 4096;
static uint64_t arg_write_mb = 256;

static int
fail(const char *what, const struct err *e, int r)
{
    fprintf(stderr, "disk-bench: %s: %s\n", what, e && e->msg[0] ? e->msg : strerror(-r));
    return 1;
}

/* rounds of create + destroy, timed apart. */
static int
churn(struct disk *d, const char *name)
{
    struct samples cr, de;
    char id[32], key[64];
    struct err e = {0};
    int r = 0;

    if (samples_init(&cr, arg_rounds) < 0 || samples_init(&de, arg_rounds) < 0)
        return -ENOMEM;
    for (uint64_t i = 0; i < arg_rounds && r == 0; i++) {
        (void)snprintf(id, sizeof(id), "churn-%llu", (unsigned long long)i);
        uint64_t t0 = bench_now_ns();
        r = disk_area_create(d, id, AREA_LIMIT, &e);
        uint64_t t1 = bench_now_ns();
        if (r == 0)
            r = disk_area_destroy(d, id, &e);
        uint64_t t2 = bench_now_ns();
        (void)samples_add(&cr, t1 - t0);
        (void)samples_add(&de, t2 - t1);
    }
    if (r < 0) {
        fprintf(stderr, "disk-bench: churn: %s\n", e.msg);
    } else {
        (void)snprintf(key, sizeof(key), "disk.%s_create", name);
        samples_report(&cr, key);
        (void)snprintf(key, sizeof(key), "disk.%s_destroy", name);
        samples_report(&de, key);
    }
    samples_done(&cr);
    samples_done(&de);
    return r;
}

/* Writes mb MiB into dir/name and fsyncs; MiB/s as disk.<what>.mib_per_s. */
static int
write_rate(int dirfd, const char *what)
{
    static char block[1 << 20];
    char key[64];
    memset(block, 'x', sizeof(block));
    int fd = openat(dirfd, "w.bin", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < arg_write_mb; i++)
        if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block)) {
            int r = -errno;
            close(fd);
            return r ? r : -EIO;
        }
    int r = fsync(fd) < 0 ? -errno : 0;
    uint64_t t = bench_now_ns() - t0;
    close(fd);
    (void)unlinkat(dirfd, "w.bin", 0);
    (void)snprintf(key, sizeof(key), "disk.%s", what);
    bench_result(key, "mib_per_s", "%.0f", (double)arg_write_mb / ((double)t / 1e9));
    return r;
}

static int
run(struct disk **dp, const struct disk_config *c)
{
    struct err e = {0};
    struct samples s;
    char id[32];
    int r;

    /* The image, made; then mounted again (a restart). */
    uint64_t t0 = bench_now_ns();
    if ((r = disk_open(c, dp, &e)) < 0)
        return fail("open", &e, r);
    bench_result("disk.make", "ms", "%.1f", (double)(bench_now_ns() - t0) / 1e6);
    bench_result("disk.make", "image_mib", "%llu", (unsigned long long)(disk_size(*dp) >> 20));
    *dp = disk_free(*dp);
    t0 = bench_now_ns();
    if ((r = disk_open(c, dp, &e)) < 0)
        return fail("reopen", &e, r);
    bench_result("disk.mount", "ms", "%.1f", (double)(bench_now_ns() - t0) / 1e6);
    struct disk *d = *dp;

    if ((r = churn(d, "empty")) < 0)
        return 1;
    /* Writes: into a bounded area and into an unbounded one. */
    if ((r = disk_area_create(d, "wbound", arg_write_mb * 2 << 20, &e)) < 0 ||
        (r = disk_area_create(d, "wfree", 0, &e)) < 0)
        return fail("area", &e, r);
    int wb = openat(disk_dir_fd(d), "wbound", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int wf = openat(disk_dir_fd(d), "wfree", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (wb < 0 || wf < 0)
        return fail("open area", NULL, -errno);
    if ((r = write_rate(wf, "write_warmup")) < 0 ||
        (r = write_rate(wf, "write_unbounded_empty")) < 0 ||
        (r = write_rate(wb, "write_bounded_empty")) < 0)
        return fail("write", NULL, r);

    /* Many bounded areas, each with a small file. */
    if (samples_init(&s, arg_areas) < 0)
        return 1;
    static char small[SMALL_FILE];
    memset(small, 'y', sizeof(small));
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < arg_areas; i++) {
        (void)snprintf(id, sizeof(id), "many-%llu", (unsigned long long)i);
        uint64_t a = bench_now_ns();
        if ((r = disk_area_create(d, id, AREA_LIMIT, &e)) < 0)
            return fail("many", &e, r);
        (void)samples_add(&s, bench_now_ns() - a);
        int afd = openat(disk_dir_fd(d), id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd = afd < 0 ? -1 : openat(afd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, small, sizeof(small)) != (ssize_t)sizeof(small))
            return fail("many: write", NULL, -errno);
        close(fd);
        close(afd);
    }
    sync();
    bench_result("disk.fill", "areas", "%llu", (unsigned long long)arg_areas);
    bench_result("disk.fill", "ms", "%.0f", (double)(bench_now_ns() - t0) / 1e6);
    samples_report(&s, "disk.fill_create");
    samples_done(&s);

    if ((r = churn(d, "many")) < 0)
        return 1;
    if ((r = write_rate(wf, "write_unbounded_many")) < 0 ||
        (r = write_rate(wb, "write_bounded_many")) < 0)
        return fail("write", NULL, r);
    close(wb);
    close(wf);

    /* Usage and a new limit on one of many. */
    if (samples_init(&s, arg_rounds) < 0)
        return 1;
    for (uint64_t i = 0; i < arg_rounds; i++) {
        uint64_t used, a = bench_now_ns();
        if ((r = disk_area_usage(d, "many-0", &used, &e)) < 0)
            return fail("usage", &e, r);
        (void)samples_add(&s, bench_now_ns() - a);
    }
    samples_report(&s, "disk.usage");
    samples_done(&s);
    if (samples_init(&s, arg_rounds) < 0)
        return 1;
    for (uint64_t i = 0; i < arg_rounds; i++) {
        uint64_t a = bench_now_ns();
        if ((r = disk_area_limit(d, "many-1", AREA_LIMIT + (i % 2) * 4096 * 256, &e)) < 0)
            return fail("limit", &e, r);
        (void)samples_add(&s, bench_now_ns() - a);
    }
    samples_report(&s, "disk.limit");
    samples_done(&s);

    /* Destroying them all (what reclaim does after a crash). */
    t0 = bench_now_ns();
    if ((r = disk_reclaim(d, &e)) < 0)
        return fail("reclaim", &e, r);
    bench_result("disk.reclaim", "areas", "%d", r);
    bench_result("disk.reclaim", "ms", "%.0f", (double)(bench_now_ns() - t0) / 1e6);
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
            {"dir", required_argument, NULL, 'd'},      {"areas", required_argument, NULL, 'a'},
            {"rounds", required_argument, NULL, 'n'},   {"image-mb", required_argument, NULL, 'i'},
            {"write-mb", required_argument, NULL, 'w'}, {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        uint64_t *v = o == 'a'   ? &arg_areas
                      : o == 'n' ? &arg_rounds
                      : o == 'i' ? &arg_image_mb
                      : o == 'w' ? &arg_write_mb
                                 : NULL;
        if (o == 'd')
            arg_dir = optarg;
        else if (!v || bench_parse_u64(optarg, v) < 0) {
            fprintf(stderr, "usage: disk-bench --dir DIR [--areas N] [--rounds N] "
                            "[--image-mb N] [--write-mb N]\n");
            return 2;
        }
    }
    if (!arg_dir || arg_dir[0] != '/' || !arg_rounds || !arg_areas) {
        fprintf(stderr, "disk-bench: --dir must be an absolute directory\n");
        return 2;
    }
    char dir[4096], image[4096];
    (void)snprintf(dir, sizeof(dir), "%s/sandboxes", arg_dir);
    (void)snprintf(image, sizeof(image), "%s/disk.img", arg_dir);
    struct disk_config c = {dir, image, arg_image_mb << 20, 0};
    struct disk *d = NULL;
    int rc = run(&d, &c);
    if (d) {
        struct err e = {0};
        (void)disk_reclaim(d, &e);
        disk_free(d);
    }
    (void)umount2(dir, MNT_DETACH);
    (void)unlink(image);
    (void)rmdir(dir);
    return rc;
}
