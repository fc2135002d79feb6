/*
 * store-pg-admin.c - the PostgreSQL store's GC lease, its collector (one
 * candidate per statement, re-checked by the foreign key: see the top of
 * store-pg.c) and its check, each blob in a snapshot of its own.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "store/store-pg-internal.h"
#include "util/cleanup.h"

/* --- GC --- */

/* Takes or renews the lease: compare and swap, creating the row if needed;
 * with from, only while from holds it (taking over from a dead holder). */
int
store_pg_lease(struct store *s, const char *holder, uint64_t lease_ms, const char *from,
               bool *ret_held, struct err *err)
{
    struct pg *q = PG(s);
    _cleanup_res_ PGresult *res = NULL;
    struct pgp p = {0};
    p_text(&p, holder);
    p_int(&p, (int64_t)MIN(lease_ms, (uint64_t)INT32_MAX * 1000));
    if (from)
        p_text(&p, from);
    int r = store_pg_run(q, "lease",
                         from ? "UPDATE gc_lease SET holder = $1, expires_ms = " NOW_MS " + $2"
                                " WHERE id = 1 AND holder = $3"
                              : "INSERT INTO gc_lease AS l (id, holder, expires_ms)"
                                " VALUES (1, $1, " NOW_MS " + $2)"
                                " ON CONFLICT (id) DO UPDATE SET holder = excluded.holder,"
                                " expires_ms = excluded.expires_ms"
                                " WHERE l.expires_ms < " NOW_MS " OR l.holder = excluded.holder",
                         &p, &res, err);
    if (r < 0)
        return r;
    *ret_held = store_pg_affected(res) == 1;
    return 0;
}

int
store_pg_lease_holder(struct store *s, char *buf, size_t n, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    int r = store_pg_run(PG(s), "lease", "SELECT holder FROM gc_lease WHERE id = 1", NULL, &res,
                         err);
    if (r < 0)
        return r;
    buf[0] = '\0';
    if (PQntuples(res) == 1)
        (void)r_str(res, 0, 0, buf, n);
    return 0;
}

int
store_pg_lease_release(struct store *s, const char *holder, struct err *err)
{
    struct pgp p = {0};
    p_text(&p, holder);
    return store_pg_run(
            PG(s), "release the lease",
            "UPDATE gc_lease SET holder = '', expires_ms = 0 WHERE id = 1 AND holder = $1", &p,
            NULL, err);
}

/* Deletes one candidate if it is still garbage: 1 deleted (and its size),
 * 0 kept (in use again, pinned, locked by a writer, or already gone). */
static int
gc_one(struct pg *q, const char *hash, uint64_t *ret_size, struct err *err)
{
    _cleanup_res_ PGresult *res = NULL;
    struct err e1 = {0};
    struct pgp p = {0};
    p_text(&p, hash);
    int r = store_pg_run(
            q, "gc delete",
            "DELETE FROM blobs b USING " ASYNC_COMMIT " WHERE b.hash = $1"
            " AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.hash = $1)"
            " AND NOT EXISTS (SELECT 1 FROM pins p WHERE p.hash = $1 AND p.expires_ms > " NOW_MS
            ") RETURNING b.size",
            &p, &res, &e1);
    if (r < 0) {
        /* 23503: a writer referenced it after our snapshot (its lock made
         * us wait, its entry failed our foreign-key check). */
        if (!strcmp(q->sqlstate, "23503") || store_pg_retryable(q) || !strcmp(q->sqlstate, "55P03"))
            return 0;
        if (err && !err_isset(err))
            *err = e1;
        return r;
    }
    if (PQntuples(res) != 1)
        return 0;
    *ret_size = (uint64_t)r_int(res, 0, 0);
    return 1;
}

