/*
 * tar.c - a push parser for tar streams, a safe extractor and a writer.
 *
 * Formats: docs/templates.md "Building" names what is accepted. The reader
 * keeps one header block, at most one pending long name, long link and pax
 * header (each bounded), and never more: content goes straight to the
 * caller in the pieces it arrived in.
 */
#include "util/tar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/path.h"

enum rstate { R_HEADER, R_DATA, R_META, R_PAD, R_END };
enum meta_kind { M_LONGNAME, M_LONGLINK, M_PAX, M_SKIP };

struct tar_reader {
    const struct tar_reader_ops *ops;
    void *ud;
    enum rstate st;
    unsigned char hdr[TAR_BLOCK];
    size_t hdr_len;
    uint64_t remaining, pad;
    bool deliver; /* R_DATA: hand content to ops->data */
    enum meta_kind meta;
    struct buf metabuf;
    int zeros;                                     /* consecutive zero blocks */
    char *longname, *longlink, *paxpath, *paxlink; /* pending for the next entry */
    char name[TAR_NAME_MAX + 1], link[TAR_NAME_MAX + 1];
    uint64_t entries;
    bool bad;
};

int
tar_reader_new(const struct tar_reader_ops *ops, void *ud, struct tar_reader **ret)
{
    struct tar_reader *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->ops = ops;
    t->ud = ud;
    buf_init(&t->metabuf, TAR_PAX_MAX);
    *ret = t;
    return 0;
}

static void
clear_pending(struct tar_reader *t)
{
    free(t->longname);
    free(t->longlink);
    free(t->paxpath);
    free(t->paxlink);
    t->longname = t->longlink = t->paxpath = t->paxlink = NULL;
}

struct tar_reader *
tar_reader_free(struct tar_reader *t)
{
    if (!t)
        return NULL;
    clear_pending(t);
    buf_done(&t->metabuf);
    free(t);
    return NULL;
}

uint64_t
tar_reader_entries(const struct tar_reader *t)
{
    return t->entries;
}

static int
bad(struct tar_reader *t, struct err *err, const char *what)
{
    t->bad = true;
    return err_set(err, EBADMSG, "malformed tar stream: %s (entry %llu)", what,
                   (unsigned long long)t->entries + 1);
}

/* An octal field: digits, optionally led by spaces and ended by NUL or space. */
static int
octal(const unsigned char *f, size_t n, uint64_t *ret)
{
    size_t i = 0;
    uint64_t v = 0;
    bool any = false;

    while (i < n && f[i] == ' ')
        i++;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 60)
            return -EBADMSG;
        v = v * 8 + (uint64_t)(f[i] - '0');
        any = true;
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return -EBADMSG;
    if (!any)
        return -EBADMSG;
    *ret = v;
    return 0;
}

/* Parses the pax records in metabuf: "LEN key=value\n" each. */
static int
parse_pax(struct tar_reader *t, struct err *err)
{
    const char *p = t->metabuf.data, *end = p + t->metabuf.len;

    while (p < end) {
        uint64_t len = 0;
        const char *q = p;
        while (q < end && *q >= '0' && *q <= '9' && q - p < 8)
            len = len * 10 + (uint64_t)(*q++ - '0');
        if (q == p || q >= end || *q != ' ' || len < (uint64_t)(q - p) + 4 ||
            len > (uint64_t)(end - p) || p[len - 1] != '\n')
            return bad(t, err, "bad pax record");
        const char *kv = q + 1, *rec_end = p + len - 1;
        const char *eq = memchr(kv, '=', (size_t)(rec_end - kv));
        if (!eq)
            return bad(t, err, "pax record without '='");
        size_t kl = (size_t)(eq - kv), vl = (size_t)(rec_end - eq - 1);
        char **slot = NULL;
        if (kl == 4 && !memcmp(kv, "path", 4))
            slot = &t->paxpath;
        else if (kl == 8 && !memcmp(kv, "linkpath", 8))
            slot = &t->paxlink;
        if (slot) {
            if (vl == 0 || vl > TAR_NAME_MAX || memchr(eq + 1, '\0', vl))
                return bad(t, err, "bad pax path");
            free(*slot);
            if (!(*slot = strndup(eq + 1, vl)))
                return -ENOMEM;
        }
        p += len;
    }
    return 0;
}

