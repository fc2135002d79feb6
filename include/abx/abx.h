/*
 * abx.h - libabx, the C client of abxd's native wire (docs/api.md).
 *
 * Every route of the native wire has one function here; the `abx` CLI and the
 * remote sandbox are built on nothing else. It is not a server, a connection
 * pool or an event loop: each call is one blocking HTTP request on the
 * client's own connection, which is kept alive and reused between calls.
 *
 * Returns. Functions return 0 (or a documented non-negative value) on success
 * and a negative errno on failure. ret_ parameters belong to the caller and are
 * written only on success. After a failure abx_client_error() says what went
 * wrong (the server's "message" when it sent one), abx_client_http_status()
 * gives the HTTP status (0 when no answer arrived) and abx_client_error_code()
 * the server's "error" code ("" when none). The table:
 *
 *   HTTP answer                           errno
 *   400 bad_request                       -EINVAL
 *   400 path_escape                       -EXDEV
 *   400 not_a_directory                   -ENOTDIR
 *   401 unauthorized                      -EACCES
 *   403 forbidden                         -EPERM
 *   404 not_found                         -ENOENT
 *   405 method_not_allowed, other 4xx     -EPROTO
 *   409 is_a_directory                    -EISDIR
 *   409 conflict                          -EBUSY; -EEXIST from abx_rename(),
 *                                         abx_workspace_rename() and abx_workspace_create();
 *                                         -ESRCH from abx_process_signal(), -EPIPE from
 *                                         abx_process_stdin()
 *   409 tool_conflict                     -ENOTUNIQ (two selected packages export one tool
 *                                         name: the tool functions)
 *   412 precondition_failed               -ESTALE (If-Match did not hold: workspaces)
 *   413 too_large                         -EFBIG
 *   429 too_many_requests                 -EAGAIN
 *   431 (headers too large)               -E2BIG
 *   503 unavailable                       -EOPNOTSUPP (draining, or isolation missing)
 *   507 insufficient_storage              -ENOSPC
 *   500 integrity_error                   -EIO; the message names the damaged paths (a
 *                                         workspace's stored files failed their hash check)
 *   500 and other 5xx                     -EIO
 *   a malformed answer                    -EBADMSG; -EPROTO if a stream ends early
 *   cannot connect                        -ECONNREFUSED
 *   cannot resolve the host               -EHOSTUNREACH
 *   connect timeout                       -ETIMEDOUT
 *   connection lost                       -ECONNRESET
 *   invalid argument (caught locally)     -EINVAL
 *   out of memory                         -ENOMEM
 *
 * A callback that returns a negative value stops the transfer and the call
 * returns that value.
 *
 * Threads. There is no global state apart from libcurl's global
 * initialisation, which abx_client_new() performs once (thread-safely). A
 * client is used by one thread at a time; use one client per thread. Callbacks
 * run on the calling thread and must not call into the same client.
 *
 * Timeouts. Connecting is bounded (10 s by default). Plain requests are bounded
 * in total (300 s by default); streams (exec, output, file transfers) and the
 * long store operations (workspace flush and close, store check and gc) have
 * no total deadline - a long-running process is not an error - but TCP
 * keep-alive detects a dead peer. See abx_client_set_timeouts().
 *
 * Memory. Result objects are heap-allocated and freed with their _free()
 * function (which takes NULL and returns NULL); strings returned through
 * `char **ret_` parameters are freed with free(). Every result object carries
 * the raw JSON text of the object the server sent (`json`), so callers can see
 * fields this header does not name.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the exported symbols; libabx is built with -fvisibility=hidden. */
#if defined(__GNUC__)
#define ABX_PUBLIC __attribute__((visibility("default")))
#else
#define ABX_PUBLIC
#endif

#define ABX_DEFAULT_URL "http://127.0.0.1:8700"

/* --- the client --- */

struct abx_client;

/* The library's version, "MAJOR.MINOR.PATCH". */
ABX_PUBLIC const char *abx_version(void);

/* Creates a client for the abxd at url ("http://host:port", optionally with a
 * path prefix; a trailing '/' is ignored). api_key may be NULL: then requests
 * carry no Authorization header and only abx_health()/abx_ready() succeed.
 * Both strings are copied. -EINVAL for a url that is not http(s) or a key with
 * control characters, -ENOMEM. */
ABX_PUBLIC int abx_client_new(const char *url, const char *api_key, struct abx_client **ret);
ABX_PUBLIC struct abx_client *abx_client_free(struct abx_client *c);

/* connect_ms bounds connecting (0 = libcurl's default of 300 s); request_ms
 * bounds a whole non-streaming request (0 = no limit). Defaults: 10 000 and
 * 300 000. Streams are never bounded in total. */
ABX_PUBLIC int abx_client_set_timeouts(struct abx_client *c, long connect_ms, long request_ms);

/* The base URL the client talks to (without a trailing '/'). */
ABX_PUBLIC const char *abx_client_url(const struct abx_client *c);

/* What the last failed call reported: a one-line message ("" when the last
 * call succeeded), the HTTP status (0 when no answer arrived) and the server's
 * "error" code ("" when it sent none). Valid until the next call. */
