/*
 * init.c - abx-init: pid 1 of a sandbox, built as a small static binary.
 *
 * abxd clones us into a fresh pid namespace and execs us while we are still
 * host root. We then (ns mode) make mount, net, ipc and uts namespaces, build the root
 * file system, pivot into it, bring up loopback, enter a cgroup namespace,
 * and only then move into a new user namespace whose root abxd maps to the
 * sandbox's pooled uid range. The namespaces above stay owned by the host's
 * user namespace, so sandbox root holds no capability over its own mounts,
 * network or host name. Because our image was exec'd before the user
 * namespace existed and we are not dumpable, sandbox root cannot ptrace us.
 *
 * After set-up we only spawn processes abxd asks for, signal them, and reap
 * every child, reporting exits of the ones abxd started. We hold no host
 * secrets; abxd still treats what we say as hostile. Control socket: fd 3.
 * When it closes (abxd died) we exit, and the kernel kills the namespace.
 *
 * This is not a general-purpose init: no services, no restarts, no logging.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jail/caps.h"
#include "jail/init/sudo-server.h"
#include "jail/proto.h"

#define CTL_FD       3
#define MAX_TRACKED  4096 /* processes abxd started and has not seen exit */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static char rxbuf[PROTO_MAX_MSG];
static char txbuf[4096];
static char *argvv[PROTO_MAX_ARGS + 1];
static char *envv[PROTO_MAX_ARGS + 1];
static pid_t tracked[MAX_TRACKED];
static size_t ntracked;
static uint32_t mode;

/* Capabilities sandbox root keeps across exec: Docker's default set. */