static int
finish_meta(struct tar_reader *t, struct err *err)
{
    char **slot = NULL;
    switch (t->meta) {
    case M_LONGNAME:
        slot = &t->longname;
        break;
    case M_LONGLINK:
        slot = &t->longlink;
        break;
    case M_PAX:
        return parse_pax(t, err);
    case M_SKIP:
        return 0;
    }
    size_t l = strnlen(t->metabuf.data, t->metabuf.len);
    if (l == 0 || l > TAR_NAME_MAX)
        return bad(t, err, "bad GNU long name");
    free(*slot);
    if (!(*slot = strndup(t->metabuf.data, l)))
        return -ENOMEM;
    return 0;
}

static bool
all_zero(const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

static int
header(struct tar_reader *t, struct err *err)
{
    const unsigned char *h = t->hdr;
    uint64_t sum = 0, want, size, mode;
    int r;

    if (all_zero(h, TAR_BLOCK)) {
        if (++t->zeros == 2)
            t->st = R_END;
        return 0;
    }
    if (t->zeros)
        return bad(t, err, "a lone zero block");
    for (size_t i = 0; i < TAR_BLOCK; i++)
        sum += (i >= 148 && i < 156) ? ' ' : h[i];
    if (octal(h + 148, 8, &want) < 0 || want != sum)
        return bad(t, err, "header checksum mismatch");
    if (octal(h + 124, 12, &size) < 0)
        return bad(t, err, "bad size field");
    if (octal(h + 100, 8, &mode) < 0)
        mode = 0644;
    char type = (char)h[156];
    t->pad = (TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK;

    if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
        if (size > TAR_PAX_MAX)
            return bad(t, err, "extended header too large");
        t->meta = type == 'L'   ? M_LONGNAME
                  : type == 'K' ? M_LONGLINK
                  : type == 'x' ? M_PAX
                                : M_SKIP;
        buf_reset(&t->metabuf);
        t->remaining = size;
        t->st = R_META;
        if (size == 0) {
            t->st = R_HEADER;
            return finish_meta(t, err);
        }
        return 0;
    }

    /* name: pax path, GNU long name, or ustar prefix + name */
    if (t->paxpath || t->longname) {
        const char *n = t->paxpath ? t->paxpath : t->longname;
        memcpy(t->name, n, strlen(n) + 1);
    } else {
        size_t nl = strnlen((const char *)h, 100);
        size_t pl = 0;
        if (!memcmp(h + 257, "ustar\0", 6))
            pl = strnlen((const char *)h + 345, 155);
        size_t o = 0;
        if (pl) {
            memcpy(t->name, h + 345, pl);
            t->name[pl] = '/';
            o = pl + 1;
        }
        memcpy(t->name + o, h, nl);
        t->name[o + nl] = '\0';
    }
    if (t->paxlink || t->longlink) {
        const char *n = t->paxlink ? t->paxlink : t->longlink;
        memcpy(t->link, n, strlen(n) + 1);
    } else {
        size_t ll = strnlen((const char *)h + 157, 100);
        memcpy(t->link, h + 157, ll);
        t->link[ll] = '\0';
    }
    clear_pending(t);
    if (!t->name[0])
        return bad(t, err, "empty name");

    struct tar_entry e = {.name = t->name, .link = "", .mode = (uint32_t)(mode & 07777)};
    switch (type) {
    case '0':
    case '\0':
    case '7':
        e.type = TAR_FILE;
        e.size = size;
        break;
    case '5':
        e.type = TAR_DIR;
        break;
    case '2':
        e.type = TAR_SYMLINK;
        e.link = t->link;
        break;
    case '1':
        e.type = TAR_HARDLINK;
        e.link = t->link;
        break;
    default:
        e.type = TAR_OTHER;
        break;
    }
    t->entries++;
    r = t->ops && t->ops->entry ? t->ops->entry(t->ud, &e) : 0;
    if (r < 0) {
        t->bad = true;
        return r;
    }
    t->remaining = size;
    t->deliver = e.type == TAR_FILE;
    t->st = size ? R_DATA : R_HEADER;
    if (!size)
        t->pad = 0;
    return 0;
}

int
tar_reader_feed(struct tar_reader *t, const void *data, size_t n, struct err *err)
{
    const unsigned char *p = data;
    int r;

    if (t->bad)
        return -EBADMSG;
    while (n > 0) {
        size_t k;
        switch (t->st) {
        case R_HEADER:
            k = TAR_BLOCK - t->hdr_len < n ? TAR_BLOCK - t->hdr_len : n;
            memcpy(t->hdr + t->hdr_len, p, k);
            t->hdr_len += k;
            p += k;
            n -= k;
            if (t->hdr_len == TAR_BLOCK) {
                t->hdr_len = 0;
                if ((r = header(t, err)) < 0)
                    return r;
            }
            break;
        case R_DATA:
        case R_META:
            k = t->remaining < n ? (size_t)t->remaining : n;
            if (t->st == R_DATA && t->deliver && t->ops && t->ops->data &&
                (r = t->ops->data(t->ud, p, k)) < 0) {
                t->bad = true;
                return r;
            }
            if (t->st == R_META && t->meta != M_SKIP && (r = buf_put(&t->metabuf, p, k)) < 0) {
                t->bad = true;
                return r;
            }
            p += k;
            n -= k;
            t->remaining -= k;
            if (t->remaining == 0) {
                if (t->st == R_META && (r = finish_meta(t, err)) < 0)
                    return r;
                t->st = t->pad ? R_PAD : R_HEADER;
            }
            break;
        case R_PAD:
            k = t->pad < n ? (size_t)t->pad : n;
            p += k;
            n -= k;
            t->pad -= k;
            if (t->pad == 0)
                t->st = R_HEADER;
            break;
        case R_END:
            if (!all_zero(p, n))
                return bad(t, err, "data after the end of the archive");
            n = 0;
            break;
        }
    }
    return 0;
}

int
tar_reader_finish(struct tar_reader *t, struct err *err)
{
    if (t->bad)
        return -EBADMSG;
    if (t->st == R_END || (t->st == R_HEADER && t->hdr_len == 0 && !t->longname && !t->longlink &&
                           !t->paxpath && !t->paxlink))
        return 0;
    return bad(t, err, "the stream ends inside an entry");
}

/* --- names --- */

int
tar_clean_name(const char *name, char *out, size_t outsz)
{
    size_t o = 0;
    const char *p = name;

    if (*p == '/')
        return -EPERM;
    while (*p) {
        const char *s = strchr(p, '/');
        size_t l = s ? (size_t)(s - p) : strlen(p);
        if (l == 2 && p[0] == '.' && p[1] == '.')
            return -EPERM;
        if (l > 255)
            return -ENAMETOOLONG;
        if (l > 0 && !(l == 1 && p[0] == '.')) {
            if (o + l + 2 > outsz)
                return -ENAMETOOLONG;
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, l);
            o += l;
        }
        p += l;
        while (*p == '/')
            p++;
    }
    if (o == 0)
        return -EINVAL; /* "." or "./": the root itself */
    out[o] = '\0';
    return 0;
}