ABX_PUBLIC const char *abx_client_error(const struct abx_client *c);
ABX_PUBLIC long abx_client_http_status(const struct abx_client *c);
ABX_PUBLIC const char *abx_client_error_code(const struct abx_client *c);

/* A borrowed key/value pair in a request (env, metadata). */
struct abx_kv {
    const char *key;
    const char *value;
};

/* An owned key/value pair in a result. */
struct abx_pair {
    char *key;
    char *value;
};

/* --- sandboxes --- */

/* What to create. A zeroed struct (or NULL) asks for the server's defaults. */
struct abx_sandbox_spec {
    const char *template_name; /* NULL = "base" */
    const struct abx_kv *env;  /* variables every exec sees */
    size_t n_env;
    const struct abx_kv *metadata; /* echoed back in the info */
    size_t n_metadata;
    double cpu;         /* cores, 0 = server default */
    uint64_t memory_mb; /* MiB, 0 = server default */
    uint64_t pids;      /* process/thread limit, 0 = server default */
    bool has_timeout;   /* send timeout_s (else: server default) */
    uint64_t timeout_s; /* lifetime in seconds, 0 = no deadline */
};

/* A resize of a running sandbox; zero fields are left as they are. */
struct abx_sandbox_update {
    double cpu;         /* cores, 0 = unchanged */
    uint64_t memory_mb; /* MiB, 0 = unchanged */
    uint64_t pids;      /* 0 = unchanged */
    bool has_timeout;   /* set the remaining life to timeout_s from now */
    uint64_t timeout_s; /* seconds, 0 = no deadline */
};

struct abx_sandbox_usage {
    uint64_t memory_bytes;
    uint64_t pids;
    uint64_t cpu_usec;
    uint64_t oom_kills;
};

struct abx_sandbox_info {
    char *id;
    char *template_name;
    char *state;      /* "running", "creating" or "stopping" */
    char *created_at; /* RFC 3339 */
    char *end_at;     /* RFC 3339, NULL = no deadline */
    char *isolation;  /* "ns", ... */
    uint64_t timeout_s;
    double cpu; /* cores */
    uint64_t memory_mb;
    uint64_t pids;
    uint64_t processes; /* running processes */
    struct abx_pair *metadata;
    size_t n_metadata;
    bool has_usage; /* usage is filled (abx_sandbox_get(), abx_sandbox_update()) */
    struct abx_sandbox_usage usage;
    char *json; /* the object as the server sent it */
};

struct abx_sandbox_list {
    size_t n;
    struct abx_sandbox_info **items;
    char *json; /* the whole answer, {"sandboxes": [...]} */
};

/* POST /v1/sandboxes. spec may be NULL. ret (optional) receives the info. */
ABX_PUBLIC int abx_sandbox_create(struct abx_client *c, const struct abx_sandbox_spec *spec,
                                  struct abx_sandbox_info **ret);
/* GET /v1/sandboxes. */
ABX_PUBLIC int abx_sandbox_list(struct abx_client *c, struct abx_sandbox_list **ret);
/* GET /v1/sandboxes/{id}, with usage. */
ABX_PUBLIC int abx_sandbox_get(struct abx_client *c, const char *id, struct abx_sandbox_info **ret);
/* PATCH /v1/sandboxes/{id}. -EINVAL when u changes nothing. ret is optional. */
ABX_PUBLIC int abx_sandbox_update(struct abx_client *c, const char *id,
                                  const struct abx_sandbox_update *u,
                                  struct abx_sandbox_info **ret);
/* DELETE /v1/sandboxes/{id}; returns once the sandbox is gone. */
ABX_PUBLIC int abx_sandbox_kill(struct abx_client *c, const char *id);

ABX_PUBLIC struct abx_sandbox_info *abx_sandbox_info_free(struct abx_sandbox_info *info);
ABX_PUBLIC struct abx_sandbox_list *abx_sandbox_list_free(struct abx_sandbox_list *list);

/* --- exec and processes --- */

struct abx_exec_spec {
    const char *const *argv;  /* NULL-terminated, at least one entry; required */
    const struct abx_kv *env; /* merged over the sandbox's */
    size_t n_env;
    const char *cwd;        /* NULL = HOME; relative to HOME */
    const char *user;       /* NULL = "user"; or "root" */
    const void *stdin_data; /* written to stdin first (up to 1 MiB) */
    size_t stdin_len;
    bool stdin_open;       /* keep stdin open for abx_process_stdin() */
    bool has_timeout;      /* send timeout_s (else: server default, 300 s) */
    double timeout_s;      /* total deadline in seconds, 0 = none */
    double idle_timeout_s; /* deadline without output in seconds, 0 = none */
};

enum abx_stream {
    ABX_STREAM_STDOUT = 1,
    ABX_STREAM_STDERR = 2,
    /* Output older than what abxd keeps was asked for: len bytes are lost and
     * output resumes at offset. data is NULL. */
    ABX_STREAM_DROPPED = 3,
};

