/*
 * fileops-proto.h - the messages between abxd and abx-fileops, the helper
 * that does a sandbox's file work with exactly the rights of one sandbox
 * user (fileops.h says why).
 *
 * One SOCK_SEQPACKET socketpair per helper, one message per packet, framed
 * and encoded with jail/proto.h's writer and reader (a header {type, len},
 * then the fields of that type in a fixed order: u32/u64 in host order -
 * both ends are one build - and strings as u32 length + bytes + NUL, no NUL
 * inside). Descriptors ride along as SCM_RIGHTS; every message type carries
 * a fixed number of them, and a packet with any other number is malformed.
 *
 * A request gets exactly one final answer: FOP_R_ERR, or the answer type
 * fop_answer_type() names for it. The listing requests first send any
 * number of entry batches (FOP_R_FENTRIES, FOP_R_VENTRIES). Requests are
 * answered in order, one at a time.
 *
 * abxd treats everything the helper sends as hostile: the helper acts for
 * a sandbox user and handles what that user controls, so code in the
 * sandbox may have taken it over. Every decoder checks types, lengths, the
 * limits of the C structs it fills (the same limits vfs.h and files.h
 * promise) and that the packet is used up. The helper decodes abxd's
 * requests as strictly. Nothing here allocates or logs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/inotify.h>

#include "jail/proto.h"
#include "sandbox/files.h"
#include "sandbox/snapshot.h"
#include "sandbox/vfs.h"

#define FOP_VERSION     1
#define FOP_MSG_MAX     (128 * 1024) /* bytes per packet */
#define FOP_BATCH_BYTES (64 * 1024)  /* the helper ends an entry batch past this */
#define FOP_UPLOADS_MAX 64           /* uploads one helper holds open at once */
#define FOP_BPF_MAX     (64 * 1024)  /* bytes of the seccomp program in FOP_HELLO */

enum fop_type {
    /* abxd -> helper */
    FOP_HELLO = 1, /* who the helper is; answered FOP_R_OK once it is that */
    /* workspace-relative (files.h): normalized paths, "." for the root */
    FOP_F_STAT = 10,
    FOP_F_OPEN_READ = 11,
    FOP_F_UPLOAD_BEGIN = 12,
    FOP_F_UPLOAD_COMMIT = 13,
    FOP_F_UPLOAD_ABORT = 14,
    FOP_F_DELETE = 15,
    FOP_F_MKDIR = 16,
    FOP_F_RMDIR = 17,
    FOP_F_RENAME = 18,
    FOP_F_WALK = 19,
    /* the whole view (vfs.h): absolute normalized paths */
    FOP_V_STAT = 30,
    FOP_V_LIST = 31,
    FOP_V_OPEN_DIR = 32,
    FOP_V_OPEN_BELOW = 33, /* carries a directory fd the helper gave out */
    FOP_V_MKDIR = 34,
    FOP_V_RENAME = 35,
    FOP_V_REMOVE = 36,
    FOP_V_OPEN_READ = 37,
    FOP_V_UPLOAD_BEGIN = 38, /* answered FOP_R_UPLOAD; then COMMIT / ABORT with its id */
    FOP_V_SET_META = 39,     /* carries the file fd */
    FOP_V_STAT_FD = 40,      /* carries the file fd */
    FOP_V_COPY_IN = 41,      /* carries the source directory fd */
    FOP_V_UPLOAD_COMMIT = 42,
    FOP_V_UPLOAD_ABORT = 43,
    /* carries an inotify descriptor and a directory the helper gave out;
     * u: the event mask (FOP_WATCH_MASK bits); answered FOP_R_WD. The
     * watch is added with the helper's rights, as the acting user. */
    FOP_V_WATCH_ADD = 44,
    /* snapshots (snapshot.h) */
    FOP_S_COPY_OUT = 50, /* carries the destination directory fd */
    FOP_S_COPY_IN = 51,  /* carries the source directory fd */
    _FOP_REQUEST_MAX,

    /* helper -> abxd */
    FOP_R_OK = 100,
    FOP_R_ERR = 101,
    FOP_R_FSTAT = 102,    /* files_stat */
    FOP_R_FSTAT_FD = 103, /* files_stat + an fd open for reading */
    FOP_R_UPLOAD = 104,   /* upload id + the staging fd, open for writing */
    FOP_R_CREATED = 105,  /* files_stat + whether the name is new */
    FOP_R_BOOL = 106,
    FOP_R_FENTRIES = 107, /* a batch: count, then entries */
    FOP_R_VENTRIES = 108,
    FOP_R_DONE = 109, /* end of a listing: entries left out by the prune rules */
    FOP_R_VENTRY = 110,
    FOP_R_FD = 111,      /* a directory or file fd */
    FOP_R_SIZE_FD = 112, /* size + an fd open for reading */
    FOP_R_SNAPSHOT = 113,
    FOP_R_WD = 114, /* u: an inotify watch descriptor (> 0) */
    _FOP_ANSWER_MAX,
};

