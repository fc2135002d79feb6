/*
 * client.c - the libabx client: one libcurl easy handle, its requests, errors.
 *
 * Every public call is one HTTP request through client_request(), which sets
 * the handle up from scratch (curl_easy_reset() keeps the live connection, so
 * keep-alive survives), streams bodies both ways through callbacks, and turns
 * whatever went wrong into -errno plus a message. It never logs and keeps no
 * global state except libcurl's one-time global initialisation.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "client/client-internal.h"
#include "util/cleanup.h"

#define CONNECT_TIMEOUT_MS_DEFAULT 10000
#define REQUEST_TIMEOUT_MS_DEFAULT 300000
#define RECV_BUFFER_SIZE           (256 * 1024)
#define UPLOAD_BUFFER_SIZE         (256 * 1024)
#define KEEPALIVE_IDLE_S           30
#define KEEPALIVE_INTERVAL_S       10

struct abx_client {
    CURL *curl;
    char *base;                      /* "http://host:port[/prefix]", no trailing '/' */
    struct curl_slist *headers;      /* Authorization (when there is a key) */
    struct curl_slist *json_headers; /* the same plus Content-Type: application/json */
    long connect_timeout_ms;
    long request_timeout_ms;
    char curl_err[CURL_ERROR_SIZE];
    char msg[CLIENT_MSG_MAX];
    char code[64];
    long status;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_client *, abx_client_free)

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void
global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_ALL);
}

const char *
abx_version(void)
{
    return ABX_VERSION;
}

/* --- errors --- */

void
client_clear(struct abx_client *c)
{
    c->msg[0] = '\0';
    c->code[0] = '\0';
    c->status = 0;
}

int
client_fail(struct abx_client *c, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
    va_end(ap);
    return r;
}

const char *
abx_client_error(const struct abx_client *c)
{
    return c ? c->msg : "no client";
}

long
abx_client_http_status(const struct abx_client *c)
{
    return c ? c->status : 0;
}

const char *
abx_client_error_code(const struct abx_client *c)
{
    return c ? c->code : "";
}

const char *
abx_client_url(const struct abx_client *c)
{
    return c->base;
}

int
client_status_errno(long status, const char *code, int conflict)
{
    static const struct {
        const char *code;
        int errnum;
    } by_code[] = {
            {"path_escape", EXDEV},
            {"not_a_directory", ENOTDIR},
            {"is_a_directory", EISDIR},
            {"precondition_failed", ESTALE}, /* If-Match did not hold (workspaces) */
            {"insufficient_storage", ENOSPC},
    };

    if (code)
        for (size_t i = 0; i < ELEMENTSOF(by_code); i++)
            if (!strcmp(code, by_code[i].code))
                return -by_code[i].errnum;
    switch (status) {
    case 400:
        return -EINVAL;
    case 401:
        return -EACCES;
    case 403:
        return -EPERM;
    case 404:
        return -ENOENT;
    case 409:
        return -(conflict > 0 ? conflict : EBUSY);
    case 412:
        return -ESTALE;
    case 413:
        return -EFBIG;
    case 429:
        return -EAGAIN;
    case 431:
        return -E2BIG;
    case 503:
        return -EOPNOTSUPP;
    case 507:
        return -ENOSPC;
    default:
        break;
    }
    if (status >= 500 && status <= 599)
        return -EIO;
    return -EPROTO;
}

static int
curl_errno(CURLcode rc)
{
    switch (rc) {
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return -EHOSTUNREACH;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_URL_MALFORMAT:
        return -EINVAL;
    case CURLE_UNSUPPORTED_PROTOCOL:
        return -EPROTONOSUPPORT;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return -ECONNRESET;
    case CURLE_WEIRD_SERVER_REPLY:
        return -EBADMSG;
    default:
        return -EIO;
    }
}

/* --- URL building --- */

int
client_put_encoded(struct buf *b, const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    int r;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char ch = *p;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~' || (keep_slash && ch == '/')) {
            r = buf_putc(b, (char)ch);
        } else {
            char esc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            r = buf_put(b, esc, sizeof(esc));
        }
        if (r < 0)
            return r;
    }
    return 0;
}