/* Called for each piece of output as it arrives. offset counts output bytes
 * of both streams since the process started. Return 0 to go on, or a negative
 * errno to stop (the call then returns it; the process runs on). */
typedef int (*abx_output_fn)(enum abx_stream stream, const void *data, size_t len, uint64_t offset,
                             void *userdata);

/* Called once when the process has started, before any output. */
typedef int (*abx_started_fn)(int pid, void *userdata);

struct abx_exec_result {
    int pid;
    int exit_code; /* 124 deadline, 127 not found, 126 not executable, 128+N signal N */
    bool timed_out;
    bool oom_killed;
    int signal; /* the signal that killed it, 0 = none */
    uint64_t duration_ms;
    uint64_t output_end; /* offset after the last output byte */
    char *json;          /* the result line as the server sent it */
};

/* Frees what r holds (not r itself) and zeroes it. NULL is fine. */
ABX_PUBLIC void abx_exec_result_done(struct abx_exec_result *r);

/* POST /v1/sandboxes/{id}/exec in the foreground: the output is parsed as it
 * streams and handed to output (NULL discards it); started (optional) gets
 * the pid first. Blocks until the process has ended; a non-zero exit is a
 * result, not an error. ret (optional) receives the result; release it with
 * abx_exec_result_done(). */
ABX_PUBLIC int abx_exec(struct abx_client *c, const char *id, const struct abx_exec_spec *spec,
                        abx_started_fn started, abx_output_fn output, void *userdata,
                        struct abx_exec_result *ret);

struct abx_process_info {
    int pid;
    char **argv; /* NULL-terminated */
    size_t argc;
    char *cwd;
    char *user; /* "user" or "root" */
    bool background;
    bool running;  /* state "running"; else "exited" */
    int exit_code; /* -1 while running */
    int signal;    /* 0 = none */
    bool timed_out;
    bool oom_killed;
    char *started_at;      /* RFC 3339 */
    char *ended_at;        /* RFC 3339, NULL while running */
    int64_t duration_ms;   /* -1 while running */
    uint64_t output_start; /* oldest output offset still kept */
    uint64_t output_end;   /* offset after the last byte */
    bool stdin_open;
    char *json;
};

struct abx_process_list {
    size_t n;
    struct abx_process_info **items;
    char *json; /* the whole answer, {"processes": [...]} */
};

/* The same request with "background": true. Returns the pid (> 0); ret
 * (optional) receives the process. */
ABX_PUBLIC int abx_exec_background(struct abx_client *c, const char *id,
                                   const struct abx_exec_spec *spec, struct abx_process_info **ret);

/* GET .../processes and .../processes/{pid}. */
ABX_PUBLIC int abx_process_list(struct abx_client *c, const char *id,
                                struct abx_process_list **ret);
ABX_PUBLIC int abx_process_get(struct abx_client *c, const char *id, int pid,
                               struct abx_process_info **ret);

/* GET .../processes/{pid}/output?offset=N[&follow=1]: the output from byte
 * offset on, handed to output as it streams. With follow it waits for the
 * process to end. Returns 1 when the stream ended with the process's result
 * (then ret, optional, receives it), 0 when it ended without (not following
 * and still running). */
ABX_PUBLIC int abx_process_output(struct abx_client *c, const char *id, int pid, uint64_t offset,
                                  bool follow, abx_output_fn output, void *userdata,
                                  struct abx_exec_result *ret);

/* POST .../signal. signal is a name ("TERM", "SIGKILL") or a number ("9");
 * group signals the whole process group. -ESRCH when the process has exited. */
ABX_PUBLIC int abx_process_signal(struct abx_client *c, const char *id, int pid, const char *signal,
                                  bool group);

/* POST .../stdin: returns once the bytes are in the process's pipe (len up to
 * 1 MiB); close closes stdin after them. -EPIPE when stdin is closed, -EFBIG
 * when more than 1 MiB would be waiting. */
ABX_PUBLIC int abx_process_stdin(struct abx_client *c, const char *id, int pid, const void *data,
                                 size_t len, bool close);
/* POST .../close-stdin: closes stdin after what is queued. */
ABX_PUBLIC int abx_process_close_stdin(struct abx_client *c, const char *id, int pid);

ABX_PUBLIC struct abx_process_info *abx_process_info_free(struct abx_process_info *p);
ABX_PUBLIC struct abx_process_list *abx_process_list_free(struct abx_process_list *list);

/* --- files --- */

/* Paths are POSIX and '/'-rooted at the workspace; a missing leading '/' is
 * added. They are percent-encoded on the wire. */

enum abx_file_type {
    ABX_FILE_UNKNOWN = 0, /* a type this library does not know */
    ABX_FILE_REGULAR,
    ABX_FILE_DIRECTORY,
    ABX_FILE_SYMLINK,
    ABX_FILE_OTHER,
};

