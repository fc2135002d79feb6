/*
 * sudo.c - abx-sudo: a sandbox's /usr/bin/sudo. Asks the sandbox's init to
 * run a command as sandbox root, with our stdin, stdout and stderr.
 *
 * Built static (it must not depend on the sandbox's libraries) and bound
 * read-only over the host's setuid sudo inside each sandbox (ns mode). It
 * holds no privilege: init decides, by our uid, whether to run the command
 * (sudo-proto.h has the wire format, ../init/sudo-server.c the other end).
 * "user" may run anything as root, without a password, like E2B's image;
 * the command still runs under no_new_privs and the sandbox's seccomp
 * filter.
 *
 * The common command line of sudo 1.9 is understood; options that only make
 * sense with a policy or a password are accepted and ignored, other users
 * than root are refused. We forward the signals a terminal or a caller
 * sends us to the command, and exit as it did.
 *
 * This is not sudo: no sudoers, no plugins, no I/O logging, no PTY.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/sudo/sudo-proto.h"

#define SECURE_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define TOOLBIN     "/.toolbin" /* tool shims (docs/tools.md) stay first on PATH */
#define ROOT_HOME   "/root"
#define ROOT_SHELL  "/bin/bash"
#define MAX_ENV     256  /* entries of the environment we build */
#define MAX_CMDLINE 4096 /* bytes of SUDO_COMMAND */
#define PASSWD_MAX  (64 * 1024)

extern char **environ;

static const char *arg_user = "root";
static const char *arg_chdir;
static const char *arg_keep; /* --preserve-env=LIST */
static bool arg_preserve_env, arg_login, arg_shell, arg_list, arg_validate, arg_reset;

/* Variables sudo's env_reset keeps from the caller (a subset of sudo's list). */
static const char *const keep_vars[] = {
        "TERM", "COLORTERM", "COLUMNS",    "LINES",     "LANG", "LANGUAGE", "LC_*",
        "TZ",   "DISPLAY",   "XAUTHORITY", "LS_COLORS", "PS1",  "PS2",      NULL,
};

static char msgbuf[SUDO_MAX_MSG];
static const char *new_env[MAX_ENV + 1];
static size_t nenv;

static void __attribute__((noreturn)) usage(int code)
{
    fputs("usage: sudo -h | -V | -l | -v | -k\n"
          "usage: sudo [-EHnS] [-D directory] [-u root] [VAR=value] [-i | -s] [command [arg ...]]\n"
          "\n"
          "Runs a command as the sandbox's root. \"user\" needs no password; the command\n"
          "still runs under no_new_privs and the sandbox's seccomp filter.\n"
          "\n"
          "  -D, --chdir=dir             run the command in dir\n"
          "  -E, --preserve-env          keep the caller's environment\n"
          "      --preserve-env=list     keep these variables too\n"
          "  -H, --set-home              HOME=/root (the default)\n"
          "  -h, --help                  this help\n"
          "  -i, --login                 root's login shell, in /root\n"
          "  -k, -K                      accepted (no credentials are cached)\n"
          "  -l, --list                  what may be run\n"
          "  -n, --non-interactive       accepted (never prompts)\n"
          "  -S, --stdin                 accepted (no password)\n"
          "  -s, --shell                 $SHELL, or root's shell\n"
          "  -u, --user=root             the only user there is\n"
          "  -V, --version               version\n"
          "  -v, --validate              accepted (no credentials)\n"
          "  --                          end of options\n",
          code ? stderr : stdout);
    exit(code);
}

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
    va_list ap;

    fputs("sudo: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void
set_user(const char *u)
{
    if (strcmp(u, "root") != 0 && strcmp(u, "#0") != 0)
        die("only root is available in this sandbox (not '%s')", u);
    arg_user = u;
}

/* Long option name with an optional "=value"; returns the value or NULL. */
static bool
long_opt(const char *arg, const char *name, const char **ret_value)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return false;
    if (arg[n] == '\0') {
        *ret_value = NULL;
        return true;
    }
    if (arg[n] == '=') {
        *ret_value = arg + n + 1;
        return true;
    }
    return false;
}

/* Parses options up to the first non-option (as sudo does); returns the
 * index of the command. */