int
client_put_id(struct buf *b, const char *collection, const char *id)
{
    size_t n = id ? strlen(id) : 0;
    int r;

    if (n == 0 || n > CLIENT_ID_MAX)
        return -EINVAL;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            return -EINVAL;
    if ((r = buf_puts(b, collection)) < 0 || (r = buf_putc(b, '/')) < 0)
        return r;
    return buf_puts(b, id);
}

int
client_put_sandbox(struct buf *b, const char *id)
{
    return client_put_id(b, "/v1/sandboxes", id);
}

int
client_check_if_match(const char *v)
{
    size_t n = 0;

    for (const char *p = v; *p; p++, n++)
        if ((unsigned char)*p < ' ' || *p == 0x7f || *p == '"')
            return -EINVAL;
    return n <= CLIENT_IF_MATCH_MAX ? 0 : -EINVAL;
}

int
client_put_path(struct buf *b, const char *path)
{
    int r;

    if (!path)
        return -EINVAL;
    if (path[0] != '/' && (r = buf_putc(b, '/')) < 0)
        return r;
    return client_put_encoded(b, path, true);
}

/* --- the client --- */

int
abx_client_new(const char *url, const char *api_key, struct abx_client **ret)
{
    _cleanup_(abx_client_freep) struct abx_client *c = NULL;
    _cleanup_free_ char *auth = NULL;
    size_t n;

    if (!url || !ret)
        return -EINVAL;
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return -EINVAL;
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return -EINVAL;
    if (api_key)
        for (const char *p = api_key; *p; p++)
            if ((unsigned char)*p < ' ' || *p == 0x7f)
                return -EINVAL;

    (void)pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return global_rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;

    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->connect_timeout_ms = CONNECT_TIMEOUT_MS_DEFAULT;
    c->request_timeout_ms = REQUEST_TIMEOUT_MS_DEFAULT;
    n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        n--;
    c->base = strndup(url, n);
    c->curl = curl_easy_init();
    if (!c->base || !c->curl)
        return -ENOMEM;
    if (api_key && *api_key) {
        if (asprintf(&auth, "Authorization: Bearer %s", api_key) < 0) {
            auth = NULL;
            return -ENOMEM;
        }
        c->headers = curl_slist_append(NULL, auth);
        if (!c->headers)
            return -ENOMEM;
        c->json_headers = curl_slist_append(NULL, auth);
        explicit_bzero(auth, strlen(auth));
        if (!c->json_headers)
            return -ENOMEM;
    }
    struct curl_slist *h = curl_slist_append(c->json_headers, "Content-Type: application/json");
    if (!h)
        return -ENOMEM;
    c->json_headers = h;
    *ret = TAKE_PTR(c);
    return 0;
}

struct abx_client *
abx_client_free(struct abx_client *c)
{
    if (!c)
        return NULL;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    /* The headers hold the key; do not leave it in freed memory. */
    for (struct curl_slist *h = c->headers; h; h = h->next)
        explicit_bzero(h->data, strlen(h->data));
    for (struct curl_slist *h = c->json_headers; h; h = h->next)
        explicit_bzero(h->data, strlen(h->data));
    curl_slist_free_all(c->headers);
    curl_slist_free_all(c->json_headers);
    free(c->base);
    free(c);
    return NULL;
}

int
abx_client_set_timeouts(struct abx_client *c, long connect_ms, long request_ms)
{
    if (!c || connect_ms < 0 || request_ms < 0)
        return -EINVAL;
    c->connect_timeout_ms = connect_ms;
    c->request_timeout_ms = request_ms;
    return 0;
}

/* --- transfer callbacks --- */

static bool
success(const struct client_req *rq, long status)
{
    return (status >= 200 && status <= 299) || (rq->accept && status == rq->accept);
}

