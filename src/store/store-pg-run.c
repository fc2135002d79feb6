/*
 * store-pg-run.c - the PostgreSQL store's connection: opening it, running
 * one statement (reopening a connection found dead outside a transaction),
 * and turning libpq's failures into errno values and one-line messages
 * (store-pg.c's comment lists the mapping). The statements themselves are
 * the other store-pg-*.c files'.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/store-pg-internal.h"
#include "util/cleanup.h"

#define MIN_SERVER 110000 /* PostgreSQL 11 */

/* Settings every connection (and every reconnection) gets. */
static const char session_sql[] = "SET synchronous_commit = on;"
                                  "SET default_transaction_isolation = 'read committed';"
                                  "SET client_min_messages = warning;"
                                  "SET client_encoding = 'UTF8'";

/* --- errors and statements --- */

/* libpq's messages span lines; err wants one. */
static void
one_line(const char *in, char *out, size_t outsz)
{
    size_t n = 0;
    bool space = false;
    for (; in && *in && n + 1 < outsz; in++) {
        bool blank = *in == '\n' || *in == '\r' || *in == '\t' || *in == ' ';
        if (blank) {
            space = n > 0;
            continue;
        }
        if (space && n + 2 < outsz)
            out[n++] = ' ';
        space = false;
        out[n++] = *in;
    }
    out[n] = '\0';
}

static int
pg_errno(const char *state)
{
    static const struct {
        const char *state;
        int err;
    } map[] = {
            {"23505", EEXIST},       /* unique_violation */
            {"23503", EBUSY},        /* foreign_key_violation: a row vanished under us */
            {"40001", EBUSY},        /* serialization_failure */
            {"40P01", EBUSY},        /* deadlock_detected */
            {"55P03", EBUSY},        /* lock_not_available */
            {"53100", ENOSPC},       /* disk_full */
            {"53200", ENOMEM},       /* out_of_memory */
            {"53300", EBUSY},        /* too_many_connections */
            {"54000", ENAMETOOLONG}, /* program_limit_exceeded: a key too big for an index */
            {"25006", EROFS},        /* read_only_sql_transaction (a standby) */
            {"42501", EACCES},       /* insufficient_privilege */
            {"57014", ETIMEDOUT},    /* query_canceled (statement_timeout) */
    };
    if (!state || !*state)
        return -EIO;
    for (size_t i = 0; i < ELEMENTSOF(map); i++)
        if (!strcmp(state, map[i].state))
            return -map[i].err;
    if (!strncmp(state, "22", 2))
        return -EINVAL; /* data exception */
    return -EIO;
}

bool
store_pg_retryable(const struct pg *q)
{
    return !strcmp(q->sqlstate, "40001") || !strcmp(q->sqlstate, "40P01");
}

/* Records why a statement failed. */
int
store_pg_fail(struct pg *q, const PGresult *res, const char *what, struct err *err)
{
    char msg[200];
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

    if (PQstatus(q->conn) != CONNECTION_OK) {
        one_line(PQerrorMessage(q->conn), msg, sizeof(msg));
        (void)snprintf(q->sqlstate, sizeof(q->sqlstate), "08006");
        return err_set(err, EIO, "store: %s: connection to the database lost: %s", what, msg);
    }
    if (!res)
        return err_set(err, ENOMEM, "store: %s: out of memory", what);
    (void)snprintf(q->sqlstate, sizeof(q->sqlstate), "%s", state ? state : "");
    one_line(primary ? primary : PQresultErrorMessage(res), msg, sizeof(msg));
    if (state && !strcmp(state, "54000"))
        return err_set(err, ENAMETOOLONG,
                       "store: %s: the path is too long for the PostgreSQL store to index (%s)",
                       what, msg);
    return err_set(err, -pg_errno(state), "store: %s: %s", what, msg);
}

static int
conn_fail(struct pg *q, struct err *err)
{
    char msg[220];
    one_line(q->conn ? PQerrorMessage(q->conn) : "out of memory", msg, sizeof(msg));
    return err_set(err, ECONNREFUSED, "cannot connect to the PostgreSQL store: %s", msg);
}

static void
ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* the store does not log */
}

static int
session_setup(struct pg *q, struct err *err)
{
    _cleanup_res_ PGresult *res = PQexec(q->conn, session_sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return store_pg_fail(q, res, "session setup", err);
    return 0;
}

static int
reconnect(struct pg *q, struct err *err)
{
    q->in_tx = false;
    PQreset(q->conn);
    if (PQstatus(q->conn) != CONNECTION_OK)
        return conn_fail(q, err);
    return session_setup(q, err);
}

/* Runs one statement. *ret (when ret is not NULL) gets the result, which the
 * caller clears. */
int
store_pg_run(struct pg *q, const char *what, const char *sql, const struct pgp *p, PGresult **ret,
             struct err *err)
{
    for (int attempt = 0;; attempt++) {
        PGresult *res =
                PQexecParams(q->conn, sql, p ? p->n : 0, p ? p->types : NULL, p ? p->values : NULL,
                             p ? p->lengths : NULL, p ? p->formats : NULL, 1);
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
            q->sqlstate[0] = '\0';
            if (ret)
                *ret = res;
            else
                PQclear(res);
            return 0;
        }
        if (attempt == 0 && !q->in_tx && PQstatus(q->conn) != CONNECTION_OK) {
            /* Dead since the last use (a server restart, a dropped
             * connection): reopen it and run the statement again. */
            PQclear(res);
            int r = reconnect(q, err);
            if (r < 0)
                return r;
            continue;
        }
        int r = store_pg_fail(q, res, what, err);
        PQclear(res);
        return r;
    }
}

/* Rows affected by the statement that produced res. */
uint64_t
store_pg_affected(PGresult *res)
{
    const char *s = PQcmdTuples(res);
    uint64_t n = 0;
    for (; s && *s >= '0' && *s <= '9'; s++)
        n = n * 10 + (uint64_t)(*s - '0');
    return n;
}

/* Opens q's connection to url and sets the session up. */
int
store_pg_connect(struct pg *q, const char *url, struct err *err)
{
    /* connect_timeout is a default the URL may override (later wins). */
    static const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname",
                                       NULL};
    const char *values[] = {"10", "abxd", url, NULL};

    q->conn = PQconnectdbParams(keys, values, 1);
    if (!q->conn || PQstatus(q->conn) != CONNECTION_OK)
        return conn_fail(q, err);
    PQsetNoticeProcessor(q->conn, ignore_notice, NULL);
    if (PQserverVersion(q->conn) < MIN_SERVER)
        return err_set(err, ENOTSUP, "PostgreSQL %d is too old for the store (11 or newer)",
                       PQserverVersion(q->conn) / 10000);
    return session_setup(q, err);
}