/* A walk entry, or the stat abx_file_upload() and abx_rename() answer with. */
struct abx_file_info {
    char *path; /* '/'-rooted; the exact bytes of the name (any but NUL), UTF-8 or not */
    enum abx_file_type type;
    char *type_name; /* "file", "dir", "symlink", "other" */
    uint64_t size;   /* bytes */
    uint32_t mode;   /* permission bits */
    char *version;   /* opaque change stamp; compare for equality only */
    char *target;    /* a symlink's target (exact bytes), else NULL */
    char *hash;      /* content SHA-256 (hex) when abxd sent it (workspaces), else NULL */
    char *json;
};

struct abx_walk_list {
    size_t n;
    struct abx_file_info **items;
    char *state; /* a workspace walk: "warm" or "cold", which it read; else NULL */
    char *json;  /* the whole answer, {"entries": [...]} */
};

/* PUT .../files/{path} streamed from fd (read from its current position to
 * EOF; borrowed, not closed). The body carries a Content-Length when fd is a
 * regular file and is chunked otherwise, so pipes work. Returns 1 when the
 * file was created, 0 when it was replaced. ret is optional. */
ABX_PUBLIC int abx_file_upload(struct abx_client *c, const char *id, const char *path, int fd,
                               struct abx_file_info **ret);
/* The same from memory. */
ABX_PUBLIC int abx_file_put(struct abx_client *c, const char *id, const char *path,
                            const void *data, size_t len, struct abx_file_info **ret);
/* GET .../files/{path} streamed to fd (borrowed; written from its current
 * position). ret_bytes (optional) receives the number of bytes written. On a
 * failure after the first byte, fd holds a prefix of the file. */
ABX_PUBLIC int abx_file_download(struct abx_client *c, const char *id, const char *path, int fd,
                                 uint64_t *ret_bytes);
/* HEAD .../files/{path}: 1 when it exists (ret_type, optional, says what it
 * is), 0 when it does not; -ENOENT when the sandbox does not exist. */
ABX_PUBLIC int abx_file_exists(struct abx_client *c, const char *id, const char *path,
                               enum abx_file_type *ret_type);
/* DELETE .../files/{path}: a file or symlink; -EISDIR for a directory. */
ABX_PUBLIC int abx_file_delete(struct abx_client *c, const char *id, const char *path);
/* GET .../walk?path=P: everything below path (NULL = "/"), sorted by path. */
ABX_PUBLIC int abx_walk(struct abx_client *c, const char *id, const char *path,
                        struct abx_walk_list **ret);
/* POST .../mkdir: creates path and its parents. 1 when created, 0 when it
 * existed. */
ABX_PUBLIC int abx_mkdir(struct abx_client *c, const char *id, const char *path);
/* POST .../rmdir: removes the directory and everything below it. */
ABX_PUBLIC int abx_rmdir(struct abx_client *c, const char *id, const char *path);
/* POST .../rename. -EEXIST when to exists and overwrite is false. ret
 * (optional) receives the stat of to. */
ABX_PUBLIC int abx_rename(struct abx_client *c, const char *id, const char *from, const char *to,
                          bool overwrite, struct abx_file_info **ret);

ABX_PUBLIC struct abx_file_info *abx_file_info_free(struct abx_file_info *f);
ABX_PUBLIC struct abx_walk_list *abx_walk_list_free(struct abx_walk_list *list);

/* --- workspaces --- */

/* A workspace is a named, durable file tree (docs/api.md, "Workspaces"): cold
 * while it has no sandbox (its files live in abxd's store), warm while it has
 * one. Only abx_workspace_exec() wakes it; the file functions work in either
 * state and never create a sandbox. Workspace ids are 1-64 of a-z, 0-9, '-'
 * and '_'. The file functions are the sandbox ones (paths, answers, errors)
 * plus If-Match on writes and deletes:
 *
 *   if_match NULL   no precondition
 *   if_match ""     only if the file does not exist
 *   if_match V      only if the file is still version V (a version or content
 *                   hash abxd handed out); -ESTALE (412) otherwise
 *
 * V is sent quoted; -EINVAL (before any request) for a V with '"' or control
 * characters, or longer than 128 bytes. */

/* What to create. A zeroed struct (or NULL) asks for the server's defaults. */
struct abx_workspace_spec {
    const char *id;            /* NULL = a random 20-character id */
    const char *template_name; /* NULL = "base" */
    double cpu;                /* cores of its sandboxes, 0 = host default */
    uint64_t memory_mb;        /* MiB, 0 = host default */
    uint64_t pids;             /* process/thread limit, 0 = host default */
};

struct abx_workspace_usage {
    uint64_t bytes; /* stored file bytes */
    uint64_t files;
    uint64_t dirs;
};

struct abx_workspace_info {
    char *id;
    char *state; /* "cold", "warm", "waking" or "sleeping" */
    char *template_name;
    char *created_at;   /* RFC 3339 */
    double cpu;         /* cores; 0 = host default or not sent (only create answers it) */
    uint64_t memory_mb; /* MiB; 0 likewise */
    uint64_t pids;      /* 0 likewise */
    bool has_usage;     /* usage and processes are filled (abx_workspace_get()) */
    struct abx_workspace_usage usage;
    uint64_t processes; /* running processes of its sandbox */
    char *json;         /* the object as the server sent it */
};

