/*
 * fake-backend.h - a store backend in memory, for the unit tests of the
 * shared layer (tree.c, lease.c, store.c's transaction runner): every
 * primitive of store-internal.h over a small table, transactions that roll
 * back, a log of the primitives called and failures on demand. It is also
 * the smallest picture of what a new backend implements. Not a store:
 * nothing is durable, nothing is bounded but by FAKE_ENTRIES.
 */
#pragma once

#include <stdbool.h>

#include "store/store-internal.h"

#define FAKE_ENTRIES 64
#define FAKE_WS      8
#define FAKE_PINS    16
#define FAKE_BLOBS   16
#define FAKE_LOG     8192

/* What a transaction rolls back. */
struct fake_state {
    int n;
    char ws[FAKE_ENTRIES][65];
    struct store_entry e[FAKE_ENTRIES];
    int nws;
    char wss[FAKE_WS][65];
    int npins;
    int64_t pins[FAKE_PINS];
    int nblobs;
    char blobs[FAKE_BLOBS][STORE_HASH_LEN + 1];
    char holder[STORE_HOLDER_MAX + 64];
    uint64_t expires_ms;
};

struct fake {
    struct store base;
    struct fake_state st, saved;
    bool in_tx;
    /* Primitives called, each once followed by a space: "pin begin ...". */
    char log[FAKE_LOG];
    /* The next fail_times calls of fail_op fail with -fail_errno. */
    const char *fail_op;
    int fail_errno, fail_times;
    bool retry;        /* what tx_retry answers */
    uint64_t clock_ms; /* the lease's clock */
    int64_t next_pin;
    int collects;
};

/* A fake store; upload_first gives it blob_known and blob_upload (new
 * content stored before the tree's transaction, as PostgreSQL does). */
struct fake *fake_new(bool upload_first);
void fake_free(struct fake *f);
/* Adds a workspace, a directory or a file (ancestors must be there). */
void fake_add_ws(struct fake *f, const char *ws);
void fake_add(struct fake *f, const char *ws, const char *path, enum store_type type,
              const char *hash);
/* The entry at path, or NULL. */
const struct store_entry *fake_find(struct fake *f, const char *ws, const char *path);
void fake_log_clear(struct fake *f);
