/*
 * replay.c - a main() for the fuzz targets in builds without libFuzzer
 * (gcc, or clang without -Dfuzz=true): it calls LLVMFuzzerInitialize when
 * the target has one, then LLVMFuzzerTestOneInput once on each file it is
 * given, or on each file in each directory it is given
 * (in name order, not descending), as `fuzz-x -runs=0 corpus/x` does. A
 * broken invariant aborts, as under libFuzzer; the exit status is 0 when
 * every input ran, 1 when one could not be read.
 *
 * Each input is a heap copy of exactly its size, so a build with ASan still
 * catches a read past its end. This driver does not mutate: fuzzing itself
 * needs the clang build (build-asan, -Dfuzz=true; docs/testing.md).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-common.h"

/* A target's one-time setup, as libFuzzer calls it before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Larger than any committed seed; libFuzzer's own default -max_len is 4096. */
#define REPLAY_MAX_INPUT (64u << 20)
#define REPLAY_MAX_FILES 100000u

static int
replay_fd(int fd, const char *name)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        fprintf(stderr, "replay: %s: %s\n", name, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > REPLAY_MAX_INPUT) {
        fprintf(stderr, "replay: %s: not a regular file of at most %u bytes\n", name,
                REPLAY_MAX_INPUT);
        return -1;
    }
    size_t size = (size_t)st.st_size, got = 0;
    uint8_t *data = malloc(size ? size : 1);
    if (!data) {
        fprintf(stderr, "replay: %s: out of memory\n", name);
        return -1;
    }
    while (got < size) {
        ssize_t n = read(fd, data + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "replay: %s: %s\n", name, n < 0 ? strerror(errno) : "short read");
            free(data);
            return -1;
        }
        got += (size_t)n;
    }
    (void)LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays every regular file directly in dir; returns the number run, or -1. */
static long
replay_dir(int dfd, const char *dir)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        (void)close(dfd);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    long ran = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == REPLAY_MAX_FILES) {
            fprintf(stderr, "replay: %s: more than %u files\n", dir, REPLAY_MAX_FILES);
            ran = -1;
            goto out;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **v = realloc(names, ncap * sizeof(*v));
            if (!v) {
                ran = -1;
                goto out;
            }
            names = v;
            cap = ncap;
        }
        if (!(names[n] = strdup(e->d_name))) {
            ran = -1;
            goto out;
        }
        n++;
    }
    if (errno) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        ran = -1;
        goto out;
    }
    if (n)
        qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        int fd = openat(dirfd(d), names[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
            fprintf(stderr, "replay: %s/%s: %s\n", dir, names[i], strerror(errno));
            ran = -1;
            goto out;
        }
        int r = replay_fd(fd, names[i]);
        (void)close(fd);
        if (r < 0) {
            ran = -1;
            goto out;
        }
        ran++;
    }
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    (void)closedir(d);
    return ran;
}

int
main(int argc, char **argv)
{
    long total = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            fprintf(stderr,
                    "%s: this build only replays inputs (no libFuzzer, no '%s'); fuzz with "
                    "the clang build: build-asan/tests/fuzz/ (docs/testing.md)\n",
                    argv[0], argv[i]);
            return 2;
        }
    }
    if (LLVMFuzzerInitialize)
        (void)LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            if (fd >= 0)
                (void)close(fd);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            long n = replay_dir(fd, argv[i]);
            if (n < 0)
                return 1;
            total += n;
        } else {
            int r = replay_fd(fd, argv[i]);
            (void)close(fd);
            if (r < 0)
                return 1;
            total++;
        }
    }
    printf("replayed %ld inputs\n", total);
    return 0;
}