static size_t
on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct client_req *rq = userdata;
    size_t n = size * nmemb;
    long status = 0;
    int r = 0;

    (void)curl_easy_getinfo(rq->c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (!success(rq, status)) {
        /* An error answer: keep its start for the message, drop the rest. */
        size_t room = CLIENT_ERRBODY_MAX - rq->errbody.len;
        (void)buf_put(&rq->errbody, data, MIN(n, room));
        return n;
    }
    switch (rq->resp) {
    case CLIENT_RESP_BUFFER:
        if (rq->out) {
            r = buf_put(rq->out, data, n);
            if (r == -EFBIG)
                r = client_fail(rq->c, r, "the answer is larger than %zu bytes", rq->out->max);
        }
        break;
    case CLIENT_RESP_NDJSON:
        r = ndjson_feed(&rq->nd, data, n, rq->line, rq->line_ud);
        if (r == -EFBIG)
            r = client_fail(rq->c, -EBADMSG, "an output line is longer than %u bytes",
                            CLIENT_LINE_MAX);
        break;
    case CLIENT_RESP_FD:
        for (size_t done = 0; done < n;) {
            ssize_t k = write(rq->out_fd, data + done, n - done);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0 && errno == EAGAIN) {
                /* A non-blocking descriptor: wait until it takes more. */
                struct pollfd p = {.fd = rq->out_fd, .events = POLLOUT};
                (void)poll(&p, 1, -1);
                continue;
            }
            if (k < 0) {
                r = client_fail(rq->c, -errno, "cannot write the file: %s", strerror(errno));
                break;
            }
            done += (size_t)k;
        }
        break;
    }
    if (r < 0) {
        rq->err = r;
        return 0; /* anything but n stops the transfer */
    }
    rq->out_bytes += n;
    return n;
}

static size_t
on_header(char *data, size_t size, size_t nitems, void *userdata)
{
    struct client_req *rq = userdata;
    size_t n = size * nitems;
    static const char type[] = "X-Abx-Type:";

    if (n >= 5 && !strncmp(data, "HTTP/", 5)) {
        rq->abx_type[0] = '\0'; /* a new answer (after "100 Continue") */
    } else if (n > sizeof(type) - 1 && !strncasecmp(data, type, sizeof(type) - 1)) {
        const char *v = data + sizeof(type) - 1;
        size_t len = n - (sizeof(type) - 1);
        while (len > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            len--;
        }
        while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
            len--;
        if (len < sizeof(rq->abx_type)) {
            memcpy(rq->abx_type, v, len);
            rq->abx_type[len] = '\0';
        }
    }
    return n;
}

static size_t
on_read(char *buffer, size_t size, size_t nitems, void *userdata)
{
    struct client_req *rq = userdata;
    size_t n = size * nitems;

    if (rq->upload_fd < 0) {
        size_t left = rq->body_len - rq->body_pos;
        n = MIN(n, left);
        memcpy(buffer, rq->body + rq->body_pos, n);
        rq->body_pos += n;
        return n;
    }
    for (;;) {
        ssize_t k = read(rq->upload_fd, buffer, n);
        if (k >= 0)
            return (size_t)k;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN) {
            struct pollfd p = {.fd = rq->upload_fd, .events = POLLIN};
            (void)poll(&p, 1, -1);
            continue;
        }
        rq->err = client_fail(rq->c, -errno, "cannot read the file to upload: %s", strerror(errno));
        return CURL_READFUNC_ABORT;
    }
}

/* libcurl rewinds the body when it has to send the request again (a kept-
 * alive connection that turned out to be closed). */
static int
on_seek(void *userdata, curl_off_t offset, int origin)
{
    struct client_req *rq = userdata;

    if (origin != SEEK_SET || offset < 0)
        return CURL_SEEKFUNC_CANTSEEK;
    if (rq->upload_fd < 0) {
        if ((uint64_t)offset > rq->body_len)
            return CURL_SEEKFUNC_FAIL;
        rq->body_pos = (size_t)offset;
        return CURL_SEEKFUNC_OK;
    }
    if (rq->upload_start < 0)
        return CURL_SEEKFUNC_CANTSEEK;
    if (lseek(rq->upload_fd, rq->upload_start + offset, SEEK_SET) < 0)
        return CURL_SEEKFUNC_FAIL;
    return CURL_SEEKFUNC_OK;
}

/* --- requests --- */

void
client_req_init(struct client_req *rq, const char *method, const struct buf *path)
{
    *rq = (struct client_req){
            .method = method,
            .path = path,
            .upload_fd = -EBADF,
            .out_fd = -EBADF,
            .upload_start = -1,
    };
}

