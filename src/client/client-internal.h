/*
 * client-internal.h - what the files of libabx share; never installed.
 *
 * client.c owns the client and its one request function; the route files
 * (client-sandboxes.c, client-exec.c, client-files.c, client-workspaces.c)
 * build a struct client_req and decode the answer. Exec and the file routes
 * are the same for a sandbox and a workspace: client-exec.c and
 * client-files.c implement them once for either scope (client_exec(),
 * client_file_*()), and the public abx_* functions of both are one call
 * each. The pure pieces - the NDJSON line splitter, percent-encoding, the
 * status -> errno table - are here so unit tests can reach them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "abx/abx.h"
#include "util/buf.h"
#include "util/json.h"

struct curl_slist;

#define CLIENT_BODY_MAX     (256u * 1024 * 1024) /* bytes of a buffered JSON answer (walk) */
#define CLIENT_ERRBODY_MAX  (64u * 1024)         /* bytes of an error answer we keep */
#define CLIENT_LINE_MAX     (4u * 1024 * 1024)   /* bytes of one NDJSON line */
#define CLIENT_MSG_MAX      512                  /* bytes of the last error message */
#define CLIENT_URL_MAX      (64u * 1024)         /* bytes of a request URL */
#define CLIENT_ID_MAX       64                   /* bytes of a sandbox or workspace id */
#define CLIENT_IF_MATCH_MAX 128                  /* bytes of an If-Match value */
#define CLIENT_REQ_BODY_MAX (8u * 1024 * 1024)   /* bytes of a JSON request we build */

/* --- NDJSON line splitting (ndjson.c) --- */

/* Called with one line (without its '\n' or a trailing '\r'; not
 * NUL-terminated). A negative return stops the feed and is returned. */
typedef int (*ndjson_line_fn)(const char *line, size_t len, void *userdata);

struct ndjson {
    struct buf partial; /* the start of a line whose '\n' has not arrived */
    size_t max_line;
};

void ndjson_init(struct ndjson *nd, size_t max_line);
void ndjson_done(struct ndjson *nd);
/* Splits data into lines, however it is chunked: complete lines are handed
 * to fn straight from data when possible, the incomplete tail is kept for
 * the next call. Empty lines are skipped. -EFBIG when a line is longer than
 * max_line. */
int ndjson_feed(struct ndjson *nd, const char *data, size_t len, ndjson_line_fn fn, void *userdata);
/* At the end of the stream: hands a last line without '\n' to fn. */
int ndjson_finish(struct ndjson *nd, ndjson_line_fn fn, void *userdata);

/* --- URLs and errors (client.c) --- */

/* Appends s percent-encoded: everything but RFC 3986 unreserved characters,
 * and '/' when keep_slash. */
int client_put_encoded(struct buf *b, const char *s, bool keep_slash);
/* Appends "<collection>/<id>" after checking id ([A-Za-z0-9_-], 1..64; abxd
 * decides whether it exists). */
int client_put_id(struct buf *b, const char *collection, const char *id);
/* Appends "/v1/sandboxes/<id>" after checking id. */
int client_put_sandbox(struct buf *b, const char *id);
/* Checks an If-Match value: at most CLIENT_IF_MATCH_MAX bytes, no '"', no
 * control characters. -EINVAL otherwise. */
int client_check_if_match(const char *v);
/* Appends a workspace path, '/'-rooted, percent-encoded, '/' kept. */
int client_put_path(struct buf *b, const char *path);
/* The errno (negative) for an HTTP status and the server's error code (may be
 * NULL); conflict is the (positive) errno for "409 conflict". */
int client_status_errno(long status, const char *code, int conflict);

enum client_resp {
    CLIENT_RESP_BUFFER, /* keep the 2xx body in out */
    CLIENT_RESP_NDJSON, /* split the 2xx body into lines for line() */
    CLIENT_RESP_FD,     /* write the 2xx body to out_fd */
};

