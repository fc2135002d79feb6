/*
 * rootfs.c - build the shared /etc from generated files and a host allowlist.
 */
#include "rootfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fd.h"
#include "../util/rand.h"

#define COPY_MAX_DEPTH 8
#define COPY_MAX_FILES 50000

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "user:x:1000:1000:user:/home/user:/bin/bash\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group[] = "root:x:0:\n"
                            "tty:x:5:\n"
                            "users:x:100:user\n"
                            "user:x:1000:\n"
                            "nogroup:x:65534:\n";
static const char hosts[] = "127.0.0.1\tlocalhost\n"
                            "::1\tlocalhost ip6-localhost ip6-loopback\n"
                            "127.0.1.1\t" ROOTFS_HOSTNAME "\n";
static const char nsswitch[] = "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
                               "networks: files\nprotocols: files\nservices: files\n";
static const char resolv[] = "# no network: sandboxes reach loopback only\n";
/* Debian's /etc/profile resets PATH, so login shells (bash -lc, sh -lc)
 * would lose the tool shims (python, pip of a carrier bundle) that exec puts
 * first; put them back. A no-op when the directory is absent. */
static const char profile_tools[] =
        "# abx: tool shims (see docs/tools.md) stay first on PATH in login shells.\n"
        "if [ -d /.toolbin ]; then\n"
        "    case \":$PATH:\" in\n"
        "    *:/.toolbin:*) ;;\n"
        "    *) PATH=\"/.toolbin:$PATH\"; export PATH ;;\n"
        "    esac\n"
        "fi\n";

/* Host entries copied verbatim (files, symlinks or whole directories). */
static const char *const allow[] = {
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "alternatives",
        "localtime",
        "timezone",
        "mime.types",
        "services",
        "protocols",
        "ethertypes",
        "inputrc",
        "profile",
        "profile.d",
        "bash.bashrc",
        "environment",
        "shells",
        "login.defs",
        "debian_version",
        "os-release",
        "issue",
        "magic",
        "magic.mime",
        "ca-certificates",
        "ca-certificates.conf",
        "fonts",
        "terminfo",
        "skel",
        "gai.conf",
        "host.conf",
        "locale.alias",
        "locale.gen",
        "papersize",
        "mailcap",
        "python3",
        "python3.11",
        "python3.12",
        "perl",
        "vim",
        "nanorc",
        "bash_completion",
        "bash_completion.d",
        "subversion",
        "X11",
        "gitconfig.d",
        "xdg",
        "dpkg",
        "ImageMagick-6",
        "matplotlibrc", /* Debian's matplotlib reads its defaults from here */
        NULL,
};
/* Inside copied directories, names never copied. */
static bool
denied(const char *name)
{
    return !strcmp(name, "private") || strstr(name, "shadow") || strstr(name, "ssh") ||
           strstr(name, "secret") || strstr(name, ".key");
}

static int copy_entry(int sdir, int ddir, const char *name, int depth, int *budget);

static int
copy_dir(int sdir, int ddir, const char *name, int depth, int *budget)
{
    if (depth > COPY_MAX_DEPTH)
        return 0;
    _cleanup_close_ int s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s < 0)
        return errno == ENOENT ? 0 : -errno;
    if (mkdirat(ddir, name, 0755) < 0 && errno != EEXIST)
        return -errno;
    _cleanup_close_ int d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return -errno;
    int sdup = fcntl(s, F_DUPFD_CLOEXEC, 3);
    if (sdup < 0)
        return -errno;
    DIR *dir = fdopendir(sdup);
    if (!dir) {
        safe_close(sdup);
        return -ENOMEM;
    }
    struct dirent *de;
    int r = 0;
    while ((de = readdir(dir))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || denied(de->d_name))
            continue;
        r = copy_entry(s, d, de->d_name, depth + 1, budget);
        if (r < 0)
            break;
    }
    closedir(dir);
    return r;
}

static int
copy_entry(int sdir, int ddir, const char *name, int depth, int *budget)
{
    struct stat st;

    if (--*budget < 0)
        return 0;
    if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(sdir, name, target, sizeof(target) - 1);
        if (n < 0)
            return -errno;
        target[n] = '\0';
        if (symlinkat(target, ddir, name) < 0 && errno != EEXIST)
            return -errno;
        return 0;
    }
    if (S_ISDIR(st.st_mode))
        return copy_dir(sdir, ddir, name, depth, budget);
    if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IROTH))
        return 0; /* only world-readable regular files */
    int r = copy_file_at(sdir, name, ddir, name, st.st_mode & 0755);
    return r == -EACCES ? 0 : r;
}