/* Fills the client's error from an error answer. */
static int
fail_from_answer(struct abx_client *c, struct client_req *rq)
{
    json_t *j = NULL;
    const char *code = NULL, *msg = NULL;
    int r;

    c->status = rq->status;
    if (rq->errbody.len > 0)
        j = json_loadb(rq->errbody.data, rq->errbody.len, 0, NULL);
    if (json_is_object(j)) {
        code = json_string_value(json_object_get(j, "error"));
        msg = json_string_value(json_object_get(j, "message"));
    }
    r = client_status_errno(rq->status, code, rq->conflict);
    if (code)
        (void)snprintf(c->code, sizeof(c->code), "%s", code);
    if (msg && *msg)
        (void)client_fail(c, r, "%s", msg);
    else if (code)
        (void)client_fail(c, r, "HTTP %ld %s", rq->status, code);
    else
        (void)client_fail(c, r, "HTTP %ld from %s %s", rq->status, rq->method, c->base);
    json_decref(j);
    return r;
}

/* Appends a copy of line to *list; false on OOM (then *list is unchanged). */
static bool
append_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *l = curl_slist_append(*list, line);
    if (!l)
        return false;
    *list = l;
    return true;
}

/* Frees a request's own header list; it may hold the key. */
static void
free_headers(struct curl_slist *list)
{
    for (struct curl_slist *h = list; h; h = h->next)
        explicit_bzero(h->data, strlen(h->data));
    curl_slist_free_all(list);
}

static int
setup(struct abx_client *c, struct client_req *rq, struct buf *url)
{
    CURL *h = c->curl;
    CURLcode rc = CURLE_OK;
    int r;

    r = buf_puts(url, c->base);
    if (r == 0)
        r = buf_put(url, rq->path->data, rq->path->len);
    if (r < 0)
        return client_fail(c, r == -EFBIG ? -EINVAL : r, "the request URL is too long");

    curl_easy_reset(h);
    c->curl_err[0] = '\0';
#define SET(opt, val)                           \
    do {                                        \
        if (rc == CURLE_OK)                     \
            rc = curl_easy_setopt(h, opt, val); \
    } while (0)
    SET(CURLOPT_URL, url->data);
    SET(CURLOPT_ERRORBUFFER, c->curl_err);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_NOPROGRESS, 1L);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    SET(CURLOPT_USERAGENT, "libabx/" ABX_VERSION);
    SET(CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_TCP_KEEPIDLE, (long)KEEPALIVE_IDLE_S);
    SET(CURLOPT_TCP_KEEPINTVL, (long)KEEPALIVE_INTERVAL_S);
    SET(CURLOPT_BUFFERSIZE, (long)RECV_BUFFER_SIZE);
    if (!rq->stream)
        SET(CURLOPT_TIMEOUT_MS, c->request_timeout_ms);
    SET(CURLOPT_WRITEFUNCTION, on_write);
    SET(CURLOPT_WRITEDATA, rq);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, rq);
    if (rq->if_match || rq->content_type) {
        /* The client's headers plus this request's own: a list of its own,
         * since curl_slist nodes cannot be shared. The value goes quoted,
         * so "" (only if absent) survives as a header. */
        struct curl_slist *base = rq->body_json ? c->json_headers : c->headers;
        char line[sizeof("If-Match: \"\"") + CLIENT_IF_MATCH_MAX];
        if (rq->if_match && client_check_if_match(rq->if_match) < 0)
            return client_fail(c, -EINVAL, "invalid If-Match value '%.64s'", rq->if_match);
        (void)snprintf(line, sizeof(line), "If-Match: \"%s\"", rq->if_match ? rq->if_match : "");
        for (struct curl_slist *l = base; l; l = l->next)
            if (!append_header(&rq->headers, l->data))
                return client_fail(c, -ENOMEM, "out of memory");
        if (rq->if_match && !append_header(&rq->headers, line))
            return client_fail(c, -ENOMEM, "out of memory");
        if (rq->content_type) {
            (void)snprintf(line, sizeof(line), "Content-Type: %s", rq->content_type);
            if (!append_header(&rq->headers, line))
                return client_fail(c, -ENOMEM, "out of memory");
        }
        SET(CURLOPT_HTTPHEADER, rq->headers);
    } else {
        SET(CURLOPT_HTTPHEADER, rq->body_json ? c->json_headers : c->headers);
    }

    if (rq->upload_fd >= 0 || rq->body_upload) {
        curl_off_t size = -1;
        if (rq->upload_fd >= 0) {
            struct stat st;
            off_t pos = lseek(rq->upload_fd, 0, SEEK_CUR);
            if (fstat(rq->upload_fd, &st) < 0)
                return client_fail(c, -errno, "cannot stat the file to upload: %s",
                                   strerror(errno));
            if (S_ISREG(st.st_mode) && pos >= 0) {
                rq->upload_start = pos;
                size = st.st_size > pos ? st.st_size - pos : 0;
            }
        } else {
            size = (curl_off_t)rq->body_len;
        }
        SET(CURLOPT_UPLOAD, 1L);
        SET(CURLOPT_UPLOAD_BUFFERSIZE, (long)UPLOAD_BUFFER_SIZE);
        SET(CURLOPT_READFUNCTION, on_read);
        SET(CURLOPT_READDATA, rq);
        SET(CURLOPT_SEEKFUNCTION, on_seek);
        SET(CURLOPT_SEEKDATA, rq);
        /* -1 makes libcurl send the body chunked (a pipe). */
        SET(CURLOPT_INFILESIZE_LARGE, size);
        if (strcmp(rq->method, "PUT") != 0)
            SET(CURLOPT_CUSTOMREQUEST, rq->method);
    } else if (!strcmp(rq->method, "GET")) {
        SET(CURLOPT_HTTPGET, 1L);
    } else if (!strcmp(rq->method, "HEAD")) {
        SET(CURLOPT_NOBODY, 1L);
    } else {
        if (rq->body || !strcmp(rq->method, "POST") || !strcmp(rq->method, "PATCH")) {
            SET(CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
            SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(rq->body ? rq->body_len : 0));
        }
        if (strcmp(rq->method, "POST") != 0)
            SET(CURLOPT_CUSTOMREQUEST, rq->method);
    }