static int
parse_argv(int argc, char **argv)
{
    int i = 1;
    const char *v;

    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            return i + 1;
        if (a[0] != '-' || a[1] == '\0')
            return i;
        if (a[1] == '-') {
            if (long_opt(a, "--preserve-env", &v)) {
                if (v)
                    arg_keep = v;
                else
                    arg_preserve_env = true;
            } else if (long_opt(a, "--user", &v) || long_opt(a, "--chdir", &v)) {
                if (!v && ++i >= argc)
                    die("option '%s' needs an argument", a);
                if (!v)
                    v = argv[i];
                if (a[2] == 'u')
                    set_user(v);
                else
                    arg_chdir = v;
            } else if (!strcmp(a, "--login")) {
                arg_login = true;
            } else if (!strcmp(a, "--shell")) {
                arg_shell = true;
            } else if (!strcmp(a, "--list")) {
                arg_list = true;
            } else if (!strcmp(a, "--validate")) {
                arg_validate = true;
            } else if (!strcmp(a, "--reset-timestamp") || !strcmp(a, "--remove-timestamp")) {
                arg_reset = true;
            } else if (!strcmp(a, "--help")) {
                usage(0);
            } else if (!strcmp(a, "--version")) {
                puts("Sudo version 1.9 (abx-sudo: runs commands as the sandbox's root)");
                exit(0);
            } else if (strcmp(a, "--non-interactive") != 0 && strcmp(a, "--set-home") != 0 &&
                       strcmp(a, "--stdin") != 0) {
                fprintf(stderr, "sudo: unrecognized option '%s'\n", a);
                usage(1);
            }
            continue;
        }
        for (const char *c = a + 1; *c; c++) {
            switch (*c) {
            case 'E':
                arg_preserve_env = true;
                break;
            case 'i':
                arg_login = true;
                break;
            case 's':
                arg_shell = true;
                break;
            case 'l':
                arg_list = true;
                break;
            case 'v':
                arg_validate = true;
                break;
            case 'h':
                usage(0);
            case 'V':
                puts("Sudo version 1.9 (abx-sudo: runs commands as the sandbox's root)");
                exit(0);
            case 'k':
            case 'K':
                arg_reset = true;
                break;
            case 'n':
            case 'H':
            case 'S':
                break;
            case 'u':
            case 'D':
                v = c[1] ? c + 1 : (++i < argc ? argv[i] : NULL);
                if (!v)
                    die("option requires an argument -- '%c'", *c);
                if (*c == 'u')
                    set_user(v);
                else
                    arg_chdir = v;
                goto next; /* the rest of the cluster was the value */
            default:
                fprintf(stderr, "sudo: invalid option -- '%c'\n", *c);
                usage(1);
            }
        }
    next:;
    }
    return i;
}

static void
env_add(const char *entry)
{
    const char *eq = strchr(entry, '=');
    size_t n = eq ? (size_t)(eq - entry) + 1 : strlen(entry);

    for (size_t i = 0; i < nenv; i++)
        if (!strncmp(new_env[i], entry, n)) {
            new_env[i] = entry;
            return;
        }
    if (nenv >= MAX_ENV)
        die("%s: too many environment variables", entry);
    new_env[nenv++] = entry;
}

static char *
env_fmt(const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 2;
    char *s = malloc(n);
    if (!s)
        die("%s", "out of memory");
    (void)snprintf(s, n, "%s=%s", name, value);
    return s;
}

static bool
matches(const char *entry, const char *pattern)
{
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*')
        return !strncmp(entry, pattern, n - 1);
    return !strncmp(entry, pattern, n) && entry[n] == '=';
}

/* Whether name is one of the comma-separated names in list. */
static bool
in_list(const char *entry, const char *list)
{
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && !strncmp(entry, p, n) && entry[n] == '=')
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

/* Name, home and uid of the caller from /etc/passwd ("#uid" if absent). */
static void
caller_name(uid_t uid, char *name, size_t size)
{
    static char pw[PASSWD_MAX];
    (void)snprintf(name, size, "#%u", (unsigned)uid);
    int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, pw, sizeof(pw) - 1);
    close(fd);
    if (n <= 0)
        return;
    pw[n] = '\0';
    for (char *line = strtok(pw, "\n"); line; line = strtok(NULL, "\n")) {
        char *f[4] = {line};
        int k = 1;
        for (char *p = line; *p && k < 4; p++)
            if (*p == ':') {
                *p = '\0';
                f[k++] = p + 1;
            }
        if (k < 4)
            continue;
        char *colon = strchr(f[2], ':');
        if (colon)
            *colon = '\0';
        char num[16];
        (void)snprintf(num, sizeof(num), "%u", (unsigned)uid);
        if (!strcmp(f[2], num)) {
            (void)snprintf(name, size, "%s", f[0]);
            return;
        }
    }
}

/* The PATH for the command: sudo's secure_path, with the tool shims first
 * when the caller had them. */