struct client_req {
    /* in */
    const char *method;     /* "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD" */
    const struct buf *path; /* after the base URL, encoded, with any query */
    const char *body;       /* request body in memory, or NULL */
    size_t body_len;
    bool body_json;           /* Content-Type: application/json */
    bool body_upload;         /* send body with PUT semantics (Content-Length, read callback) */
    int upload_fd;            /* >= 0: stream the body from it */
    bool stream;              /* no total deadline */
    const char *if_match;     /* If-Match: "<value>" (checked), NULL = none */
    const char *content_type; /* Content-Type of an upload (a constant), NULL = none */
    int conflict;             /* errno for 409 conflict, 0 = EBUSY */
    long accept;              /* a non-2xx status handled as an answer (readyz's 503), 0 = none */
    enum client_resp resp;
    struct buf *out;     /* CLIENT_RESP_BUFFER (NULL: discard) */
    int out_fd;          /* CLIENT_RESP_FD */
    ndjson_line_fn line; /* CLIENT_RESP_NDJSON */
    void *line_ud;

    /* out */
    long status;
    uint64_t out_bytes; /* body bytes handled */
    char abx_type[16];  /* X-Abx-Type of the answer, "" if none */

    /* private to client.c */
    struct abx_client *c;
    int err; /* -errno a callback stopped the transfer with */
    struct buf errbody;
    struct ndjson nd;
    size_t body_pos;
    int64_t upload_start;       /* fd offset the upload started at, -1 = not seekable */
    struct curl_slist *headers; /* this request's own header list (If-Match), or NULL */
};

/* Sets up rq for method and path with everything else off. */
void client_req_init(struct client_req *rq, const char *method, const struct buf *path);

/* Performs rq. Returns 0 for a 2xx (or rq->accept) answer (rq->status says which), else the
 * -errno of the table in abx.h with the client's error filled in. For NDJSON,
 * a line callback failure is returned as is (it should set the error). */
int client_request(struct abx_client *c, struct client_req *rq);

/* Records a failure of the current call: message (formatted), no status.
 * Returns r. */