#undef SET
    if (rc != CURLE_OK)
        return client_fail(c, curl_errno(rc), "cannot set up the request: %s",
                           curl_easy_strerror(rc));
    return 0;
}

int
client_request(struct abx_client *c, struct client_req *rq)
{
    struct buf url;
    CURLcode rc;
    int r;

    buf_init(&url, CLIENT_URL_MAX);
    buf_init(&rq->errbody, CLIENT_ERRBODY_MAX);
    ndjson_init(&rq->nd, CLIENT_LINE_MAX);
    rq->c = c;
    rq->headers = NULL;
    rq->err = 0;
    rq->status = 0;
    rq->out_bytes = 0;
    rq->abx_type[0] = '\0';

    r = setup(c, rq, &url);
    if (r < 0)
        goto out;
    rc = curl_easy_perform(c->curl);
    (void)curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &rq->status);
    if (rc == CURLE_OK && rq->resp == CLIENT_RESP_NDJSON && success(rq, rq->status)) {
        r = ndjson_finish(&rq->nd, rq->line, rq->line_ud);
        if (r < 0)
            rq->err = r;
    }
    if (rq->err < 0) {
        /* A callback stopped it and said why. */
        r = rq->err;
        c->status = rq->status;
        goto out;
    }
    if (rc != CURLE_OK) {
        r = curl_errno(rc);
        c->status = rq->status;
        if (rq->status && !success(rq, rq->status) && rc != CURLE_OPERATION_TIMEDOUT &&
            rq->errbody.len) {
            /* The answer was an error and the upload was cut short by it. */
            r = fail_from_answer(c, rq);
            goto out;
        }
        (void)client_fail(c, r, "%s %s: %s", rq->method, url.data,
                          c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc));
        goto out;
    }
    if (!success(rq, rq->status)) {
        r = fail_from_answer(c, rq);
        goto out;
    }
    r = 0;
out:
    free_headers(TAKE_PTR(rq->headers));
    ndjson_done(&rq->nd);
    buf_done(&rq->errbody);
    buf_done(&url);
    return r;
}

const char *
client_scope_noun(enum client_scope scope)
{
    return scope == CLIENT_WORKSPACE ? "workspace" : "sandbox";
}

int
client_scope_url(struct abx_client *c, struct buf *b, enum client_scope scope, const char *id,
                 const char *suffix)
{
    int r = client_put_id(b, scope == CLIENT_WORKSPACE ? "/v1/workspaces" : "/v1/sandboxes", id);
    if (r == -EINVAL)
        return client_fail(c, r, "invalid %s id '%.80s'", client_scope_noun(scope), id ? id : "");
    if (r == 0 && suffix)
        r = buf_puts(b, suffix);
    if (r < 0)
        return client_fail(c, r, "cannot build the request URL: %s", strerror(-r));
    return 0;
}

