/*
 * test-client.c - libabx against a scripted HTTP server on loopback.
 *
 * The pure pieces (percent-encoding, ids, the status -> errno table) are
 * tested directly; the rest through real libcurl against a tiny server
 * thread that answers each request with a script of byte pieces: the
 * requests libabx sends (method, URL encoding, headers, JSON, chunked
 * uploads), NDJSON delivered in pieces cut anywhere and handed to the
 * callback before the stream ends, and error answers turned into -errno
 * with the server's message. The workspace functions are checked to send
 * the sandbox routes' requests under /v1/workspaces/{ws}, with If-Match
 * where given, and to decode the workspace and store answers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "abx/abx.h"
#include "client/client-internal.h"

/* --- pure pieces --- */

static void
test_encoding(void **state)
{
    struct buf b;
    (void)state;

    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(client_put_encoded(&b, "a b/c%d?e#f&g+h~i.j-k_l", true), 0);
    assert_string_equal(b.data, "a%20b/c%25d%3Fe%23f%26g%2Bh~i.j-k_l");
    buf_reset(&b);
    assert_int_equal(client_put_encoded(&b, "/x/y", false), 0);
    assert_string_equal(b.data, "%2Fx%2Fy");
    buf_reset(&b);
    assert_int_equal(client_put_encoded(&b, "\xc3\xa9\x01", true), 0);
    assert_string_equal(b.data, "%C3%A9%01");
    buf_reset(&b);
    assert_int_equal(client_put_path(&b, "rel/file"), 0);
    assert_string_equal(b.data, "/rel/file");
    buf_reset(&b);
    assert_int_equal(client_put_path(&b, "/"), 0);
    assert_string_equal(b.data, "/");
    buf_reset(&b);

    assert_int_equal(client_put_sandbox(&b, "j46zo8ij5r7l7fl5990j"), 0);
    assert_string_equal(b.data, "/v1/sandboxes/j46zo8ij5r7l7fl5990j");
    buf_reset(&b);
    assert_int_equal(client_put_sandbox(&b, ""), -EINVAL);
    assert_int_equal(client_put_sandbox(&b, NULL), -EINVAL);
    assert_int_equal(client_put_sandbox(&b, "a/b"), -EINVAL);
    assert_int_equal(client_put_sandbox(&b, "a b"), -EINVAL);
    assert_int_equal(client_put_sandbox(&b, ".."), -EINVAL);
    char long_id[CLIENT_ID_MAX + 2];
    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    assert_int_equal(client_put_sandbox(&b, long_id), -EINVAL);
    assert_int_equal(b.len, 0);

    /* Workspaces: the same id rules under their own collection. */
    assert_int_equal(client_put_id(&b, "/v1/workspaces", "proj-1_a"), 0);
    assert_string_equal(b.data, "/v1/workspaces/proj-1_a");
    buf_reset(&b);
    assert_int_equal(client_put_id(&b, "/v1/workspaces", "a/../b"), -EINVAL);
    assert_int_equal(client_put_id(&b, "/v1/workspaces", ""), -EINVAL);
    assert_int_equal(b.len, 0);
    buf_done(&b);

    /* If-Match values go quoted: nothing that could break out of the quotes. */
    assert_int_equal(client_check_if_match(""), 0);
    assert_int_equal(client_check_if_match("0123abcdef"), 0);
    assert_int_equal(client_check_if_match("a\"b"), -EINVAL);
    assert_int_equal(client_check_if_match("a\r\nX-Evil: 1"), -EINVAL);
    assert_int_equal(client_check_if_match("\x7f"), -EINVAL);
    char long_match[CLIENT_IF_MATCH_MAX + 2];
    memset(long_match, 'a', sizeof(long_match) - 1);
    long_match[sizeof(long_match) - 1] = '\0';
    assert_int_equal(client_check_if_match(long_match), -EINVAL);
    long_match[CLIENT_IF_MATCH_MAX] = '\0';
    assert_int_equal(client_check_if_match(long_match), 0);

    /* The limit of a URL holds. */
    buf_init(&b, 8);
    assert_int_equal(client_put_encoded(&b, "a b c d", true), -EFBIG);
    buf_done(&b);
}

static void
test_status_errno(void **state)
{
    (void)state;
    assert_int_equal(client_status_errno(400, "bad_request", 0), -EINVAL);
    assert_int_equal(client_status_errno(400, "path_escape", 0), -EXDEV);
    assert_int_equal(client_status_errno(400, "not_a_directory", 0), -ENOTDIR);
    assert_int_equal(client_status_errno(401, "unauthorized", 0), -EACCES);
    assert_int_equal(client_status_errno(403, "forbidden", 0), -EPERM);
    assert_int_equal(client_status_errno(404, NULL, 0), -ENOENT);
    assert_int_equal(client_status_errno(405, "method_not_allowed", 0), -EPROTO);
    assert_int_equal(client_status_errno(409, "conflict", 0), -EBUSY);
    assert_int_equal(client_status_errno(409, "conflict", EEXIST), -EEXIST);
    assert_int_equal(client_status_errno(409, "is_a_directory", EEXIST), -EISDIR);
    assert_int_equal(client_status_errno(412, "precondition_failed", 0), -ESTALE);
    assert_int_equal(client_status_errno(412, NULL, 0), -ESTALE);
    assert_int_equal(client_status_errno(413, "too_large", 0), -EFBIG);
    assert_int_equal(client_status_errno(500, "integrity_error", 0), -EIO);
    assert_int_equal(client_status_errno(429, NULL, 0), -EAGAIN);
    assert_int_equal(client_status_errno(431, NULL, 0), -E2BIG);
    assert_int_equal(client_status_errno(500, "internal", 0), -EIO);
    assert_int_equal(client_status_errno(502, NULL, 0), -EIO);
    assert_int_equal(client_status_errno(503, "unavailable", 0), -EOPNOTSUPP);
    assert_int_equal(client_status_errno(507, NULL, 0), -ENOSPC);
    assert_int_equal(client_status_errno(418, NULL, 0), -EPROTO);
    assert_int_equal(client_status_errno(302, NULL, 0), -EPROTO);
}

