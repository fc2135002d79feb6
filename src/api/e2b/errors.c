/*
 * errors.c - how the E2B surface says no: the platform API's
 * {"code": <status>, "message": ...} with its errno table, and envd's
 * Connect errors (unary: {"code": <name>, "message": ...} with the status
 * Connect gives that name; streams: an end-stream frame) with theirs.
 * Every E2B answer that refuses is written here.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/e2b/e2b-internal.h"
#include "http/connect.h"
#include "util/buf.h"
#include "util/json.h"

/* --- the platform API --- */

json_t *
e2b_error_json(unsigned status, const char *msg)
{
    json_t *o = json_object();
    (void)json_set(o, "code", json_integer(status));
    (void)json_set(o, "message", json_string_lossy(msg));
    return o;
}

void
e2b_error(struct http_req *req, unsigned status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    api_json(req, status, e2b_error_json(status, msg));
}

void
e2b_fail(struct http_req *req, int r, const struct err *err)
{
    int e = r < 0 ? -r : r;
    unsigned status = e == EINVAL || e == E2BIG           ? 400
                      : e == ENOENT                       ? 404
                      : e == EAGAIN                       ? 429
                      : e == ESHUTDOWN || e == EOPNOTSUPP ? 503
                      : e == EMFILE || e == ENFILE        ? 503
                                                          : 500;
    char tmp[128];
    e2b_error(req, status, "%s", err && err->msg[0] ? err->msg : strerror_r(e, tmp, sizeof(tmp)));
}

/* r (-errno) of a snapshot, restore or fork as the platform API's status
 * (507 for files past a snapshot's limits). */
unsigned
e2b_snap_status(int r)
{
    int e = r < 0 ? -r : r;
    /* The sandbox's files over a snapshot limit (bytes, entries, depth). */
    return e == EFBIG || e == E2BIG || e == ELOOP ? 507
           : e == EBUSY                           ? 409
           : e == EINVAL                          ? 400
           : e == ENOENT || e == ESRCH            ? 404
           : e == ESHUTDOWN || e == EOPNOTSUPP    ? 503
                                                  : 500;
}

void
e2b_snap_fail(struct http_req *req, int r, const struct err *err)
{
    char tmp[128];
    e2b_error(req, e2b_snap_status(r), "%s",
              err && err->msg[0] ? err->msg : strerror_r(r < 0 ? -r : r, tmp, sizeof(tmp)));
}

/* --- envd (Connect) --- */

void
e2b_gone(struct http_req *req, const char *id)
{
    json_t *o = e2b_error_json(502, "The sandbox was not found");
    (void)json_set(o, "sandboxId", json_string(id));
    api_json(req, 502, o);
}

static unsigned
status_for_code(const char *code)
{
    static const struct {
        const char *code;
        unsigned status;
    } t[] = {
            {"canceled", 499},
            {"unknown", 500},
            {"invalid_argument", 400},
            {"deadline_exceeded", 504},
            {"not_found", 404},
            {"already_exists", 409},
            {"permission_denied", 403},
            {"resource_exhausted", 429},
            {"failed_precondition", 400},
            {"aborted", 409},
            {"out_of_range", 400},
            {"unimplemented", 501},
            {"internal", 500},
            {"unavailable", 503},
            {"data_loss", 500},
            {"unauthenticated", 401},
    };
    for (size_t i = 0; i < ELEMENTSOF(t); i++)
        if (!strcmp(t[i].code, code))
            return t[i].status;
    return 500;
}

const char *
e2b_code_for_errno(int r)
{
    switch (-r) {
    case ENOENT:
    case ESRCH:
        return "not_found";
    case EEXIST:
        return "already_exists";
    case EINVAL:
    case ENOTDIR:
    case EISDIR:
    case ENAMETOOLONG:
    case EXDEV:
    case ELOOP:
        return "invalid_argument";
    case EACCES:
    case EPERM:
        return "permission_denied";
    case EAGAIN:
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case E2BIG:
        return "resource_exhausted";
    case ENOSYS:
    case EOPNOTSUPP:
        return "unimplemented";
    case EMFILE: /* abxd is out of descriptors: retry later */
    case ENFILE:
        return "unavailable";
    default:
        return "internal";
    }
}

void
e2b_rpc_error(struct http_req *req, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *o = json_object();
    (void)json_set(o, "code", json_string(code));
    (void)json_set(o, "message", json_string_lossy(msg));
    api_json(req, status_for_code(code), o);
}

void
e2b_rpc_ok(struct http_req *req, json_t *msg)
{
    api_json(req, 200, msg ? msg : json_object());
}

void
e2b_stream_error(struct http_req *req, const char *code, const char *fmt, ...)
{
    char msg[512];
    struct buf b;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    buf_init(&b, BUF_UNLIMITED);
    if (connect_end_stream_json(&b, code, msg) == 0)
        http_respond(req, 200, "application/connect+json", b.data, b.len);
    else
        http_respond(req, 500, NULL, "", 0);
    buf_done(&b);
}
