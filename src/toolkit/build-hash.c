/*
 * build-hash.c - the two hashes that decide whether a bundle is rebuilt:
 * the package's content hash (a walk of its regular files in byte order of
 * their paths) and the builder's fingerprint (templates, format version,
 * SDK files).
 *
 * Reads the package and the SDK, writes nothing. A symlink or special file
 * in a package fails the walk, naming it.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "toolkit/build-internal.h"
#include "toolkit/build.h"

/* --- hashing --- */

static void
hex_encode(const unsigned char *d, size_t n, char *out)
{
    static const char x[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = x[d[i] >> 4];
        out[2 * i + 1] = x[d[i] & 15];
    }
    out[2 * n] = '\0';
}

static int
md_put(EVP_MD_CTX *md, const void *p, size_t n)
{
    return EVP_DigestUpdate(md, p, n) == 1 ? 0 : -EIO;
}

/* A length-prefixed field, so that no two sequences of fields hash alike. */
static int
md_field(EVP_MD_CTX *md, const void *p, size_t n)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    int r = md_put(md, len, sizeof(len));
    return r < 0 ? r : md_put(md, p, n);
}

static int
md_new(EVP_MD_CTX **ret)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md)
        return -ENOMEM;
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return -EIO;
    }
    *ret = md;
    return 0;
}

static int
md_final(EVP_MD_CTX *md, char ret_hex[TOOLS_BUILD_HASH_HEX])
{
    unsigned char dg[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    if (EVP_DigestFinal_ex(md, dg, &dl) != 1 || dl != 32)
        return -EIO;
    hex_encode(dg, dl, ret_hex);
    return 0;
}

/* Hashes the length and content of the open regular file fd. */
static int
md_file(EVP_MD_CTX *md, int fd, const char *what, struct err *err)
{
    struct stat st;
    char b[65536];
    uint64_t left;
    unsigned char len[8];
    int r;

    if (fstat(fd, &st) < 0)
        return err_setx(err, errno, "cannot stat '%s'", what);
    if (!S_ISREG(st.st_mode))
        return err_set(err, EINVAL, "'%s' is not a regular file", what);
    left = (uint64_t)st.st_size;
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(left >> (8 * i));
    if ((r = md_put(md, len, sizeof(len))) < 0)
        return r;
    while (left > 0) {
        ssize_t k = read(fd, b, left < sizeof(b) ? left : sizeof(b));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return err_setx(err, errno, "cannot read '%s'", what);
        if (k == 0)
            return err_set(err, EAGAIN, "'%s' changed while it was hashed", what);
        if ((r = md_put(md, b, (size_t)k)) < 0)
            return r;
        left -= (uint64_t)k;
    }
    return 0;
}

struct src_entry {
    char *path;
    bool exec;
};

struct src_list {
    struct src_entry *v;
    size_t n, cap;
};

static void
src_list_done(struct src_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
}

bool
build_skipped_name(const char *name)
{
    return name[0] == '.' || !strcmp(name, "__pycache__");
}

/* Collects the regular files below dfd (at prefix) into l. */
static int
walk_source(int dfd, const char *prefix, int depth, struct src_list *l, struct err *err)
{
    _cleanup_(closedirp) DIR *d = NULL;
    struct dirent *de;
    int r;

    if (depth > BUILD_TREE_DEPTH_MAX)
        return err_set(err, ELOOP, "'%s' is more than %d directories deep", prefix,
                       BUILD_TREE_DEPTH_MAX);
    int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return err_setx(err, errno, "cannot read the package");
    d = fdopendir(fd);
    if (!d) {
        (void)safe_close(fd);
        return err_setx(err, errno, "cannot read the package");
    }
    rewinddir(d);
    while ((errno = 0, de = readdir(d))) {
        char rel[PATH_MAX];
        struct stat st;

        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || build_skipped_name(de->d_name))
            continue;
        if (snprintf(rel, sizeof(rel), "%s%s%s", prefix, *prefix ? "/" : "", de->d_name) >=
            (int)sizeof(rel))
            return err_set(err, ENAMETOOLONG, "a path in the package is too long");
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return err_setx(err, errno, "cannot stat '%s'", rel);
        if (S_ISLNK(st.st_mode))
            return err_set(err, ELOOP,
                           "'%.200s' is a symlink; a package holds regular files and "
                           "directories only",
                           rel);
        if (S_ISDIR(st.st_mode)) {
            _cleanup_close_ int sub =
                    openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0)
                return err_setx(err, errno, "cannot open '%s'", rel);
            if ((r = walk_source(sub, rel, depth + 1, l, err)) < 0)
                return r;
            continue;
        }
        if (!S_ISREG(st.st_mode))
            return err_set(err, EINVAL, "'%.200s' is not a regular file or directory", rel);
        if (l->n >= TOOLS_BUILD_FILES_MAX)
            return err_set(err, EFBIG, "the package has more than %d files", TOOLS_BUILD_FILES_MAX);
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 64;
            struct src_entry *v = realloc(l->v, cap * sizeof(*v));
            if (!v)
                return -ENOMEM;
            l->v = v;
            l->cap = cap;
        }
        l->v[l->n].path = strdup(rel);
        if (!l->v[l->n].path)
            return -ENOMEM;
        l->v[l->n].exec = (st.st_mode & 0111) != 0;
        l->n++;
    }
    if (errno)
        return err_setx(err, errno, "cannot read the package");
    return 0;
}

