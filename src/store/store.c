/*
 * store.c - what every backend shares below the tree: opening a store (which
 * backend), the transaction runner, the staging writer that hashes data on
 * its way to the store and the verifier that hashes it on its way out. The
 * trees' semantics are tree.c's, the GC lease is lease.c's.
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

uint64_t
store_now_ms(void)
{
    return wall_msec();
}

bool
store_ws_ok(const char *ws)
{
    size_t n = ws ? strlen(ws) : 0;
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((ws[i] >= 'a' && ws[i] <= 'z') || (ws[i] >= '0' && ws[i] <= '9') || ws[i] == '-' ||
              ws[i] == '_'))
            return false;
    return true;
}

bool
store_path_ok(const char *path, bool root_ok)
{
    char norm[PATH_MAX_LEN + 2];
    if (!path || path_normalize(path, strlen(path), norm, sizeof(norm)) < 0)
        return false;
    if (strcmp(norm, path) != 0)
        return false; /* not already normalized */
    return root_ok || !path_is_root(path);
}

void
store_entry_row(struct store_entry *e, const char *path, int64_t type, const char *hash,
                int64_t size, int64_t mode, int64_t mtime_ms)
{
    memset(e, 0, sizeof(*e));
    (void)snprintf(e->path, sizeof(e->path), "%s", path ? path : "");
    e->type = type == STORE_DIR ? STORE_DIR : STORE_FILE;
    (void)snprintf(e->hash, sizeof(e->hash), "%s", hash ? hash : "");
    e->size = (uint64_t)size;
    e->mode = (uint32_t)mode;
    e->mtime_ms = (uint64_t)mtime_ms;
}

void
store_ws_row(struct store_ws *w, const char *id, int64_t created_ms, const char *template_name,
             int64_t cpu_millis, int64_t memory_bytes, int64_t pids, int64_t disk_bytes)
{
    memset(w, 0, sizeof(*w));
    (void)snprintf(w->id, sizeof(w->id), "%s", id ? id : "");
    w->created_ms = (uint64_t)created_ms;
    (void)snprintf(w->template_name, sizeof(w->template_name), "%s",
                   template_name ? template_name : "");
    w->cpu_millis = (uint32_t)cpu_millis;
    w->memory_bytes = (uint64_t)memory_bytes;
    w->pids = (uint32_t)pids;
    w->disk_bytes = (uint64_t)disk_bytes;
}

void
store_range_below(const char *dir, char *lo, char *hi)
{
    (void)snprintf(lo, STORE_RANGE_MAX, "%s/", dir);
    (void)snprintf(hi, STORE_RANGE_MAX, "%s0", dir);
}

static void
to_hex(const unsigned char *d, unsigned n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = '\0';
}

int
store_hash_copy(int fd, store_sink_fn sink, void *ud, char hash[STORE_HASH_LEN + 1],
                uint64_t *ret_size)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char dg[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    uint64_t off = 0;
    int r = 0;
    static __thread char b[256 * 1024];

    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return -ENOMEM;
    }
    for (;;) {
        ssize_t k = pread(fd, b, sizeof(b), (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            r = -errno;
            break;
        }
        if (k == 0)
            break;
        if (EVP_DigestUpdate(md, b, (size_t)k) != 1) {
            r = -EIO;
            break;
        }
        off += (uint64_t)k;
        if (sink && (r = sink(ud, b, (size_t)k)) < 0)
            break;
    }
    if (r == 0 && EVP_DigestFinal_ex(md, dg, &dl) != 1)
        r = -EIO;
    EVP_MD_CTX_free(md);
    if (r < 0)
        return r;
    to_hex(dg, dl, hash);
    if (ret_size)
        *ret_size = off;
    return 0;
}

int
store_hash_fd(int fd, char hash[STORE_HASH_LEN + 1], uint64_t *ret_size)
{
    return store_hash_copy(fd, NULL, NULL, hash, ret_size);
}

/* --- verifying content on its way out --- */

static atomic_uint_fast64_t damaged_reads;

uint64_t
store_damaged_reads(void)
{
    return atomic_load(&damaged_reads);
}

void
store_note_damaged(void)
{
    atomic_fetch_add(&damaged_reads, 1);
}

int
store_verify_begin(struct store_verify *v, const struct store_entry *e)
{
    memset(v, 0, sizeof(*v));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return -ENOMEM;
    }
    v->md = md;
    memcpy(v->hash, e->hash, sizeof(v->hash));
    v->size = e->size;
    return 0;
}

void
store_verify_update(struct store_verify *v, const void *data, size_t n)
{
    /* A failed update leaves the digest wrong, which end() reports. */
    if (v->md && EVP_DigestUpdate(v->md, data, n) != 1) {
        EVP_MD_CTX_free(v->md);
        v->md = NULL;
    }
    v->seen += n;
}

int
store_verify_end(struct store_verify *v, struct err *err)
{
    unsigned char dg[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    char got[STORE_HASH_LEN + 1];
    int r = 0;

    if (v->seen != v->size) {
        r = err_set(err, EBADMSG, "blob %.16s... is damaged: %llu bytes where %llu are recorded",
                    v->hash, (unsigned long long)v->seen, (unsigned long long)v->size);
    } else if (!v->md || EVP_DigestFinal_ex(v->md, dg, &dl) != 1) {
        store_verify_done(v);
        return err_set(err, ENOMEM, "cannot hash the content of blob %.16s...", v->hash);
    } else {
        to_hex(dg, dl, got);
        if (strcmp(got, v->hash) != 0)
            r = err_set(err, EBADMSG, "blob %.16s... is damaged: its content hashes to %.16s...",
                        v->hash, got);
    }
    store_verify_done(v);
    if (r < 0)
        store_note_damaged();
    return r;
}

void
store_verify_done(struct store_verify *v)
{
    EVP_MD_CTX_free(v->md);
    v->md = NULL;
}

/* --- transactions --- */

int
store_tx_run(struct store *s, enum store_tx kind, store_tx_fn fn, void *ctx, struct err *err)
{
    for (int attempt = 1;; attempt++) {
        struct err e1 = {0};
        int r = s->ops->tx_begin(s, kind, &e1);
        if (r >= 0)
            r = fn(s, ctx, &e1);
        if (r >= 0) {
            int c = s->ops->tx_commit(s, &e1);
            if (c < 0)
                r = c;
        }
        s->ops->tx_rollback(s);
        if (r >= 0)
            return r;
        if (attempt >= STORE_TX_ATTEMPTS || !s->ops->tx_retry(s)) {
            if (err && !err_isset(err))
                *err = e1;
            return r;
        }
        /* Back off 5-15 ms per attempt so the other party can finish. */
        unsigned char j = 0;
        (void)rand_bytes(&j, 1);
        struct timespec ts = {0, (long)(attempt * 5000 + (j % 100) * 100) * 1000L};
        (void)nanosleep(&ts, NULL);
    }
}

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
    to_hex(dg, dl, hash);
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
