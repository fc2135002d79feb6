/*
 * proto.h - the messages between abx's privileged parent (host root, owns
 * the jails: parent.h) and its unprivileged network-facing process (HTTP,
 * every parser: client.h).
 *
 * One SOCK_SEQPACKET connection, one message per packet: a fixed header,
 * then a body of at most PRIV_BODY_MAX bytes whose fields follow in the
 * order the type's comment below gives. Integers are in host byte order
 * (both ends are one build on one host); a string is u32 length, the
 * bytes, then a NUL, with no NUL inside. Descriptors ride along as
 * SCM_RIGHTS; each type carries exactly priv_type_fds() of them and the
 * header says how many, so a packet with another number is malformed. A
 * byte string ("bytes") is u32 length then the bytes, no NUL.
 *
 *   header  u32 magic (PRIV_MAGIC) | u16 type | u16 nfds | u32 len | u32 seq
 *   example SIGNAL: 61 62 78 70 | 04 00 | 00 00 | 18 00 00 00 | 07 00 00 00
 *           then id "ab12" (04 00 00 00 'a' 'b' '1' '2' 00), pid, sig, group
 *
 * Requests go from the unprivileged side to the parent, each with a seq of
 * its choosing (not 0). Every request but SPAWN, SPAWN_LARGE and
 * SET_RECORD gets exactly one reply with that seq, in order: R_ERR, or
 * the reply type priv_reply_type() names. A SET_RECORD gets none at all:
 * the parent keeps the record of a sandbox of the sender's, and drops
 * one for any other id (it may have died meanwhile). A SPAWN (or
 * SPAWN_LARGE) gets no reply
 * (priv_reply_type() is 0): its outcome is one EV_SPAWNED with its token,
 * refusals included (no such sandbox, not ready, dying, bad stdio, a bad
 * memfd, init not keeping up), so the sender need not wait for the
 * parent; only one the decoder refuses ends the connection, as any
 * malformed message does. The parent handles requests one at a time, so
 * a refusal's EV_SPAWNED comes before the answer to any later request,
 * and init's verdict on an accepted one comes later; the sandbox's
 * EV_GONE ends any spawn still in flight (init died or was killed before
 * it answered: no EV_SPAWNED then, as jail.h's gone). Events come from
 * the parent with seq 0. A sandbox id names a sandbox from the CREATE
 * the parent accepted to the EV_GONE that ends it; one connection at a
 * time owns it (the creator, or the one that ADOPTed it once its owner's
 * connection ended: parent.h); nothing but names ever
 * reaches the parent (layers and areas are names it resolves itself), and
 * what goes back is facts and descriptors, never something to act on.
 *
 * The decoder is strict for both directions (the parent treats the other
 * side as hostile; the other side shares the decoder): known type for the
 * direction, exact body length, every string bounded and NUL-free, ids
 * [a-z0-9]{1,32}, names [a-z0-9-]{1,64}, counts and enums in range, seq
 * rules, descriptor count. Anything else is -EBADMSG, and both ends then
 * end the connection. Nothing here allocates, logs or touches a
 * descriptor.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jail/cgroup.h"
#include "jail/jail.h"

/* PRIV_VERSION 2: SPAWN answered by EV_SPAWNED alone; 3: TREE_EMPTY; 4:
 * LAYER_INSTALL and EV_LAYER; 5: SET_RECORD one-way. */
#define PRIV_MAGIC     0x70786261u /* "abxp" in memory */
#define PRIV_VERSION   5
#define PRIV_BODY_MAX  (16 * 1024)
#define PRIV_HDR_SIZE  16
#define PRIV_MSG_MAX   (PRIV_HDR_SIZE + PRIV_BODY_MAX)
#define PRIV_ID_MAX    32   /* sandbox ids: [a-z0-9]{1,32} */
#define PRIV_NAME_MAX  64   /* layer and area names: [a-z0-9-]{1,64} */
#define PRIV_PATH_MAX  1024 /* cwd, homes: absolute, bytes */
#define PRIV_TEXT_MAX  255  /* error messages, steps: printable ASCII */
#define PRIV_MISS_MAX  1024 /* HELLO's "missing isolation" text */
#define PRIV_ARGS_MAX  1024 /* argv + env entries of one SPAWN */
#define PRIV_FDS_MAX   4    /* descriptors one message carries at most */
#define PRIV_PTY_MAX   4096 /* rows and columns of a terminal */
#define PRIV_SIG_MAX   64
#define PRIV_ERRNO_MAX 4095

