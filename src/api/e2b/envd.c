/*
 * envd.c - envd, E2B's in-sandbox service, served by abxd itself.
 *
 * A request with E2b-Sandbox-Id is for that sandbox: GET /health (204 up,
 * 502 gone or paused), /files, and Connect RPCs POST /<pkg.Service>/<Method>
 * in the JSON codec. Unary calls take and answer application/json; server
 * streams (process Start/Connect, filesystem WatchDir) take one envelope of
 * application/connect+json and answer envelopes ending with an end-stream
 * frame, errors included (the SDK reads a stream's errors only there).
 *
 * Every request but /health must carry the sandbox's access token
 * (X-Access-Token; /files may instead carry a signature). The user is the
 * Basic-auth name ("user" when absent, or "root"); nothing else exists.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/e2b/e2b-internal.h"
#include "http/connect.h"
#include "util/b64.h"
#include "util/json.h"
#include "util/log.h"
#include "util/parse.h"

static void
unauthorized(struct http_req *req, const char *msg)
{
    /* HTTP 401 with a numeric code: the SDK maps it to unauthenticated. */
    e2b_error(req, 401, "%s", msg);
}

/* The user of an RPC: Basic base64("<name>:"), default "user". */
static int
rpc_user(struct http_req *req, struct e2b_user *u)
{
    const char *h = http_req_header(req, "Authorization");
    char name[64] = "user";
    if (h && !strncasecmp(h, "Basic ", 6)) {
        struct buf b;
        buf_init(&b, 256);
        const char *s = h + 6;
        if (b64_decode(&b, s, strlen(s)) < 0 || b.len == 0 || b.len >= sizeof(name)) {
            buf_done(&b);
            return -EINVAL;
        }
        size_t n = 0;
        while (n < b.len && b.data[n] != ':')
            n++;
        memcpy(name, b.data, n);
        name[n] = '\0';
        buf_done(&b);
    }
    return e2b_user_named(name, u);
}

static uint64_t
header_u64(struct http_req *req, const char *name, uint64_t max)
{
    const char *v = http_req_header(req, name);
    if (!v || !*v)
        return 0;
    uint64_t n;
    int r = parse_u64(v, &n);
    if (r == -ERANGE)
        return max;
    if (r < 0)
        return 0;
    return n > max ? max : n;
}

struct rpc {
    struct e2b_call call;
    char method[64];
    bool process; /* process.Process, else filesystem.Filesystem */
    bool stream;
};

static void
rpc_close(struct http_req *req, void *ud)
{
    (void)req;
    free(ud);
}

static void
rpc_dispatch(struct http_req *req, struct rpc *q, json_t *msg)
{
    const char *m = q->method;
    if (q->process)
        e2b_process(req, &q->call, m, msg);
    else if (!strcmp(m, "WatchDir"))
        e2b_watch(req, &q->call, msg);
    else if (!strcmp(m, "CreateWatcher") || !strcmp(m, "GetWatcherEvents") ||
             !strcmp(m, "RemoveWatcher"))
        e2b_watcher(req, &q->call, m, msg);
    else
        e2b_filesystem(req, &q->call, m, msg);
}

static void
rpc_body(struct http_req *req, const char *body, size_t len)
{
    struct rpc *q = http_req_userdata(req);
    struct err err = {0};
    json_t *msg = NULL;

    if (!e2b_call_entry(&q->call)) {
        e2b_gone(req, q->call.id);
        return;
    }
    if (q->stream) {
        /* One envelope: flags 0, big-endian length, the message. */
        if (len < 5 || (unsigned char)body[0] != 0 ||
            (((size_t)(unsigned char)body[1] << 24) | ((size_t)(unsigned char)body[2] << 16) |
             ((size_t)(unsigned char)body[3] << 8) | (size_t)(unsigned char)body[4]) != len - 5) {
            e2b_stream_error(req, "invalid_argument",
                             "the request must be one uncompressed Connect envelope");
            return;
        }
        body += 5;
        len -= 5;
    }
    if (json_parse(len ? body : "{}", len ? len : 2, &msg, &err) < 0 || !json_is_object(msg)) {
        json_decref(msg);
        if (q->stream)
            e2b_stream_error(req, "invalid_argument", "%s",
                             err.msg[0] ? err.msg : "not a JSON object");
        else
            e2b_rpc_error(req, "invalid_argument", "%s",
                          err.msg[0] ? err.msg : "the message must be a JSON object");
        return;
    }
    rpc_dispatch(req, q, msg);
    json_decref(msg);
}