static int
cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct src_entry *)a)->path, ((const struct src_entry *)b)->path);
}

int
tools_build_source_hash(int dirfd, char ret_hex[TOOLS_BUILD_HASH_HEX], struct err *err)
{
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = NULL;
    struct src_list l = {0};
    int r;

    r = walk_source(dirfd, "", 0, &l, err);
    if (r < 0)
        goto out;
    qsort(l.v, l.n, sizeof(*l.v), cmp_entry);
    if ((r = md_new(&md)) < 0)
        goto out;
    r = md_field(md, "abx-tool-source-1", 17);
    for (size_t i = 0; r >= 0 && i < l.n; i++) {
        _cleanup_close_ int fd = openat(dirfd, l.v[i].path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            r = err_setx(err, errno, "cannot open '%s'", l.v[i].path);
            break;
        }
        if ((r = md_field(md, l.v[i].path, strlen(l.v[i].path))) < 0 ||
            (r = md_field(md, l.v[i].exec ? "x" : "-", 1)) < 0)
            break;
        r = md_file(md, fd, l.v[i].path, err);
    }
    if (r >= 0)
        r = md_final(md, ret_hex);
out:
    src_list_done(&l);
    return r;
}

/* --- the SDK and the fingerprint --- */

#ifndef ABX_TOOLS_SDK_INCLUDE
#define ABX_TOOLS_SDK_INCLUDE "include"
#endif
#ifndef ABX_TOOLS_SDK_LIB
#define ABX_TOOLS_SDK_LIB "build/src/tools/libabxtool.a"
#endif
#ifndef ABX_TOOLS_SDK_PYTHON
#define ABX_TOOLS_SDK_PYTHON "sdk/python"
#endif

const char *
build_env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

void
tools_build_sdk_default(struct tools_build_sdk *ret)
{
    ret->include_dir = build_env_or("ABX_TOOLS_SDK_INCLUDE", ABX_TOOLS_SDK_INCLUDE);
    ret->lib = build_env_or("ABX_TOOLS_SDK_LIB", ABX_TOOLS_SDK_LIB);
    ret->python_dir = build_env_or("ABX_TOOLS_SDK_PYTHON", ABX_TOOLS_SDK_PYTHON);
}

static int
md_sdk_file(EVP_MD_CTX *md, const char *label, const char *dir, const char *file, struct err *err)
{
    char path[PATH_MAX];
    int r;

    if (snprintf(path, sizeof(path), "%s%s%s", dir, file ? "/" : "", file ? file : "") >=
        (int)sizeof(path))
        return err_set(err, ENAMETOOLONG, "SDK path too long");
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_setx(err, errno,
                        "cannot open the tool SDK's %s at '%s' (build abx first, or set "
                        "ABX_TOOLS_SDK_*)",
                        label, path);
    if ((r = md_field(md, label, strlen(label))) < 0)
        return r;
    return md_file(md, fd, path, err);
}

int
tools_build_fingerprint(const struct tools_build_templates *t, const struct tools_build_sdk *sdk,
                        char ret_hex[TOOLS_BUILD_HASH_HEX], struct err *err)
{
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = NULL;
    char fmt[32];
    int r;

    (void)snprintf(fmt, sizeof(fmt), "format=%d", TOOLS_BUILD_FORMAT);
    if ((r = md_new(&md)) < 0)
        return r;
    if ((r = md_field(md, "abx-tool-builder", 16)) < 0 ||
        (r = md_field(md, fmt, strlen(fmt))) < 0 ||
        (r = md_field(md, t->exec, strlen(t->exec))) < 0 ||
        (r = md_field(md, t->python, strlen(t->python))) < 0 ||
        (r = md_field(md, t->carrier, strlen(t->carrier))) < 0)
        return r;
    if ((r = md_sdk_file(md, "abx/tool.h", sdk->include_dir, "abx/tool.h", err)) < 0 ||
        (r = md_sdk_file(md, "libabxtool.a", sdk->lib, NULL, err)) < 0 ||
        (r = md_sdk_file(md, "abx_tool.py", sdk->python_dir, "abx_tool.py", err)) < 0)
        return r;
    return md_final(md, ret_hex);
}