int
store_pg_collect(struct store *s, const char *holder, uint64_t lease_ms, struct store_gc_stats *ret,
                 struct err *err)
{
    struct pg *q = PG(s);
    char after[STORE_HASH_LEN + 1] = "";
    bool held = true;
    int r;
    for (bool first = true;; first = false) {
        /* Still ours? A collection that outlives its lease stops. */
        if (!first && ((r = store_pg_lease(s, holder, lease_ms, NULL, &held, err)) < 0 || !held))
            return r < 0 ? r : 0;
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, after);
        p_int(&p, PAGE_ROWS);
        r = store_pg_run(q, "gc scan",
                         "SELECT hash FROM blobs b WHERE hash > $1"
                         " AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.hash = b.hash)"
                         " AND NOT EXISTS (SELECT 1 FROM pins p WHERE p.hash = b.hash"
                         " AND p.expires_ms > " NOW_MS ") ORDER BY hash LIMIT $2",
                         &p, &res, err);
        if (r < 0)
            return r;
        int n = PQntuples(res);
        for (int i = 0; i < n; i++) {
            char hash[STORE_HASH_LEN + 1];
            uint64_t size = 0;
            (void)r_str(res, i, 0, hash, sizeof(hash));
            r = gc_one(q, hash, &size, err);
            if (r < 0)
                return r;
            if (r > 0) {
                ret->blobs_deleted++;
                ret->bytes_freed += size;
            }
            memcpy(after, hash, sizeof(after));
        }
        ret->blobs_seen += (uint64_t)n;
        if (n < PAGE_ROWS)
            break;
    }
    return store_pg_run(q, "gc pins",
                        "DELETE FROM pins USING " ASYNC_COMMIT " WHERE expires_ms <= " NOW_MS, NULL,
                        NULL, err);
}

/* --- check --- */

struct blob_check {
    const char *hash;
    int verdict; /* 0 sound, 1 damaged, 2 gone (collected meanwhile) */
    char problem[200];
};

static int
check_blob_tx(struct store *s, void *ctx, struct err *err)
{
    struct pg *q = PG(s);
    struct blob_check *c = ctx;
    unsigned char dg[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    char got[STORE_HASH_LEN + 1];
    uint64_t size, total = 0, nchunks;
    int r;

    c->verdict = 0;
    c->problem[0] = '\0';
    {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, c->hash);
        r = store_pg_run(q, "check blob",
                         "SELECT b.size, (SELECT count(*) FROM blob_chunks c WHERE c.hash = b.hash)"
                         " FROM blobs b WHERE b.hash = $1",
                         &p, &res, err);
        if (r < 0)
            return r;
        if (PQntuples(res) == 0) {
            c->verdict = 2;
            return 0;
        }
        size = (uint64_t)r_int(res, 0, 0);
        nchunks = (uint64_t)r_int(res, 0, 1);
    }
    if (nchunks != (size + STORE_CHUNK - 1) / STORE_CHUNK) {
        c->verdict = 1;
        (void)snprintf(c->problem, sizeof(c->problem),
                       "blob %.16s... has %llu chunks for %llu bytes", c->hash,
                       (unsigned long long)nchunks, (unsigned long long)size);
        return 0;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return err_set(err, ENOMEM, "store: out of memory");
    }
    for (uint64_t seq = 0; seq < nchunks && c->verdict == 0; seq++) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, c->hash);
        p_int(&p, (int64_t)seq);
        r = store_pg_run(q, "check blob chunk",
                         "SELECT data FROM blob_chunks WHERE hash = $1 AND seq = $2::integer", &p,
                         &res, err);
        if (r < 0) {
            EVP_MD_CTX_free(md);
            return r;
        }
        if (PQntuples(res) != 1) {
            c->verdict = 1;
            (void)snprintf(c->problem, sizeof(c->problem), "blob %.16s... lacks chunk %llu",
                           c->hash, (unsigned long long)seq);
            break;
        }
        size_t n = (size_t)PQgetlength(res, 0, 0);
        total += n;
        if (EVP_DigestUpdate(md, PQgetvalue(res, 0, 0), n) != 1) {
            EVP_MD_CTX_free(md);
            return err_set(err, EIO, "store: hashing failed");
        }
    }
    if (c->verdict == 0 && EVP_DigestFinal_ex(md, dg, &dl) != 1) {
        EVP_MD_CTX_free(md);
        return err_set(err, EIO, "store: hashing failed");
    }
    EVP_MD_CTX_free(md);
    if (c->verdict != 0)
        return 0;
    for (unsigned i = 0; i < dl && 2 * i + 2 < sizeof(got); i++)
        (void)snprintf(got + 2 * i, 3, "%02x", dg[i]);
    if (total != size) {
        c->verdict = 1;
        (void)snprintf(c->problem, sizeof(c->problem), "blob %.16s... holds %llu bytes, not %llu",
                       c->hash, (unsigned long long)total, (unsigned long long)size);
    } else if (strcmp(got, c->hash) != 0) {
        c->verdict = 1;
        (void)snprintf(c->problem, sizeof(c->problem),
                       "blob %.16s... does not match its content (it hashes to %.16s...)", c->hash,
                       got);
    }
    return 0;
}

