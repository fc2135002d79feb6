/*
 * init-root.c - abx-init's root file system (ns mode), built while init is
 * still host root in its fresh mount namespace: the read-only host or
 * layered (overlayfs) root: /usr and the top-level links, /etc, /proc, a
 * read-only /dev with its own pts and shm, /tmp, the workspace as
 * /home/user, the configured bind mounts and abx-sudo; then pivot_root
 * into it and mask /proc.
 *
 * Part of the static abx-init: no allocation, stdio only for snprintf; a
 * step that fails ends init through init_fail(), naming the step. The pid 1
 * loop and the rest of set-up are init.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/init/init-internal.h"
#include "jail/proto.h"

static char pathbuf[4096];

static const char *
at(const char *root, const char *rel)
{
    int n = snprintf(pathbuf, sizeof(pathbuf), "%s/%s", root, rel);
    if (n < 0 || (size_t)n >= sizeof(pathbuf))
        init_fail("path too long", ENAMETOOLONG);
    return pathbuf;
}

static uid_t owner_uid; /* host ids of sandbox root: directories we make belong to it */
static gid_t owner_gid;

static void
mkdir_in(const char *root, const char *rel, mode_t m)
{
    if (mkdir(at(root, rel), m) < 0 && errno != EEXIST)
        init_fail(rel, errno);
    CHECK(chmod(at(root, rel), m), rel);
    CHECK(lchown(at(root, rel), owner_uid, owner_gid), rel);
}

static void
touch_in(const char *root, const char *rel)
{
    int fd = open(at(root, rel), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        init_fail(rel, errno);
    close(fd);
}

static void
bind_in(const char *src, const char *root, const char *rel, unsigned long extra, bool ro)
{
    const char *dst = at(root, rel);
    CHECK(mount(src, dst, NULL, MS_BIND, NULL), rel);
    unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | extra | (ro ? MS_RDONLY : 0);
    CHECK(mount(NULL, dst, NULL, fl, NULL), rel);
}

static void
tmpfs_in(const char *root, const char *rel, unsigned long flags, const char *opts)
{
    CHECK(mount("tmpfs", at(root, rel), "tmpfs", flags, opts), rel);
}

/* Mirrors the host's top-level /bin, /lib... : symlinks into usr/ are copied
 * as symlinks (merged /usr), real directories are bound read-only. */
static void
mirror_toplevel(const char *root, const char *name)
{
    char host[64], target[256];
    struct stat st;

    (void)snprintf(host, sizeof(host), "/%s", name);
    if (lstat(host, &st) < 0)
        return;
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlink(host, target, sizeof(target) - 1);
        if (n <= 0)
            return;
        target[n] = '\0';
        CHECK(symlink(target, at(root, name)), name);
    } else if (S_ISDIR(st.st_mode)) {
        mkdir_in(root, name, 0755);
        bind_in(host, root, name, MS_NODEV, true);
    }
}

static void
write_proc(const char *path, const char *value)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return; /* an older kernel without this knob */
    (void)!write(fd, value, strlen(value));
    close(fd);
}

/* Hides or freezes the /proc entries Docker's default masks. */
/* A boot id of the sandbox's own at path (read-only /dev): a sandbox made
 * anew, e.g. an E2B resume without memory, is a new boot. */
static void
make_boot_id(const char *path)
{
    unsigned char b[16];
    char s[40];
    if (syscall(SYS_getrandom, b, sizeof(b), 0) != (long)sizeof(b))
        return;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    int n = snprintf(s, sizeof(s),
                     "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", b[0],
                     b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                     b[13], b[14], b[15]);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (fd < 0)
        return;
    if (write(fd, s, (size_t)n) != n)
        (void)unlink(path);
    (void)close(fd);
}