static int
send_msg(const void *buf, size_t n)
{
    for (;;) {
        ssize_t k = send(CTL_FD, buf, n, MSG_NOSIGNAL);
        if (k >= 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

/* Reports a set-up failure and exits; abxd turns it into an error naming the step. */
static void __attribute__((noreturn)) fail(const char *step, int errnum)
{
    struct proto_writer w;
    proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_FAILED);
    proto_put_u32(&w, (uint32_t)(errnum > 0 ? errnum : EIO));
    proto_put_str(&w, step);
    long n = proto_writer_finish(&w);
    if (n > 0)
        (void)send_msg(txbuf, (size_t)n);
    _exit(1);
}

#define CHECK(expr, step)      \
    do {                       \
        if ((expr) < 0)        \
            fail(step, errno); \
    } while (0)

static char pathbuf[4096];

static const char *
at(const char *root, const char *rel)
{
    int n = snprintf(pathbuf, sizeof(pathbuf), "%s/%s", root, rel);
    if (n < 0 || (size_t)n >= sizeof(pathbuf))
        fail("path too long", ENAMETOOLONG);
    return pathbuf;
}

static uid_t owner_uid; /* host ids of sandbox root: directories we make belong to it */
static gid_t owner_gid;

static void
mkdir_in(const char *root, const char *rel, mode_t m)
{
    if (mkdir(at(root, rel), m) < 0 && errno != EEXIST)
        fail(rel, errno);
    CHECK(chmod(at(root, rel), m), rel);
    CHECK(lchown(at(root, rel), owner_uid, owner_gid), rel);
}

static void
touch_in(const char *root, const char *rel)
{
    int fd = open(at(root, rel), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        fail(rel, errno);
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

static void
loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        fail("loopback socket", errno);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strcpy(ifr.ifr_name, "lo");
    CHECK(ioctl(s, SIOCGIFFLAGS, &ifr), "loopback flags");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    CHECK(ioctl(s, SIOCSIFFLAGS, &ifr), "loopback up");
    close(s);
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
        fail("idmap fork", errno);
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
        fail("idmap user namespace", EIO);
    hostpid[n] = '\0';
    static const char *const files[] = {"uid_map", "gid_map"};
    for (int i = 0; i < 2; i++) {
        (void)snprintf(path, sizeof(path), "/proc/%s/%s", hostpid, files[i]);
        (void)snprintf(map, sizeof(map), "0 %u 65536",
                       i == 0 ? c->root_uid_host : c->root_gid_host);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map))
            fail("idmap write map", errno);
        close(fd);
    }
    (void)snprintf(path, sizeof(path), "/proc/%s/ns/user", hostpid);
    idmap_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (idmap_fd < 0)
        fail("idmap open", errno);
    close(go[1]);
    (void)waitpid(pid, NULL, 0);
}

/* Mounts host directory src at dst read-only, its ids shifted into the
 * sandbox's range (an idmapped mount; a layer's files are stored with ids
 * 0..65535, the host's /usr with the host's). */
static void
idmapped_bind(const char *src, const char *dst)
{
    int t = (int)syscall(SYS_open_tree, AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (t < 0)
        fail("layer open_tree", errno);
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
            fail("layer path", ENAMETOOLONG);
        if (stat(src, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        (void)snprintf(rel, sizeof(rel), "l%u-%s", i, name);
        mkdir_in(S, rel, 0755);
        idmapped_bind(src, at(S, rel));
        n = snprintf(ovl_opts + o, sizeof(ovl_opts) - o, "%s%s", nl ? ":" : "", at(S, rel));
        if (n < 0 || (size_t)n >= sizeof(ovl_opts) - o)
            fail("overlay options", ENAMETOOLONG);
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
            fail("overlay options", ENAMETOOLONG);
        o += (size_t)n;
    }
    (void)snprintf(rel, sizeof(rel), "up/%s", name);
    mkdir_in(S, rel, 0755);
    n = snprintf(ovl_opts + o, sizeof(ovl_opts) - o, ",upperdir=%s", at(S, rel));
    if (n < 0 || (size_t)n >= sizeof(ovl_opts) - o)
        fail("overlay options", ENAMETOOLONG);
    o += (size_t)n;
    (void)snprintf(rel, sizeof(rel), "up/.work-%s", name);
    if (mkdir(at(S, rel), 0700) < 0 && errno != EEXIST)
        fail(rel, errno);
    n = snprintf(ovl_opts + o, sizeof(ovl_opts) - o, ",workdir=%s", at(S, rel));
    if (n < 0 || (size_t)n >= sizeof(ovl_opts) - o)
        fail("overlay options", ENAMETOOLONG);
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
        fail("state directory path has ',', ':' or '\\\\' (overlay options)", EINVAL);
    (void)snprintf(opts, sizeof(opts), "mode=0700,size=%llu",
                   (unsigned long long)(c->upper_bytes ? c->upper_bytes : c->root_bytes));
    CHECK(mount("tmpfs", S, "tmpfs", MS_NOSUID | MS_NODEV, opts), "mount layer tmpfs");
    if (mkdir(at(S, "up"), 0755) < 0)
        fail("up", errno);
    if (c->upper[0])
        CHECK(mount(c->upper, at(S, "up"), NULL, MS_BIND, NULL), "bind build upper");
    if (mkdir(at(S, "root"), 0755) < 0)
        fail("root", errno);
    make_idmap(c);
    int n = snprintf(root, size, "%s/root", S);
    if (n < 0 || (size_t)n >= size)
        fail("root path", ENAMETOOLONG);
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

static void
build_root(const struct proto_config *c)
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
            fail("bind target", EINVAL);
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

static void
wait_mapped(void)
{
    struct proto_writer w;
    proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_NEED_MAP);
    long n = proto_writer_finish(&w);
    if (n < 0 || send_msg(txbuf, (size_t)n) < 0)
        _exit(1);
    for (;;) {
        ssize_t k = recv(CTL_FD, rxbuf, sizeof(rxbuf), 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            _exit(1);
        struct proto_reader r;
        if (proto_reader_init(&r, rxbuf, (size_t)k) == PROTO_MAPPED && proto_reader_done(&r) == 0)
            return;
        fail("expected MAPPED", EPROTO);
    }
}

static int
last_cap(void)
{
    char b[16];
    int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 63;
    b[n] = '\0';
    int v = 0;
    for (char *p = b; *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (*p - '0');
    return v > 0 && v <= 63 ? v : 63;
}

static void
drop_bounding_caps(void)
{
    int last = last_cap();
    for (int cap = 0; cap <= last; cap++) {
        bool keep = false;
        for (size_t i = 0; i < sizeof(jail_keep_caps) / sizeof(jail_keep_caps[0]); i++)
            if (jail_keep_caps[i] == cap)
                keep = true;
        if (keep)
            continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            fail("drop capability", errno);
    }
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

static void
setup(const struct proto_config *c)
{
    mode = c->mode;
    for (uint32_t i = 0; i < c->ncgroups; i++) {
        int fd = open(c->cgroups[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
            fail("join cgroup", errno);
        close(fd);
    }
    if (mode == PROTO_MODE_NS) {
        /* abxd made only our pid namespace; the rest are ours to make, as
         * host root, so they belong to the host's user namespace. */
        CHECK(unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "namespaces");
        build_root(c);
        loopback_up();
        CHECK(sethostname(c->hostname, strlen(c->hostname)), "sethostname");
        CHECK(unshare(CLONE_NEWCGROUP), "cgroup namespace");
        CHECK(unshare(CLONE_NEWUSER), "user namespace");
        wait_mapped();
        CHECK(setgroups(0, NULL), "setgroups");
        CHECK(setresgid(0, 0, 0), "setresgid");
        CHECK(setresuid(0, 0, 0), "setresuid");
        drop_bounding_caps();
    } else {
        /* No pid namespace: adopt orphans so they are reaped and counted. */
        CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper");
        CHECK(chdir(c->workspace), "chdir workspace");
        if (mode == PROTO_MODE_UID)
            drop_bounding_caps();
    }

    /* Credential changes clear the parent-death signal; set it again. */
    CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "pdeathsig");
    if (mode != PROTO_MODE_NONE) {
        struct rlimit core = {0, 0};
        CHECK(setrlimit(RLIMIT_CORE, &core), "rlimit core");
        CHECK(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable");
        CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");
        if (c->bpf_len) {
            if (c->bpf_len % sizeof(struct sock_filter) != 0)
                fail("seccomp program", EINVAL);
            struct sock_fprog prog = {
                    .len = (unsigned short)(c->bpf_len / sizeof(struct sock_filter)),
                    .filter = (struct sock_filter *)(uintptr_t)c->bpf,
            };
            CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), "seccomp filter");
        }
    }
}

/* --- spawning --- */

struct spawn_err {
    int step;
    int errnum;
};

enum { STEP_SETSID = 1, STEP_STDIO, STEP_GROUPS, STEP_GID, STEP_UID, STEP_CHDIR };

static const char *
step_name(int step)
{
    switch (step) {
    case STEP_SETSID:
        return "setsid";
    case STEP_STDIO:
        return "stdio";
    case STEP_GROUPS:
        return "setgroups";
    case STEP_GID:
        return "setgid";
    case STEP_UID:
        return "setuid";
    case STEP_CHDIR:
        return "chdir";
    default:
        return "spawn";
    }
}

static void __attribute__((noreturn)) child_fail(int errpipe, int step)
{
    struct spawn_err e = {step, errno};
    (void)!write(errpipe, &e, sizeof(e));
    _exit(125);
}

static const char *
env_path(char *const *env)
{
    for (size_t i = 0; env[i]; i++)
        if (!strncmp(env[i], "PATH=", 5))
            return env[i] + 5;
    return DEFAULT_PATH;
}

static void __attribute__((noreturn)) exec_or_die(char *const *argv, char *const *env)
{
    static char cand[4096];
    const char *file = argv[0];
    int err = ENOENT;
    bool eacces = false;

    if (strchr(file, '/')) {
        execve(file, argv, env);
        err = errno;
    } else if (*file) {
        const char *p = env_path(env);
        for (;;) {
            const char *colon = strchr(p, ':');
            size_t n = colon ? (size_t)(colon - p) : strlen(p);
            int k = n ? snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, p, file)
                      : snprintf(cand, sizeof(cand), "%s", file);
            if (k > 0 && (size_t)k < sizeof(cand)) {
                execve(cand, argv, env);
                if (errno == EACCES)
                    eacces = true;
                else if (errno != ENOENT && errno != ENOTDIR)
                    err = errno;
            }
            if (!colon)
                break;
            p = colon + 1;
        }
        if (eacces && err == ENOENT)
            err = EACCES;
    }
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "abx: %s: %s\n", file,
                     err == ENOENT ? "command not found" : strerror(err));
    if (n > 0)
        (void)!write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

static void __attribute__((noreturn))
spawn_child(const struct proto_spawn *s, const int *fds, int nfds, int errpipe)
{
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    /* init changes no disposition but SIGPIPE's (handlers would be reset
     * by exec anyway; an ignored signal would stay ignored). */
    (void)signal(SIGPIPE, SIG_DFL);

    if (setsid() < 0)
        child_fail(errpipe, STEP_SETSID);
    for (int i = 0; i < 3; i++) {
        int fd = i < nfds ? fds[i] : -1;
        if (fd < 0) {
            fd = open("/dev/null", O_RDWR | O_CLOEXEC);
            if (fd < 0)
                child_fail(errpipe, STEP_STDIO);
        }
        if (dup2(fd, i) < 0)
            child_fail(errpipe, STEP_STDIO);
    }
    /* A terminal on stdin (abxd's PTY processes) becomes the new session's
     * controlling terminal, so job control and ^C work as in a login. */
    if (isatty(0))
        (void)ioctl(0, TIOCSCTTY, 0);
    /* Everything else we hold (control socket, received fds, the error
     * pipe) is closed by the exec. */
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        for (int fd = 3; fd < 65536; fd++)
            if (fd != errpipe)
                (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    if (mode != PROTO_MODE_NONE) {
        /* The OOM killer should always pick a sandbox's processes before its
         * init (whose death ends the sandbox), and untrusted code before the
         * host's services. Raising the score needs no privilege. */
        int ofd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (ofd >= 0) {
            (void)!write(ofd, "300", 3);
            close(ofd);
        }
        gid_t g = s->gid;
        if (setgroups(1, &g) < 0)
            child_fail(errpipe, STEP_GROUPS);
        if (setresgid(s->gid, s->gid, s->gid) < 0)
            child_fail(errpipe, STEP_GID);
        if (setresuid(s->uid, s->uid, s->uid) < 0)
            child_fail(errpipe, STEP_UID);
    }
    if (chdir(s->cwd) < 0)
        child_fail(errpipe, STEP_CHDIR);
    umask(022);
    exec_or_die(argvv, envv);
}

static bool
track(pid_t pid)
{
    if (ntracked >= MAX_TRACKED)
        return false;
    tracked[ntracked++] = pid;
    return true;
}

static bool
untrack(pid_t pid)
{
    for (size_t i = 0; i < ntracked; i++)
        if (tracked[i] == pid) {
            tracked[i] = tracked[--ntracked];
            return true;
        }
    return false;
}

static void
send_spawned(uint64_t token, pid_t pid, int errnum, const char *step)
{
    struct proto_writer w;
    proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_SPAWNED);
    proto_put_u64(&w, token);
    proto_put_u32(&w, (uint32_t)(pid > 0 ? pid : 0));
    proto_put_u32(&w, (uint32_t)errnum);
    proto_put_str(&w, step);
    long n = proto_writer_finish(&w);
    if (n < 0 || send_msg(txbuf, (size_t)n) < 0)
        _exit(1);
}

static void
do_spawn(struct proto_reader *r, int *fds, int nfds)
{
    struct proto_spawn s;

    if (proto_decode_spawn(r, &s) < 0)
        fail("bad spawn message", EPROTO);
    for (uint32_t i = 0; i < s.argc; i++)
        argvv[i] = (char *)(uintptr_t)proto_get_str(r, NULL);
    argvv[s.argc] = NULL;
    for (uint32_t i = 0; i < s.envc; i++)
        envv[i] = (char *)(uintptr_t)proto_get_str(r, NULL);
    envv[s.envc] = NULL;
    if (proto_reader_done(r) < 0)
        fail("bad spawn message", EPROTO);

    if (ntracked >= MAX_TRACKED) {
        send_spawned(s.token, 0, EAGAIN, "process table full");
        return;
    }
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        send_spawned(s.token, 0, errno, "pipe");
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(ep[0]);
        close(ep[1]);
        send_spawned(s.token, 0, e, "fork");
        return;
    }
    if (pid == 0) {
        close(ep[0]);
        spawn_child(&s, fds, nfds, ep[1]);
    }
    close(ep[1]);
    struct spawn_err e;
    ssize_t k;
    do
        k = read(ep[0], &e, sizeof(e));
    while (k < 0 && errno == EINTR);
    close(ep[0]);
    if (k == (ssize_t)sizeof(e)) {
        (void)waitpid(pid, NULL, 0);
        send_spawned(s.token, 0, e.errnum ? e.errnum : EIO, step_name(e.step));
        return;
    }
    track(pid);
    send_spawned(s.token, pid, 0, "");
}

static void
do_signal(struct proto_reader *r)
{
    int32_t pid = (int32_t)proto_get_u32(r);
    int32_t sig = (int32_t)proto_get_u32(r);
    uint32_t flags = proto_get_u32(r);
    if (proto_reader_done(r) < 0 || pid <= 1 || sig < 0 || sig >= NSIG)
        return;
    /* Only processes we started (or their groups) may be signalled. */
    bool known = false;
    for (size_t i = 0; i < ntracked; i++)
        if (tracked[i] == pid)
            known = true;
    if (!known)
        return;
    (void)kill((flags & PROTO_SIGNAL_GROUP) ? -pid : pid, sig);
}

static void
reap(void)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        /* Not abxd's (an orphan, or a sudo command): abxd never hears of it. */
        if (!untrack(pid)) {
            (void)sudo_server_reaped(pid, status);
            continue;
        }
        struct proto_writer w;
        proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_EXITED);
        proto_put_u32(&w, (uint32_t)pid);
        proto_put_u32(&w, (uint32_t)status);
        long n = proto_writer_finish(&w);
        if (n < 0 || send_msg(txbuf, (size_t)n) < 0)
            _exit(1);
    }
}

static void
handle_control(void)
{
    int fds[PROTO_MAX_FDS];
    int nfds = 0;
    char cbuf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
    struct iovec iov = {rxbuf, sizeof(rxbuf)};
    struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};

    ssize_t k = recvmsg(CTL_FD, &mh, MSG_CMSG_CLOEXEC);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (k <= 0) {
        /* abxd is gone. In ns mode leaving takes the namespace with us;
         * otherwise take down the process groups we started ourselves. */
        if (mode != PROTO_MODE_NS)
            for (size_t i = 0; i < ntracked; i++)
                (void)kill(-tracked[i], SIGKILL);
        _exit(0);
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (nfds < PROTO_MAX_FDS)
                fds[nfds++] = fd;
            else
                close(fd);
        }
    }
    struct proto_reader r;
    int type = proto_reader_init(&r, rxbuf, (size_t)k);
    if (type == PROTO_SPAWN)
        do_spawn(&r, fds, nfds);
    else if (type == PROTO_SIGNAL)
        do_signal(&r);
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

