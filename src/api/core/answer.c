/*
 * answer.c - the native wire's one errno -> HTTP status table, and JSON answers.
 */
#include "api/core/answer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/api-internal.h"
#include "util/buf.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"

struct mapping {
    int errnum;
    unsigned status;
    const char *code;
};

static const struct mapping table[] = {
        {EINVAL, 400, "bad_request"},
        {ENAMETOOLONG, 400, "bad_request"},
        /* A socket, fifo or device where a file was meant (files.c names
         * and refuses them before any open; these are the open's own). */
        {ENXIO, 400, "bad_request"},
        {ENODEV, 400, "bad_request"},
        {EXDEV, 400, "path_escape"},
        {ELOOP, 400, "path_escape"},
        {ENOTDIR, 400, "not_a_directory"},
        {EISDIR, 409, "is_a_directory"},
        {EACCES, 403, "forbidden"},
        {EPERM, 403, "forbidden"},
        {EROFS, 403, "forbidden"},
        {ENOENT, 404, "not_found"},
        {ESRCH, 404, "not_found"},
        {EEXIST, 409, "conflict"},
        {ENOTEMPTY, 409, "conflict"},
        {EBUSY, 409, "conflict"},
        {EPIPE, 409, "conflict"},
        {ETXTBSY, 409, "conflict"},
        {EMLINK, 409, "conflict"},
        /* A workspace's sandbox died before a mirror saved its changes. */
        {ENOTRECOVERABLE, 409, "changes_lost"},
        {ESTALE, 412, "precondition_failed"},
        {EFBIG, 413, "too_large"},
        {E2BIG, 413, "too_large"},
        {EMSGSIZE, 413, "too_large"},
        {EOVERFLOW, 413, "too_large"},
        {EAGAIN, 429, "too_many_requests"},
        {EOPNOTSUPP, 503, "unavailable"},
        {ECANCELED, 503, "unavailable"},
        {ESHUTDOWN, 503, "draining"},
        {EMFILE, 503, "unavailable"}, /* abxd is out of descriptors: retry later */
        {ENFILE, 503, "unavailable"},
        {EBADMSG, 500, "integrity_error"},
        {ENOSPC, 507, "insufficient_storage"},
        {EDQUOT, 507, "insufficient_storage"},
};

static void
send_error(struct http_req *req, unsigned status, const char *code, const char *msg)
{
    /* Also as a header: a HEAD answer has no body to carry it. */
    http_req_add_header(req, "X-Abx-Error", code);
    json_t *o = json_object();
    if (o) {
        (void)json_set(o, "error", json_string(code));
        /* A message names paths, which need not be UTF-8 (and err's fixed
         * buffer may have cut a character): never lose it for that. */
        (void)json_set(o, "message", json_string_lossy(msg));
    }
    api_json(req, status, o);
}

void
api_error(struct http_req *req, int r, const struct err *err)
{
    int e = r < 0 ? -r : r;
    unsigned status = 500;
    const char *code = "internal";
    char tmp[128];

    for (size_t i = 0; i < ELEMENTSOF(table); i++)
        if (table[i].errnum == e) {
            status = table[i].status;
            code = table[i].code;
            break;
        }
    const char *msg = err && err->msg[0] ? err->msg : strerror_r(e, tmp, sizeof(tmp));
    if (status >= 500)
        log_warn("%s '%s': %s", http_req_method(req), http_req_path(req), msg);
    send_error(req, status, code, msg);
}

void
api_error_msg(struct http_req *req, unsigned status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    send_error(req, status, code, msg);
}

void
api_json(struct http_req *req, unsigned status, json_t *v)
{
    struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    if (!v || json_dump_buf(v, &b) < 0 || buf_putc(&b, '\n') < 0) {
        static const char oom[] = "{\"error\":\"internal\",\"message\":\"out of memory\"}\n";
        http_respond(req, 500, "application/json", oom, sizeof(oom) - 1);
    } else {
        http_respond(req, status, "application/json", b.data, b.len);
    }
    buf_done(&b);
    json_decref(v);
}

void
api_no_content(struct http_req *req)
{
    http_respond(req, 204, NULL, "", 0);
}

json_t *
api_time_json(uint64_t wall_ms)
{
    char b[40];
    format_rfc3339(wall_ms, b, sizeof(b));
    return json_string(b);
}

json_t *
api_time_json_or_null(uint64_t wall_ms)
{
    return wall_ms ? api_time_json(wall_ms) : json_null();
}