/* Re-adoption and large spawns. */
#define PRIV_RECORD_MAX (8 * 1024) /* SET_RECORD: bytes of one sandbox's record */
#define PRIV_LIST_MAX   64         /* R_LIST: entries of one page */
#define PRIV_LIST_END   UINT32_MAX /* R_LIST's next when no page follows */
/* SPAWN_LARGE: bytes of the argv/env block in its memfd; the jail's own
 * bound for a spawn (jail/proto.h's PROTO_MAX_MSG, asserted in parent.c). */
#define PRIV_ARGS_BYTES_MAX (256 * 1024)

struct priv_hdr {
    uint32_t magic;
    uint16_t type;
    uint16_t nfds; /* descriptors that came with the packet */
    uint32_t len;  /* body bytes after the header */
    uint32_t seq;  /* request: not 0; reply: its request's; event: 0 */
};
_Static_assert(sizeof(struct priv_hdr) == PRIV_HDR_SIZE, "the header is 16 bytes");

enum priv_type {
    /* requests (unprivileged side -> parent) */
    PRIV_HELLO = 1,          /* u32 version                       -> R_HELLO */
    PRIV_CREATE = 2,         /* id, limits, fs                    -> R_OK, later EV_READY */
    PRIV_SPAWN = 3,          /* id, u64 token, u32 root, cwd, argv/env; 3 fds -> EV_SPAWNED only */
    PRIV_SIGNAL = 4,         /* id, i32 pid, u32 sig, u32 group   -> R_OK */
    PRIV_SET_LIMITS = 5,     /* id, limits                        -> R_OK */
    PRIV_FREEZE = 6,         /* id, u32 frozen                    -> R_OK */
    PRIV_STATS = 7,          /* id                                -> R_STATS */
    PRIV_KILL = 8,           /* id                                -> R_OK, later EV_GONE */
    PRIV_OPEN_HELPER = 9,    /* id, u32 root                      -> R_HELPER (socket, pidfd) */
    PRIV_OPEN_PTY = 10,      /* id, u32 root, u32 rows, u32 cols  -> R_PTY (master, tty) */
    PRIV_NETNS_SOCKET = 11,  /* id, u32 family, u32 type         -> R_FD (the socket) */
    PRIV_IDMAP = 12,         /* id; 1 fd (a directory)            -> R_FD (the mount) */
    PRIV_AREA_CREATE = 13,   /* name, u64 limit_bytes             -> R_OK */
    PRIV_AREA_USAGE = 14,    /* name                              -> R_USAGE */
    PRIV_AREA_DESTROY = 15,  /* name                             -> R_OK */
    PRIV_SET_RECORD = 16,    /* id, bytes record (<= PRIV_RECORD_MAX) -> nothing */
    PRIV_LIST = 17,          /* u32 cursor (0 first)              -> R_LIST (the orphans) */
    PRIV_ADOPT = 18,         /* id                                -> R_LIST (its one entry) */
    PRIV_KILL_HELPER = 19,   /* id, u32 helper (R_HELPER's)       -> R_OK */
    PRIV_SPAWN_LARGE = 20,   /* id, u64 token, u32 root, cwd; 4 fds: stdio, the
                              * sealed memfd holding the argv/env block (see
                              * priv_encode_args())      -> EV_SPAWNED only */
    PRIV_TREE_EMPTY = 21,    /* 1 fd (a directory strictly below the idmap root) -> R_OK;
                              * what is inside it is removed, in the background */
    PRIV_LAYER_INSTALL = 22, /* name (an area), layer -> R_OK, later EV_LAYER: the
                              * area's writable layer becomes layer (jail.h's
                              * jail_host_layer_install()) */
    _PRIV_REQUEST_MAX,