/* Whether symlink target, placed at clean name, stays inside the tree. */
static bool
link_inside(const char *name, const char *target)
{
    int depth = 0;
    for (const char *p = name; *p; p++)
        if (*p == '/')
            depth++;
    if (!*target || *target == '/')
        return false;
    const char *p = target;
    while (*p) {
        const char *s = strchr(p, '/');
        size_t l = s ? (size_t)(s - p) : strlen(p);
        if (l == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return false;
        } else if (l > 0 && !(l == 1 && p[0] == '.')) {
            depth++;
        }
        p += l;
        while (*p == '/')
            p++;
    }
    return true;
}

/* --- extractor --- */

struct tar_extract {
    int dirfd;
    uint64_t max_bytes, max_entries, bytes;
    struct tar_reader *r;
    int fd; /* the file being written, or -EBADF */
    struct err *err;
    char clean[TAR_NAME_MAX + 1];
};

/* Opens (creating, 0755 less the umask) the parent directories of clean
 * name rel below root through the resolver, never through a symlink - not
 * even one the archive itself made inside - nor a file: -EPERM for those.
 * Returns an O_PATH fd of the parent; name gets the last component. */
static int
open_parent(int root, const char *rel, char name[PATH_NAME_MAX + 1])
{
    char parent[TAR_NAME_MAX + 1];
    const struct path_mkdir m = {.mode = 0755, .uid = (uid_t)-1, .gid = (gid_t)-1};
    int r = path_parent(rel, parent, sizeof(parent), name);
    if (r < 0)
        return r;
    int fd = path_mkdirat(root, parent, PATH_BENEATH | PATH_NO_SYMLINKS | PATH_FALLBACK, &m, NULL);
    return fd == -ELOOP || fd == -ENOTDIR || fd == -EXDEV ? -EPERM : fd;
}