static void
test_output_line(void **state)
{
    enum abx_stream stream = 0;
    const char *b64 = NULL;
    size_t n = 0;
    uint64_t off = 0;
    (void)state;

#define LINE(s) s, sizeof(s) - 1
    assert_int_equal(client_output_line(LINE("{\"stdout\":\"aGk=\",\"offset\":120}"), &stream, &b64,
                                        &n, &off),
                     1);
    assert_int_equal(stream, ABX_STREAM_STDOUT);
    assert_int_equal(n, 4);
    assert_memory_equal(b64, "aGk=", 4);
    assert_int_equal(off, 120);
    assert_int_equal(client_output_line(LINE("{\"stderr\":\"\",\"offset\":18446744073709551615}"),
                                        &stream, &b64, &n, &off),
                     1);
    assert_int_equal(stream, ABX_STREAM_STDERR);
    assert_int_equal(n, 0);
    assert_true(off == UINT64_MAX);
#undef LINE

    /* Anything else is left to the JSON parser. */
    static const char *const other[] = {
            "{\"stdout\": \"aGk=\", \"offset\": 1}",
            "{\"stdout\":\"aGk=\",\"offset\":1} ",
            "{\"stdout\":\"aGk=\",\"offset\":1,\"x\":2}",
            "{\"stdout\":\"aGk=\",\"offset\":}",
            "{\"stdout\":\"aGk=\",\"offset\":-1}",
            "{\"stdout\":\"aGk=\",\"offset\":18446744073709551616}",
            "{\"stdout\":\"aG\\u006b=\",\"offset\":1}",
            "{\"stdout\":\"aGk=\"}",
            "{\"stdout\":\"aGk=",
            "{\"offset\":1,\"stdout\":\"aGk=\"}",
            "{\"dropped\":5,\"offset\":9}",
            "{\"exit_code\":0}",
            "",
    };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
        assert_int_equal(client_output_line(other[i], strlen(other[i]), &stream, &b64, &n, &off),
                         0);
}

static void
test_client_new(void **state)
{
    struct abx_client *c = NULL;
    (void)state;

    assert_int_equal(abx_client_new("ftp://x", "k", &c), -EINVAL);
    assert_int_equal(abx_client_new("127.0.0.1:8700", "k", &c), -EINVAL);
    assert_int_equal(abx_client_new("http://a b", "k", &c), -EINVAL);
    assert_int_equal(abx_client_new("http://x", "k\r\nX-Evil: 1", &c), -EINVAL);
    assert_int_equal(abx_client_new(NULL, "k", &c), -EINVAL);
    assert_null(c);
    assert_int_equal(abx_client_new("http://127.0.0.1:1///", NULL, &c), 0);
    assert_string_equal(abx_client_url(c), "http://127.0.0.1:1");
    assert_string_equal(abx_client_error(c), "");
    assert_int_equal(abx_client_set_timeouts(c, -1, 0), -EINVAL);
    assert_null(abx_client_free(c));
    assert_null(abx_client_free(NULL));
    assert_non_null(abx_version());
}

static bool
starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* --- a scripted server --- */

#define MAX_STEPS  8
#define MAX_PIECES 16

struct step {
    const char *head;             /* "HTTP/1.1 200 OK\r\n" and any headers */
    const char *body[MAX_PIECES]; /* written in order, apart; NULL ends */
    size_t hold_before;           /* body index to wait for the client's signal before */
    bool close; /* "Connection: close" and the body ends with the connection; else a
                 * Content-Length is added and the connection is kept */
    bool raw;   /* head is the whole head, blank line included; nothing is added */
};

struct server {
    int lfd;
    uint16_t port;
    pthread_t thread;
    struct step steps[MAX_STEPS];
    size_t nsteps;
    struct buf requests[MAX_STEPS]; /* each request as received (chunked bodies decoded) */
    atomic_bool signal;             /* set by the client side: go on */
    atomic_bool held_timeout;       /* the server waited for the signal in vain */
};

static bool
wait_flag(atomic_bool *flag, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (atomic_load(flag))
            return true;
        struct timespec ts = {0, 1000 * 1000};
        (void)nanosleep(&ts, NULL);
    }
    return false;
}

static ssize_t
read_some(int fd, struct buf *b)
{
    char tmp[65536];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) <= 0)
        return -ETIMEDOUT;
    ssize_t n = read(fd, tmp, sizeof(tmp));
    if (n > 0 && buf_put(b, tmp, (size_t)n) < 0)
        return -ENOMEM;
    return n;
}

/* Reads one request into out: head, then the body (Content-Length or
 * chunked, decoded). Returns 0, or < 0 when the connection ended. */
static int
read_request(int fd, struct buf *in, struct buf *out)
{
    char *end;
    while (!(end = strstr(in->data, "\r\n\r\n")))
        if (read_some(fd, in) <= 0)
            return -EPIPE;
    size_t head = (size_t)(end - in->data) + 4;
    assert_int_equal(buf_put(out, in->data, head), 0);
    const char *h = out->data;
    const char *cl = strcasestr(h, "\r\nContent-Length:");
    bool chunked = strcasestr(h, "\r\nTransfer-Encoding: chunked") != NULL;
    if (strcasestr(h, "\r\nExpect: 100-continue")) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        assert_int_equal(write(fd, cont, sizeof(cont) - 1), (ssize_t)sizeof(cont) - 1);
    }
    buf_consume(in, head);
    if (cl) {
        size_t len = (size_t)strtoull(cl + 17, NULL, 10);
        while (in->len < len)
            if (read_some(fd, in) <= 0)
                return -EPIPE;
        assert_int_equal(buf_put(out, in->data, len), 0);
        buf_consume(in, len);
    } else if (chunked) {
        for (;;) {
            char *crlf;
            while (!(crlf = strstr(in->data, "\r\n")))
                if (read_some(fd, in) <= 0)
                    return -EPIPE;
            size_t len = (size_t)strtoull(in->data, NULL, 16);
            size_t skip = (size_t)(crlf - in->data) + 2;
            while (in->len < skip + len + 2)
                if (read_some(fd, in) <= 0)
                    return -EPIPE;
            assert_int_equal(buf_put(out, in->data + skip, len), 0);
            buf_consume(in, skip + len + 2);
            if (len == 0)
                break;
        }
    }
    return 0;
}

static void *
server_main(void *userdata)
{
    struct server *s = userdata;
    struct buf in;
    int fd = -1;

    buf_init(&in, BUF_UNLIMITED);
    for (size_t i = 0; i < s->nsteps; i++) {
        const struct step *st = &s->steps[i];
        if (fd < 0) {
            fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0)
                break;
            buf_reset(&in);
        }
        if (read_request(fd, &in, &s->requests[i]) < 0)
            break;
        struct buf head;
        size_t total = 0;
        buf_init(&head, BUF_UNLIMITED);
        for (size_t k = 0; k < MAX_PIECES && st->body[k]; k++)
            total += strlen(st->body[k]);
        assert_int_equal(buf_puts(&head, st->head), 0);
        if (!st->raw && st->close)
            assert_int_equal(buf_puts(&head, "Connection: close\r\n\r\n"), 0);
        else if (!st->raw)
            assert_int_equal(buf_printf(&head, "Content-Length: %zu\r\n\r\n", total), 0);
        bool ok = write(fd, head.data, head.len) == (ssize_t)head.len;
        buf_done(&head);
        for (size_t k = 0; ok && k < MAX_PIECES && st->body[k]; k++) {
            if (st->hold_before && k == st->hold_before && !wait_flag(&s->signal, 5000))
                atomic_store(&s->held_timeout, true);
            struct timespec ts = {0, 2 * 1000 * 1000}; /* let the pieces arrive apart */
            (void)nanosleep(&ts, NULL);
            size_t n = strlen(st->body[k]);
            ok = write(fd, st->body[k], n) == (ssize_t)n;
        }
        if (st->close || st->raw) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0)
        close(fd);
    buf_done(&in);
    return NULL;
}

