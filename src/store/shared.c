/*
 * shared.c - what every backend shares below the tree: the checks of
 * workspace ids and paths, filling rows, hashing a file, the verifier that
 * hashes content on its way out (and counts damage), and the transaction
 * runner. It calls no backend by name (only through struct store_ops), so
 * the backends and tree.c use it without a circle.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store-internal.h"
#include "store/store.h"
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

void
store_to_hex(const unsigned char *d, unsigned n, char *out)
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
    store_to_hex(dg, dl, hash);
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
        store_to_hex(dg, dl, got);
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