static const char *
command_path(void)
{
    const char *p = getenv("PATH");
    if (p && (!strncmp(p, TOOLBIN ":", strlen(TOOLBIN) + 1) || strstr(p, ":" TOOLBIN ":")))
        return TOOLBIN ":" SECURE_PATH;
    return SECURE_PATH;
}

static void
build_env(const char *shell, const char *cmdline)
{
    char name[64], num[16];
    uid_t uid = getuid();

    if (arg_preserve_env) {
        for (char **e = environ; *e; e++)
            env_add(*e);
    } else {
        for (char **e = environ; *e; e++)
            for (size_t i = 0; keep_vars[i]; i++)
                if (matches(*e, keep_vars[i]))
                    env_add(*e);
        env_add(env_fmt("PATH", command_path()));
        env_add("HOME=" ROOT_HOME);
        env_add(env_fmt("SHELL", shell));
        env_add("MAIL=/var/mail/root");
    }
    if (arg_keep)
        for (char **e = environ; *e; e++)
            if (in_list(*e, arg_keep))
                env_add(*e);
    if (arg_login)
        env_add("HOME=" ROOT_HOME);
    env_add("USER=root");
    env_add("LOGNAME=root");
    caller_name(uid, name, sizeof(name));
    env_add(env_fmt("SUDO_USER", name));
    (void)snprintf(num, sizeof(num), "%u", (unsigned)uid);
    env_add(env_fmt("SUDO_UID", num));
    (void)snprintf(num, sizeof(num), "%u", (unsigned)getgid());
    env_add(env_fmt("SUDO_GID", num));
    env_add(env_fmt("SUDO_COMMAND", cmdline));
    new_env[nenv] = NULL;
}

/* sudo -i/-s CMD...: one -c string, each argument's special characters
 * backslash-escaped, as sudo does. */
