/*
 * fileops-proto.c - encoder and strict decoder for the abxd <-> abx-fileops
 * messages.
 *
 * Linked into abxd, into the static abx-fileops and into the fuzz target;
 * no allocation, no stdio, no logging.
 */
#include "sandbox/fileops-proto.h"

#include <errno.h>
#include <string.h>

/* --- limits every decoded struct keeps --- */

static bool
abs_path_ok(const char *s, uint32_t n)
{
    return n >= 1 && n <= PATH_MAX_LEN && s[0] == '/';
}

static bool
rel_path_ok(const char *s, uint32_t n)
{
    /* normalized workspace paths: "." or "a/b"; the store and path.c check
     * the rest before anything reaches a file system */
    return n >= 1 && n <= PATH_MAX_LEN && s[0] != '/';
}

static bool
version_ok(const char *s, uint32_t n)
{
    if (n != FILES_VERSION_LEN)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static bool
perms_ok(const char *s, uint32_t n)
{
    if (n == 0 || n >= VFS_PERMS_LEN)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!strchr("dLDpSugct-rwx", s[i]))
            return false;
    return true;
}

static bool
idname_ok(const char *s, uint32_t n)
{
    if (n == 0 || n >= 32)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

/* --- hello --- */

int
fop_encode_hello(void *buf, size_t cap, const struct fop_hello *h)
{
    struct proto_writer w;
    proto_writer_init(&w, buf, cap, FOP_HELLO);
    proto_put_u32(&w, h->version);
    proto_put_u32(&w, h->mode);
    proto_put_u32(&w, h->uid);
    proto_put_u32(&w, h->gid);
    proto_put_u32(&w, h->as_root ? 1 : 0);
    proto_put_u32(&w, h->ids.root_uid);
    proto_put_u32(&w, h->ids.root_gid);
    proto_put_u32(&w, h->ids.user_uid);
    proto_put_u32(&w, h->ids.user_gid);
    proto_put_u32(&w, h->ids.range_first);
    proto_put_u32(&w, h->ids.range_len);
    proto_put_u64(&w, h->caps);
    if (h->bpf_len > FOP_BPF_MAX)
        return -EMSGSIZE;
    proto_put_bytes(&w, h->bpf, h->bpf_len);
    long n = proto_writer_finish(&w);
    return n < 0 || n > FOP_MSG_MAX ? -EMSGSIZE : (int)n;
}

int
fop_decode_hello(const void *buf, size_t n, unsigned nfds, struct fop_hello *ret)
{
    struct proto_reader r;
    if (nfds != 0 || proto_reader_init(&r, buf, n) != FOP_HELLO)
        return -EBADMSG;
    memset(ret, 0, sizeof(*ret));
    ret->version = proto_get_u32(&r);
    ret->mode = proto_get_u32(&r);
    ret->uid = proto_get_u32(&r);
    ret->gid = proto_get_u32(&r);
    uint32_t as_root = proto_get_u32(&r);
    ret->ids.root_uid = proto_get_u32(&r);
    ret->ids.root_gid = proto_get_u32(&r);
    ret->ids.user_uid = proto_get_u32(&r);
    ret->ids.user_gid = proto_get_u32(&r);
    ret->ids.range_first = proto_get_u32(&r);
    ret->ids.range_len = proto_get_u32(&r);
    ret->caps = proto_get_u64(&r);
    ret->bpf = proto_get_bytes(&r, &ret->bpf_len);
    if (proto_reader_done(&r) < 0 || ret->version != FOP_VERSION || ret->mode > FOP_MODE_UID ||
        as_root > 1 || ret->bpf_len > FOP_BPF_MAX || ret->bpf_len % 8 != 0)
        return -EBADMSG;
    ret->as_root = as_root == 1;
    return 0;
}

/* --- requests --- */

/* The fields each request type carries. */
enum {
    R_A = 1u << 0,     /* path a */
    R_B = 1u << 1,     /* path b */
    R_U = 1u << 2,     /* u32 */
    R_MAX = 1u << 3,   /* u64 */
    R_PRUNE = 1u << 4, /* prune rules */
    R_META = 1u << 5,  /* metadata pairs */
    R_FD = 1u << 6,    /* one descriptor */
    R_ABS = 1u << 7,   /* paths are absolute (vfs), else workspace-relative */
    R_KNOWN = 1u << 8,
    R_B_ABS = 1u << 9, /* b is absolute, a relative (V_COPY_IN) */
    R_FD2 = 1u << 10,  /* two descriptors (with R_FD) */
};

static unsigned
request_layout(enum fop_type t)
{
    switch (t) {
    case FOP_F_STAT:
    case FOP_F_OPEN_READ:
    case FOP_F_UPLOAD_BEGIN:
    case FOP_F_DELETE:
    case FOP_F_MKDIR:
    case FOP_F_RMDIR:
        return R_KNOWN | R_A;
    case FOP_F_UPLOAD_COMMIT:
    case FOP_F_UPLOAD_ABORT:
    case FOP_V_UPLOAD_COMMIT:
    case FOP_V_UPLOAD_ABORT:
        return R_KNOWN | R_U;
    case FOP_F_RENAME:
        return R_KNOWN | R_A | R_B | R_U;
    case FOP_F_WALK:
        return R_KNOWN | R_A | R_U | R_MAX | R_PRUNE;
    case FOP_V_STAT:
    case FOP_V_OPEN_DIR:
    case FOP_V_MKDIR:
    case FOP_V_REMOVE:
    case FOP_V_OPEN_READ:
    case FOP_V_UPLOAD_BEGIN:
        return R_KNOWN | R_ABS | R_A;
    case FOP_V_LIST:
        return R_KNOWN | R_ABS | R_A | R_U;
    case FOP_V_OPEN_BELOW:
        /* a relative name below the directory it carries */
        return R_KNOWN | R_A | R_FD;
    case FOP_V_RENAME:
        return R_KNOWN | R_ABS | R_A | R_B;
    case FOP_V_SET_META:
        return R_KNOWN | R_META | R_FD;
    case FOP_V_STAT_FD:
        return R_KNOWN | R_ABS | R_A | R_FD;
    case FOP_V_COPY_IN:
        return R_KNOWN | R_A | R_B | R_B_ABS | R_FD;
    case FOP_S_COPY_OUT:
        return R_KNOWN | R_MAX | R_FD;
    case FOP_S_COPY_IN:
        return R_KNOWN | R_FD;
    case FOP_V_WATCH_ADD:
        return R_KNOWN | R_U | R_FD | R_FD2;
    default:
        return 0;
    }
}

unsigned
fop_request_fds(enum fop_type t)
{
    unsigned l = request_layout(t);
    return (l & R_FD2) ? 2 : (l & R_FD) ? 1 : 0;
}

enum fop_type
fop_answer_type(enum fop_type request)
{
    switch (request) {
    case FOP_HELLO:
        return FOP_R_OK;
    case FOP_F_STAT:
        return FOP_R_FSTAT;
    case FOP_F_OPEN_READ:
        return FOP_R_FSTAT_FD;
    case FOP_F_UPLOAD_BEGIN:
    case FOP_V_UPLOAD_BEGIN:
        return FOP_R_UPLOAD;
    case FOP_F_UPLOAD_COMMIT:
        return FOP_R_CREATED;
    case FOP_F_MKDIR:
    case FOP_V_MKDIR:
    case FOP_V_UPLOAD_COMMIT:
        return FOP_R_BOOL;
    case FOP_F_WALK:
    case FOP_V_LIST:
        return FOP_R_DONE;
    case FOP_V_STAT:
    case FOP_V_STAT_FD:
        return FOP_R_VENTRY;
    case FOP_V_OPEN_DIR:
    case FOP_V_OPEN_BELOW:
        return FOP_R_FD;
    case FOP_V_OPEN_READ:
        return FOP_R_SIZE_FD;
    case FOP_S_COPY_OUT:
        return FOP_R_SNAPSHOT;
    case FOP_V_WATCH_ADD:
        return FOP_R_WD;
    default:
        return FOP_R_OK;
    }
}

unsigned
fop_answer_fds(enum fop_type t)
{
    return t == FOP_R_FSTAT_FD || t == FOP_R_UPLOAD || t == FOP_R_FD || t == FOP_R_SIZE_FD ? 1 : 0;
}

long
fop_encode_request(void *buf, size_t cap, const struct fop_request *rq)
{
    unsigned l = request_layout(rq->type);
    struct proto_writer w;

    if (!l)
        return -EINVAL;
    /* What the helper would refuse (and end over) is not sent at all. */
    size_t la = rq->a ? strlen(rq->a) : 0, lb = rq->b ? strlen(rq->b) : 0;
    if (((l & R_A) && la > PATH_MAX_LEN) || ((l & R_B) && lb > PATH_MAX_LEN))
        return -ENAMETOOLONG;
    if (((l & R_A) && !((l & R_ABS) ? abs_path_ok(rq->a ? rq->a : "", (uint32_t)la)
                                    : rel_path_ok(rq->a ? rq->a : "", (uint32_t)la))) ||
        ((l & R_B) && !((l & (R_ABS | R_B_ABS)) ? abs_path_ok(rq->b ? rq->b : "", (uint32_t)lb)
                                                : rel_path_ok(rq->b ? rq->b : "", (uint32_t)lb))))
        return -EINVAL;
    if ((rq->type == FOP_F_RENAME || rq->type == FOP_F_WALK) && rq->u > 1)
        return -EINVAL;
    if (rq->type == FOP_V_LIST && rq->u > VFS_MAX_DEPTH)
        return -EINVAL;
    proto_writer_init(&w, buf, cap, rq->type);
    if (l & R_A)
        proto_put_str(&w, rq->a ? rq->a : "");
    if (l & R_B)
        proto_put_str(&w, rq->b ? rq->b : "");
    if (l & R_U)
        proto_put_u32(&w, rq->u);
    if (l & R_MAX)
        proto_put_u64(&w, rq->max);
    if (l & R_PRUNE) {
        if (rq->prune.n > FILES_PRUNE_MAX)
            return -EINVAL;
        proto_put_u32(&w, (uint32_t)rq->prune.n);
        for (size_t i = 0; i < rq->prune.n; i++) {
            proto_put_str(&w, rq->prune.patterns[i] ? rq->prune.patterns[i] : "");
            proto_put_u32(&w, (rq->prune.dir_only[i] ? 1u : 0u) | (rq->prune.glob[i] ? 2u : 0u));
        }
        proto_put_u64(&w, rq->prune.max_file_bytes);
    }
    if (l & R_META) {
        if (rq->meta.n > VFS_META_MAX)
            return -EINVAL;
        proto_put_u32(&w, rq->meta.n);
        for (uint32_t i = 0; i < rq->meta.n; i++) {
            proto_put_str(&w, vfs_meta_key(&rq->meta, i));
            proto_put_str(&w, vfs_meta_value(&rq->meta, i));
        }
    }
    long n = proto_writer_finish(&w);
    return n < 0 || n > FOP_MSG_MAX ? -EMSGSIZE : n;
}

int
fop_decode_request(const void *buf, size_t n, unsigned nfds, struct fop_request *ret)
{
    struct proto_reader r;
    uint32_t la = 0, lb = 0;
    int t = proto_reader_init(&r, buf, n);

    if (t < 0 || n > FOP_MSG_MAX)
        return -EBADMSG;
    unsigned l = request_layout((enum fop_type)t);
    if (!l || nfds != fop_request_fds((enum fop_type)t))
        return -EBADMSG;
    memset(ret, 0, sizeof(*ret));
    ret->type = (enum fop_type)t;
    if (l & R_A)
        ret->a = proto_get_str(&r, &la);
    if (l & R_B)
        ret->b = proto_get_str(&r, &lb);
    if (l & R_U)
        ret->u = proto_get_u32(&r);
    if (l & R_MAX)
        ret->max = proto_get_u64(&r);
    if (l & R_PRUNE) {
        uint32_t np = proto_get_u32(&r);
        if (np > FILES_PRUNE_MAX)
            return -EBADMSG;
        for (uint32_t i = 0; i < np && !r.bad; i++) {
            uint32_t pl;
            ret->prune.patterns[i] = proto_get_str(&r, &pl);
            uint32_t f = proto_get_u32(&r);
            if (pl == 0 || pl > PATH_NAME_MAX || f > 3)
                return -EBADMSG;
            ret->prune.dir_only[i] = f & 1;
            ret->prune.glob[i] = f & 2;
        }
        ret->prune.n = np;
        ret->prune.max_file_bytes = proto_get_u64(&r);
    }
    if (l & R_META) {
        uint32_t nm = proto_get_u32(&r);
        if (nm > VFS_META_MAX)
            return -EBADMSG;
        for (uint32_t i = 0; i < nm && !r.bad; i++) {
            const char *k = proto_get_str(&r, NULL);
            const char *v = proto_get_str(&r, NULL);
            if (!r.bad && vfs_meta_add(&ret->meta, k, v) < 0)
                return -EBADMSG;
        }
    }
    if (proto_reader_done(&r) < 0)
        return -EBADMSG;
    if (l & R_A) {
        if (!((l & R_ABS) ? abs_path_ok(ret->a, la) : rel_path_ok(ret->a, la)))
            return -EBADMSG;
    }
    if ((l & R_B) && !((l & (R_ABS | R_B_ABS)) ? abs_path_ok(ret->b, lb) : rel_path_ok(ret->b, lb)))
        return -EBADMSG;
    if ((ret->type == FOP_F_RENAME || ret->type == FOP_F_WALK) && ret->u > 1)
        return -EBADMSG;
    if (ret->type == FOP_V_LIST && ret->u > VFS_MAX_DEPTH)
        return -EBADMSG;
    if (ret->type == FOP_V_WATCH_ADD && (!ret->u || (ret->u & ~(uint32_t)FOP_WATCH_MASK)))
        return -EBADMSG;
    return 0;
}

/* --- answers --- */

void
fop_answer_init(struct proto_writer *w, void *buf, size_t cap, enum fop_type t)
{
    proto_writer_init(w, buf, cap < FOP_MSG_MAX ? cap : FOP_MSG_MAX, t);
}

void
fop_put_err(struct proto_writer *w, int errnum, const char *msg)
{
    char m[ERR_MSG_MAX];
    size_t n = strnlen(msg ? msg : "", ERR_MSG_MAX - 1);
    memcpy(m, msg ? msg : "", n);
    m[n] = '\0';
    proto_put_u32(w, (uint32_t)errnum);
    proto_put_str(w, m);
}

void
fop_put_fstat(struct proto_writer *w, const struct files_stat *st)
{
    proto_put_u32(w, (uint32_t)st->type);
    proto_put_u64(w, st->size);
    proto_put_u32(w, st->mode);
    proto_put_u64(w, st->mtime_ms);
    proto_put_str(w, st->version);
}

void
fop_put_fentry(struct proto_writer *w, const struct files_entry *e)
{
    proto_put_str(w, e->path);
    fop_put_fstat(w, &e->st);
    proto_put_u32(w, (e->target ? 1u : 0u) | (e->unread ? 2u : 0u) |
                             (e->beyond == ELOOP ? 4u : 0u) |
                             (e->beyond == ENAMETOOLONG ? 8u : 0u));
    if (e->target)
        proto_put_str(w, e->target);
}

void
fop_put_ventry(struct proto_writer *w, const struct vfs_entry *e)
{
    proto_put_str(w, e->name);
    proto_put_str(w, e->path);
    proto_put_u32(w, (uint32_t)e->type);
    proto_put_u64(w, e->size);
    proto_put_u32(w, e->mode);
    proto_put_str(w, e->perms);
    proto_put_str(w, e->owner);
    proto_put_str(w, e->group);
    proto_put_u64(w, (uint64_t)e->mtime_sec);
    proto_put_u32(w, e->mtime_nsec);
    proto_put_u32(w, e->has_target ? 1 : 0);
    proto_put_str(w, e->has_target ? e->target : "");
    uint32_t nm = e->meta.n <= VFS_META_MAX ? e->meta.n : 0;
    proto_put_u32(w, nm);
    for (uint32_t i = 0; i < nm; i++) {
        proto_put_str(w, vfs_meta_key(&e->meta, i));
        proto_put_str(w, vfs_meta_value(&e->meta, i));
    }
}

void
fop_put_snapshot(struct proto_writer *w, const struct snapshot_stats *st)
{
    proto_put_u64(w, st->bytes);
    proto_put_u64(w, st->entries);
    proto_put_u64(w, st->skipped);
}

static int
get_fstat(struct proto_reader *r, struct files_stat *st)
{
    uint32_t vl;
    memset(st, 0, sizeof(*st));
    uint32_t type = proto_get_u32(r);
    st->size = proto_get_u64(r);
    st->mode = proto_get_u32(r);
    st->mtime_ms = proto_get_u64(r);
    const char *v = proto_get_str(r, &vl);
    if (r->bad || type > FILES_OTHER || st->mode > 07777 || !version_ok(v, vl))
        return -EBADMSG;
    st->type = (enum files_type)type;
    memcpy(st->version, v, FILES_VERSION_LEN + 1);
    return 0;
}

int
fop_decode_answer(const void *buf, size_t n, unsigned nfds, struct fop_answer *ret)
{
    uint32_t ml;
    int t = proto_reader_init(&ret->r, buf, n);

    if (t < FOP_R_OK || t >= _FOP_ANSWER_MAX || n > FOP_MSG_MAX ||
        nfds != fop_answer_fds((enum fop_type)t))
        return -EBADMSG;
    ret->type = (enum fop_type)t;
    ret->errnum = 0;
    ret->msg = "";
    ret->u = 0;
    ret->v = 0;
    ret->left = 0;
    struct proto_reader *r = &ret->r;
    switch (ret->type) {
    case FOP_R_OK:
        break;
    case FOP_R_ERR: {
        uint32_t e = proto_get_u32(r);
        ret->msg = proto_get_str(r, &ml);
        if (e == 0 || e > 4095 || ml >= ERR_MSG_MAX)
            return -EBADMSG;
        ret->errnum = (int)e;
        break;
    }
    case FOP_R_FSTAT:
    case FOP_R_FSTAT_FD:
        if (get_fstat(r, &ret->st) < 0)
            return -EBADMSG;
        break;
    case FOP_R_CREATED:
        if (get_fstat(r, &ret->st) < 0)
            return -EBADMSG;
        ret->u = proto_get_u32(r);
        if (ret->u > 1)
            return -EBADMSG;
        break;
    case FOP_R_UPLOAD:
        ret->u = proto_get_u32(r);
        break;
    case FOP_R_BOOL:
        ret->u = proto_get_u32(r);
        if (ret->u > 1)
            return -EBADMSG;
        break;
    case FOP_R_DONE:
    case FOP_R_SIZE_FD:
        ret->v = proto_get_u64(r);
        break;
    case FOP_R_FD:
        break;
    case FOP_R_WD:
        ret->u = proto_get_u32(r);
        if (ret->u == 0 || ret->u > INT32_MAX)
            return -EBADMSG;
        break;
    case FOP_R_SNAPSHOT:
        ret->snap.bytes = proto_get_u64(r);
        ret->snap.entries = proto_get_u64(r);
        ret->snap.skipped = proto_get_u64(r);
        break;
    case FOP_R_FENTRIES:
    case FOP_R_VENTRIES:
        ret->left = ret->u = proto_get_u32(r);
        /* each entry takes more than 16 bytes: a count beyond that is a lie */
        if (r->bad || ret->u > (uint32_t)(n / 16))
            return -EBADMSG;
        return 0; /* entries are checked as they are read */
    case FOP_R_VENTRY:
        ret->left = 1;
        return 0;
    default:
        return -EBADMSG;
    }
    return proto_reader_done(r);
}

int
fop_next_fentry(struct fop_answer *a, struct files_entry *ret)
{
    uint32_t pl, tl = 0;
    if (a->type != FOP_R_FENTRIES)
        return -EBADMSG;
    if (a->left == 0)
        return proto_reader_done(&a->r) < 0 ? -EBADMSG : 0;
    const char *p = proto_get_str(&a->r, &pl);
    if (get_fstat(&a->r, &ret->st) < 0)
        return -EBADMSG;
    uint32_t flags = proto_get_u32(&a->r);
    const char *t = (flags & 1) ? proto_get_str(&a->r, &tl) : NULL;
    /* "/a/b": a workspace path with its leading '/' */
    /* a walk's paths may pass PATH_MAX_LEN by one name (files.h) */
    if (a->r.bad || flags > 15 || (flags & 12) == 12 || pl < 2 || pl > 2 * PATH_MAX_LEN ||
        p[0] != '/' || (t && tl > PATH_MAX_LEN) || (t && ret->st.type != FILES_SYMLINK) ||
        ((flags & 2) && ret->st.type != FILES_DIR) || ((flags & 4) && ret->st.type != FILES_DIR))
        return -EBADMSG;
    a->left--;
    ret->path = (char *)(uintptr_t)p;
    ret->target = (char *)(uintptr_t)t;
    ret->unread = flags & 2;
    ret->beyond = (flags & 4) ? ELOOP : (flags & 8) ? ENAMETOOLONG : 0;
    return 1;
}

static int
get_ventry(struct proto_reader *r, struct vfs_entry *e)
{
    uint32_t nl, pl, perml, ol, gl, tl;
    const char *name = proto_get_str(r, &nl);
    const char *path = proto_get_str(r, &pl);
    uint32_t type = proto_get_u32(r);
    e->size = proto_get_u64(r);
    e->mode = proto_get_u32(r);
    const char *perms = proto_get_str(r, &perml);
    const char *owner = proto_get_str(r, &ol);
    const char *group = proto_get_str(r, &gl);
    e->mtime_sec = (int64_t)proto_get_u64(r);
    e->mtime_nsec = proto_get_u32(r);
    uint32_t has = proto_get_u32(r);
    const char *target = proto_get_str(r, &tl);
    uint32_t nm = proto_get_u32(r);
    if (r->bad || nl == 0 || nl > PATH_NAME_MAX || !abs_path_ok(path, pl) || type > VFS_DIR ||
        e->mode > 0777 || !perms_ok(perms, perml) || !idname_ok(owner, ol) ||
        !idname_ok(group, gl) || e->mtime_nsec >= 1000000000u || has > 1 || tl > PATH_MAX_LEN ||
        (has == 1 && tl == 0) || (has == 0 && tl != 0) || nm > VFS_META_MAX)
        return -EBADMSG;
    memcpy(e->name, name, nl + 1);
    memcpy(e->path, path, pl + 1);
    memcpy(e->perms, perms, perml + 1);
    memcpy(e->owner, owner, ol + 1);
    memcpy(e->group, group, gl + 1);
    memcpy(e->target, target, tl + 1);
    e->type = (enum vfs_type)type;
    e->has_target = has == 1;
    e->meta.n = e->meta.used = 0;
    for (uint32_t i = 0; i < nm; i++) {
        const char *k = proto_get_str(r, NULL);
        const char *v = proto_get_str(r, NULL);
        if (r->bad || vfs_meta_add(&e->meta, k, v) < 0)
            return -EBADMSG;
    }
    return 0;
}

int
fop_next_ventry(struct fop_answer *a, struct vfs_entry *ret)
{
    if (a->type != FOP_R_VENTRIES && a->type != FOP_R_VENTRY)
        return -EBADMSG;
    if (a->left == 0)
        return proto_reader_done(&a->r) < 0 ? -EBADMSG : 0;
    if (get_ventry(&a->r, ret) < 0)
        return -EBADMSG;
    a->left--;
    if (a->type == FOP_R_VENTRY && proto_reader_done(&a->r) < 0)
        return -EBADMSG;
    return 1;
}
