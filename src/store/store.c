/*
 * store.c - the store's front door: opening one (which backend), the staging
 * writer that hashes data on its way to the store, writing a file, the
 * check. What the backends share (rows, hashing, the verifier, the
 * transaction runner) is shared.c's, the trees' semantics are tree.c's,
 * the GC lease is lease.c's.
 */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "store/store-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/path.h"
#include "util/rand.h"
#include "util/timeutil.h"

int
store_open(const char *where, const char *tmp_dir, struct store **ret, struct err *err)
{
    if (!where || !*where)
        return err_set(err, EINVAL, "no store location given");
    if (!strncmp(where, "postgres://", 11) || !strncmp(where, "postgresql://", 13))
        return store_pg_open(where, tmp_dir, ret, err);
    return store_sqlite_open(where, ret, err);
}

void
store_close(struct store *s)
{
    if (!s)
        return;
    s->ops->close(s);
}

const char *
store_kind(const struct store *s)
{
    return s->ops->kind;
}

/* --- the staging writer --- */

struct store_writer {
    int fd;
    EVP_MD_CTX *md;
    uint64_t size, max;
    uint64_t floor;   /* bytes the file system keeps free */
    uint64_t checked; /* size when the free space was last looked at */
};

void
store_set_floor(struct store *s, uint64_t floor_bytes)
{
    s->floor_bytes = floor_bytes;
}

/* -ENOSPC when writing more bytes would leave less than the floor free. */
static int
check_floor(struct store_writer *w, uint64_t more, struct err *err)
{
    struct statvfs sv;
    w->checked = w->size;
    if (!w->floor || fstatvfs(w->fd, &sv) < 0)
        return 0;
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    if (avail >= w->floor && avail - w->floor >= more)
        return 0;
    return err_set(err, ENOSPC,
                   "the store's file system is down to its reserve: %llu MiB free, %llu MiB of "
                   "it stay free",
                   (unsigned long long)(avail >> 20), (unsigned long long)(w->floor >> 20));
}

int
store_writer_expect(struct store_writer *w, uint64_t n, struct err *err)
{
    return check_floor(w, n, err);
}

int
store_writer_begin(struct store *s, uint64_t max_bytes, struct store_writer **ret, struct err *err)
{
    struct store_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->max = max_bytes;
    w->md = EVP_MD_CTX_new();
    if (!w->md || EVP_DigestInit_ex(w->md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(w->md);
        free(w);
        return -ENOMEM;
    }
    /* Unnamed until committed: a crash or abort leaves nothing behind. */
    w->fd = openat(s->tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0444);
    if (w->fd < 0) {
        int r = err_setx(err, errno, "cannot create a staging file");
        EVP_MD_CTX_free(w->md);
        free(w);
        return r;
    }
    w->floor = s->floor_bytes;
    int r = check_floor(w, 0, err);
    if (r < 0) {
        store_writer_abort(w);
        return r;
    }
    *ret = w;
    return 0;
}

int
store_writer_write(struct store_writer *w, const void *data, size_t n, struct err *err)
{
    if (w->max && n > w->max - w->size)
        return err_set(err, EFBIG, "the file would be larger than %llu bytes",
                       (unsigned long long)w->max);
    int r = 0;
    if (w->size + n - w->checked >= STORE_FLOOR_CHECK_BYTES && (r = check_floor(w, n, err)) < 0)
        return r;
    r = write_full(w->fd, data, n);
    if (r == -ENOSPC || r == -EDQUOT)
        return err_set(err, ENOSPC, "no space left to stage the file");
    if (r < 0)
        return err_setx(err, -r, "cannot write the staging file");
    if (EVP_DigestUpdate(w->md, data, n) != 1)
        return err_set(err, EIO, "hashing failed");
    w->size += n;
    return 0;
}

void
store_writer_abort(struct store_writer *w)
{
    if (!w)
        return;
    safe_close(w->fd);
    EVP_MD_CTX_free(w->md);
    free(w);
}

uint64_t
store_writer_size(const struct store_writer *w)
{
    return w->size;
}

int
store_writer_fd(const struct store_writer *w)
{
    return w->fd;
}

int
store_writer_commit(struct store *s, struct store_writer *w, const char *ws, const char *path,
                    uint32_t mode, const char *if_match, struct store_entry *ret, struct err *err)
{
    unsigned char dg[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    char hash[STORE_HASH_LEN + 1];
    struct store_entry tmp;
    int r;

    if (!store_ws_ok(ws)) {
        r = err_set(err, EINVAL, "invalid workspace id '%.80s'", ws ? ws : "");
        goto out;
    }
    if (!store_path_ok(path, false)) {
        r = err_set(err, EINVAL, "invalid path '%.200s'", path ? path : "");
        goto out;
    }
    if (EVP_DigestFinal_ex(w->md, dg, &dl) != 1) {
        r = err_set(err, EIO, "hashing failed");
        goto out;
    }
    store_to_hex(dg, dl, hash);
    /* The data is on disk before anything points at it. */
    if (fsync(w->fd) < 0) {
        r = err_setx(err, errno, "cannot sync the staging file");
        goto out;
    }
    r = store_commit(s, ws, path, mode & 07777, if_match, w->fd, hash, w->size, ret ? ret : &tmp,
                     err);
out:
    store_writer_abort(w);
    return r;
}

int
store_write(struct store *s, const char *ws, const char *path, int fd, uint32_t mode,
            uint64_t max_bytes, const char *if_match, struct store_entry *ret, struct err *err)
{
    struct store_writer *w;
    static __thread char b[256 * 1024];
    int r = store_writer_begin(s, max_bytes, &w, err);
    if (r < 0)
        return r;
    for (;;) {
        ssize_t k = read(fd, b, sizeof(b));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            r = err_setx(err, errno, "cannot read the data to store");
            break;
        }
        if (k == 0)
            return store_writer_commit(s, w, ws, path, mode, if_match, ret, err);
        r = store_writer_write(w, b, (size_t)k, err);
        if (r < 0)
            break;
    }
    store_writer_abort(w);
    return r;
}

int
store_check(struct store *s, struct store_check_report *ret, struct err *err)
{
    memset(ret, 0, sizeof(*ret));
    return s->ops->check(s, ret, err);
}