int
rootfs_prepare_etc(const char *statedir, struct err *err)
{
    char tmpname[64], rnd[17];
    int r;
    int budget = COPY_MAX_FILES;
    _cleanup_close_ int d = -EBADF;
    _cleanup_close_ int host = -EBADF;
    struct {
        const char *name, *content;
    } gen[] = {
            {"passwd", passwd},
            {"group", group},
            {"hosts", hosts},
            {"hostname", ROOTFS_HOSTNAME "\n"},
            {"nsswitch.conf", nsswitch},
            {"resolv.conf", resolv},
            {"profile.d/zz-abx-tools.sh", profile_tools},
    };

    _cleanup_close_ int state = open(statedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (state < 0)
        return err_setx(err, errno, "cannot open state directory '%s'", statedir);
    r = rand_hex(rnd, 8);
    if (r < 0)
        return err_setx(err, -r, "random");
    (void)snprintf(tmpname, sizeof(tmpname), ".etc-%s", rnd);
    if (mkdirat(state, tmpname, 0755) < 0)
        return err_setx(err, errno, "cannot create '%s/%s'", statedir, tmpname);
    d = openat(state, tmpname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) {
        r = -errno;
        goto fail;
    }
    (void)fchmod(d, 0755);

    host = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (host < 0) {
        r = -errno;
        goto fail;
    }
    for (const char *const *a = allow; *a; a++) {
        r = copy_entry(host, d, *a, 0, &budget);
        if (r < 0) {
            (void)err_setx(err, -r, "cannot copy /etc/%s", *a);
            goto fail;
        }
    }
    if (mkdirat(d, "profile.d", 0755) < 0 && errno != EEXIST) {
        r = -errno;
        goto fail;
    }
    for (size_t i = 0; i < ELEMENTSOF(gen); i++) {
        (void)unlinkat(d, gen[i].name, 0);
        r = write_file_at(d, gen[i].name, gen[i].content, 0644);
        if (r < 0) {
            (void)err_setx(err, -r, "cannot write etc/%s", gen[i].name);
            goto fail;
        }
    }

    /* Swap in atomically. Only called at start, before any sandbox has
     * bound the previous directory, so removing it is safe. */
    if (renameat2(state, tmpname, state, "etc", RENAME_EXCHANGE) == 0) {
        r = rm_rf_at(state, tmpname);
        if (r < 0)
            return err_setx(err, -r, "cannot remove the previous etc");
        return 0;
    }
    if (errno != ENOENT) {
        r = -errno;
        goto fail;
    }
    if (renameat(state, tmpname, state, "etc") < 0) {
        r = -errno;
        goto fail;
    }
    return 0;
fail:
    (void)rm_rf_at(state, tmpname);
    return err_isset(err) ? r : err_setx(err, -r, "cannot build '%s/etc'", statedir);
}

/* The static abx-sudo binary, embedded by sudo-blob.S. */
extern const char abx_sudo_blob[];
extern const char abx_sudo_blob_end[];

int
rootfs_prepare_sudo(const char *statedir, char *ret_path, size_t size, struct err *err)
{
    char tmpname[64], rnd[17];
    size_t n = (size_t)(abx_sudo_blob_end - abx_sudo_blob);
    int r;

    if ((size_t)snprintf(ret_path, size, "%s/abx-sudo", statedir) >= size)
        return err_set(err, ENAMETOOLONG, "state directory path too long");
    _cleanup_close_ int state = open(statedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (state < 0)
        return err_setx(err, errno, "cannot open state directory '%s'", statedir);
    r = rand_hex(rnd, 8);
    if (r < 0)
        return err_setx(err, -r, "random");
    (void)snprintf(tmpname, sizeof(tmpname), ".abx-sudo-%s", rnd);
    _cleanup_close_ int fd =
            openat(state, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0555);
    if (fd < 0)
        return err_setx(err, errno, "cannot create '%s/%s'", statedir, tmpname);
    r = write_full(fd, abx_sudo_blob, n);
    if (r >= 0 && fchmod(fd, 0555) < 0)
        r = -errno;
    /* Sandboxes of a previous run may still bind the old file: rename, do
     * not rewrite it in place. */
    if (r >= 0 && renameat(state, tmpname, state, "abx-sudo") < 0)
        r = -errno;
    if (r < 0) {
        (void)unlinkat(state, tmpname, 0);
        return err_setx(err, -r, "cannot write '%s'", ret_path);
    }
    return 0;
}