_printf_(2, 3) static void note_problem(struct store_check_report *rep, const char *fmt, ...)
{
    va_list ap;
    if (rep->first_problem[0])
        return;
    va_start(ap, fmt);
    (void)vsnprintf(rep->first_problem, sizeof(rep->first_problem), fmt, ap);
    va_end(ap);
}

int
store_pg_check(struct store *s, struct store_check_report *rep, struct err *err)
{
    struct pg *q = PG(s);
    char after[STORE_HASH_LEN + 1] = "";
    int r;

    /* Every file row has its blob (the foreign key says so; trust, but
     * verify). A file row without a hash counts as missing its blob. */
    {
        _cleanup_res_ PGresult *res = NULL;
        r = store_pg_run(
                q, "check files",
                "SELECT count(*), count(*) FILTER (WHERE NOT EXISTS"
                " (SELECT 1 FROM blobs b WHERE b.hash = e.hash)) FROM entries e WHERE e.type = 1",
                NULL, &res, err);
        if (r < 0)
            return r;
        rep->files = (uint64_t)r_int(res, 0, 0);
        rep->missing_blobs = (uint64_t)r_int(res, 0, 1);
    }
    if (rep->missing_blobs) {
        _cleanup_res_ PGresult *res = NULL;
        r = store_pg_run(q, "check files",
                         "SELECT e.ws, e.path, COALESCE(e.hash, '') FROM entries e WHERE e.type = 1"
                         " AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.hash = e.hash) LIMIT 1",
                         NULL, &res, err);
        if (r < 0)
            return r;
        if (PQntuples(res) == 1) {
            char ws[65], path[4100], hash[STORE_HASH_LEN + 1];
            (void)r_str(res, 0, 0, ws, sizeof(ws));
            (void)r_str(res, 0, 1, path, sizeof(path));
            (void)r_str(res, 0, 2, hash, sizeof(hash));
            note_problem(rep, "workspace '%s' file '/%s' has no blob %.16s...", ws, path, hash);
        }
    }

    /* Every blob's chunks hash to its name and add up to its size; each
     * blob in its own snapshot, so GC may run meanwhile. */
    for (;;) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_text(&p, after);
        p_int(&p, PAGE_ROWS);
        r = store_pg_run(q, "check blobs",
                         "SELECT hash FROM blobs WHERE hash > $1 ORDER BY hash LIMIT $2", &p, &res,
                         err);
        if (r < 0)
            return r;
        int n = PQntuples(res);
        for (int i = 0; i < n; i++) {
            (void)r_str(res, i, 0, after, sizeof(after));
            struct blob_check c = {after, 0, ""};
            r = store_tx_run(&q->base, STORE_TX_READ, check_blob_tx, &c, err);
            if (r < 0)
                return r;
            if (c.verdict == 2)
                continue;
            rep->blobs++;
            if (c.verdict == 1) {
                rep->corrupt_blobs++;
                note_problem(rep, "%s", c.problem);
            }
        }
        if (n < PAGE_ROWS)
            break;
    }

    /* Every entry's parent directory exists. */
    {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_path(&p, ".");
        r = store_pg_run(
                q, "check tree",
                "SELECT count(*) FROM entries e WHERE e.parent <> $1 AND NOT EXISTS"
                " (SELECT 1 FROM entries d WHERE d.ws = e.ws AND d.path = e.parent AND d.type = 2)",
                &p, &res, err);
        if (r < 0)
            return r;
        rep->orphan_entries = (uint64_t)r_int(res, 0, 0);
    }
    if (rep->orphan_entries) {
        _cleanup_res_ PGresult *res = NULL;
        struct pgp p = {0};
        p_path(&p, ".");
        r = store_pg_run(
                q, "check tree",
                "SELECT e.ws, e.path FROM entries e WHERE e.parent <> $1 AND NOT EXISTS"
                " (SELECT 1 FROM entries d WHERE d.ws = e.ws AND d.path = e.parent AND d.type = 2)"
                " LIMIT 1",
                &p, &res, err);
        if (r < 0)
            return r;
        if (PQntuples(res) == 1) {
            char ws[65], path[4100];
            (void)r_str(res, 0, 0, ws, sizeof(ws));
            (void)r_str(res, 0, 1, path, sizeof(path));
            note_problem(rep, "workspace '%s' entry '/%s' has no parent directory", ws, path);
        }
    }
    return 0;
}