static uint64_t
usec_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int
main(void)
{
    uint64_t t0 = usec_now();
    sigset_t mask;

    (void)prctl(PR_SET_NAME, "abx-init", 0, 0, 0);
    (void)signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    (void)sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        fail("signalfd", errno);
    if (fcntl(CTL_FD, F_SETFD, FD_CLOEXEC) < 0)
        _exit(1);

    ssize_t k;
    do
        k = recv(CTL_FD, rxbuf, sizeof(rxbuf), 0);
    while (k < 0 && errno == EINTR);
    if (k <= 0)
        _exit(1);
    struct proto_config cfg;
    if (proto_decode_config(rxbuf, (size_t)k, &cfg) < 0)
        fail("bad config message", EPROTO);
    setup(&cfg);
    if (mode == PROTO_MODE_NS) {
        int r = sudo_server_start();
        if (r < 0)
            fail("sudo socket", -r);
    }

    struct proto_writer w;
    proto_writer_init(&w, txbuf, sizeof(txbuf), PROTO_READY);
    proto_put_u64(&w, usec_now() - t0);
    long n = proto_writer_finish(&w);
    if (n < 0 || send_msg(txbuf, (size_t)n) < 0)
        _exit(1);

    struct pollfd pfd[2 + SUDO_SERVER_MAX_POLLS] = {{.fd = CTL_FD, .events = POLLIN},
                                                    {.fd = sfd, .events = POLLIN}};
    for (;;) {
        size_t nsudo = sudo_server_pollfds(pfd + 2, SUDO_SERVER_MAX_POLLS);
        if (poll(pfd, 2 + nsudo, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        if (pfd[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
            reap();
        }
        sudo_server_dispatch(pfd + 2, nsudo);
        if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
            handle_control();
    }
}