static char *
shell_command(char **args)
{
    size_t n = 1;
    for (char **a = args; *a; a++)
        n += 2 * strlen(*a) + 1;
    char *s = malloc(n), *d = s;
    if (!s)
        die("%s", "out of memory");
    for (char **a = args; *a; a++) {
        if (a != args)
            *d++ = ' ';
        for (const char *c = *a; *c; c++) {
            bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                         (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '$';
            if (!plain)
                *d++ = '\\';
            *d++ = *c;
        }
    }
    *d = '\0';
    return s;
}

/* Finds file in path for SUDO_COMMAND ("" when not found there). */
static const char *
which(const char *file, const char *path, char *buf, size_t size)
{
    if (strchr(file, '/'))
        return file;
    for (const char *p = path; p;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        struct stat st;
        int k = snprintf(buf, size, "%.*s/%s", (int)n, p, file);
        if (n && k > 0 && (size_t)k < size && stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
            (st.st_mode & 0111))
            return buf;
        p = colon ? colon + 1 : NULL;
    }
    return file;
}

static int
connect_init(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(SUDO_SOCKET_NAME);
    int sz = SUDO_SOCKET_BYTES;

    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("cannot create a socket: %s", strerror(errno));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    memcpy(a.sun_path + 1, SUDO_SOCKET_NAME, n);
    if (connect(fd, (struct sockaddr *)&a,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0)
        die("cannot reach the sandbox's init (is this an abx sandbox?): %s", strerror(errno));
    return fd;
}

static void
send_run(int sock, const char *cwd, char **cmd)
{
    int fds[3];
    char cbuf[CMSG_SPACE(sizeof(fds))];

    long n = sudo_encode_run(msgbuf, sizeof(msgbuf), cwd, (const char *const *)cmd, new_env);
    if (n < 0)
        die("%s: argument list too long", cmd[0]);
    for (int i = 0; i < 3; i++) {
        fds[i] = i;
        if (fcntl(i, F_GETFD) < 0 && (fds[i] = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
            die("cannot open /dev/null: %s", strerror(errno));
    }
    memset(cbuf, 0, sizeof(cbuf));
    struct iovec iov = {msgbuf, (size_t)n};
    struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(cm), fds, sizeof(fds));
    while (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0) {
        /* init refused us and shut the connection: its reason is queued */
        if (errno == EPIPE)
            return;
        if (errno != EINTR)
            die("cannot send the command to the sandbox's init: %s", strerror(errno));
    }
}

/* Forwards signals until init reports; returns the command's wait status. */
static int
wait_command(int sock, int sfd)
{
    struct pollfd pfd[2] = {{.fd = sock, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    char rx[SUDO_MAX_ERROR + 64], sig[64];

    for (;;) {
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll: %s", strerror(errno));
        }
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            int s = (int)si.ssi_signo;
            if (s == SIGTSTP)
                s = SIGSTOP; /* the command is not in our terminal's job */
            long n = sudo_encode_signal(sig, sizeof(sig), s);
            if (n > 0)
                (void)send(sock, sig, (size_t)n, MSG_NOSIGNAL);
            if ((int)si.ssi_signo == SIGTSTP)
                (void)kill(getpid(), SIGSTOP); /* and stop with it; SIGCONT follows */
        }
        if (!pfd[0].revents)
            continue;
        ssize_t k = recv(sock, rx, sizeof(rx), 0);
        if (k < 0 && errno == EINTR)
            continue;
        struct sudo_reply r;
        if (k <= 0 || sudo_decode_reply(rx, (size_t)k, &r) < 0)
            die("%s", "lost the connection to the sandbox's init");
        if (r.type == SUDO_ERROR) {
            fprintf(stderr, "sudo: %s: %s\n", r.msg, strerror((int)r.errnum));
            exit(1);
        }
        return r.status;
    }
}

int
main(int argc, char **argv)
{
    static const int forward[] = {SIGINT,  SIGTERM,  SIGHUP,  SIGQUIT, SIGUSR1,
                                  SIGUSR2, SIGWINCH, SIGTSTP, SIGCONT, SIGALRM};
    char **cmd, *shell_argv[5];
    const char *shell = ROOT_SHELL, *cwd;
    char cwdbuf[4096], cmdline[MAX_CMDLINE], pathbuf[4096];
    sigset_t mask;

    int first = parse_argv(argc, argv);
    /* VAR=value before the command sets it for the command. */
    int assigns = first;
    while (assigns < argc && strchr(argv[assigns], '=') && argv[assigns][0] != '=')
        assigns++;
    cmd = argv + assigns;

    if (arg_list) {
        char name[64];
        caller_name(getuid(), name, sizeof(name));
        printf("User %s may run the following commands on this sandbox:\n"
               "    (root) NOPASSWD: ALL\n",
               name);
        return 0;
    }
    if (assigns == argc && !arg_login && !arg_shell) {
        if (arg_validate || arg_reset)
            return 0; /* no credentials to validate or forget */
        usage(1);
    }
    if (arg_login || arg_shell) {
        const char *sh = getenv("SHELL");
        if (arg_shell && !arg_login && sh && sh[0] == '/')
            shell = sh;
        if (access(shell, X_OK) < 0)
            shell = "/bin/sh";
        int k = 0;
        shell_argv[k++] = (char *)(uintptr_t)shell;
        if (arg_login)
            shell_argv[k++] = (char *)"-l";
        if (assigns < argc) {
            shell_argv[k++] = (char *)"-c";
            shell_argv[k++] = shell_command(cmd);
        }
        shell_argv[k] = NULL;
        cmd = shell_argv;
    }

    if (arg_chdir)
        cwd = arg_chdir;
    else if (arg_login)
        cwd = ROOT_HOME;
    else
        cwd = getcwd(cwdbuf, sizeof(cwdbuf)) ? cwdbuf : "/";
    if (cwd[0] != '/')
        die("%s: the directory must be an absolute path", cwd);

    /* SUDO_COMMAND: the resolved command and its arguments, cut to fit. */
    size_t o = 0;
    for (char **a = cmd; *a && o < sizeof(cmdline) - 1; a++) {
        const char *s = a == cmd ? which(*a, command_path(), pathbuf, sizeof(pathbuf)) : *a;
        int k = snprintf(cmdline + o, sizeof(cmdline) - o, "%s%s", a == cmd ? "" : " ", s);
        if (k < 0)
            break;
        o += (size_t)k;
    }
    cmdline[sizeof(cmdline) - 1] = '\0';
    build_env(shell, cmdline);
    for (int i = first; i < assigns; i++)
        env_add(argv[i]);
    new_env[nenv] = NULL;

    /* Block what we forward before init can start the command. */
    sigemptyset(&mask);
    for (size_t i = 0; i < sizeof(forward) / sizeof(forward[0]); i++)
        sigaddset(&mask, forward[i]);
    (void)sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        die("signalfd: %s", strerror(errno));

    int sock = connect_init();
    send_run(sock, cwd, cmd);
    int status = wait_command(sock, sfd);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        /* Die the same way, so a shell sees what the command did. */
        int s = WTERMSIG(status);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, s);
        (void)signal(s, SIG_DFL);
        (void)sigprocmask(SIG_UNBLOCK, &one, NULL);
        (void)kill(getpid(), s);
        return 128 + s;
    }
    return 1;
}