    /* replies (parent -> unprivileged side, the request's seq) */
    PRIV_R_OK = 100,     /* (empty) */
    PRIV_R_ERR = 101,    /* u32 errnum, text */
    PRIV_R_HELLO = 102,  /* host facts, see struct priv_hello */
    PRIV_R_STATS = 103,  /* 5 x u64 cgroup_stats, u32 disk known, u64 disk bytes */
    PRIV_R_HELPER = 104, /* u32 helper (its number; the parent never issues 0); 2 fds:
                          * the helper's socket, its pidfd */
    PRIV_R_PTY = 105,    /* 2 fds: the terminal's master, its tty */
    PRIV_R_FD = 106,     /* 1 fd */
    PRIV_R_USAGE = 107,  /* u64 bytes */
    PRIV_R_LIST = 108,   /* u32 next (a cursor, or PRIV_LIST_END), u32 n, n entries:
                          * id, u32 ready, [the READY facts if ready], bytes record */
    _PRIV_REPLY_MAX,

    /* events (parent -> unprivileged side, seq 0) */
    PRIV_EV_READY = 200,   /* id, u32 errnum, text, see struct priv_ready */
    PRIV_EV_SPAWNED = 201, /* id, u64 token, i32 pid, u32 errnum, step (a SPAWN's outcome:
                            * pid, or errnum and the step that failed, for a refusal
                            * "sandbox", "stdio", "args", "cwd" or "init") */
    PRIV_EV_EXITED = 202,  /* id, i32 pid, i32 status */
    PRIV_EV_GONE = 203,    /* id; the id is free again */
    PRIV_EV_LAYER = 204,   /* layer, u32 errnum, text (no id): a LAYER_INSTALL's outcome */
    _PRIV_EVENT_MAX,
};

/* PRIV_R_HELLO: what the unprivileged side must know of the host. No path. */
struct priv_hello {
    uint32_t version;
    uint32_t mode;       /* enum jail_mode */
    uint32_t uid_slots;  /* sandboxes the parent runs at most */
    bool has_disk;       /* sandboxes' writable space is bounded (jail_host_disk()) */
    bool oom_protect;    /* jail_host_oom_protect() */
    uint64_t root_caps;  /* jail_root_caps() */
    const char *missing; /* jail_host_missing(), "" when nothing is */
};

/* PRIV_EV_READY, on success (errnum 0). */
struct priv_ready {
    struct jail_timings timings;
    uint32_t user_uid, user_gid; /* jail_user_uid/gid() */
    uint32_t root_uid;           /* jail_root_uid() */
    int32_t init_pid;            /* jail_init_pid(), for tests and leak checks */
    const char *home_user;       /* jail_home(j, false), as processes see it */
    const char *home_root;       /* jail_home(j, true) */
};

/* R_LIST: one sandbox nobody owns (or, for ADOPT, the one adopted). */
struct priv_entry {
    const char *id;
    bool ready;              /* else still being created: facts are zero */
    struct priv_ready facts; /* as its EV_READY gave them */
    const void *record;      /* its SET_RECORD bytes, as stored; NULL when none */
    uint32_t record_len;     /* at most PRIV_RECORD_MAX */
};

/* A decoded (or to be encoded) message. Which fields a type uses is in
 * enum priv_type's comments; strings point into the packet (decode) or at
 * the caller's memory (encode). Unused fields are zero after decoding. */
