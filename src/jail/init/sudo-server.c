/*
 * sudo-server.c - abx-init's sudo service: runs a command as sandbox root
 * for a caller in the sandbox that is "user" or root.
 *
 * The host's setuid sudo cannot work in a sandbox (no_new_privs, and the
 * sandbox's /usr is the host's, mounted nosuid), and a setuid binary of our
 * own would need exactly the privilege we withhold. So the elevation is done
 * by the one process already root in the sandbox's user namespace: init
 * forks, takes the caller's stdin/stdout/stderr, and execs the command as
 * uid 0. The command inherits everything init runs under (no_new_privs,
 * seccomp, capability bounding set, cgroup, namespaces): sudo gives "user"
 * what an abxd exec as root gives, and nothing more.
 *
 * The command gets its own session and process group (a child of init
 * cannot join the caller's process group: that needs the same session), so
 * terminal signals reach it through abx-sudo, which forwards them. When the
 * client goes away first, the command's process group is killed: sudo's
 * command lives no longer than sudo, so abxd's deadlines, which kill the
 * caller's process group, still bound it.
 *
 * This is not a policy engine: no sudoers, no passwords, no logging.
 */
#include "jail/init/sudo-server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "jail/sudo/sudo-proto.h"

#define SUDO_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct session {
    int fd;    /* connection; -1 = free slot */
    pid_t pid; /* the command once started; 0 before */
};

static int listen_fd = -1;
static struct session sessions[SUDO_MAX_SESSIONS];
static int poll_slot[SUDO_SERVER_MAX_POLLS]; /* session index per pollfd; -1 = listener */
static char rx[SUDO_MAX_MSG];
static char tx[SUDO_MAX_ERROR + 64];
static const char *cmd_argv[SUDO_MAX_ARGS + 1];
static const char *cmd_env[SUDO_MAX_ARGS + 1];