struct abx_workspace_list {
    size_t n;
    struct abx_workspace_info **items;
    char *json; /* the whole answer, {"workspaces": [...]} */
};

/* What a mirror (flush, close) did; all 0 when the workspace was cold. */
struct abx_sync_report {
    uint64_t files;     /* files copied into the store */
    uint64_t dirs;      /* directories created in the store */
    uint64_t deleted;   /* entries deleted from the store */
    uint64_t bytes;     /* bytes copied */
    uint64_t unchanged; /* files whose version had not changed */
    uint64_t ignored;   /* entries the ignore rules left out */
    double duration_ms;
    char *json;       /* the answer; "skipped_entries" names what was skipped */
    uint64_t skipped; /* entries abxd could not store (everything else was saved) */
};

/* POST /v1/workspaces. spec may be NULL. -EEXIST when the id is taken. ret
 * (optional) receives the info (state "cold"). */
ABX_PUBLIC int abx_workspace_create(struct abx_client *c, const struct abx_workspace_spec *spec,
                                    struct abx_workspace_info **ret);
/* GET /v1/workspaces. */
ABX_PUBLIC int abx_workspace_list(struct abx_client *c, struct abx_workspace_list **ret);
/* GET /v1/workspaces/{ws}, with usage. Does not wake it. */
ABX_PUBLIC int abx_workspace_get(struct abx_client *c, const char *ws,
                                 struct abx_workspace_info **ret);
/* DELETE /v1/workspaces/{ws}: kills its sandbox without mirroring and
 * deletes every file. */
ABX_PUBLIC int abx_workspace_delete(struct abx_client *c, const char *ws);

/* POST /v1/workspaces/{ws}/exec: abx_exec() in the workspace, which is woken
 * first (restored from the store; -EIO with the damaged paths in the message
 * when a stored file fails its hash check). */
ABX_PUBLIC int abx_workspace_exec(struct abx_client *c, const char *ws,
                                  const struct abx_exec_spec *spec, abx_started_fn started,
                                  abx_output_fn output, void *userdata,
                                  struct abx_exec_result *ret);
/* The same with "background": true: abx_exec_background() in the workspace.
 * Workspaces have no process routes: the pid only identifies the process. */
ABX_PUBLIC int abx_workspace_exec_background(struct abx_client *c, const char *ws,
                                             const struct abx_exec_spec *spec,
                                             struct abx_process_info **ret);

/* The file functions of a workspace: as abx_file_upload(), abx_file_put(),
 * abx_file_download(), abx_file_exists(), abx_file_delete(), abx_walk(),
 * abx_mkdir(), abx_rmdir() and abx_rename(), on /v1/workspaces/{ws}/...
 * Answers carry the content hash (abx_file_info.hash); a walk says which
 * state it read (abx_walk_list.state). if_match: see above. */
ABX_PUBLIC int abx_workspace_file_upload(struct abx_client *c, const char *ws, const char *path,
                                         int fd, const char *if_match, struct abx_file_info **ret);
ABX_PUBLIC int abx_workspace_file_put(struct abx_client *c, const char *ws, const char *path,
                                      const void *data, size_t len, const char *if_match,
                                      struct abx_file_info **ret);
ABX_PUBLIC int abx_workspace_file_download(struct abx_client *c, const char *ws, const char *path,
                                           int fd, uint64_t *ret_bytes);
/* 1 when it exists, 0 when it does not; -ENOENT when the workspace does not
 * exist. */
ABX_PUBLIC int abx_workspace_file_exists(struct abx_client *c, const char *ws, const char *path,
                                         enum abx_file_type *ret_type);
ABX_PUBLIC int abx_workspace_file_delete(struct abx_client *c, const char *ws, const char *path,
                                         const char *if_match);
ABX_PUBLIC int abx_workspace_walk(struct abx_client *c, const char *ws, const char *path,
                                  struct abx_walk_list **ret);
ABX_PUBLIC int abx_workspace_mkdir(struct abx_client *c, const char *ws, const char *path);
ABX_PUBLIC int abx_workspace_rmdir(struct abx_client *c, const char *ws, const char *path);
ABX_PUBLIC int abx_workspace_rename(struct abx_client *c, const char *ws, const char *from,
                                    const char *to, bool overwrite, struct abx_file_info **ret);

/* POST .../flush: mirrors the sandbox into the store now. POST .../close:
 * mirrors, then ends the sandbox; the workspace is cold afterwards. ret
 * (optional) receives what the mirror did. */
ABX_PUBLIC int abx_workspace_flush(struct abx_client *c, const char *ws,
                                   struct abx_sync_report **ret);
ABX_PUBLIC int abx_workspace_close(struct abx_client *c, const char *ws,
                                   struct abx_sync_report **ret);
/* GET .../manifest: the stored snapshot (what a wake would restore), every
 * entry with its hash (files) - not the live sandbox. */
ABX_PUBLIC int abx_workspace_manifest(struct abx_client *c, const char *ws,
                                      struct abx_walk_list **ret);