int client_fail(struct abx_client *c, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Forgets the last failure; every public call starts with it. */
void client_clear(struct abx_client *c);

/* Whose routes a shared function serves: a sandbox's
 * (/v1/sandboxes/<id>/...) or the same routes of a workspace
 * (/v1/workspaces/<ws>/...). */
enum client_scope {
    CLIENT_SANDBOX,
    CLIENT_WORKSPACE,
};

/* "sandbox" or "workspace", for messages. */
const char *client_scope_noun(enum client_scope scope);
/* Appends "/v1/sandboxes/<id><suffix>" or "/v1/workspaces/<id><suffix>" to
 * b; -EINVAL with the error set for a bad id. suffix may be NULL. */
int client_scope_url(struct abx_client *c, struct buf *b, enum client_scope scope, const char *id,
                     const char *suffix);
/* client_scope_url() for a sandbox. */
int client_sandbox_url(struct abx_client *c, struct buf *b, const char *id, const char *suffix);
/* One request with a JSON body (stolen, may be NULL) whose 2xx answer is kept
 * in ret_body (optional). ret_status (optional) receives the 2xx status. */
int client_call(struct abx_client *c, const char *method, const struct buf *path, json_t *body,
                int conflict, struct buf *ret_body, long *ret_status);
/* A heap copy of b without trailing blanks and newlines; NULL on OOM. */
char *client_strip(const struct buf *b);

/* --- JSON helpers (client.c) --- */

/* Encodes v (stolen) compactly into a heap string; NULL on OOM. */
char *client_dump(json_t *v);
/* Parses a whole answer; -EBADMSG with the error set when it is not an object. */
int client_parse(struct abx_client *c, const char *data, size_t len, const char *what,
                 json_t **ret);
/* GETs path (conflict as for client_call()) and finds the list at key in the
 * answer: *ret_json is the parsed answer (the caller's), *ret_list the array
 * in it, answer the text. -EBADMSG with the error set when there is none. */
int client_get_list(struct abx_client *c, const struct buf *path, int conflict, const char *what,
                    const char *key, struct buf *answer, json_t **ret_json, json_t **ret_list);
/* Copies the string at key, or NULL when absent or null. -ENOMEM. */
int client_dup_str(json_t *o, const char *key, char **ret);
/* A name abxd sent as key (and key_b64 when it is not UTF-8, util/json.h):
 * the exact bytes, NUL-terminated; NULL when absent. -ENOMEM only. */
#define CLIENT_NAME_MAX 65536 /* bytes of one name or path we decode */
int client_dup_name(json_t *o, const char *key, char **ret);
uint64_t client_get_u64(json_t *o, const char *key);
int64_t client_get_i64(json_t *o, const char *key, int64_t dflt);
double client_get_num(json_t *o, const char *key);
bool client_get_bool(json_t *o, const char *key);
/* An env/metadata object from n pairs; -EINVAL for a NULL key or value. */
int client_kv_object(const struct abx_kv *kv, size_t n, json_t **ret);

/* --- routes shared by sandboxes and workspaces --- */

/* Each starts the call (client_clear()) and is what the public function of
 * the same name does, for scope. if_match (NULL = none) is only sent by a
 * workspace's writes and deletes. client-exec.c: */
int client_exec(struct abx_client *c, enum client_scope scope, const char *id,
                const struct abx_exec_spec *spec, abx_started_fn started, abx_output_fn output,
                void *userdata, struct abx_exec_result *ret);
int client_exec_background(struct abx_client *c, enum client_scope scope, const char *id,
                           const struct abx_exec_spec *spec, struct abx_process_info **ret);
/* Performs an NDJSON request shaped like exec's (body: JSON text or NULL)
 * and decodes its lines as exec's: started, output, then the result. Returns
 * 1 with the result in ret (optional), 0 when the stream ended without one,
 * or -errno with the error set. */
int client_stream(struct abx_client *c, const char *method, const struct buf *path,
                  const char *body, abx_started_fn started, abx_output_fn output, void *userdata,
                  struct abx_exec_result *ret);

/* client-files.c; fd < 0 uploads data (len bytes) instead. */
int client_file_upload(struct abx_client *c, enum client_scope scope, const char *id,
                       const char *path, int fd, const void *data, size_t len, const char *if_match,
                       struct abx_file_info **ret);
int client_file_download(struct abx_client *c, enum client_scope scope, const char *id,
                         const char *path, int fd, uint64_t *ret_bytes);
int client_file_exists(struct abx_client *c, enum client_scope scope, const char *id,
                       const char *path, enum abx_file_type *ret_type);
int client_file_delete(struct abx_client *c, enum client_scope scope, const char *id,
                       const char *path, const char *if_match);
int client_walk(struct abx_client *c, enum client_scope scope, const char *id, const char *path,
                struct abx_walk_list **ret);
/* op is "/mkdir" or "/rmdir"; ret_status (optional) receives 200 or 201. */
int client_dir_call(struct abx_client *c, enum client_scope scope, const char *id, const char *op,
                    const char *path, long *ret_status);
int client_rename(struct abx_client *c, enum client_scope scope, const char *id, const char *from,
                  const char *to, bool overwrite, struct abx_file_info **ret);
/* Decodes {"entries": [...]} (a walk, a manifest) into *ret; what names the
 * answer in messages. */
int client_walk_from(struct abx_client *c, const struct buf *answer, const char *what,
                     struct abx_walk_list **ret);

/* --- decoders shared by route files --- */

/* Recognises an output line in the exact compact form abxd writes,
 * {"stdout"|"stderr":"<base64>","offset":N}, without a JSON parser: returns 1
 * with the stream, the base64 text (pointing into line) and the offset, or 0
 * when the line has any other form (then parse it as JSON). */
int client_output_line(const char *line, size_t len, enum abx_stream *ret_stream,
                       const char **ret_b64, size_t *ret_b64_len, uint64_t *ret_offset);

int client_exec_result_from(json_t *o, const char *line, size_t len, struct abx_exec_result *ret);
int client_process_from(json_t *o, struct abx_process_info **ret);
int client_file_info_from(json_t *o, struct abx_file_info **ret);
enum abx_file_type client_file_type(const char *name);
