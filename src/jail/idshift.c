/*
 * idshift.c - shifting a tree's owners (idshift.h).
 */
#include "jail/idshift.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fd.h"

static int
shift_tree(int dfd, uid_t first, int depth, struct err *err)
{
    char **names = NULL;
    size_t n = 0;
    int r;

    if (depth > 256)
        return err_set(err, ELOOP, "layer nested too deep");
    if ((r = fd_dir_names(dfd, SIZE_MAX, &names, &n)) < 0)
        return err_set(err, -r, "cannot list a layer directory");
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct stat st;
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = err_set(err, errno, "cannot stat '%s' in the layer", names[i]);
            break;
        }
        uid_t u = st.st_uid >= first && st.st_uid - first < 65536 ? st.st_uid - first
                  : st.st_uid == 0                                ? 0
                                                                  : 65534;
        gid_t g = st.st_gid >= first && st.st_gid - first < 65536 ? st.st_gid - first
                  : st.st_gid == 0                                ? 0
                                                                  : 65534;
        if (fchownat(dfd, names[i], u, g, AT_SYMLINK_NOFOLLOW) < 0) {
            r = err_set(err, errno, "cannot chown '%s' in the layer", names[i]);
            break;
        }
        if (!S_ISLNK(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)) && !S_ISDIR(st.st_mode) &&
            fchmodat(dfd, names[i], st.st_mode & 01777, 0) < 0) {
            r = err_set(err, errno, "cannot chmod '%s' in the layer", names[i]);
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0) {
                r = err_set(err, errno, "cannot open '%s' in the layer", names[i]);
                break;
            }
            r = shift_tree(cfd, first, depth + 1, err);
            close(cfd);
        }
    }
    fd_names_free(names, n);
    return r;
}

int
idshift_tree(int dirfd, uid_t first, struct err *err)
{
    struct stat st;
    if (fstat(dirfd, &st) < 0)
        return err_set(err, errno, "cannot stat the layer");
    uid_t u = st.st_uid >= first && st.st_uid - first < 65536 ? st.st_uid - first : 0;
    if (fchown(dirfd, u, u) < 0)
        return err_set(err, errno, "cannot chown the layer");
    return shift_tree(dirfd, first, 0, err);
}