ABX_PUBLIC struct abx_workspace_info *abx_workspace_info_free(struct abx_workspace_info *info);
ABX_PUBLIC struct abx_workspace_list *abx_workspace_list_free(struct abx_workspace_list *list);
ABX_PUBLIC struct abx_sync_report *abx_sync_report_free(struct abx_sync_report *r);

/* --- the store --- */

struct abx_store_check {
    bool ok;     /* every file has its blob and every blob hashes to its name */
    char *store; /* "sqlite", "postgres" */
    uint64_t files;
    uint64_t blobs;
    uint64_t missing_blobs;
    uint64_t corrupt_blobs;
    uint64_t orphan_entries;
    char *first_problem; /* a description of the first problem, NULL when ok */
    char *json;
};

struct abx_store_gc {
    bool held_lease; /* false: another abxd is collecting; nothing was done */
    uint64_t blobs_deleted;
    uint64_t bytes_freed;
    char *json;
};

/* GET /v1/store/check: reads every blob, so it takes a while on a large
 * store. Returns 1 when the store is consistent, 0 when it is not (ret,
 * optional, says how). */
ABX_PUBLIC int abx_store_check(struct abx_client *c, struct abx_store_check **ret);
/* POST /v1/store/gc: deletes blobs no file references. ret is optional. */
ABX_PUBLIC int abx_store_gc(struct abx_client *c, struct abx_store_gc **ret);

ABX_PUBLIC struct abx_store_check *abx_store_check_free(struct abx_store_check *r);
ABX_PUBLIC struct abx_store_gc *abx_store_gc_free(struct abx_store_gc *r);

/* --- tools --- */

/* Tool bundles abxd found at start (docs/api.md, "Tools"): packages whose
 * commands are exported to language models as functions and run in a sandbox
 * or a workspace. A tool's name is its command ("summarize"), or
 * "package:command" where two packages export the same command; names are
 * percent-encoded on the wire. A selection ("allowed") is a comma-separated
 * list of "package" and "package:command" items; unknown names are skipped.
 * Where two selected packages export one name abxd answers 409
 * "tool_conflict", which these functions return as -ENOTUNIQ. */

/* One tool of a list: what an LLM sees of it. */
struct abx_tool {
    char *name;
    char *description; /* NULL when none */
};

struct abx_tool_list {
    size_t n;
    struct abx_tool *items;
    /* The whole answer, {"tools": [...]}, in the format asked for: hand it to
     * an LLM library as it is. */
    char *json;
};

/* GET /v1/tools. allowed: NULL = every tool, "" = none, else a selection.
 * format: "openai" (NULL: the default; entries {"type": "function",
 * "function": {name, description, parameters}}) or "mcp" (entries {name,
 * description, inputSchema}). */
ABX_PUBLIC int abx_tool_list(struct abx_client *c, const char *allowed, const char *format,
                             struct abx_tool_list **ret);

struct abx_tool_info {
    char *name;        /* as asked for: "summarize" or "csv-summary:summarize" */
    char *package;     /* "csv-summary" */
    char *command;     /* "summarize" */
    char *description; /* NULL when none */
    char *schema;      /* the JSON Schema of the arguments, as JSON text indented by 2 */
    char *json;        /* the object as the server sent it */
};

/* GET /v1/tools/{name}. -ENOENT for an unknown tool. */
ABX_PUBLIC int abx_tool_get(struct abx_client *c, const char *name, struct abx_tool_info **ret);

struct abx_tool_package {
    char *name;
    char *kind;        /* "cli", ... */
    char *description; /* NULL when none */
    char **commands;   /* NULL-terminated */
    size_t n_commands;
    char *built_at; /* RFC 3339, NULL when not sent */
    char *json;
};

struct abx_tool_package_list {
    size_t n;
    struct abx_tool_package **items;
    char *json; /* the whole answer, {"packages": [...]} */
};

/* GET /v1/tool-packages: every package abxd found, whatever a selection. */
ABX_PUBLIC int abx_tool_package_list(struct abx_client *c, struct abx_tool_package_list **ret);

/* How to run a tool. A zeroed struct (or NULL) asks for the server's defaults. */
struct abx_tool_call_opts {
    bool has_timeout;      /* send timeout_s (else: the tool's or the server's default) */
    double timeout_s;      /* total deadline in seconds, 0 = none */
    double idle_timeout_s; /* deadline without output in seconds, 0 = not sent */
};

/* A workspace file the call created or changed. */
struct abx_tool_file {
    char *path; /* '/'-rooted */
    uint64_t size;
    char *version; /* NULL when not sent */
};

struct abx_tool_result {
    char *tool;    /* the command that ran */
    char *package; /* its package */
    int exit_code; /* the tool's; 124 deadline, 128+N signal N */
    int signal;    /* the signal that killed it, 0 = none */
    /* What the tool wrote (NUL-terminated; the lengths count embedded NULs).
     * NULL after a streamed call, which handed the output to the callback. */
    char *stdout_data;
    size_t stdout_len;
    char *stderr_data;
    size_t stderr_len;
    bool truncated; /* the output exceeded abxd's cap; the text ends with a marker line */
    bool timed_out;
    bool oom_killed;
    uint64_t duration_ms;
    struct abx_tool_file *files;
    size_t n_files;
    char *json; /* the result object as the server sent it */
};