static int
x_entry(void *ud, const struct tar_entry *e)
{
    struct tar_extract *x = ud;
    char base[PATH_NAME_MAX + 1];
    int r;

    safe_close(x->fd);
    x->fd = -EBADF;
    if (tar_reader_entries(x->r) > x->max_entries)
        return err_set(x->err, E2BIG, "the archive has more than %llu entries",
                       (unsigned long long)x->max_entries);
    r = tar_clean_name(e->name, x->clean, sizeof(x->clean));
    if (r == -EINVAL && e->type == TAR_DIR)
        return 0; /* "./" */
    if (r < 0)
        return err_set(x->err, EPERM, "'%.200s': %s", e->name,
                       r == -EPERM ? "absolute names and '..' are refused" : "bad name");
    switch (e->type) {
    case TAR_HARDLINK:
        return err_set(x->err, EPERM, "'%.200s': hard links are refused", e->name);
    case TAR_OTHER:
        return err_set(x->err, EPERM, "'%.200s': only files, directories and symlinks are taken",
                       e->name);
    case TAR_SYMLINK:
        if (!link_inside(x->clean, e->link))
            return err_set(x->err, EPERM, "'%.200s': the symlink points outside the directory",
                           e->name);
        break;
    default:
        break;
    }
    if (e->type == TAR_FILE && (x->bytes += e->size) > x->max_bytes)
        return err_set(x->err, EFBIG, "the archive holds more than %llu bytes",
                       (unsigned long long)x->max_bytes);
    _cleanup_close_ int pfd = open_parent(x->dirfd, x->clean, base);
    if (pfd < 0)
        return err_set(x->err, -pfd == EPERM ? EPERM : -pfd, "'%.200s': %s", e->name,
                       pfd == -EPERM ? "its path goes through a symlink or a file"
                                     : strerror(-pfd));
    /* O_PATH parents cannot be used with mkdirat etc. on old kernels: reopen */
    _cleanup_close_ int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return err_set(x->err, errno, "'%.200s': cannot open its directory", e->name);
    switch (e->type) {
    case TAR_DIR:
        if (mkdirat(dfd, base, 0755) < 0) {
            struct stat st;
            if (errno != EEXIST || fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                !S_ISDIR(st.st_mode))
                return err_set(x->err, errno == EEXIST ? EPERM : errno,
                               "'%.200s': cannot create the directory", e->name);
        }
        return 0;
    case TAR_SYMLINK:
        if (symlinkat(e->link, dfd, base) < 0)
            return err_set(x->err, errno == EEXIST ? EPERM : errno,
                           "'%.200s': cannot create the symlink%s", e->name,
                           errno == EEXIST ? " (a duplicate entry)" : "");
        return 0;
    default:
        x->fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       (e->mode & 0100) ? 0755 : 0644);
        if (x->fd < 0)
            return err_set(x->err, errno == EEXIST ? EPERM : errno,
                           "'%.200s': cannot create the file%s", e->name,
                           errno == EEXIST ? " (a duplicate entry)" : "");
        return 0;
    }
}

static int
x_data(void *ud, const void *p, size_t n)
{
    struct tar_extract *x = ud;
    if (x->fd < 0)
        return 0;
    int r = write_full(x->fd, p, n);
    if (r < 0)
        return err_set(x->err, -r, "'%.200s': cannot write", x->clean);
    return 0;
}

static const struct tar_reader_ops x_ops = {.entry = x_entry, .data = x_data};

int
tar_extract_new(int dirfd, uint64_t max_bytes, uint64_t max_entries, struct tar_extract **ret)
{
    struct tar_extract *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->dirfd = dirfd;
    x->fd = -EBADF;
    x->max_bytes = max_bytes;
    x->max_entries = max_entries;
    if (tar_reader_new(&x_ops, x, &x->r) < 0) {
        free(x);
        return -ENOMEM;
    }
    *ret = x;
    return 0;
}

struct tar_extract *
tar_extract_free(struct tar_extract *x)
{
    if (!x)
        return NULL;
    safe_close(x->fd);
    tar_reader_free(x->r);
    free(x);
    return NULL;
}

int
tar_extract_feed(struct tar_extract *x, const void *p, size_t n, struct err *err)
{
    x->err = err;
    return tar_reader_feed(x->r, p, n, err);
}

int
tar_extract_finish(struct tar_extract *x, struct err *err)
{
    x->err = err;
    int r = tar_reader_finish(x->r, err);
    safe_close(x->fd);
    x->fd = -EBADF;
    return r;
}

/* --- writer --- */

static void
put_octal(unsigned char *f, size_t n, uint64_t v)
{
    f[n - 1] = '\0';
    for (size_t i = n - 1; i-- > 0;) {
        f[i] = (unsigned char)('0' + (v & 7));
        v >>= 3;
    }
}