static void
mask_proc(void)
{
    static const char *const files[] = {
            "/proc/kcore",       "/proc/keys",        "/proc/latency_stats", "/proc/timer_list",
            "/proc/timer_stats", "/proc/sched_debug", "/proc/sysrq-trigger"};
    static const char *const dirs[] = {"/proc/acpi", "/proc/asound", "/proc/scsi"};
    static const char *const ro[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"};
    struct stat st;

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (stat(files[i], &st) == 0 && !S_ISDIR(st.st_mode))
            CHECK(mount("/dev/null", files[i], NULL, MS_BIND, NULL), files[i]);
    if (stat("/dev/.boot_id", &st) == 0 && stat("/proc/sys/kernel/random/boot_id", &st) == 0)
        CHECK(mount("/dev/.boot_id", "/proc/sys/kernel/random/boot_id", NULL, MS_BIND, NULL),
              "boot_id");
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        if (stat(dirs[i], &st) == 0 && S_ISDIR(st.st_mode))
            CHECK(mount("tmpfs", dirs[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                        "size=0,mode=0555"),
                  dirs[i]);
    for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++)
        if (stat(ro[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            CHECK(mount(ro[i], ro[i], NULL, MS_BIND | MS_REC, NULL), ro[i]);
            CHECK(mount(NULL, ro[i], NULL,
                        MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
                  ro[i]);
        }
}

/* --- layers (templates.md "Layers") --- */

static int idmap_fd = -1; /* user namespace mapping 0..65535 to the sandbox's range */

/* A user namespace whose ids 0..65535 are host ids root_uid_host.. (the
 * sandbox's range): the idmap of every layer mount. A child makes it and
 * waits while we, host root, write its maps; we keep a descriptor of it. */
static void
make_idmap(const struct proto_config *c)
{
    int go[2], ready[2];
    char hostpid[32], path[96], map[64];

    CHECK(pipe2(go, O_CLOEXEC), "idmap pipe");
    CHECK(pipe2(ready, O_CLOEXEC), "idmap pipe");
    pid_t pid = fork();
    if (pid < 0)
        init_fail("idmap fork", errno);
    if (pid == 0) {
        close(go[1]);
        close(ready[0]);
        if (unshare(CLONE_NEWUSER) < 0)
            _exit(1);
        /* our pid as the host's /proc knows it (we are in a new pid namespace) */
        ssize_t n = readlink("/proc/self", hostpid, sizeof(hostpid) - 1);
        if (n <= 0 || write(ready[1], hostpid, (size_t)n) != n)
            _exit(1);
        (void)!read(go[0], hostpid, 1);
        _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    ssize_t n = read(ready[0], hostpid, sizeof(hostpid) - 1);
    close(ready[0]);
    if (n <= 0)
        init_fail("idmap user namespace", EIO);
    hostpid[n] = '\0';
    static const char *const files[] = {"uid_map", "gid_map"};
    for (int i = 0; i < 2; i++) {
        (void)snprintf(path, sizeof(path), "/proc/%s/%s", hostpid, files[i]);
        (void)snprintf(map, sizeof(map), "0 %u 65536",
                       i == 0 ? c->root_uid_host : c->root_gid_host);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map))
            init_fail("idmap write map", errno);
        close(fd);
    }
    (void)snprintf(path, sizeof(path), "/proc/%s/ns/user", hostpid);
    idmap_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (idmap_fd < 0)
        init_fail("idmap open", errno);
    close(go[1]);
    (void)waitpid(pid, NULL, 0);
}

/* Mounts host directory src at dst read-only, its ids shifted into the
 * sandbox's range (an idmapped mount; a layer's files are stored with ids
 * 0..65535, the host's /usr with the host's). src's last component is
 * never followed: a layer's usr/ that is a link would lead to the host. */
static void
idmapped_bind(const char *src, const char *dst)
{
    int t = (int)syscall(SYS_open_tree, AT_FDCWD, src,
                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
    if (t < 0)
        init_fail("layer open_tree", errno);
    struct mount_attr a = {
            .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            .userns_fd = (uint64_t)idmap_fd,
    };
    CHECK(syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof(a)), "layer idmap");
    CHECK(syscall(SYS_move_mount, t, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH), "layer attach");
    close(t);
}

static char ovl_opts[PROTO_MAX_LAYERS * 128 + 1024];

/* R/<name> becomes an overlay: the layers' <name>/ (top first) over host
 * (NULL = nothing, e.g. /opt), with the writable layer on top. Everything
 * is first mounted on scratch S, outside the new root, so none of it is
 * reachable from inside once the old root is detached. */
static void
layered_mount(const struct proto_config *c, const char *S, const char *R, const char *name,
              const char *host)
{
    char rel[64], src[4096];
    size_t o = 0;
    int n;
    uint32_t nl = 0;

    n = snprintf(ovl_opts, sizeof(ovl_opts), "lowerdir=");
    o = (size_t)n;
    for (uint32_t i = 0; i < c->nlayers; i++) {
        struct stat st;
        n = snprintf(src, sizeof(src), "%s/%s", c->layers[i], name);
        if (n < 0 || (size_t)n >= sizeof(src))
            init_fail("layer path", ENAMETOOLONG);
        if (lstat(src, &st) < 0 || !S_ISDIR(st.st_mode))
            continue; /* none, or no directory: a link is never followed */
        (void)snprintf(rel, sizeof(rel), "l%u-%s", i, name);
        mkdir_in(S, rel, 0755);
        idmapped_bind(src, at(S, rel));
        n = snprintf(ovl_opts + o, sizeof(ovl_opts) - o, "%s%s", nl ? ":" : "", at(S, rel));
        if (n < 0 || (size_t)n >= sizeof(ovl_opts) - o)
            init_fail("overlay options", ENAMETOOLONG);
        o += (size_t)n;
        nl++;
    }
    (void)snprintf(rel, sizeof(rel), "h-%s", name);
    mkdir_in(S, rel, 0755);
    if (host)
        idmapped_bind(host, at(S, rel));
    /* an empty lower when there is nothing else (overlay needs one) */
    if (host || nl == 0) {
        n = snprintf(ovl_opts + o, sizeof(ovl_opts) - o, "%s%s", nl ? ":" : "", at(S, rel));
        if (n < 0 || (size_t)n >= sizeof(ovl_opts) - o)
            init_fail("overlay options", ENAMETOOLONG);
        o += (size_t)n;
    }
    (void)snprintf(rel, sizeof(rel), "up/%s", name);
    mkdir_in(S, rel, 0755);
    n = snprintf(ovl_opts + o, sizeof(ovl_opts) - o, ",upperdir=%s", at(S, rel));
    if (n < 0 || (size_t)n >= sizeof(ovl_opts) - o)
        init_fail("overlay options", ENAMETOOLONG);
    o += (size_t)n;
    (void)snprintf(rel, sizeof(rel), "up/.work-%s", name);
    if (mkdir(at(S, rel), 0700) < 0 && errno != EEXIST)
        init_fail(rel, errno);
    n = snprintf(ovl_opts + o, sizeof(ovl_opts) - o, ",workdir=%s", at(S, rel));
    if (n < 0 || (size_t)n >= sizeof(ovl_opts) - o)
        init_fail("overlay options", ENAMETOOLONG);
    mkdir_in(R, name, 0755);
    CHECK(mount("overlay", at(R, name), "overlay", MS_NOSUID | MS_NODEV, ovl_opts), name);
}

/* Layered mode: a scratch tmpfs on rootmnt holds the lower mounts and the
 * writable layer (or a bind of the build's upper directory); the root is
 * built on S/root. Returns the root to build on. */
static const char *
layered_scratch(const struct proto_config *c, char *root, size_t size)
{
    const char *S = c->rootmnt;
    char opts[128];

    if (strpbrk(S, ",:\\"))
        init_fail("state directory path has ',', ':' or '\\\\' (overlay options)", EINVAL);
    (void)snprintf(opts, sizeof(opts), "mode=0700,size=%llu",
                   (unsigned long long)(c->upper_bytes ? c->upper_bytes : c->root_bytes));
    CHECK(mount("tmpfs", S, "tmpfs", MS_NOSUID | MS_NODEV, opts), "mount layer tmpfs");
    if (mkdir(at(S, "up"), 0755) < 0)
        init_fail("up", errno);
    if (c->upper[0])
        CHECK(mount(c->upper, at(S, "up"), NULL, MS_BIND, NULL), "bind build upper");
    if (mkdir(at(S, "root"), 0755) < 0)
        init_fail("root", errno);
    make_idmap(c);
    int n = snprintf(root, size, "%s/root", S);
    if (n < 0 || (size_t)n >= size)
        init_fail("root path", ENAMETOOLONG);
    return root;
}

/* Puts abx-sudo over R/usr/bin/sudo (sudo-server.c says why). Only over a
 * regular file that is there (the host's or a layer's sudo): the host's
 * /usr is read-only, and a template build (upper) must not record a
 * mount point in its layer. */
static void
bind_sudo(const struct proto_config *c, const char *R)
{
    struct stat st;

    if (!c->sudo[0] || c->upper[0])
        return;
    if (lstat(at(R, "usr/bin/sudo"), &st) < 0 || !S_ISREG(st.st_mode))
        return;
    bind_in(c->sudo, R, "usr/bin/sudo", MS_NODEV, true);
}

void
init_build_root(const struct proto_config *c)
{
    const char *R = c->rootmnt;
    char opts[256], rootbuf[4096];
    bool layered = c->nlayers > 0 || c->upper[0];

    owner_uid = c->root_uid_host;
    owner_gid = c->root_gid_host;
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make mounts private");
    if (layered)
        R = layered_scratch(c, rootbuf, sizeof(rootbuf));
    (void)snprintf(opts, sizeof(opts), "mode=0755,size=%llu,uid=%u,gid=%u",
                   (unsigned long long)c->root_bytes, owner_uid, owner_gid);
    CHECK(mount("tmpfs", R, "tmpfs", MS_NOSUID | MS_NODEV, opts), "mount root tmpfs");

    if (layered) {
        layered_mount(c, c->rootmnt, R, "usr", "/usr");
    } else {
        mkdir_in(R, "usr", 0755);
        bind_in("/usr", R, "usr", MS_NODEV, true);
    }
    static const char *const top[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
        mirror_toplevel(R, top[i]);
    bind_sudo(c, R);

    if (layered) {
        layered_mount(c, c->rootmnt, R, "etc", c->etc);
    } else {
        mkdir_in(R, "etc", 0755);
        bind_in(c->etc, R, "etc", MS_NODEV | MS_NOEXEC, true);
    }

    mkdir_in(R, "proc", 0555);
    CHECK(mount("proc", at(R, "proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
          "mount /proc");

    mkdir_in(R, "dev", 0755);
    tmpfs_in(R, "dev", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
    static const char *const devs[] = {"null", "zero", "full", "random", "urandom", "tty"};
    for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
        char host[32], rel[32];
        (void)snprintf(host, sizeof(host), "/dev/%s", devs[i]);
        (void)snprintf(rel, sizeof(rel), "dev/%s", devs[i]);
        touch_in(R, rel);
        CHECK(mount(host, at(R, rel), NULL, MS_BIND, NULL), rel);
    }
    mkdir_in(R, "dev/pts", 0755);
    (void)snprintf(opts, sizeof(opts), "newinstance,ptmxmode=0666,mode=0620,gid=%u",
                   c->tty_gid_host);
    CHECK(mount("devpts", at(R, "dev/pts"), "devpts", MS_NOSUID | MS_NOEXEC, opts),
          "mount /dev/pts");
    CHECK(symlink("pts/ptmx", at(R, "dev/ptmx")), "dev/ptmx");
    mkdir_in(R, "dev/shm", 01777);
    (void)snprintf(opts, sizeof(opts), "mode=1777,size=%llu,uid=%u,gid=%u",
                   (unsigned long long)c->shm_bytes, owner_uid, owner_gid);
    tmpfs_in(R, "dev/shm", MS_NOSUID | MS_NODEV, opts);
    CHECK(symlink("/proc/self/fd", at(R, "dev/fd")), "dev/fd");
    CHECK(symlink("/proc/self/fd/0", at(R, "dev/stdin")), "dev/stdin");
    CHECK(symlink("/proc/self/fd/1", at(R, "dev/stdout")), "dev/stdout");
    CHECK(symlink("/proc/self/fd/2", at(R, "dev/stderr")), "dev/stderr");
    make_boot_id(at(R, "dev/.boot_id"));
    CHECK(mount(NULL, at(R, "dev"), NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
                "mode=0755,size=64k"),
          "remount /dev read-only");

    mkdir_in(R, "tmp", 01777);
    (void)snprintf(opts, sizeof(opts), "mode=1777,size=%llu,uid=%u,gid=%u",
                   (unsigned long long)c->tmp_bytes, owner_uid, owner_gid);
    tmpfs_in(R, "tmp", MS_NOSUID | MS_NODEV, opts);

    mkdir_in(R, "home", 0755);
    mkdir_in(R, "home/user", 0755);
    bind_in(c->workspace, R, "home/user", MS_NODEV, false);
    mkdir_in(R, "root", 0700);
    mkdir_in(R, "run", 0755);
    mkdir_in(R, "var", 0755);
    mkdir_in(R, "var/tmp", 01777);
    if (layered)
        layered_mount(c, c->rootmnt, R, "opt", NULL);
    else
        mkdir_in(R, "opt", 0755);
    mkdir_in(R, "mnt", 0755);
    mkdir_in(R, "srv", 0755);

    for (uint32_t i = 0; i < c->nbinds; i++) {
        const char *dst = c->binds[i].dst;
        while (*dst == '/')
            dst++;
        if (!*dst || strstr(dst, ".."))
            init_fail("bind target", EINVAL);
        mkdir_in(R, dst, 0755);
        bind_in(c->binds[i].src, R, dst, MS_NODEV, c->binds[i].flags & PROTO_BIND_RO);
    }

    /* The root directory belongs to sandbox root once mapped. */
    CHECK(chdir(R), "enter new root");
    CHECK(syscall(SYS_pivot_root, ".", "."), "pivot_root");
    CHECK(umount2(".", MNT_DETACH), "detach old root");
    CHECK(chdir("/"), "chdir /");

    /* Per-network-namespace knobs: let sandbox root bind low ports and
     * ping on loopback; the namespace holds nothing but lo. */
    write_proc("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0");
    write_proc("/proc/sys/net/ipv4/ping_group_range", "0 2147483647");
    mask_proc();
    if (idmap_fd >= 0) {
        close(idmap_fd);
        idmap_fd = -1;
    }
}
