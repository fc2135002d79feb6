/*
 * test-client-tools.c - libabx's tool functions: URLs, bodies, decoders, and
 * the calls against a one-answer HTTP server on loopback.
 *
 * The file includes client-tools.c to reach its static pieces (the list URL
 * and its selection query, tool names with ':' encoded, the call body that
 * keeps the arguments' text, the result and list decoders, the stream line
 * handler). The server answers each test's one request with a canned answer
 * and keeps the request, so the method, URL and body libabx sent are checked
 * with the answer's decoding and the 409 tool_conflict -> -ENOTUNIQ mapping.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client-tools.c"

static bool
starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* --- pure pieces --- */

static void
test_urls(void **state)
{
    struct buf b;
    (void)state;

    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(tool_list_url(&b, NULL, NULL), 0);
    assert_string_equal(b.data, "/v1/tools");
    buf_reset(&b);
    assert_int_equal(tool_list_url(&b, "", NULL), 0);
    assert_string_equal(b.data, "/v1/tools?allowed=");
    buf_reset(&b);
    assert_int_equal(tool_list_url(&b, "csv-summary,sci-plot:plot", "mcp"), 0);
    assert_string_equal(b.data, "/v1/tools?format=mcp&allowed=csv-summary%2Csci-plot%3Aplot");
    buf_reset(&b);
    assert_int_equal(tool_list_url(&b, NULL, "a&b=c"), 0);
    assert_string_equal(b.data, "/v1/tools?format=a%26b%3Dc");
    buf_reset(&b);

    assert_int_equal(put_tool_name(&b, "csv-summary:summarize"), 0);
    assert_string_equal(b.data, "/csv-summary%3Asummarize");
    buf_reset(&b);
    assert_int_equal(put_tool_name(&b, "../x"), 0);
    assert_string_equal(b.data, "/..%2Fx");
    buf_reset(&b);
    assert_int_equal(put_tool_name(&b, ""), -EINVAL);
    assert_int_equal(put_tool_name(&b, NULL), -EINVAL);
    assert_int_equal(put_tool_name(&b, "a\nb"), -EINVAL);
    char long_name[TOOL_NAME_MAX + 2];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(put_tool_name(&b, long_name), -EINVAL);
    assert_int_equal(b.len, 0);
    buf_done(&b);
}

static struct abx_client *
offline_client(void)
{
    struct abx_client *c = NULL;
    assert_int_equal(abx_client_new("http://127.0.0.1:1", "k", &c), 0);
    return c;
}

static void
test_call_body(void **state)
{
    struct abx_client *c = offline_client();
    struct abx_tool_call_opts o = {.has_timeout = true, .timeout_s = 2.5, .idle_timeout_s = 1};
    struct buf b;
    (void)state;

    buf_init(&b, BUF_UNLIMITED);
    /* The arguments go as they were written: spacing and number spelling kept. */
    assert_int_equal(call_body(c, "{\"limit\": 1.50, \"path\": \"data.csv\"}", NULL, false, &b), 0);
    assert_string_equal(b.data, "{\"arguments\":{\"limit\": 1.50, \"path\": \"data.csv\"}}");
    buf_reset(&b);
    assert_int_equal(call_body(c, NULL, &o, true, &b), 0);
    assert_string_equal(
            b.data, "{\"arguments\":{},\"timeout_s\":2.5,\"idle_timeout_s\":1.0,\"stream\":true}");
    buf_reset(&b);

    assert_int_equal(call_body(c, "{\"a\":", NULL, false, &b), -EINVAL);
    assert_non_null(strstr(abx_client_error(c), "not valid JSON"));
    assert_int_equal(call_body(c, "[1]", NULL, false, &b), -EINVAL);
    assert_int_equal(call_body(c, "\"{}\"", NULL, false, &b), -EINVAL);
    assert_int_equal(call_body(c, "{} {}", NULL, false, &b), -EINVAL);
    assert_int_equal(call_body(c, "{\"a\":1,\"a\":2}", NULL, false, &b), -EINVAL);
    o.timeout_s = -1;
    assert_int_equal(call_body(c, "{}", &o, false, &b), -EINVAL);
    assert_int_equal(b.len, 0);
    buf_done(&b);
    abx_client_free(c);
}