/* POST /v1/sandboxes/{id}/tools/{name}: runs the tool in the sandbox and
 * returns once it has ended; a non-zero exit is a result, not an error.
 * arguments_json is the JSON object of the arguments as text (NULL = "{}"),
 * e.g. the "arguments" string of an OpenAI tool call; -EINVAL (before any
 * request) when it is not one JSON object. abxd checks the arguments against
 * the tool's schema: -EINVAL with its message (code "invalid_arguments") when
 * they do not fit. -EIO with abxd's message when the call failed midway
 * (the sandbox ended before the tool did). opts may be NULL. There is no
 * total deadline (the tool's timeout bounds it). ret receives the result
 * (abx_tool_result_free()). */
ABX_PUBLIC int abx_tool_call(struct abx_client *c, const char *id, const char *name,
                             const char *arguments_json, const struct abx_tool_call_opts *opts,
                             struct abx_tool_result **ret);
/* The same with "stream": true: the tool's output is handed to output (NULL
 * discards it) as it arrives, with offset counting both streams' bytes; the
 * result (optional ret) then has no stdout_data or stderr_data. -EPROTO when
 * the stream ends without a result. */
ABX_PUBLIC int abx_tool_call_stream(struct abx_client *c, const char *id, const char *name,
                                    const char *arguments_json,
                                    const struct abx_tool_call_opts *opts, abx_output_fn output,
                                    void *userdata, struct abx_tool_result **ret);
/* abx_tool_call() and abx_tool_call_stream() in a workspace, on
 * /v1/workspaces/{ws}/tools/{name}; the workspace is woken first. The
 * result's files are the workspace files the call created or changed. */
ABX_PUBLIC int abx_workspace_tool_call(struct abx_client *c, const char *ws, const char *name,
                                       const char *arguments_json,
                                       const struct abx_tool_call_opts *opts,
                                       struct abx_tool_result **ret);
ABX_PUBLIC int abx_workspace_tool_call_stream(struct abx_client *c, const char *ws,
                                              const char *name, const char *arguments_json,
                                              const struct abx_tool_call_opts *opts,
                                              abx_output_fn output, void *userdata,
                                              struct abx_tool_result **ret);

ABX_PUBLIC struct abx_tool_list *abx_tool_list_free(struct abx_tool_list *list);
ABX_PUBLIC struct abx_tool_info *abx_tool_info_free(struct abx_tool_info *info);
ABX_PUBLIC struct abx_tool_package_list *
abx_tool_package_list_free(struct abx_tool_package_list *list);
ABX_PUBLIC struct abx_tool_result *abx_tool_result_free(struct abx_tool_result *r);

/* --- templates, custom commands and code --- */

/* Templates abxd loaded at start (docs/templates.md): what a sandbox is made
 * of, what it may do (its capabilities: "shell", "files", "code",
 * "terminal", "ports") and the custom commands it declares - named shell
 * commands with typed arguments, run by name. The built-in "base" template
 * always exists. Template and command names are percent-encoded on the
 * wire. A sandbox route its template does not allow answers 403
 * "capability_missing" (-EPERM; abx_client_error_code() says
 * "capability_missing" and the message names the capability). */

enum abx_arg_type {
    ABX_ARG_UNKNOWN = 0, /* a type this library does not know (treat as text) */
    ABX_ARG_STR,
    ABX_ARG_INT,   /* 64-bit integer */
    ABX_ARG_FLOAT, /* finite double */
    ABX_ARG_BOOL,
};

/* One argument of a custom command. */
struct abx_command_arg {
    char *name;
    enum abx_arg_type type;
    char *type_name; /* as sent: "str", "int", "float", "bool" */
    bool required;
    char *default_value; /* canonical text ("10", "false"), NULL = none */
    char *description;   /* NULL = none */
};

/* A custom command. From abx_template_list() only the name is filled. */
struct abx_command {
    char *name;
    char *description; /* NULL = none */
    struct abx_command_arg *args;
    size_t n_args;
    char *schema; /* the arguments as a JSON Schema, JSON text indented by 2; NULL = not sent */
};

struct abx_template_info {
    char *name;
    char **aliases; /* NULL-terminated */
    size_t n_aliases;
    char *description;   /* NULL = none */
    char *base;          /* another template's name, or "host" */
    char **capabilities; /* NULL-terminated */
    size_t n_capabilities;
    double cpu;         /* cores, 0 = abxd's default */
    uint64_t memory_mb; /* MiB, 0 = abxd's default */
    uint64_t pids;      /* 0 = abxd's default */
    bool has_details;   /* abx_template_get(): ports and the commands' arguments are filled */
    int *ports;         /* 1..65535 */
    size_t n_ports;
    struct abx_command *commands;
    size_t n_commands;
    char *json; /* the object as the server sent it */
};

struct abx_template_list {
    size_t n;
    struct abx_template_info **items;
    char *json; /* the whole answer, {"templates": [...]} */
};