static struct server *
server_start(const struct step *steps, size_t n)
{
    struct server *s = calloc(1, sizeof(*s));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);

    assert_non_null(s);
    assert_true(n <= MAX_STEPS);
    memcpy(s->steps, steps, n * sizeof(*steps));
    s->nsteps = n;
    for (size_t i = 0; i < MAX_STEPS; i++)
        buf_init(&s->requests[i], BUF_UNLIMITED);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->lfd, 8), 0);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &len), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
    return s;
}

static void
server_stop(struct server *s)
{
    shutdown(s->lfd, SHUT_RDWR);
    assert_int_equal(pthread_join(s->thread, NULL), 0);
    close(s->lfd);
    for (size_t i = 0; i < MAX_STEPS; i++)
        buf_done(&s->requests[i]);
    free(s);
}

static struct abx_client *
client_for(struct server *s)
{
    struct abx_client *c = NULL;
    char url[64];
    (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u/", s->port);
    assert_int_equal(abx_client_new(url, "sekrit", &c), 0);
    return c;
}

#define OK "HTTP/1.1 200 OK\r\n"

/* --- exec: streaming NDJSON --- */

struct captured {
    struct server *server;
    int pid;
    struct buf out, err;
    uint64_t last_offset;
    size_t dropped;
    int calls;
    bool fail;
};

static int
cap_started(int pid, void *userdata)
{
    struct captured *c = userdata;
    c->pid = pid;
    return 0;
}

static int
cap_output(enum abx_stream stream, const void *data, size_t len, uint64_t offset, void *userdata)
{
    struct captured *c = userdata;
    c->calls++;
    c->last_offset = offset;
    if (stream == ABX_STREAM_DROPPED) {
        assert_null(data);
        c->dropped = len;
        return 0;
    }
    assert_int_equal(buf_put(stream == ABX_STREAM_STDOUT ? &c->out : &c->err, data, len), 0);
    /* Tell the server we have the first piece; it holds the rest until then. */
    if (c->server)
        atomic_store(&c->server->signal, true);
    return c->fail ? -ECANCELED : 0;
}

static void
test_exec_streams(void **state)
{
    /* The lines are cut inside JSON and inside base64 on purpose. */
    static const struct step steps[] = {{
            .head = "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n",
            .body = {"{\"pi", "d\": 7}\n{\"stdout\": \"aGVs", "bG8K\", \"offset\": 0}\n{\"std",
                     /* held until the client has seen "hello\n" */
                     "err\": \"ZXJyCg==\", \"offset\": 6}\n",
                     "{\"exit_code\": 3, \"timed_out\": false, \"oom_killed\": false, "
                     "\"duration_ms\": 12, \"pid\": 7, \"output_end\": 10, \"new\": 1}\n"},
            .hold_before = 3,
            .close = true,
    }};
    struct server *s = server_start(steps, 1);
    struct abx_client *c = client_for(s);
    struct captured cap = {.server = s};
    struct abx_exec_result res = {0};
    const char *argv[] = {"sh", "-c", "echo hello", NULL};
    struct abx_kv env[] = {{"K", "V"}};
    struct abx_exec_spec spec = {
            .argv = argv,
            .env = env,
            .n_env = 1,
            .cwd = "src",
            .stdin_data = "hi",
            .stdin_len = 2,
            .has_timeout = true,
            .timeout_s = 1.5,
    };
    (void)state;

    buf_init(&cap.out, BUF_UNLIMITED);
    buf_init(&cap.err, BUF_UNLIMITED);
    assert_int_equal(abx_exec(c, "sb1", &spec, cap_started, cap_output, &cap, &res), 0);
    assert_false(atomic_load(&s->held_timeout)); /* output arrived while the stream was open */
    assert_int_equal(cap.pid, 7);
    assert_string_equal(cap.out.data, "hello\n");
    assert_string_equal(cap.err.data, "err\n");
    assert_int_equal(cap.last_offset, 6);
    assert_int_equal(res.exit_code, 3);
    assert_int_equal(res.pid, 7);
    assert_int_equal(res.duration_ms, 12);
    assert_int_equal(res.output_end, 10);
    assert_false(res.timed_out);
    assert_non_null(strstr(res.json, "\"new\": 1"));
    abx_exec_result_done(&res);
    assert_null(res.json);

    const char *rq = s->requests[0].data;
    assert_true(starts(rq, "POST /v1/sandboxes/sb1/exec HTTP/1.1\r\n"));
    assert_non_null(strcasestr(rq, "\r\nAuthorization: Bearer sekrit\r\n"));
    assert_non_null(strcasestr(rq, "\r\nContent-Type: application/json\r\n"));
    const char *body = strstr(rq, "\r\n\r\n") + 4;
    assert_string_equal(body, "{\"argv\":[\"sh\",\"-c\",\"echo hello\"],\"env\":{\"K\":\"V\"},"
                              "\"cwd\":\"src\",\"stdin\":\"aGk=\",\"timeout_s\":1.5}");
    buf_done(&cap.out);
    buf_done(&cap.err);
    abx_client_free(c);
    server_stop(s);
}

static void
test_exec_stream_failures(void **state)
{
    static const struct step steps[] = {
            /* ends without a result */
            {.head = OK, .body = {"{\"pid\": 2}\n"}, .close = true},
            /* a line that is not JSON */
            {.head = OK, .body = {"{\"pid\": 2}\nnot json\n"}, .close = true},
            /* output that is not base64 */
            {.head = OK, .body = {"{\"stdout\": \"!!\", \"offset\": 0}\n"}, .close = true},
            /* the callback stops it */
            {.head = OK,
             .body = {"{\"stdout\": \"aGk=\", \"offset\": 0}\n{\"exit_code\": 0}\n"},
             .close = true},
            /* an error line mid-stream */
            {.head = OK,
             .body = {"{\"error\": \"the process record is no longer kept\"}\n"},
             .close = true},
            /* a length that is never reached: the connection is cut */
            {.head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
             .body = {"{\"pid\": 2}\n"},
             .raw = true},
    };
    struct server *s = server_start(steps, sizeof(steps) / sizeof(steps[0]));
    struct abx_client *c = client_for(s);
    struct captured cap = {0};
    const char *argv[] = {"true", NULL};
    struct abx_exec_spec spec = {.argv = argv};
    struct abx_exec_result res = {0};
    (void)state;

    buf_init(&cap.out, BUF_UNLIMITED);
    buf_init(&cap.err, BUF_UNLIMITED);
    assert_int_equal(abx_exec(c, "sb", &spec, NULL, cap_output, &cap, &res), -EPROTO);
    assert_non_null(strstr(abx_client_error(c), "ended before"));
    assert_int_equal(abx_exec(c, "sb", &spec, NULL, cap_output, &cap, &res), -EBADMSG);
    assert_int_equal(abx_exec(c, "sb", &spec, NULL, cap_output, &cap, &res), -EBADMSG);
    assert_non_null(strstr(abx_client_error(c), "base64"));
    cap.fail = true;
    assert_int_equal(abx_exec(c, "sb", &spec, NULL, cap_output, &cap, &res), -ECANCELED);
    assert_non_null(strstr(abx_client_error(c), "callback"));
    cap.fail = false;
    assert_int_equal(abx_exec(c, "sb", &spec, NULL, cap_output, &cap, &res), -ENOENT);
    assert_string_equal(abx_client_error(c), "the process record is no longer kept");
    assert_int_equal(abx_exec(c, "sb", &spec, NULL, cap_output, &cap, &res), -ECONNRESET);
    assert_null(res.json); /* nothing to release after a failure */

    /* Refused before any request. */
    assert_int_equal(abx_exec(c, "bad/id", &spec, NULL, NULL, NULL, NULL), -EINVAL);
    assert_non_null(strstr(abx_client_error(c), "invalid sandbox id"));
    struct abx_exec_spec none = {0};
    assert_int_equal(abx_exec(c, "sb", &none, NULL, NULL, NULL, NULL), -EINVAL);
    buf_done(&cap.out);
    buf_done(&cap.err);
    abx_client_free(c);
    server_stop(s);
}

static void
test_output_reattach(void **state)
{
    static const struct step steps[] = {
            {.head = OK,
             /* abxd's compact form, cut inside the base64 */
             .body = {"{\"dropped\":100,\"offset\":120}\n{\"stdout\":\"aG",
                      "k=\",\"offset\":120}\n"}},
            {.head = OK, .body = {"{\"exit_code\": 137, \"signal\": 9}\n"}},
    };
    struct server *s = server_start(steps, 2);
    struct abx_client *c = client_for(s);
    struct abx_exec_result res = {0};
    struct captured cap = {0};
    (void)state;

    buf_init(&cap.out, BUF_UNLIMITED);
    buf_init(&cap.err, BUF_UNLIMITED);
    /* No result: still running. The dropped gap comes first. */
    assert_int_equal(abx_process_output(c, "sb", 5, 3, false, cap_output, &cap, &res), 0);
    assert_int_equal(cap.calls, 2);
    assert_int_equal(cap.dropped, 100);
    assert_int_equal(cap.last_offset, 120);
    assert_string_equal(cap.out.data, "hi");
    /* On the same kept-alive connection: the result. */
    assert_int_equal(abx_process_output(c, "sb", 5, 122, true, NULL, NULL, &res), 1);
    assert_int_equal(res.exit_code, 137);
    assert_int_equal(res.signal, 9);
    abx_exec_result_done(&res);
    assert_true(starts(s->requests[0].data,
                       "GET /v1/sandboxes/sb/processes/5/output?offset=3 HTTP/1.1\r\n"));
    assert_true(starts(s->requests[1].data,
                       "GET /v1/sandboxes/sb/processes/5/output?offset=122&follow=1 HTTP/1.1\r\n"));
    assert_int_equal(abx_process_output(c, "sb", 0, 0, false, NULL, NULL, NULL), -EINVAL);
    buf_done(&cap.out);
    buf_done(&cap.err);
    abx_client_free(c);
    server_stop(s);
}

/* --- errors --- */

static void
test_error_answers(void **state)
{
    static const struct step steps[] = {
            {.head = "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n",
             .body = {"{\"error\": \"not_found\", \"message\": \"no sandbox 'zz'\"}\n"}},
            {.head = "HTTP/1.1 409 Conflict\r\n",
             .body = {"{\"error\": \"conflict\", \"message\": \"'/b' already exists\"}\n"}},
            {.head = "HTTP/1.1 409 Conflict\r\n",
             .body = {"{\"error\": \"conflict\", \"message\": \"process 3 has exited\"}"}},
            {.head = "HTTP/1.1 409 Conflict\r\n",
             .body = {"{\"error\": \"is_a_directory\", \"message\": \"a directory\"}"}},
            {.head = "HTTP/1.1 500 Internal Server Error\r\n",
             .body = {"<html>oops</html>"},
             .close = true},
            {.head = OK, .body = {"[1, 2]"}},
            {.head = "HTTP/1.1 401 Unauthorized\r\n",
             .body = {"{\"error\": \"unauthorized\", \"message\": \"the API key is not "
                      "valid\"}"}},
    };
    struct server *s = server_start(steps, sizeof(steps) / sizeof(steps[0]));
    struct abx_client *c = client_for(s);
    struct abx_sandbox_info *info = NULL;
    struct abx_sandbox_list *list = NULL;
    (void)state;

    assert_int_equal(abx_sandbox_get(c, "zz", &info), -ENOENT);
    assert_string_equal(abx_client_error(c), "no sandbox 'zz'");
    assert_int_equal(abx_client_http_status(c), 404);
    assert_string_equal(abx_client_error_code(c), "not_found");
    assert_null(info);
    assert_int_equal(abx_rename(c, "sb", "/a", "/b", false, NULL), -EEXIST);
    assert_string_equal(abx_client_error(c), "'/b' already exists");
    assert_int_equal(abx_process_signal(c, "sb", 3, "TERM", true), -ESRCH);
    assert_int_equal(abx_file_delete(c, "sb", "/d"), -EISDIR);
    assert_int_equal(abx_sandbox_kill(c, "sb"), -EIO);
    assert_int_equal(abx_client_http_status(c), 500);
    assert_non_null(strstr(abx_client_error(c), "500"));
    assert_int_equal(abx_sandbox_list(c, &list), -EBADMSG);
    assert_null(list);
    assert_int_equal(abx_metrics(c, NULL), -EACCES);
    assert_string_equal(abx_client_error_code(c), "unauthorized");
    abx_client_free(c);
    server_stop(s);

    /* Nobody listens: a transport error, no status. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char url[64];
    (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(a.sin_port));
    assert_int_equal(abx_client_new(url, "k", &c), 0);
    assert_int_equal(abx_health(c, NULL), -ECONNREFUSED);
    assert_int_equal(abx_client_http_status(c), 0);
    assert_non_null(strstr(abx_client_error(c), "/healthz"));
    abx_client_free(c);
    close(fd);
}

/* --- sandboxes and operations --- */

static void
test_sandbox_requests(void **state)
{
    static const struct step steps[] = {
            {.head = "HTTP/1.1 201 Created\r\n",
             .body = {"{\"id\": \"abc\", \"template\": \"base\", \"state\": \"running\", "
                      "\"end_at\": null, \"cpu\": 0.5, \"memory_mb\": 256, \"metadata\": "
                      "{\"owner\": \"me\"}, \"timings\": {\"x\": 1}}\n"}},
            {.head = OK,
             .body = {"{\"sandboxes\": [{\"id\": \"a\"}, {\"id\": \"b\", \"usage\": "
                      "{\"pids\": 3}}]}"}},
            {.head = "HTTP/1.1 204 No Content\r\n\r\n", .raw = true},
            {.head = "HTTP/1.1 503 Service Unavailable\r\n",
             .body = {"{\"ready\": false, \"isolation\": \"ns\", \"cgroup\": \"v2\", "
                      "\"draining\": true, \"missing\": [\"root privileges\"]}\n"}},
            {.head = OK, .body = {"{\"draining\": true, \"sandboxes\": 4}\n"}},
    };
    struct server *s = server_start(steps, sizeof(steps) / sizeof(steps[0]));
    struct abx_client *c = client_for(s);
    struct abx_sandbox_info *info = NULL;
    struct abx_sandbox_list *list = NULL;
    struct abx_readiness *rd = NULL;
    struct abx_kv meta[] = {{"owner", "me"}};
    struct abx_sandbox_spec spec = {
            .cpu = 0.5,
            .memory_mb = 256,
            .has_timeout = true,
            .timeout_s = 0,
            .metadata = meta,
            .n_metadata = 1,
    };
    char *text = NULL;
    (void)state;

    assert_int_equal(abx_sandbox_create(c, &spec, &info), 0);
    assert_string_equal(info->id, "abc");
    assert_null(info->end_at);
    assert_true(info->cpu == 0.5);
    assert_int_equal(info->memory_mb, 256);
    assert_int_equal(info->n_metadata, 1);
    assert_string_equal(info->metadata[0].key, "owner");
    assert_string_equal(info->metadata[0].value, "me");
    assert_false(info->has_usage);
    assert_non_null(strstr(info->json, "\"timings\": {\"x\": 1}}")); /* as sent, trimmed */
    assert_int_equal(info->json[strlen(info->json) - 1], '}');
    info = abx_sandbox_info_free(info);
    const char *rq = s->requests[0].data;
    assert_true(starts(rq, "POST /v1/sandboxes HTTP/1.1\r\n"));
    assert_string_equal(
            strstr(rq, "\r\n\r\n") + 4,
            "{\"cpu\":0.5,\"memory_mb\":256,\"timeout_s\":0,\"metadata\":{\"owner\":\"me\"}}");

    assert_int_equal(abx_sandbox_list(c, &list), 0);
    assert_int_equal(list->n, 2);
    assert_string_equal(list->items[1]->id, "b");
    assert_true(list->items[1]->has_usage);
    assert_int_equal(list->items[1]->usage.pids, 3);
    list = abx_sandbox_list_free(list);

    struct abx_sandbox_update nothing = {0};
    assert_int_equal(abx_sandbox_update(c, "abc", &nothing, NULL), -EINVAL);
    assert_int_equal(abx_sandbox_kill(c, "abc"), 0);
    assert_true(starts(s->requests[2].data, "DELETE /v1/sandboxes/abc HTTP/1.1\r\n"));

    assert_int_equal(abx_ready(c, &rd), 0);
    assert_false(rd->ready);
    assert_true(rd->draining);
    assert_string_equal(rd->cgroup, "v2");
    assert_int_equal(rd->n_missing, 1);
    assert_string_equal(rd->missing[0], "root privileges");
    assert_null(rd->missing[1]);
    rd = abx_readiness_free(rd);
    assert_true(starts(s->requests[3].data, "GET /readyz HTTP/1.1\r\n"));

    assert_int_equal(abx_drain(c, &text), 4);
    assert_string_equal(text, "{\"draining\": true, \"sandboxes\": 4}");
    free(text);
    assert_true(starts(s->requests[4].data, "POST /drain HTTP/1.1\r\n"));
    abx_client_free(c);
    server_stop(s);
}

/* --- files --- */

static void
test_file_requests(void **state)
{
    static const struct step steps[] = {
            /* upload from a pipe: chunked */
            {.head = "HTTP/1.1 201 Created\r\n",
             .body = {"{\"path\": \"/a b/c%d\", \"type\": \"file\", \"size\": 5, "
                      "\"mode\": 420, \"version\": \"v1\"}"}},
            /* upload from a regular file: Content-Length */
            {.head = OK, .body = {"{\"path\": \"/f\"}"}},
            /* download, in two pieces */
            {.head = OK, .body = {"hello", " world"}},
            /* download of a missing file: nothing is written */
            {.head = "HTTP/1.1 404 Not Found\r\n",
             .body = {"{\"error\": \"not_found\", \"message\": \"no such file\"}"}},
            /* exists */
            {.head = "HTTP/1.1 200 OK\r\nX-Abx-Type: dir\r\nContent-Length: 0\r\n\r\n",
             .raw = true},
            /* exists: 404, then the sandbox is there */
            {.head = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", .raw = true},
            {.head = OK, .body = {"{\"id\": \"sb\"}"}},
            /* walk */
            {.head = OK,
             .body = {"{\"entries\": [{\"path\": \"/l\", \"type\": \"symlink\", "
                      "\"size\": 1, \"target\": \"x\"}]}"}},
    };
    struct server *s = server_start(steps, sizeof(steps) / sizeof(steps[0]));
    struct abx_client *c = client_for(s);
    struct abx_file_info *fi = NULL;
    struct abx_walk_list *wl = NULL;
    enum abx_file_type type = ABX_FILE_UNKNOWN;
    uint64_t bytes = 0;
    int p[2];
    char tmpl[] = "/tmp/abx-test-XXXXXX";
    (void)state;

    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(write(p[1], "hello", 5), 5);
    close(p[1]);
    assert_int_equal(abx_file_upload(c, "sb", "a b/c%d", p[0], &fi), 1);
    close(p[0]);
    assert_string_equal(fi->path, "/a b/c%d");
    assert_int_equal(fi->type, ABX_FILE_REGULAR);
    assert_int_equal(fi->size, 5);
    assert_int_equal(fi->mode, 0644);
    assert_string_equal(fi->version, "v1");
    fi = abx_file_info_free(fi);
    const char *rq = s->requests[0].data;
    assert_true(starts(rq, "PUT /v1/sandboxes/sb/files/a%20b/c%25d HTTP/1.1\r\n"));
    assert_non_null(strcasestr(rq, "\r\nTransfer-Encoding: chunked\r\n"));
    assert_string_equal(strstr(rq, "\r\n\r\n") + 4, "hello");

    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    assert_int_equal(lseek(fd, 4, SEEK_SET), 4); /* from the current position */
    assert_int_equal(abx_file_upload(c, "sb", "/f", fd, NULL), 0);
    rq = s->requests[1].data;
    assert_non_null(strcasestr(rq, "\r\nContent-Length: 6\r\n"));
    assert_string_equal(strstr(rq, "\r\n\r\n") + 4, "456789");

    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    assert_int_equal(abx_file_download(c, "sb", "/f", fd, &bytes), 0);
    assert_int_equal(bytes, 11);
    assert_int_equal(abx_file_download(c, "sb", "/nope", fd, &bytes), -ENOENT);
    assert_string_equal(abx_client_error(c), "no such file");
    char back[32] = {0};
    assert_int_equal(pread(fd, back, sizeof(back) - 1, 0), 11);
    assert_string_equal(back, "hello world");
    close(fd);
    unlink(tmpl);

    assert_int_equal(abx_file_exists(c, "sb", "/d", &type), 1);
    assert_int_equal(type, ABX_FILE_DIRECTORY);
    assert_true(starts(s->requests[4].data, "HEAD /v1/sandboxes/sb/files/d HTTP/1.1"));
    assert_int_equal(abx_file_exists(c, "sb", "/gone", &type), 0);
    assert_string_equal(abx_client_error(c), "");
    assert_true(starts(s->requests[6].data, "GET /v1/sandboxes/sb HTTP/1.1"));

    assert_int_equal(abx_walk(c, "sb", "/a b", &wl), 0);
    assert_int_equal(wl->n, 1);
    assert_int_equal(wl->items[0]->type, ABX_FILE_SYMLINK);
    assert_string_equal(wl->items[0]->target, "x");
    wl = abx_walk_list_free(wl);
    assert_true(starts(s->requests[7].data, "GET /v1/sandboxes/sb/walk?path=%2Fa%20b HTTP/1.1"));

    assert_int_equal(abx_file_upload(c, "sb", "/x", -1, NULL), -EBADF);
    assert_int_equal(abx_file_upload(c, "sb", "", 0, NULL), -EINVAL);
    abx_client_free(c);
    server_stop(s);
}

/* Names are bytes: a walk entry's path_b64/target_b64 give the exact bytes
 * (path stays the display form), a name that is UTF-8 is taken as is, and
 * request bodies carry a name that is not UTF-8 as path_b64/from_b64/
 * to_b64; URLs percent-encode every byte. */
static void
test_byte_names(void **state)
{
    static const struct step steps[] = {
            {.head = OK,
             .body = {"{\"entries\": [{\"path\": \"/a\\ufffd\", \"path_b64\": \"L2H/\", "
                      "\"type\": \"symlink\", \"target\": \"\\ufffd\", \"target_b64\": \"/g==\"},"
                      " {\"path\": \"/n\\nl\\u001b\", \"type\": \"file\"}]}"}},
            {.head = OK, .body = {"{\"path\": \"/x\\ufffd\", \"path_b64\": \"L3j+\"}"}},
            {.head = "HTTP/1.1 201 Created\r\n", .body = {"{\"path\": \"/d\\n\"}"}},
            {.head = OK, .body = {"{\"path\": \"/\\u00e9\", \"type\": \"file\"}"}},
    };
    struct server *s = server_start(steps, sizeof(steps) / sizeof(steps[0]));
    struct abx_client *c = client_for(s);
    struct abx_walk_list *wl = NULL;
    struct abx_file_info *fi = NULL;
    (void)state;

    assert_int_equal(abx_walk(c, "sb", "/\xff", &wl), 0);
    assert_true(starts(s->requests[0].data, "GET /v1/sandboxes/sb/walk?path=%2F%FF HTTP/1.1"));
    assert_int_equal(wl->n, 2);
    assert_string_equal(wl->items[0]->path, "/a\xff");
    assert_string_equal(wl->items[0]->target, "\xfe");
    assert_string_equal(wl->items[1]->path, "/n\nl\x1b");
    assert_null(wl->items[1]->target);
    wl = abx_walk_list_free(wl);

    assert_int_equal(abx_rename(c, "sb", "/\xff", "x\xfe", false, &fi), 0);
    assert_string_equal(fi->path, "/x\xfe");
    fi = abx_file_info_free(fi);
    const char *b = strstr(s->requests[1].data, "\r\n\r\n") + 4;
    assert_non_null(strstr(b, "\"from_b64\":\"L/8=\""));
    assert_non_null(strstr(b, "\"to_b64\":\"L3j+\""));

    assert_int_equal(abx_mkdir(c, "sb", "/d\n"), 1);
    b = strstr(s->requests[2].data, "\r\n\r\n") + 4;
    assert_string_equal(b, "{\"path\":\"/d\\n\"}");

    assert_int_equal(abx_rename(c, "sb", "/a", "/\xc3\xa9", true, &fi), 0);
    assert_string_equal(fi->path, "/\xc3\xa9");
    fi = abx_file_info_free(fi);
    b = strstr(s->requests[3].data, "\r\n\r\n") + 4;
    assert_null(strstr(b, "_b64"));
    abx_client_free(c);
    server_stop(s);
}

/* --- workspaces --- */

/* The body of request i (after the blank line). */
static const char *
body_of(const struct server *s, size_t i)
{
    const char *b = strstr(s->requests[i].data, "\r\n\r\n");
    assert_non_null(b);
    return b + 4;
}

static void
test_workspace_lifecycle(void **state)
{
    static const struct step steps[] = {
            {.head = "HTTP/1.1 201 Created\r\n",
             .body = {"{\"id\": \"proj-1\", \"state\": \"cold\", \"template\": \"base\", "
                      "\"created_at\": \"2026-11-30T18:19:28.653Z\", \"cpu\": 0.5, "
                      "\"memory_mb\": 256, \"pids\": null}\n"}},
            {.head = "HTTP/1.1 409 Conflict\r\n",
             .body = {"{\"error\": \"conflict\", \"message\": \"workspace 'proj-1' already "
                      "exists\"}"}},
            {.head = OK,
             .body = {"{\"workspaces\": [{\"id\": \"a\", \"state\": \"warm\"}, {\"id\": \"b\", "
                      "\"template\": \"base\", \"state\": \"cold\"}]}"}},
            {.head = OK,
             .body = {"{\"id\": \"a\", \"state\": \"warm\", \"usage\": {\"bytes\": 9, "
                      "\"files\": 1, \"dirs\": 4}, \"processes\": 2}"}},
            {.head = "HTTP/1.1 204 No Content\r\n\r\n", .raw = true},
            {.head = "HTTP/1.1 404 Not Found\r\n",
             .body = {"{\"error\": \"not_found\", \"message\": \"no workspace 'gone'\"}"}},
    };
    struct server *s = server_start(steps, sizeof(steps) / sizeof(steps[0]));
    struct abx_client *c = client_for(s);
    struct abx_workspace_info *w = NULL;
    struct abx_workspace_list *l = NULL;
    struct abx_workspace_spec spec = {.id = "proj-1", .cpu = 0.5, .memory_mb = 256, .pids = 64};
    (void)state;

    assert_int_equal(abx_workspace_create(c, &spec, &w), 0);
    assert_string_equal(w->id, "proj-1");
    assert_string_equal(w->state, "cold");
    assert_string_equal(w->template_name, "base");
    assert_true(w->cpu == 0.5);
    assert_int_equal(w->memory_mb, 256);
    assert_int_equal(w->pids, 0); /* null: the host default */
    assert_false(w->has_usage);
    assert_non_null(strstr(w->json, "\"pids\": null}"));
    w = abx_workspace_info_free(w);
    assert_true(starts(s->requests[0].data, "POST /v1/workspaces HTTP/1.1\r\n"));
    assert_string_equal(body_of(s, 0),
                        "{\"id\":\"proj-1\",\"cpu\":0.5,\"memory_mb\":256,\"pids\":64}");

    /* A taken id is -EEXIST, with abxd's message. */
    assert_int_equal(abx_workspace_create(c, &spec, &w), -EEXIST);
    assert_string_equal(abx_client_error(c), "workspace 'proj-1' already exists");
    assert_null(w);
    struct abx_workspace_spec bad = {.cpu = -1};
    assert_int_equal(abx_workspace_create(c, &bad, NULL), -EINVAL);

    assert_int_equal(abx_workspace_list(c, &l), 0);
    assert_int_equal(l->n, 2);
    assert_string_equal(l->items[0]->state, "warm");
    assert_string_equal(l->items[1]->id, "b");
    assert_non_null(strstr(l->json, "\"workspaces\""));
    l = abx_workspace_list_free(l);
    assert_true(starts(s->requests[2].data, "GET /v1/workspaces HTTP/1.1\r\n"));

    assert_int_equal(abx_workspace_get(c, "a", &w), 0);
    assert_true(w->has_usage);
    assert_int_equal(w->usage.bytes, 9);
    assert_int_equal(w->usage.files, 1);
    assert_int_equal(w->usage.dirs, 4);
    assert_int_equal(w->processes, 2);
    w = abx_workspace_info_free(w);
    assert_true(starts(s->requests[3].data, "GET /v1/workspaces/a HTTP/1.1\r\n"));

    assert_int_equal(abx_workspace_delete(c, "a"), 0);
    assert_true(starts(s->requests[4].data, "DELETE /v1/workspaces/a HTTP/1.1\r\n"));
    assert_int_equal(abx_workspace_delete(c, "gone"), -ENOENT);
    assert_string_equal(abx_client_error(c), "no workspace 'gone'");

    /* Refused before any request. */
    assert_int_equal(abx_workspace_get(c, "a/b", &w), -EINVAL);
    assert_non_null(strstr(abx_client_error(c), "invalid workspace id"));
    assert_null(abx_workspace_info_free(NULL));
    assert_null(abx_workspace_list_free(NULL));
    abx_client_free(c);
    server_stop(s);
}

static void
test_workspace_files(void **state)
{
    static const struct step steps[] = {
            /* upload with If-Match */
            {.head = OK,
             .body = {"{\"path\": \"/src/a.py\", \"type\": \"file\", \"size\": 2, \"mode\": 420, "
                      "\"version\": \"9f86\", \"hash\": \"9f86\"}"}},
            /* upload with If-Match "" that no longer holds */
            {.head = "HTTP/1.1 412 Precondition Failed\r\n",
             .body = {"{\"error\": \"precondition_failed\", \"message\": \"'/src/a.py' exists "
                      "(expected none)\"}"}},
            /* delete with If-Match */
            {.head = "HTTP/1.1 204 No Content\r\n\r\n", .raw = true},
            /* download */
            {.head = "HTTP/1.1 200 OK\r\nX-Abx-State: cold\r\n", .body = {"hi"}},
            /* exists: 404, then the workspace is asked about */
            {.head = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", .raw = true},
            {.head = OK, .body = {"{\"id\": \"ws\", \"state\": \"cold\"}"}},
            /* walk */
            {.head = OK,
             .body = {"{\"entries\": [{\"path\": \"/src\", \"type\": \"dir\", \"version\": "
                      "\"\"}], \"state\": \"cold\"}"}},
            /* mkdir */
            {.head = "HTTP/1.1 201 Created\r\n", .body = {"{\"path\": \"/d\", \"created\": true}"}},
    };
    struct server *s = server_start(steps, sizeof(steps) / sizeof(steps[0]));
    struct abx_client *c = client_for(s);
    struct abx_file_info *fi = NULL;
    struct abx_walk_list *wl = NULL;
    enum abx_file_type type = ABX_FILE_UNKNOWN;
    char tmpl[] = "/tmp/abx-test-XXXXXX";
    uint64_t bytes = 0;
    (void)state;

    assert_int_equal(abx_workspace_file_put(c, "ws", "src/a.py", "hi", 2, "9f86", &fi), 0);
    assert_string_equal(fi->hash, "9f86");
    assert_string_equal(fi->version, "9f86");
    fi = abx_file_info_free(fi);
    const char *rq = s->requests[0].data;
    assert_true(starts(rq, "PUT /v1/workspaces/ws/files/src/a.py HTTP/1.1\r\n"));
    assert_non_null(strcasestr(rq, "\r\nIf-Match: \"9f86\"\r\n"));
    assert_non_null(strcasestr(rq, "\r\nAuthorization: Bearer sekrit\r\n"));
    assert_string_equal(body_of(s, 0), "hi");

    /* "" (only if absent) survives as a header; 412 is -ESTALE with the message. */
    assert_int_equal(abx_workspace_file_put(c, "ws", "/src/a.py", "x", 1, "", NULL), -ESTALE);
    assert_int_equal(abx_client_http_status(c), 412);
    assert_string_equal(abx_client_error_code(c), "precondition_failed");
    assert_string_equal(abx_client_error(c), "'/src/a.py' exists (expected none)");
    assert_non_null(strcasestr(s->requests[1].data, "\r\nIf-Match: \"\"\r\n"));

    assert_int_equal(abx_workspace_file_delete(c, "ws", "/src/a.py", "9f86"), 0);
    rq = s->requests[2].data;
    assert_true(starts(rq, "DELETE /v1/workspaces/ws/files/src/a.py HTTP/1.1\r\n"));
    assert_non_null(strcasestr(rq, "\r\nIf-Match: \"9f86\"\r\n"));

    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    assert_int_equal(abx_workspace_file_download(c, "ws", "/src/a.py", fd, &bytes), 0);
    assert_int_equal(bytes, 2);
    close(fd);
    unlink(tmpl);
    rq = s->requests[3].data;
    assert_true(starts(rq, "GET /v1/workspaces/ws/files/src/a.py HTTP/1.1\r\n"));
    /* Without a precondition there is no If-Match. */
    assert_null(strcasestr(rq, "If-Match"));

    assert_int_equal(abx_workspace_file_exists(c, "ws", "/gone", &type), 0);
    assert_true(starts(s->requests[4].data, "HEAD /v1/workspaces/ws/files/gone HTTP/1.1"));
    assert_true(starts(s->requests[5].data, "GET /v1/workspaces/ws HTTP/1.1"));

    assert_int_equal(abx_workspace_walk(c, "ws", NULL, &wl), 0);
    assert_string_equal(wl->state, "cold");
    assert_int_equal(wl->n, 1);
    assert_int_equal(wl->items[0]->type, ABX_FILE_DIRECTORY);
    assert_null(wl->items[0]->hash);
    wl = abx_walk_list_free(wl);
    assert_true(starts(s->requests[6].data, "GET /v1/workspaces/ws/walk?path=%2F HTTP/1.1"));

    assert_int_equal(abx_workspace_mkdir(c, "ws", "d"), 1);
    assert_true(starts(s->requests[7].data, "POST /v1/workspaces/ws/mkdir HTTP/1.1"));
    assert_string_equal(body_of(s, 7), "{\"path\":\"/d\"}");

    /* A value that could break out of its quotes is refused before any request. */
    assert_int_equal(abx_workspace_file_put(c, "ws", "/f", "x", 1, "a\"b", NULL), -EINVAL);
    assert_non_null(strstr(abx_client_error(c), "If-Match"));
    assert_int_equal(abx_workspace_file_delete(c, "ws", "/f", "a\nb"), -EINVAL);
    assert_int_equal(abx_workspace_file_upload(c, "ws", "/f", -1, NULL, NULL), -EBADF);
    abx_client_free(c);
    server_stop(s);
}

static void
test_workspace_exec_and_mirror(void **state)
{
    static const struct step steps[] = {
            /* a wake that fails its hash check: an error before any line */
            {.head = "HTTP/1.1 500 Internal Server Error\r\n",
             .body = {"{\"error\": \"integrity_error\", \"message\": \"restore of workspace "
                      "'ws' failed: '/dir/bad.txt' does not match its hash\"}"}},
            {.head = "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n",
             .body = {"{\"pid\": 3}\n{\"stdout\": \"b2s=\", \"offset\": 0}\n",
                      "{\"exit_code\": 0, \"pid\": 3}\n"},
             .close = true},
            {.head = "HTTP/1.1 201 Created\r\n",
             .body = {"{\"pid\": 4, \"argv\": [\"sleep\", \"1\"], \"state\": \"running\"}"}},
            {.head = OK,
             .body = {"{\"files\": 2, \"dirs\": 1, \"deleted\": 3, \"bytes\": 10, \"unchanged\": "
                      "4, \"ignored\": 5, \"duration_ms\": 1.5}"}},
            {.head = OK, .body = {"{\"files\": 0}"}},
            {.head = OK,
             .body = {"{\"entries\": [{\"path\": \"/n.txt\", \"type\": \"file\", \"size\": 4, "
                      "\"mode\": 420, \"version\": \"abc\", \"hash\": \"abc\"}]}"}},
            {.head = OK,
             .body = {"{\"ok\": false, \"store\": \"sqlite\", \"files\": 3, \"blobs\": 2, "
                      "\"missing_blobs\": 0, \"corrupt_blobs\": 1, \"orphan_entries\": 0, "
                      "\"first_problem\": \"blob 'ab12' does not hash to its name\"}"}},
            {.head = OK,
             .body = {"{\"held_lease\": true, \"blobs_deleted\": 2, \"bytes_freed\": 28}"}},
    };
    struct server *s = server_start(steps, sizeof(steps) / sizeof(steps[0]));
    struct abx_client *c = client_for(s);
    const char *argv[] = {"cat", "n.txt", NULL};
    struct abx_exec_spec spec = {.argv = argv};
    struct abx_exec_result res = {0};
    struct abx_process_info *p = NULL;
    struct abx_sync_report *rep = NULL;
    struct abx_walk_list *m = NULL;
    struct abx_store_check *chk = NULL;
    struct abx_store_gc *gc = NULL;
    struct captured cap = {0};
    (void)state;

    buf_init(&cap.out, BUF_UNLIMITED);
    buf_init(&cap.err, BUF_UNLIMITED);
    /* 5xx stays -EIO, but abxd's message (the damaged paths) is kept. */
    assert_int_equal(abx_workspace_exec(c, "ws", &spec, NULL, cap_output, &cap, &res), -EIO);
    assert_int_equal(abx_client_http_status(c), 500);
    assert_string_equal(abx_client_error_code(c), "integrity_error");
    assert_non_null(strstr(abx_client_error(c), "'/dir/bad.txt' does not match its hash"));
    assert_null(res.json);
    assert_true(starts(s->requests[0].data, "POST /v1/workspaces/ws/exec HTTP/1.1\r\n"));
    assert_string_equal(body_of(s, 0), "{\"argv\":[\"cat\",\"n.txt\"]}");

    assert_int_equal(abx_workspace_exec(c, "ws", &spec, cap_started, cap_output, &cap, &res), 0);
    assert_int_equal(cap.pid, 3);
    assert_string_equal(cap.out.data, "ok");
    assert_int_equal(res.exit_code, 0);
    abx_exec_result_done(&res);

    assert_int_equal(abx_workspace_exec_background(c, "ws", &spec, &p), 4);
    assert_true(p->running);
    p = abx_process_info_free(p);
    assert_true(starts(s->requests[2].data, "POST /v1/workspaces/ws/exec HTTP/1.1\r\n"));
    assert_string_equal(body_of(s, 2), "{\"argv\":[\"cat\",\"n.txt\"],\"background\":true}");

    assert_int_equal(abx_workspace_flush(c, "ws", &rep), 0);
    assert_int_equal(rep->files, 2);
    assert_int_equal(rep->dirs, 1);
    assert_int_equal(rep->deleted, 3);
    assert_int_equal(rep->bytes, 10);
    assert_int_equal(rep->unchanged, 4);
    assert_int_equal(rep->ignored, 5);
    assert_true(rep->duration_ms == 1.5);
    rep = abx_sync_report_free(rep);
    assert_true(starts(s->requests[3].data, "POST /v1/workspaces/ws/flush HTTP/1.1\r\n"));
    assert_int_equal(abx_workspace_close(c, "ws", NULL), 0);
    assert_true(starts(s->requests[4].data, "POST /v1/workspaces/ws/close HTTP/1.1\r\n"));

    assert_int_equal(abx_workspace_manifest(c, "ws", &m), 0);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->items[0]->hash, "abc");
    assert_null(m->state);
    m = abx_walk_list_free(m);
    assert_true(starts(s->requests[5].data, "GET /v1/workspaces/ws/manifest HTTP/1.1\r\n"));

    /* A damaged store is an answer (0), not a failure. */
    assert_int_equal(abx_store_check(c, &chk), 0);
    assert_false(chk->ok);
    assert_string_equal(chk->store, "sqlite");
    assert_int_equal(chk->corrupt_blobs, 1);
    assert_int_equal(chk->files, 3);
    assert_string_equal(chk->first_problem, "blob 'ab12' does not hash to its name");
    chk = abx_store_check_free(chk);
    assert_true(starts(s->requests[6].data, "GET /v1/store/check HTTP/1.1\r\n"));

    assert_int_equal(abx_store_gc(c, &gc), 0);
    assert_true(gc->held_lease);
    assert_int_equal(gc->blobs_deleted, 2);
    assert_int_equal(gc->bytes_freed, 28);
    gc = abx_store_gc_free(gc);
    assert_true(starts(s->requests[7].data, "POST /v1/store/gc HTTP/1.1\r\n"));
    buf_done(&cap.out);
    buf_done(&cap.err);
    abx_client_free(c);
    server_stop(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_encoding),
            cmocka_unit_test(test_status_errno),
            cmocka_unit_test(test_output_line),
            cmocka_unit_test(test_client_new),
            cmocka_unit_test(test_exec_streams),
            cmocka_unit_test(test_exec_stream_failures),
            cmocka_unit_test(test_output_reattach),
            cmocka_unit_test(test_error_answers),
            cmocka_unit_test(test_sandbox_requests),
            cmocka_unit_test(test_file_requests),
            cmocka_unit_test(test_byte_names),
            cmocka_unit_test(test_workspace_lifecycle),
            cmocka_unit_test(test_workspace_files),
            cmocka_unit_test(test_workspace_exec_and_mirror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