static void
test_result_from(void **state)
{
    static const char text[] =
            "{\"tool\":\"plot\",\"package\":\"sci-plot\",\"exit_code\":3,\"stdout\":\"a\\u0000b\","
            "\"stderr\":\"warn\\n\",\"signal\":9,\"timed_out\":false,\"oom_killed\":true,\"duration_ms\":12,"
            "\"truncated\":true,\"files\":[{\"path\":\"/plot.png\",\"size\":1234,\"version\":\"v1\"},"
            "{\"size\":1},{\"path\":\"/b\"}]}";
    struct abx_tool_result *r = NULL;
    json_t *o = json_loads(text, JSON_ALLOW_NUL, NULL);
    (void)state;

    assert_non_null(o);
    assert_int_equal(tool_result_from(o, text, sizeof(text) - 1, &r), 0);
    assert_string_equal(r->tool, "plot");
    assert_string_equal(r->package, "sci-plot");
    assert_int_equal(r->exit_code, 3);
    assert_int_equal(r->signal, 9);
    assert_int_equal(r->stdout_len, 3);
    assert_memory_equal(r->stdout_data, "a\0b", 4);
    assert_string_equal(r->stderr_data, "warn\n");
    assert_false(r->timed_out);
    assert_true(r->oom_killed);
    assert_true(r->truncated);
    assert_int_equal(r->duration_ms, 12);
    assert_int_equal(r->n_files, 2); /* the entry without a path is skipped */
    assert_string_equal(r->files[0].path, "/plot.png");
    assert_int_equal(r->files[0].size, 1234);
    assert_string_equal(r->files[0].version, "v1");
    assert_string_equal(r->files[1].path, "/b");
    assert_null(r->files[1].version);
    assert_string_equal(r->json, text);
    abx_tool_result_free(r);
    json_decref(o);

    /* A streamed result has no output; without exit_code it is no result. */
    o = json_loads("{\"exit_code\":0}", 0, NULL);
    assert_int_equal(tool_result_from(o, "{\"exit_code\":0}", 15, &r), 0);
    assert_null(r->stdout_data);
    assert_int_equal(r->stdout_len, 0);
    assert_int_equal(r->n_files, 0);
    abx_tool_result_free(r);
    json_decref(o);
    o = json_loads("{\"exit_code\":\"0\"}", 0, NULL);
    assert_int_equal(tool_result_from(o, "", 0, &r), -EBADMSG);
    json_decref(o);
    assert_null(abx_tool_result_free(NULL));
}

static void
test_list_from(void **state)
{
    static const char *const answers[] = {
            "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"summarize\","
            "\"description\":\"Sum up a CSV\",\"parameters\":{\"type\":\"object\"}}},"
            "{\"type\":\"function\",\"function\":{\"name\":\"plot\",\"parameters\":{}}}]}",
            "{\"tools\":[{\"name\":\"summarize\",\"description\":\"Sum up a CSV\","
            "\"inputSchema\":{\"type\":\"object\"}},{\"name\":\"plot\",\"inputSchema\":{}}]}",
    };
    (void)state;

    for (size_t i = 0; i < 2; i++) {
        struct abx_tool_list *l = calloc(1, sizeof(*l));
        json_t *o = json_loads(answers[i], 0, NULL);
        assert_int_equal(tool_list_from(o, l), 0);
        assert_int_equal(l->n, 2);
        assert_string_equal(l->items[0].name, "summarize");
        assert_string_equal(l->items[0].description, "Sum up a CSV");
        assert_string_equal(l->items[1].name, "plot");
        assert_null(l->items[1].description);
        abx_tool_list_free(l);
        json_decref(o);
    }
    struct abx_tool_list *l = calloc(1, sizeof(*l));
    json_t *o = json_loads("{\"tools\":[{\"function\":{}}]}", 0, NULL);
    assert_int_equal(tool_list_from(o, l), -EBADMSG);
    abx_tool_list_free(l);
    json_decref(o);
}

struct captured {
    struct buf out, err;
    uint64_t offsets[8];
    size_t n;
};

static int
cap_output(enum abx_stream stream, const void *data, size_t len, uint64_t offset, void *userdata)
{
    struct captured *cap = userdata;
    assert_true(cap->n < 8);
    cap->offsets[cap->n++] = offset;
    return buf_put(stream == ABX_STREAM_STDERR ? &cap->err : &cap->out, data, len);
}

#define LINE(s) s, sizeof(s) - 1