/* What a sandbox's template offers it. */
struct abx_command_list {
    char *template_name;
    char **capabilities; /* NULL-terminated */
    size_t n_capabilities;
    struct abx_command *commands; /* with their arguments */
    size_t n_commands;
    char *json;
};

/* GET /v1/templates: every template, commands by name only. */
ABX_PUBLIC int abx_template_list(struct abx_client *c, struct abx_template_list **ret);
/* GET /v1/templates/{name} (a name or an alias), with ports and each
 * command's arguments and schema. -ENOENT for an unknown template. */
ABX_PUBLIC int abx_template_get(struct abx_client *c, const char *name,
                                struct abx_template_info **ret);
/* GET /v1/sandboxes/{id}/commands: the sandbox's template, capabilities and
 * commands. */
ABX_PUBLIC int abx_sandbox_commands(struct abx_client *c, const char *id,
                                    struct abx_command_list **ret);

/* The command called name in l (NULL when there is none). */
ABX_PUBLIC const struct abx_command *abx_command_find(const struct abx_command_list *l,
                                                      const char *name);

/* POST /v1/sandboxes/{id}/commands/{name}: runs a custom command; its output
 * streams to output (NULL discards it) as for abx_exec(). args_json is the
 * JSON object of the arguments as text (NULL = "{}"), sent as it is;
 * -EINVAL (before any request) when it is not one JSON object. abxd checks
 * the values against the command's arguments and refuses with 400 (-EINVAL,
 * its message names the argument) before anything runs; an unknown command
 * is -ENOENT (the message lists the template's commands). The command's own
 * timeout bounds it (exit code 124). Blocks until it has ended; a non-zero
 * exit is a result, not an error. ret (optional): abx_exec_result_done(). */
ABX_PUBLIC int abx_command_run(struct abx_client *c, const char *id, const char *name,
                               const char *args_json, abx_output_fn output, void *userdata,
                               struct abx_exec_result *ret);

/* POST /v1/sandboxes/{id}/code: runs len bytes of code (UTF-8, no NUL; abxd
 * takes up to 1 MiB) with the sandbox's interpreter for language ("python",
 * "javascript" or "bash"), streaming like abx_exec(). Needs the "code"
 * capability (-EPERM). Exit 127 when the sandbox has no such interpreter. */
ABX_PUBLIC int abx_code_run(struct abx_client *c, const char *id, const char *language,
                            const char *code, size_t len, abx_output_fn output, void *userdata,
                            struct abx_exec_result *ret);

/* One line of a template build's log. step: the step it belongs to (1-based,
 * 0 = none); start: true for the line that begins a step (text is then
 * "run", "env", "workdir" or "copy" and line the step's line in the file).
 * A non-zero return stops the build (the client hangs up; abxd abandons it). */
typedef int (*abx_build_log_fn)(unsigned step, bool start, unsigned line, const char *text,
                                void *userdata);

/* POST /v1/templates: sends the template directory dir (sandbox-template.yaml
 * and the files its copy steps use; only regular files, directories and
 * symlinks, else -EPERM before any request) as a tar and streams the build
 * log to log (NULL discards it). Returns 0 when the template is built and
 * offered (ret_name, optional, gets its name: free() it); -EINVAL for a
 * template abxd refuses (the message is "<dir>/sandbox-template.yaml:<line>:
 * <reason>"); -ECANCELED when a step failed (the message says which and
 * why); other errors as in the table above. Blocks until the build ends. */
ABX_PUBLIC int abx_template_build(struct abx_client *c, const char *dir, abx_build_log_fn log,
                                  void *userdata, char **ret_name);

ABX_PUBLIC struct abx_template_info *abx_template_info_free(struct abx_template_info *t);
ABX_PUBLIC struct abx_template_list *abx_template_list_free(struct abx_template_list *l);
ABX_PUBLIC struct abx_command_list *abx_command_list_free(struct abx_command_list *l);

/* --- operations --- */

/* GET /healthz. ret_json (optional) receives the answer. No key needed. */
ABX_PUBLIC int abx_health(struct abx_client *c, char **ret_json);
struct abx_readiness {
    bool ready;
    char *isolation; /* "ns", ... */
    char *cgroup;    /* "v1", "v2" */
    bool draining;
    char **missing; /* what the configured isolation lacks; NULL-terminated */
    size_t n_missing;
    char *json;
};

/* GET /readyz: 1 when ready, 0 when abxd answers 503 (then ret, optional,
 * says why). No key needed. */
ABX_PUBLIC int abx_ready(struct abx_client *c, struct abx_readiness **ret);
ABX_PUBLIC struct abx_readiness *abx_readiness_free(struct abx_readiness *r);
/* POST /drain: returns the number of sandboxes still running (>= 0). */
ABX_PUBLIC int abx_drain(struct abx_client *c, char **ret_json);
/* GET /metrics: the Prometheus text. */
ABX_PUBLIC int abx_metrics(struct abx_client *c, char **ret_text);

#ifdef __cplusplus
}
#endif
