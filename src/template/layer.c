/*
 * layer.c - digests, id shifting and stacks of built template layers.
 */
#include "template/layer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"

#define DEPTH_MAX 64

struct walk {
    EVP_MD_CTX *md;
    size_t files;
    struct err *err;
};

static int
digest_tree(struct walk *w, int dfd, const char *prefix, int depth)
{
    char **names = NULL;
    size_t n = 0;
    int r;

    if (depth > DEPTH_MAX)
        return err_set(w->err, ELOOP, "'%s': nested too deep", prefix);
    if ((r = fd_dir_names(dfd, SIZE_MAX, &names, &n)) < 0)
        return err_set(w->err, -r, "cannot list '%s'", prefix[0] ? prefix : ".");
    for (size_t i = 0; r == 0 && i < n; i++) {
        char path[8192], b[65536];
        struct stat st;
        if (++w->files > LAYER_FILES_MAX) {
            r = err_set(w->err, E2BIG, "more than %d files", LAYER_FILES_MAX);
            break;
        }
        (void)snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "/" : "", names[i]);
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = err_set(w->err, errno, "cannot stat '%s'", path);
            break;
        }
        char type = S_ISDIR(st.st_mode)   ? 'd'
                    : S_ISLNK(st.st_mode) ? 'l'
                    : S_ISREG(st.st_mode) ? 'f'
                                          : '?';
        char x = (st.st_mode & 0100) && type == 'f' ? 'x' : '-';
        (void)EVP_DigestUpdate(w->md, path, strlen(path) + 1);
        (void)EVP_DigestUpdate(w->md, &type, 1);
        (void)EVP_DigestUpdate(w->md, &x, 1);
        if (type == 'd') {
            int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0) {
                r = err_set(w->err, errno, "cannot open '%s'", path);
                break;
            }
            r = digest_tree(w, cfd, path, depth + 1);
            close(cfd);
        } else if (type == 'l') {
            ssize_t l = readlinkat(dfd, names[i], b, sizeof(b));
            if (l < 0) {
                r = err_set(w->err, errno, "cannot read '%s'", path);
                break;
            }
            uint64_t len = (uint64_t)l;
            (void)EVP_DigestUpdate(w->md, &len, sizeof(len));
            (void)EVP_DigestUpdate(w->md, b, (size_t)l);
        } else if (type == 'f') {
            int fd = openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) {
                r = err_set(w->err, errno, "cannot open '%s'", path);
                break;
            }
            uint64_t len = (uint64_t)st.st_size;
            (void)EVP_DigestUpdate(w->md, &len, sizeof(len));
            ssize_t k;
            while ((k = read(fd, b, sizeof(b))) > 0)
                (void)EVP_DigestUpdate(w->md, b, (size_t)k);
            if (k < 0)
                r = err_set(w->err, errno, "cannot read '%s'", path);
            close(fd);
        }
    }
    fd_names_free(names, n);
    return r;
}

int
layer_digest(int dirfd, char ret[LAYER_DIGEST_LEN + 1], struct err *err)
{
    struct walk w = {.err = err};
    unsigned char h[32];
    unsigned int hl = 0;

    if (!(w.md = EVP_MD_CTX_new()))
        return -ENOMEM;
    int r = EVP_DigestInit_ex(w.md, EVP_sha256(), NULL) == 1 ? 0 : -ENOMEM;
    if (r == 0)
        r = digest_tree(&w, dirfd, "", 0);
    if (r == 0 && EVP_DigestFinal_ex(w.md, h, &hl) != 1)
        r = -EIO;
    EVP_MD_CTX_free(w.md);
    if (r < 0)
        return r;
    for (unsigned i = 0; i < 32; i++)
        (void)snprintf(ret + 2 * i, 3, "%02x", h[i]);
    return 0;
}

int
layer_read_stack(const char *layer_dir, size_t max, char ***ret, struct err *err)
{
    _cleanup_(buf_donep) struct buf b = {0};
    char path[4200];
    char **v = calloc(max + 1, sizeof(*v));
    size_t n = 0;
    int r = 0;

    if (!v)
        return -ENOMEM;
    buf_init(&b, 1 << 20);
    (void)snprintf(path, sizeof(path), "%s/fs", layer_dir);
    if (!(v[n++] = strdup(path))) {
        r = -ENOMEM;
        goto fail;
    }
    r = read_file_at(AT_FDCWD, (snprintf(path, sizeof(path), "%s/lowers", layer_dir), path),
                     1 << 20, &b);
    if (r < 0) {
        r = err_set(err, -r, "cannot read '%s'", path);
        goto fail;
    }
    for (char *p = b.data, *e; p && *p; p = e ? e + 1 : NULL) {
        e = strchr(p, '\n');
        if (e)
            *e = '\0';
        if (!*p)
            continue;
        if (*p != '/' || n == max) {
            r = err_set(err, EINVAL, "'%s': bad or too many lower layers", path);
            goto fail;
        }
        if (!(v[n++] = strdup(p))) {
            r = -ENOMEM;
            goto fail;
        }
    }
    *ret = v;
    return (int)n;
fail:
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
    return r;
}