static void
test_stream_lines(void **state)
{
    struct captured cap = {0};
    struct tool_stream s = {.output = cap_output, .userdata = &cap};
    (void)state;

    s.c = offline_client();
    buf_init(&cap.out, BUF_UNLIMITED);
    buf_init(&cap.err, BUF_UNLIMITED);
    buf_init(&s.bytes, CLIENT_LINE_MAX);
    /* Lines without offsets count their own; exec's form with one works too. */
    assert_int_equal(stream_line(LINE("{\"stdout\":\"aGVsbG8K\"}"), &s), 0);
    assert_int_equal(stream_line(LINE("{\"stderr\":\"b29wcw==\"}"), &s), 0);
    assert_int_equal(stream_line(LINE("{\"stdout\":\"IQ==\",\"offset\":10}"), &s), 0);
    assert_int_equal(stream_line(LINE("{\"something\":\"new\"}"), &s), 0);
    assert_int_equal(stream_line(LINE("{\"tool\":\"summarize\",\"exit_code\":0,\"files\":[]}"), &s),
                     0);
    assert_int_equal(stream_line(LINE("{\"stdout\":\"IQ==\"}"), &s), 0); /* after: ignored */
    assert_string_equal(cap.out.data, "hello\n!");
    assert_string_equal(cap.err.data, "oops");
    assert_int_equal(cap.n, 3);
    assert_int_equal(cap.offsets[0], 0);
    assert_int_equal(cap.offsets[1], 6);
    assert_int_equal(cap.offsets[2], 10);
    assert_non_null(s.result);
    assert_string_equal(s.result->tool, "summarize");
    assert_null(s.result->stdout_data);
    s.result = abx_tool_result_free(s.result);

    /* abxd's word that the call failed midway. */
    assert_int_equal(stream_line(LINE("{\"tool\":\"x\",\"exit_code\":null,\"error\":\"the "
                                      "sandbox ended before the tool did\"}"),
                                 &s),
                     -EIO);
    assert_string_equal(abx_client_error(s.c), "the sandbox ended before the tool did");
    assert_null(s.result);
    assert_int_equal(stream_line(LINE("{\"stdout\":\"!!\"}"), &s), -EBADMSG);
    assert_int_equal(stream_line(LINE("[1]"), &s), -EBADMSG);
    assert_int_equal(stream_line(LINE("{\"error\":\"internal\",\"message\":\"it broke\"}"), &s),
                     -EIO);
    assert_string_equal(abx_client_error(s.c), "it broke");
    buf_done(&s.bytes);
    buf_done(&cap.out);
    buf_done(&cap.err);
    abx_client_free(s.c);
}

/* --- against a one-answer server --- */

struct server {
    int lfd;
    uint16_t port;
    pthread_t thread;
    const char *answer; /* the whole answer: status line, headers, body */
    struct buf request; /* head and body as received */
    bool joined;
};

static void *
server_main(void *userdata)
{
    struct server *s = userdata;
    int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
    char tmp[65536];
    const char *end;

    if (fd < 0)
        return NULL;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10000) <= 0)
            break;
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n <= 0 || buf_put(&s->request, tmp, (size_t)n) < 0)
            break;
        end = strstr(s->request.data, "\r\n\r\n");
        if (!end)
            continue;
        const char *cl = strcasestr(s->request.data, "\r\nContent-Length:");
        size_t want = (size_t)(end + 4 - s->request.data) +
                      (cl && cl < end ? (size_t)strtoull(cl + 17, NULL, 10) : 0);
        if (s->request.len >= want)
            break;
    }
    assert_int_equal(write(fd, s->answer, strlen(s->answer)), (ssize_t)strlen(s->answer));
    close(fd);
    return NULL;
}

static struct server *
server_start(const char *answer)
{
    struct server *s = calloc(1, sizeof(*s));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);

    assert_non_null(s);
    s->answer = answer;
    buf_init(&s->request, BUF_UNLIMITED);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->lfd, 1), 0);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &len), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
    return s;
}