static int
emit_header(tar_write_fn w, void *ud, const char *name, char type, uint32_t mode, uint64_t size,
            const char *link)
{
    unsigned char h[TAR_BLOCK];
    size_t nl = strlen(name);
    int r;

    if (nl > 100) {
        /* a GNU long-name record first */
        r = emit_header(w, ud, "././@LongLink", 'L', 0, nl + 1, "");
        if (r < 0)
            return r;
        size_t padded = (nl + 1 + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        _cleanup_free_ unsigned char *b = calloc(1, padded);
        if (!b)
            return -ENOMEM;
        memcpy(b, name, nl);
        if ((r = w(ud, b, padded)) < 0)
            return r;
    }
    memset(h, 0, sizeof(h));
    memcpy(h, name, nl > 100 ? 100 : nl);
    put_octal(h + 100, 8, mode);
    put_octal(h + 108, 8, 0);
    put_octal(h + 116, 8, 0);
    put_octal(h + 124, 12, size);
    put_octal(h + 136, 12, 0);
    h[156] = (unsigned char)type;
    memcpy(h + 157, link, strlen(link));
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    memset(h + 148, ' ', 8);
    uint64_t sum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++)
        sum += h[i];
    put_octal(h + 148, 7, sum);
    h[155] = ' ';
    return w(ud, h, sizeof(h));
}

static int
write_tree(int dfd, const char *prefix, tar_write_fn w, void *ud, uint64_t max, uint64_t *total,
           int depth, struct err *err)
{
    char **names = NULL;
    size_t n = 0;
    int r;

    if (depth > 64)
        return err_set(err, ELOOP, "'%s': directories nested too deep", prefix);
    if ((r = fd_dir_names(dfd, SIZE_MAX, &names, &n)) < 0)
        return err_set(err, -r, "cannot list '%s'", prefix[0] ? prefix : ".");
    for (size_t i = 0; r == 0 && i < n; i++) {
        char path[TAR_NAME_MAX + 1], link[TAR_NAME_MAX + 1];
        struct stat st;
        int k = snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "/" : "", names[i]);
        if (k < 0 || (size_t)k >= sizeof(path)) {
            r = err_set(err, ENAMETOOLONG, "'%s/%s': path too long", prefix, names[i]);
            break;
        }
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = err_set(err, errno, "cannot stat '%s'", path);
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            char dn[TAR_NAME_MAX + 2];
            (void)snprintf(dn, sizeof(dn), "%s/", path);
            if ((r = emit_header(w, ud, dn, '5', 0755, 0, "")) < 0)
                break;
            int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0) {
                r = err_set(err, errno, "cannot open '%s'", path);
                break;
            }
            r = write_tree(cfd, path, w, ud, max, total, depth + 1, err);
            close(cfd);
        } else if (S_ISLNK(st.st_mode)) {
            ssize_t l = readlinkat(dfd, names[i], link, sizeof(link) - 1);
            if (l < 0 || l > 100) {
                r = err_set(err, l < 0 ? errno : ENAMETOOLONG, "cannot read the symlink '%s'",
                            path);
                break;
            }
            link[l] = '\0';
            r = emit_header(w, ud, path, '2', 0777, 0, link);
        } else if (S_ISREG(st.st_mode)) {
            if ((*total += (uint64_t)st.st_size) > max) {
                r = err_set(err, EFBIG, "the directory holds more than %llu bytes",
                            (unsigned long long)max);
                break;
            }
            int ffd = openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (ffd < 0) {
                r = err_set(err, errno, "cannot open '%s'", path);
                break;
            }
            uint64_t size = (uint64_t)st.st_size, done = 0;
            r = emit_header(w, ud, path, '0', (st.st_mode & 0100) ? 0755 : 0644, size, "");
            char b[65536];
            while (r == 0 && done < size) {
                ssize_t m =
                        read(ffd, b, size - done < sizeof(b) ? (size_t)(size - done) : sizeof(b));
                if (m <= 0) {
                    r = err_set(err, m < 0 ? errno : EIO, "'%s' changed while being read", path);
                    break;
                }
                r = w(ud, b, (size_t)m);
                done += (uint64_t)m;
            }
            close(ffd);
            if (r == 0 && size % TAR_BLOCK) {
                memset(b, 0, TAR_BLOCK);
                r = w(ud, b, TAR_BLOCK - size % TAR_BLOCK);
            }
        } else {
            r = err_set(err, EPERM, "'%s' is not a file, directory or symlink", path);
        }
    }
    fd_names_free(names, n);
    return r;
}

int
tar_write_dir(int dirfd, tar_write_fn w, void *ud, uint64_t max_bytes, struct err *err)
{
    uint64_t total = 0;
    int r = write_tree(dirfd, "", w, ud, max_bytes, &total, 0, err);
    if (r < 0)
        return r;
    unsigned char z[TAR_BLOCK * 2];
    memset(z, 0, sizeof(z));
    return w(ud, z, sizeof(z));
}