struct priv_msg {
    enum priv_type type;
    uint32_t seq;
    const char *id;            /* per-sandbox requests and every event */
    const char *name;          /* AREA_*, LAYER_INSTALL: an area */
    const char *layer;         /* LAYER_INSTALL, EV_LAYER */
    uint64_t u64;              /* SPAWN, EV_SPAWNED: token; AREA_CREATE: limit; R_USAGE: bytes */
    uint32_t flag;             /* SPAWN, OPEN_*: root; FREEZE: frozen; SIGNAL: group (0/1) */
    int32_t pid;               /* SIGNAL, EV_SPAWNED, EV_EXITED */
    int32_t status;            /* EV_EXITED: wait status */
    uint32_t a, b;             /* SIGNAL: sig; OPEN_PTY: rows, cols; NETNS_SOCKET: family, type;
                                * HELLO: version (a); KILL_HELPER, R_HELPER: helper (a);
                                * LIST: cursor (a); R_LIST: next (a) */
    int errnum;                /* R_ERR, EV_READY, EV_SPAWNED, EV_LAYER: positive errno,
                                * 0 = success */
    const char *text;          /* R_ERR, EV_READY, EV_LAYER: message; EV_SPAWNED: the failing
                                * step */
    struct jail_limits limits; /* CREATE, SET_LIMITS */
    /* CREATE: the file system by name */
    const char *layers[JAIL_MAX_LAYERS]; /* top first */
    uint32_t nlayers;
    const char *upper; /* an area name, or NULL = a private tmpfs */
    uint64_t fs_disk_bytes;
    /* SPAWN */
    const char *cwd;
    const char *argv[PRIV_ARGS_MAX + 1]; /* NULL-terminated */
    const char *env[PRIV_ARGS_MAX + 1];  /* NULL-terminated, "K=V" */
    /* R_HELLO, EV_READY, R_STATS */
    struct priv_hello hello;
    struct priv_ready ready;
    struct cgroup_stats stats;
    bool disk_known;
    uint64_t disk_bytes;
    /* SET_RECORD */
    const void *record;
    uint32_t record_len;
    /* R_LIST */
    struct priv_entry list[PRIV_LIST_MAX];
    uint32_t nlist;
};

/* How many descriptors a message of type t carries (exactly). */
unsigned priv_type_fds(enum priv_type t);
/* The reply a successful request of type t gets; 0 for no request, and
 * for SPAWN and SPAWN_LARGE, which get none (their EV_SPAWNED answers). */
enum priv_type priv_reply_type(enum priv_type t);
bool priv_is_request(int t);
bool priv_is_reply(int t);
bool priv_is_event(int t);
const char *priv_type_name(enum priv_type t);

/* Whether s is a sandbox id ([a-z0-9]{1,32}) or a name ([a-z0-9-]{1,64}). */
bool priv_id_ok(const char *s);
bool priv_name_ok(const char *s);

/* Encodes m (and checks it as the decoder would: what the peer would
 * refuse is not sent). Returns the packet's length, -EINVAL for a field the
 * decoder would refuse, -EMSGSIZE past PRIV_BODY_MAX. */
long priv_encode(void *buf, size_t cap, const struct priv_msg *m);

/* Decodes the packet buf[0..n) that came with nfds descriptors. Requests
 * only (the parent's side), or replies and events only (the other side).
 * ret's pointers point into buf. -EBADMSG for anything malformed. */
int priv_decode_request(const void *buf, size_t n, unsigned nfds, struct priv_msg *ret);
int priv_decode_answer(const void *buf, size_t n, unsigned nfds, struct priv_msg *ret);

/* Bytes entry e takes in an R_LIST body (what the parent packs a page by). */
size_t priv_entry_size(const struct priv_entry *e);

/* SPAWN_LARGE's argv/env block, the tail of a SPAWN body on its own:
 *   u32 argc | u32 envc | argc strings | envc strings
 * at most PRIV_ARGS_BYTES_MAX bytes. priv_encode_args() writes m's argv
 * and env (checked as SPAWN's) and returns the length, -EINVAL or
 * -EMSGSIZE; priv_decode_args() fills m->argv and m->env from buf[0..n)
 * (pointers into buf) with SPAWN's rules and nothing left over, else
 * -EBADMSG. */
long priv_encode_args(void *buf, size_t cap, const struct priv_msg *m);
int priv_decode_args(const void *buf, size_t n, struct priv_msg *m);