/* A client of s. */
static struct abx_client *
client_for(struct server *s)
{
    struct abx_client *c = NULL;
    char url[64];
    (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", s->port);
    assert_int_equal(abx_client_new(url, "sekrit", &c), 0);
    return c;
}

/* Waits until the server has answered; then s->request is complete. */
static void
server_wait(struct server *s)
{
    if (!s->joined)
        assert_int_equal(pthread_join(s->thread, NULL), 0);
    s->joined = true;
}

static void
server_stop(struct server *s)
{
    shutdown(s->lfd, SHUT_RDWR);
    server_wait(s);
    close(s->lfd);
    buf_done(&s->request);
    free(s);
}

#define ANSWER(status, body) \
    "HTTP/1.1 " status "\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" body

static void
test_call(void **state)
{
    struct server *s = server_start(
            ANSWER("200 OK", "{\"tool\":\"summarize\",\"package\":\"csv-summary\",\"exit_code\":0,"
                             "\"stdout\":\"rows: 3\\n\",\"stderr\":\"\",\"timed_out\":false,"
                             "\"duration_ms\":5,\"files\":[]}\n"));
    struct abx_client *c = client_for(s);
    struct abx_tool_result *r = NULL;
    (void)state;

    assert_int_equal(abx_workspace_tool_call(c, "ws-1", "csv-summary:summarize",
                                             "{\"path\":\"data.csv\"}", NULL, &r),
                     0);
    server_wait(s);
    assert_true(starts(s->request.data,
                       "POST /v1/workspaces/ws-1/tools/csv-summary%3Asummarize HTTP/1.1\r\n"));
    assert_non_null(strcasestr(s->request.data, "\r\nAuthorization: Bearer sekrit\r\n"));
    assert_non_null(strcasestr(s->request.data, "\r\nContent-Type: application/json\r\n"));
    assert_non_null(strstr(s->request.data, "\r\n\r\n{\"arguments\":{\"path\":\"data.csv\"}}"));
    assert_string_equal(r->stdout_data, "rows: 3\n");
    assert_int_equal(r->stdout_len, 8);
    assert_string_equal(r->stderr_data, "");
    assert_int_equal(r->exit_code, 0);
    assert_string_equal(r->package, "csv-summary");
    assert_int_equal(r->json[strlen(r->json) - 1], '}');
    abx_tool_result_free(r);
    abx_client_free(c);
    server_stop(s);
}

static void
test_call_errors(void **state)
{
    static const struct {
        const char *answer;
        int r;
        const char *code, *msg;
    } cases[] = {
            {ANSWER("400 Bad Request", "{\"error\":\"invalid_arguments\",\"message\":\"'limit' "
                                       "must be an integer\"}"),
             -EINVAL, "invalid_arguments", "'limit' must be an integer"},
            {ANSWER("409 Conflict", "{\"error\":\"tool_conflict\",\"message\":\"'plot' is "
                                    "exported by a and b\"}"),
             -ENOTUNIQ, "tool_conflict", "'plot' is exported by a and b"},
            {ANSWER("409 Conflict", "{\"error\":\"conflict\",\"message\":\"busy\"}"), -EBUSY,
             "conflict", "busy"},
            {ANSWER("404 Not Found", "{\"error\":\"not_found\",\"message\":\"no tool 'x'\"}"),
             -ENOENT, "not_found", "no tool 'x'"},
            {ANSWER("200 OK", "{\"tool\":\"x\"}"), -EBADMSG, "", NULL},
            {ANSWER("200 OK", "{\"tool\":\"x\",\"exit_code\":null,\"error\":\"gone\"}"), -EIO, "",
             "gone"},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct server *s = server_start(cases[i].answer);
        struct abx_client *c = client_for(s);
        struct abx_tool_result *r = NULL;
        assert_int_equal(abx_tool_call(c, "sb1", "x", "{\"limit\":\"a\"}", NULL, &r), cases[i].r);
        assert_null(r);
        assert_string_equal(abx_client_error_code(c), cases[i].code);
        if (cases[i].msg)
            assert_string_equal(abx_client_error(c), cases[i].msg);
        server_stop(s);
        abx_client_free(c);
    }

    /* Caught before any request. */
    struct abx_client *c = offline_client();
    struct abx_tool_result *r = NULL;
    assert_int_equal(abx_tool_call(c, "a/b", "x", "{}", NULL, &r), -EINVAL);
    assert_int_equal(abx_tool_call(c, "sb1", "", "{}", NULL, &r), -EINVAL);
    assert_int_equal(abx_tool_call(c, "sb1", "x", "[]", NULL, &r), -EINVAL);
    assert_int_equal(abx_tool_call(c, "sb1", "x", "{}", NULL, NULL), -EINVAL);
    abx_client_free(c);
}

static void
test_call_stream(void **state)
{
    struct server *s = server_start(
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n"
            "{\"stdout\":\"aGk=\"}\n{\"stderr\":\"IQ==\"}\n"
            "{\"tool\":\"plot\",\"package\":\"sci-plot\",\"exit_code\":0,"
            "\"files\":[{\"path\":\"/plot.png\",\"size\":1234,\"version\":\"x\"}]}\n");
    struct abx_client *c = client_for(s);
    struct abx_tool_result *r = NULL;
    struct captured cap = {0};
    struct abx_tool_call_opts o = {.has_timeout = true, .timeout_s = 30};
    (void)state;

    buf_init(&cap.out, BUF_UNLIMITED);
    buf_init(&cap.err, BUF_UNLIMITED);
    assert_int_equal(
            abx_tool_call_stream(c, "sb1", "plot", "{\"x\":[1,2]}", &o, cap_output, &cap, &r), 0);
    server_stop(s);
    assert_string_equal(cap.out.data, "hi");
    assert_string_equal(cap.err.data, "!");
    assert_int_equal(r->n_files, 1);
    assert_string_equal(r->files[0].path, "/plot.png");
    assert_int_equal(r->files[0].size, 1234);
    assert_null(r->stdout_data);
    abx_tool_result_free(r);

    /* Without the result line the call failed. */
    s = server_start("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"stdout\":\"aGk=\"}\n");
    abx_client_free(c);
    c = client_for(s);
    assert_int_equal(abx_tool_call_stream(c, "sb1", "plot", NULL, NULL, NULL, NULL, &r), -EPROTO);
    server_stop(s);
    buf_done(&cap.out);
    buf_done(&cap.err);
    abx_client_free(c);
}

static void
test_list_get_packages(void **state)
{
    struct abx_tool_package_list *pl = NULL;
    struct abx_tool_info *t = NULL;
    struct abx_tool_list *l = NULL;
    struct abx_client *c;
    struct server *s;
    (void)state;

    s = server_start(ANSWER("200 OK", "{\"tools\":[{\"name\":\"plot\",\"description\":\"Plot\","
                                      "\"inputSchema\":{}}]}\n"));
    c = client_for(s);
    assert_int_equal(abx_tool_list(c, "sci-plot:plot", "mcp", &l), 0);
    server_stop(s);
    assert_int_equal(l->n, 1);
    assert_string_equal(l->items[0].name, "plot");
    assert_string_equal(
            l->json,
            "{\"tools\":[{\"name\":\"plot\",\"description\":\"Plot\",\"inputSchema\":{}}]}");
    abx_tool_list_free(l);
    abx_client_free(c);

    s = server_start(ANSWER("409 Conflict", "{\"error\":\"tool_conflict\",\"message\":\"m\"}"));
    c = client_for(s);
    assert_int_equal(abx_tool_list(c, NULL, NULL, &l), -ENOTUNIQ);
    server_stop(s);
    abx_client_free(c);

    s = server_start(ANSWER("200 OK", "{\"name\":\"summarize\",\"package\":\"csv-summary\","
                                      "\"command\":\"summarize\",\"description\":\"d\","
                                      "\"schema\":{\"type\":\"object\",\"required\":[\"path\"]}}"));
    c = client_for(s);
    assert_int_equal(abx_tool_get(c, "summarize", &t), 0);
    server_wait(s);
    assert_true(starts(s->request.data, "GET /v1/tools/summarize HTTP/1.1\r\n"));
    assert_string_equal(t->package, "csv-summary");
    assert_string_equal(t->command, "summarize");
    assert_string_equal(t->schema,
                        "{\n  \"type\": \"object\",\n  \"required\": [\n    \"path\"\n  ]\n}");
    assert_non_null(t->json);
    abx_tool_info_free(t);
    abx_client_free(c);
    server_stop(s);

    s = server_start(ANSWER("200 OK", "{\"packages\":[{\"name\":\"csv-summary\",\"kind\":\"cli\","
                                      "\"description\":\"CSV\",\"commands\":[\"summarize\",3],"
                                      "\"built_at\":\"2026-01-01T00:00:00Z\"}]}"));
    c = client_for(s);
    assert_int_equal(abx_tool_package_list(c, &pl), 0);
    server_stop(s);
    assert_int_equal(pl->n, 1);
    assert_string_equal(pl->items[0]->name, "csv-summary");
    assert_string_equal(pl->items[0]->kind, "cli");
    assert_int_equal(pl->items[0]->n_commands, 1);
    assert_string_equal(pl->items[0]->commands[0], "summarize");
    assert_null(pl->items[0]->commands[1]);
    assert_string_equal(pl->items[0]->built_at, "2026-01-01T00:00:00Z");
    abx_tool_package_list_free(pl);
    abx_client_free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_urls),
            cmocka_unit_test(test_call_body),
            cmocka_unit_test(test_result_from),
            cmocka_unit_test(test_list_from),
            cmocka_unit_test(test_stream_lines),
            cmocka_unit_test(test_call),
            cmocka_unit_test(test_call_errors),
            cmocka_unit_test(test_call_stream),
            cmocka_unit_test(test_list_get_packages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