int
client_sandbox_url(struct abx_client *c, struct buf *b, const char *id, const char *suffix)
{
    return client_scope_url(c, b, CLIENT_SANDBOX, id, suffix);
}

int
client_call(struct abx_client *c, const char *method, const struct buf *path, json_t *body,
            int conflict, struct buf *ret_body, long *ret_status)
{
    _cleanup_free_ char *text = NULL;
    struct client_req rq;
    int r;

    if (body) {
        text = client_dump(body);
        if (!text)
            return client_fail(c, -ENOMEM, "out of memory");
    }
    client_req_init(&rq, method, path);
    if (text) {
        rq.body = text;
        rq.body_len = strlen(text);
        rq.body_json = true;
    }
    rq.conflict = conflict;
    rq.resp = CLIENT_RESP_BUFFER;
    rq.out = ret_body;
    r = client_request(c, &rq);
    if (r < 0)
        return r;
    if (ret_status)
        *ret_status = rq.status;
    return 0;
}

char *
client_strip(const struct buf *b)
{
    size_t n = b->len;
    while (n > 0 && (b->data[n - 1] == '\n' || b->data[n - 1] == '\r' || b->data[n - 1] == ' '))
        n--;
    return strndup(b->data, n);
}

/* --- JSON helpers --- */

char *
client_dump(json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return s;
}

int
client_parse(struct abx_client *c, const char *data, size_t len, const char *what, json_t **ret)
{
    json_error_t je;
    json_t *j = json_loadb(data, len, 0, &je);

    if (!j)
        return client_fail(c, -EBADMSG, "abxd sent invalid JSON for %s: %s", what, je.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return client_fail(c, -EBADMSG, "abxd sent JSON that is not an object for %s", what);
    }
    *ret = j;
    return 0;
}

int
client_get_list(struct abx_client *c, const struct buf *path, int conflict, const char *what,
                const char *key, struct buf *answer, json_t **ret_json, json_t **ret_list)
{
    json_t *j = NULL;
    int r = client_call(c, "GET", path, NULL, conflict, answer, NULL);
    if (r < 0 || (r = client_parse(c, answer->data, answer->len, what, &j)) < 0)
        return r;
    json_t *arr = json_object_get(j, key);
    if (!json_is_array(arr)) {
        json_decref(j);
        return client_fail(c, -EBADMSG, "abxd's answer has no '%s' list", key);
    }
    *ret_json = j;
    *ret_list = arr;
    return 0;
}

int
client_dup_str(json_t *o, const char *key, char **ret)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s) {
        *ret = NULL;
        return 0;
    }
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

int
client_dup_name(json_t *o, const char *key, char **ret)
{
    _cleanup_buf_ struct buf b;
    struct err err = {0};

    buf_init(&b, CLIENT_NAME_MAX);
    int r = json_get_name(o, key, false, &b, &err);
    if (r == -ENOMEM)
        return r;
    if (r <= 0) {
        /* Absent, or not what abxd sends (bad base64): as absent. */
        *ret = NULL;
        return 0;
    }
    *ret = buf_steal(&b);
    return *ret ? 0 : -ENOMEM;
}

uint64_t
client_get_u64(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        return (uint64_t)json_integer_value(v);
    if (json_is_real(v) && json_real_value(v) >= 0)
        return (uint64_t)json_real_value(v);
    return 0;
}

int64_t
client_get_i64(json_t *o, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

double
client_get_num(json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

bool
client_get_bool(json_t *o, const char *key)
{
    return json_is_true(json_object_get(o, key));
}

int
client_kv_object(const struct abx_kv *kv, size_t n, json_t **ret)
{
    json_t *o = json_object();

    if (!o)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!kv[i].key || !kv[i].value || !*kv[i].key) {
            json_decref(o);
            return -EINVAL;
        }
        /* jansson refuses keys and values that are not UTF-8. */
        if (json_object_set_new(o, kv[i].key, json_string(kv[i].value)) < 0) {
            json_decref(o);
            return -EINVAL;
        }
    }
    *ret = o;
    return 0;
}