/* What a FOP_V_WATCH_ADD may ask for: events, and how the directory is
 * taken (never following a link, only a directory). */
#define FOP_WATCH_MASK (IN_ALL_EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

/* Where the helper's identity comes from. */
enum fop_mode {
    FOP_MODE_NS = 0,  /* join the sandbox's user namespace, then become uid:gid in it */
    FOP_MODE_UID = 1, /* become host uid:gid, no namespace */
};

/* FOP_HELLO: who the helper becomes. FOP_MODE_NS: uid/gid and ids are the
 * sandbox's own (0 for its root, 1000 for "user"); FOP_MODE_UID: host ids. */
struct fop_hello {
    uint32_t version;
    uint32_t mode;
    uint32_t uid, gid;
    bool as_root;       /* vfs ownership rules: act as the sandbox's root */
    struct vfs_ids ids; /* how the helper names the ids it sees */
    uint64_t caps;      /* capabilities kept in the sandbox's namespace (bit n = cap n) */
    const void *bpf;    /* the sandboxes' seccomp program (may be empty); into the packet */
    uint32_t bpf_len;   /* bytes, a multiple of sizeof(struct sock_filter) */
};

int fop_encode_hello(void *buf, size_t cap, const struct fop_hello *h);
int fop_decode_hello(const void *buf, size_t n, unsigned nfds, struct fop_hello *ret);

/* A request. Which fields a type uses:
 *   a        every path-taking request (F_RENAME, V_RENAME: from)
 *   b        F_RENAME, V_RENAME: to; V_COPY_IN: dst (a: src, relative)
 *   u        F_/V_UPLOAD_COMMIT/ABORT: upload id; V_LIST: depth;
 *            F_RENAME: overwrite (0/1); F_WALK: limits_as_entries (0/1);
 *            V_WATCH_ADD: the event mask
 *   max      F_WALK: entries kept (0 = FILES_WALK_MAX); S_COPY_OUT: bytes
 *   prune    F_WALK (n = 0: nothing left out)
 *   meta     V_SET_META
 * Strings point into the packet (decode) or the caller's memory (encode). */
struct fop_request {
    enum fop_type type;
    const char *a, *b;
    uint32_t u;
    uint64_t max;
    struct files_prune prune;
    struct vfs_meta meta;
};

/* Returns the packet length or -EMSGSIZE (or -EINVAL for a bad type). */
long fop_encode_request(void *buf, size_t cap, const struct fop_request *rq);
/* -EBADMSG for anything malformed, unknown, over a limit, or with another
 * descriptor count than fop_request_fds() says. */
int fop_decode_request(const void *buf, size_t n, unsigned nfds, struct fop_request *ret);
unsigned fop_request_fds(enum fop_type t);
/* The final answer type of a successful request. */
enum fop_type fop_answer_type(enum fop_type request);
unsigned fop_answer_fds(enum fop_type t);

/* Answers (helper side): fop_answer_init(), the fields, then
 * proto_writer_finish(). Batches: init FOP_R_*ENTRIES, put_u32 placeholder
 * via fop_batch_begin(), entries, fop_batch_end(). */
void fop_answer_init(struct proto_writer *w, void *buf, size_t cap, enum fop_type t);
void fop_put_err(struct proto_writer *w, int errnum, const char *msg);
void fop_put_fstat(struct proto_writer *w, const struct files_stat *st);
void fop_put_fentry(struct proto_writer *w, const struct files_entry *e);
void fop_put_ventry(struct proto_writer *w, const struct vfs_entry *e);
void fop_put_snapshot(struct proto_writer *w, const struct snapshot_stats *st);

/* A decoded answer. */
struct fop_answer {
    enum fop_type type;
    int errnum;           /* FOP_R_ERR: positive errno */
    const char *msg;      /* FOP_R_ERR: printable ASCII only (checked) */
    struct files_stat st; /* FOP_R_FSTAT(_FD), FOP_R_CREATED */
    uint32_t u;           /* FOP_R_UPLOAD id; FOP_R_BOOL, FOP_R_CREATED flag; batch count */
    uint64_t v;           /* FOP_R_SIZE_FD size; FOP_R_DONE entries left out */
    struct snapshot_stats snap;
    struct proto_reader r; /* batches and FOP_R_VENTRY: at the first entry */
    uint32_t left;         /* batch entries not yet read */
};

/* -EBADMSG for anything malformed or with another descriptor count than
 * fop_answer_fds() says. Batches and FOP_R_VENTRY are checked entry by
 * entry as they are read. */
int fop_decode_answer(const void *buf, size_t n, unsigned nfds, struct fop_answer *ret);

/* The next entry of a batch. ret's path and target point into the packet
 * (target NULL unless a symlink; do not write through them). 1 for an
 * entry, 0 at the end of the batch, -EBADMSG. */
int fop_next_fentry(struct fop_answer *a, struct files_entry *ret);
int fop_next_ventry(struct fop_answer *a, struct vfs_entry *ret);