int
sudo_server_start(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(SUDO_SOCKET_NAME);

    for (size_t i = 0; i < SUDO_MAX_SESSIONS; i++)
        sessions[i].fd = -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    /* Abstract: no file to protect or clean up, and reachable only from
     * this network namespace, which is the sandbox's alone. We bind it
     * before any sandbox process exists, so nothing can squat the name. */
    memcpy(a.sun_path + 1, SUDO_SOCKET_NAME, n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    if (bind(fd, (struct sockaddr *)&a, len) < 0 || listen(fd, SUDO_MAX_SESSIONS) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    listen_fd = fd;
    return 0;
}

size_t
sudo_server_pollfds(struct pollfd *pfd, size_t max)
{
    size_t n = 0;

    if (listen_fd < 0 || max == 0)
        return 0;
    pfd[n] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
    poll_slot[n++] = -1;
    for (int i = 0; i < SUDO_MAX_SESSIONS && n < max; i++) {
        if (sessions[i].fd < 0)
            continue;
        pfd[n] = (struct pollfd){.fd = sessions[i].fd, .events = POLLIN};
        poll_slot[n++] = i;
    }
    return n;
}

static void
reply(int fd, long n)
{
    if (n > 0)
        (void)send(fd, tx, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Closing a unix socket with unread data makes the peer's next recv fail
 * with ECONNRESET, even with our last message queued for it. So stop the
 * peer from sending (its sends now fail with EPIPE), then discard what it
 * sent (descriptors in it are closed by the kernel: no control buffer). */
static void
close_conn(int fd)
{
    char b[64];

    (void)shutdown(fd, SHUT_RDWR);
    for (int i = 0; i < 1024 && recv(fd, b, sizeof(b), MSG_DONTWAIT | MSG_TRUNC) > 0; i++)
        ;
    close(fd);
}

static void
end_session(struct session *s, bool kill_command)
{
    if (kill_command && s->pid > 0)
        (void)kill(-s->pid, SIGKILL);
    close_conn(s->fd);
    s->fd = -1;
    s->pid = 0;
}

/* Tells the client why and ends its session (and its command). */
static void
refuse(struct session *s, int errnum, const char *msg)
{
    reply(s->fd, sudo_encode_error(tx, sizeof(tx), errnum, msg));
    end_session(s, true);
}

static void __attribute__((noreturn)) die(const char *what, int errnum)
{
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "sudo: %s: %s\n", what, strerror(errnum));
    if (n > 0)
        (void)!write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    _exit(1);
}

static const char *
env_path(void)
{
    for (size_t i = 0; cmd_env[i]; i++)
        if (!strncmp(cmd_env[i], "PATH=", 5))
            return cmd_env[i] + 5;
    return SUDO_DEFAULT_PATH;
}

/* execvpe() with sudo's messages; runs in the child. */
static void __attribute__((noreturn)) exec_command(void)
{
    static char cand[4096];
    char *const *argv = (char *const *)(uintptr_t)cmd_argv;
    char *const *env = (char *const *)(uintptr_t)cmd_env;
    const char *file = cmd_argv[0];
    int err = ENOENT;

    if (strchr(file, '/')) {
        execve(file, argv, env);
        die(file, errno);
    }
    for (const char *p = env_path(); *file;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        int k = snprintf(cand, sizeof(cand), "%.*s%s%s", (int)n, p, n ? "/" : "", file);
        if (k > 0 && (size_t)k < sizeof(cand)) {
            execve(cand, argv, env);
            if (errno != ENOENT && errno != ENOTDIR)
                err = errno;
        }
        if (!colon)
            break;
        p = colon + 1;
    }
    if (err != ENOENT)
        die(file, err);
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "sudo: %s: command not found\n", file);
    if (n > 0)
        (void)!write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    _exit(1);
}

/* The command's side of the fork: init's credentials are already uid/gid 0
 * in the sandbox; take the caller's stdio and nothing else of init's. */
static void __attribute__((noreturn)) run_command(const struct sudo_run *run, const int *fds)
{
    sigset_t none;

    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    (void)signal(SIGPIPE, SIG_DFL);
    (void)setsid();
    /* init's 0..2 are /dev/null, so received descriptors are all >= 3 and
     * none is overwritten before it is duplicated. */
    for (int i = 0; i < 3; i++)
        if (dup2(fds[i], i) < 0)
            die("stdio", errno);
    if (syscall(SYS_close_range, 3, ~0U, 0) < 0) {
        struct rlimit rl = {1024, 1024};
        (void)getrlimit(RLIMIT_NOFILE, &rl);
        for (rlim_t fd = 3; fd < rl.rlim_cur && fd < 1048576; fd++)
            (void)close((int)fd);
    }
    /* As spawn_child: the OOM killer takes the command before init. */
    int ofd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (ofd >= 0) {
        (void)!write(ofd, "300", 3);
        close(ofd);
    }
    gid_t root = 0;
    if (setgroups(1, &root) < 0)
        die("setgroups", errno);
    if (setresgid(0, 0, 0) < 0)
        die("setgid", errno);
    if (setresuid(0, 0, 0) < 0)
        die("setuid", errno);
    /* The caller's directory, as sudo does; "/" if it is gone. */
    if (chdir(run->cwd) < 0 && chdir("/") < 0)
        die("chdir", errno);
    umask(022);
    exec_command();
}

static void
start(struct session *s, size_t n, const int *fds, int nfds)
{
    struct sudo_run run;

    if (nfds != 3) {
        refuse(s, EPROTO, "expected stdin, stdout and stderr with the command");
        return;
    }
    if (sudo_decode_run(rx, n, &run, cmd_argv, cmd_env) < 0) {
        refuse(s, EPROTO, "malformed request");
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        refuse(s, errno, "cannot fork");
        return;
    }
    if (pid == 0)
        run_command(&run, fds);
    s->pid = pid;
}

static void
session_read(struct session *s)
{
    int fds[3];
    int nfds = 0;
    char cbuf[CMSG_SPACE(sizeof(int) * 3)];
    struct iovec iov = {rx, sizeof(rx)};
    struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};

    ssize_t k = recvmsg(s->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (k < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    /* Descriptors beyond cbuf's room were closed by the kernel (MSG_CTRUNC). */
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t m = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < m; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (nfds < 3)
                fds[nfds++] = fd;
            else
                close(fd);
        }
    }
    if (k <= 0) {
        end_session(s, true); /* the client left */
    } else if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        refuse(s, E2BIG, "request too large");
    } else {
        int type = sudo_msg_type(rx, (size_t)k), sig;
        if (type == SUDO_RUN && s->pid == 0)
            start(s, (size_t)k, fds, nfds);
        else if (type == SUDO_SIGNAL && s->pid > 0 && nfds == 0 &&
                 sudo_decode_signal(rx, (size_t)k, &sig) == 0)
            (void)kill(-s->pid, sig);
        else
            refuse(s, EPROTO, "unexpected message");
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

/* Returns false when there is nothing more to accept. */
static bool
accept_one(void)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    char msg[128];

    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return errno == EINTR || errno == ECONNABORTED;
    struct session *s = NULL;
    for (size_t i = 0; i < SUDO_MAX_SESSIONS && !s; i++)
        if (sessions[i].fd < 0)
            s = &sessions[i];
    if (!s) {
        (void)snprintf(msg, sizeof(msg), "too many sudo commands running (at most %d)",
                       SUDO_MAX_SESSIONS);
        reply(fd, sudo_encode_error(tx, sizeof(tx), EAGAIN, msg));
        close_conn(fd);
        return true;
    }
    s->fd = fd;
    s->pid = 0;
    /* Credentials as of connect(), in our user namespace: ids without a
     * mapping here show as the overflow id and are refused too. */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        refuse(s, errno, "cannot identify the caller");
        return true;
    }
    if (cred.uid != 0 && cred.uid != SUDO_USER_UID) {
        (void)snprintf(msg, sizeof(msg), "uid %u is not allowed to use sudo in this sandbox",
                       (unsigned)cred.uid);
        refuse(s, EPERM, msg);
    }
    return true;
}

void
sudo_server_dispatch(const struct pollfd *pfd, size_t n)
{
    bool listener = false;

    /* Sessions first: accepting last means a descriptor closed in this
     * round cannot come back as a new session while stale revents for it
     * are still ahead of us. */
    for (size_t i = 0; i < n; i++) {
        if (!pfd[i].revents)
            continue;
        if (poll_slot[i] < 0) {
            listener = true;
            continue;
        }
        struct session *s = &sessions[poll_slot[i]];
        if (s->fd == pfd[i].fd)
            session_read(s);
    }
    for (int i = 0; listener && i < SUDO_MAX_SESSIONS && accept_one(); i++)
        ;
}

bool
sudo_server_reaped(pid_t pid, int status)
{
    if (listen_fd < 0)
        return false;
    for (size_t i = 0; i < SUDO_MAX_SESSIONS; i++) {
        struct session *s = &sessions[i];
        if (s->fd >= 0 && s->pid == pid) {
            reply(s->fd, sudo_encode_exit(tx, sizeof(tx), status));
            end_session(s, false);
            return true;
        }
    }
    return false;
}