static void
rpc(struct api *a, struct http_req *req, struct entry *e, const char *path)
{
    const char *ct = http_req_header(req, "Content-Type");
    struct rpc *q;
    bool process = !strncmp(path, "/process.Process/", 17);
    const char *method = path + (process ? 17 : 23);

    if (strcmp(http_req_method(req), "POST")) {
        e2b_rpc_error(req, "unimplemented", "Connect RPCs are POST requests");
        return;
    }
    bool stream = process ? e2b_process_is_stream(method) : e2b_filesystem_is_stream(method);
    bool json_ct = ct && (stream ? !strncasecmp(ct, "application/connect+json", 24)
                                 : !strncasecmp(ct, "application/json", 16));
    if (!json_ct) {
        /* Only the JSON codec: connect-web's useBinaryFormat:false. */
        http_respond(req, 415, "text/plain", "abx envd speaks the Connect JSON codec only\n", 44);
        return;
    }
    if (!(q = calloc(1, sizeof(*q)))) {
        e2b_rpc_error(req, "internal", "out of memory");
        return;
    }
    q->call.api = a;
    memcpy(q->call.id, e->id, sizeof(q->call.id));
    q->process = process;
    q->stream = stream;
    (void)snprintf(q->method, sizeof(q->method), "%s", method);
    q->call.timeout_ms = header_u64(req, "Connect-Timeout-Ms", UINT32_MAX);
    q->call.keepalive_ms = header_u64(req, "Keepalive-Ping-Interval", 86400) * 1000u;
    http_req_set_userdata(req, q, rpc_close);
    if (rpc_user(req, &q->call.user) < 0) {
        if (stream)
            e2b_stream_error(req, "unauthenticated", "invalid username");
        else
            e2b_rpc_error(req, "unauthenticated", "invalid username");
        return;
    }
    if (process && !strcmp(method, "StreamInput")) {
        struct e2b_call call = q->call;
        http_req_set_userdata(req, NULL, NULL); /* q is not this request's any more */
        free(q);
        e2b_stream_input(req, &call);
        return;
    }
    http_req_read_body(req, E2B_RPC_MAX, rpc_body);
}

static bool
token_ok(struct entry *e, const char *tok)
{
    size_t n = strlen(e2b_of(e)->token);
    return tok && strlen(tok) == n && CRYPTO_memcmp(tok, e2b_of(e)->token, n) == 0;
}

void
e2b_envd(struct api *a, struct http_req *req, const char *path)
{
    const char *id = http_req_header(req, "E2b-Sandbox-Id");
    struct entry *e;

    if (!id) {
        e2b_files_signed(a, req);
        return;
    }
    e = e2b_lookup(a, id);
    if (!e || e->state != E_READY || !e2b_of(e) || e->paused) {
        e2b_gone(req, id);
        return;
    }
    if (!strcmp(path, "/health")) {
        table_touch(e);
        http_respond(req, 204, NULL, "", 0);
        return;
    }
    const char *tok = http_req_header(req, "X-Access-Token");
    if (!strcmp(path, "/files")) {
        e2b_files(a, req, e, tok);
        return;
    }
    if (!token_ok(e, tok)) {
        unauthorized(req, "unauthorized access, please provide a valid access token or method "
                          "signing if supported");
        return;
    }
    table_touch(e);
    if (!strncmp(path, "/process.Process/", 17) || !strncmp(path, "/filesystem.Filesystem/", 23)) {
        rpc(a, req, e, path);
        return;
    }
    e2b_error(req, 404, "no envd route for %s %.200s", http_req_method(req), path);
}
