/*
 * proto.h - messages between abxd and a sandbox's init (abx-init).
 *
 * One SOCK_SEQPACKET socketpair per sandbox carries one message per packet:
 * a header {type, len} then the fields of that type in a fixed order, each
 * u32/u64 little-endian (host order: both ends are the same binary build) or
 * a string as u32 length + bytes + NUL. Descriptors ride along as SCM_RIGHTS.
 *
 * abxd treats everything init sends as hostile: code in the sandbox may have
 * taken init over. The reader therefore checks every length against the
 * packet, requires the NUL, and rejects trailing bytes (-EBADMSG). Nothing
 * here allocates; the writer fills a caller buffer.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION     1
#define PROTO_MAX_MSG     (256 * 1024) /* bytes per packet, argv+env included */
#define PROTO_MAX_FDS     3
#define PROTO_MAX_ARGS    8192 /* argv + env entries per spawn */
#define PROTO_MAX_BINDS   16
#define PROTO_MAX_CGROUPS 8
#define PROTO_MAX_LAYERS  16 /* read-only layers under /usr, /etc, /opt */

enum proto_type {
    /* abxd -> init */
    PROTO_CONFIG = 1,
    PROTO_MAPPED = 2,
    PROTO_SPAWN = 3,
    PROTO_SIGNAL = 4,
    /* init -> abxd */
    PROTO_NEED_MAP = 100,
    PROTO_READY = 101,
    PROTO_FAILED = 102,
    PROTO_SPAWNED = 103,
    PROTO_EXITED = 104,
};

enum proto_mode {
    PROTO_MODE_NS = 0,   /* all namespaces, pooled uid range */
    PROTO_MODE_UID = 1,  /* pooled uid + cgroup, no namespaces */
    PROTO_MODE_NONE = 2, /* no isolation at all */
};

#define PROTO_SPAWN_SETSID 0x1u /* new session and process group (always set) */

#define PROTO_SIGNAL_GROUP 0x1u /* signal the process group, not just the process */

#define PROTO_BIND_RO 0x1u

struct proto_hdr {
    uint32_t type;
    uint32_t len; /* whole packet including this header */
};

struct proto_writer {
    char *buf;
    size_t len, cap;
    bool overflow;
};

struct proto_reader {
    const char *buf;
    size_t len, pos;
    bool bad;
};

void proto_writer_init(struct proto_writer *w, void *buf, size_t cap, uint32_t type);
void proto_put_u32(struct proto_writer *w, uint32_t v);
void proto_put_u64(struct proto_writer *w, uint64_t v);
void proto_put_str(struct proto_writer *w, const char *s);
void proto_put_bytes(struct proto_writer *w, const void *p, uint32_t n);
/* Finishes the header; returns the packet length or -EMSGSIZE on overflow. */
long proto_writer_finish(struct proto_writer *w);

/* Checks the header against n received bytes; returns the type or -EBADMSG. */
int proto_reader_init(struct proto_reader *r, const void *buf, size_t n);
uint32_t proto_get_u32(struct proto_reader *r);
uint64_t proto_get_u64(struct proto_reader *r);
/* Returns a pointer into the packet (NUL-terminated), or "" when bad. */
const char *proto_get_str(struct proto_reader *r, uint32_t *ret_len);
const void *proto_get_bytes(struct proto_reader *r, uint32_t *ret_len);
/* 0 when every field was well-formed and the packet fully consumed. */
int proto_reader_done(const struct proto_reader *r);

/* Decoded messages. Pointers point into the packet buffer. */

struct proto_bind {
    const char *src; /* host path */
    const char *dst; /* path inside the sandbox root */
    uint32_t flags;  /* PROTO_BIND_* */
};

struct proto_config {
    uint32_t version, mode;
    uint32_t user_uid, user_gid; /* "user" inside (ns) or on the host (uid) */
    uint32_t root_uid_host;      /* host uid/gid that sandbox root maps to (ns) */
    uint32_t root_gid_host;
    uint32_t tty_gid_host; /* host gid that shows as "tty" (5) inside */
    uint64_t root_bytes, tmp_bytes, shm_bytes;
    const char *rootmnt;   /* host directory to build the new root on */
    const char *workspace; /* host path of the workspace */
    const char *etc;       /* host path of the generated /etc */
    const char *hostname;
    const void *bpf;  /* struct sock_filter[], may be empty */
    uint32_t bpf_len; /* bytes */
    uint32_t nbinds;
    struct proto_bind binds[PROTO_MAX_BINDS];
    /* cgroup.procs files init writes itself into before anything else, so
     * what it creates is charged to the sandbox (and because on v1 an attach
     * waits for an RCU grace period, which abxd's loop must not). */
    uint32_t ncgroups;
    const char *cgroups[PROTO_MAX_CGROUPS];
    /* Layered file system (ns mode; docs/templates.md "Layers"): with
     * layers or an upper, /usr, /etc and /opt are overlays of the layers'
     * usr/, etc/, opt/ (top first) over the host's /usr and the generated
     * /etc, seen through an idmapped mount that maps ids 0..65535 of the
     * layers to the sandbox's range, with a writable layer on top: upper's
     * usr/, etc/, opt/ (a host directory, for builds), or, when upper is "",
     * a private tmpfs of upper_bytes. */
    uint32_t nlayers;
    const char *layers[PROTO_MAX_LAYERS]; /* host directories */
    const char *upper;                    /* host directory or "" */
    uint64_t upper_bytes;                 /* 0 = root_bytes */
    /* Host path of abx-sudo, bound read-only over /usr/bin/sudo (ns mode);
     * "" = none. See jail/init/sudo-server.c. */
    const char *sudo;
};

struct proto_spawn {
    uint64_t token;
    uint32_t uid, gid, flags;
    const char *cwd;
    uint32_t argc, envc;
    /* argv/env strings follow in the packet; walk them with the reader
     * positioned by proto_decode_spawn(). */
};

int proto_encode_config(struct proto_writer *w, const struct proto_config *c);
int proto_decode_config(const void *buf, size_t n, struct proto_config *c);

/* Encodes a spawn; argv and env are NULL-terminated string arrays. */
int proto_encode_spawn(struct proto_writer *w, uint64_t token, uint32_t uid, uint32_t gid,
                       uint32_t flags, const char *cwd, const char *const *argv,
                       const char *const *env);
/* Decodes the fixed part and leaves r positioned at the first argv string;
 * the caller reads argc + envc strings and then calls proto_reader_done(). */
int proto_decode_spawn(struct proto_reader *r, struct proto_spawn *s);

/* Messages from init, decoded by abxd. */
struct proto_event {
    uint32_t type;
    uint64_t token;   /* SPAWNED */
    int32_t pid;      /* SPAWNED (> 0 on success), EXITED */
    int32_t status;   /* EXITED: wait status */
    uint32_t errnum;  /* FAILED, SPAWNED on failure */
    const char *step; /* FAILED, SPAWNED on failure */
    uint64_t usec;    /* READY: setup time inside init */
};

/* Decodes any init->abxd packet; -EBADMSG for anything malformed or unknown. */
int proto_decode_event(const void *buf, size_t n, struct proto_event *ev);
