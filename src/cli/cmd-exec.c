/*
 * cmd-exec.c - abx exec and abx ws exec, ps, logs, signal.
 *
 * A foreground exec streams the command's stdout and stderr to ours as they
 * arrive and exits with its exit code. Two helper threads, each with its own
 * client (a client is single-threaded), run beside the stream: one forwards
 * our stdin to the process through /stdin when it cannot be sent up front,
 * one forwards the signals we get (Ctrl-C) to the process. The state they
 * share is static: a helper may still be blocked in read(0) when the exec is
 * over, and then the process simply exits under it. `abx ws exec` is the same
 * code on a workspace, which has no process routes: its stdin goes up front
 * (at most 1 MiB) and signals are not forwarded.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/b64.h"
#include "util/buf.h"
#include "util/fd.h"

#define STDIN_UPFRONT_MAX (1024 * 1024) /* bytes of stdin sent in the exec request */
#define STDIN_CHUNK       (256 * 1024)  /* bytes per /stdin call */
#define STDIN_RETRIES     200           /* /stdin calls refused as too large, then give up */
#define SIGNALS_TO_FORCE  3             /* the third signal ends abx at once */

enum {
    OPT_CWD = 256,
    OPT_ENV,
    OPT_USER,
    OPT_TIMEOUT,
    OPT_IDLE,
    OPT_JSON,
    OPT_OFFSET,
    OPT_NO_GROUP,
};

/* What the helper threads share with the exec. */
static struct {
    struct cli *cli;
    enum cli_scope scope;
    const char *id;
    atomic_int pid; /* 0 until the process has started */
    bool json;
    bool pump; /* forward stdin through /stdin */
    pthread_t stdin_thread;
    bool stdin_started;
    atomic_bool stdin_done;
    struct buf line; /* --json: the NDJSON line being written */
} ex;

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static const char *
signal_name(int sig)
{
    switch (sig) {
    case SIGINT:
        return "INT";
    case SIGTERM:
        return "TERM";
    case SIGHUP:
        return "HUP";
    case SIGQUIT:
        return "QUIT";
    default:
        return "TERM";
    }
}

/* --- stdin --- */

/* Sends fd 0 from here to EOF to the process, then closes its stdin. Uses
 * client c; returns 0 or -errno with the failure printed. */
static int
pump_stdin(struct abx_client *c, const char *id, int pid)
{
    char *chunk = malloc(STDIN_CHUNK);
    int r = 0;

    if (!chunk)
        return -ENOMEM;
    for (;;) {
        ssize_t n = read(STDIN_FILENO, chunk, STDIN_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
            (void)poll(&p, 1, -1);
            continue;
        }
        if (n < 0) {
            r = -errno;
            cli_warn(ex.cli, "cannot read standard input: %s", strerror(errno));
            break;
        }
        if (n == 0) {
            r = abx_process_close_stdin(c, id, pid);
            break;
        }
        /* 413 means abxd still holds 1 MiB the process has not read: wait. */
        for (int tries = 0;; tries++) {
            r = abx_process_stdin(c, id, pid, chunk, (size_t)n, false);
            if (r != -EFBIG || tries >= STDIN_RETRIES)
                break;
            struct timespec ts = {0, 50 * 1000 * 1000};
            (void)nanosleep(&ts, NULL);
        }
        if (r < 0)
            break;
    }
    free(chunk);
    /* The process closed its stdin or ended: nobody wants the rest. */
    if (r == -EPIPE || r == -ENOENT || r == -ESRCH)
        return 0;
    if (r < 0)
        cli_warn(ex.cli, "cannot forward standard input: %s", abx_client_error(c));
    return r;
}

static void *
stdin_thread(void *userdata)
{
    struct abx_client *c = NULL;
    (void)userdata;

    if (abx_client_new(ex.cli->url, ex.cli->key, &c) < 0)
        cli_warn(ex.cli, "cannot forward standard input: out of memory");
    else
        (void)pump_stdin(c, ex.id, atomic_load(&ex.pid));
    abx_client_free(c);
    atomic_store(&ex.stdin_done, true);
    return NULL;
}

/* Reads all of stdin (up to STDIN_UPFRONT_MAX bytes) into spec's stdin: a
 * workspace has no /stdin route to pump the rest through. */
static int
read_stdin_upfront(struct cli *cli, struct abx_exec_spec *spec, struct buf *data)
{
    ssize_t n;

    if (buf_reserve(data, STDIN_UPFRONT_MAX + 1) < 0)
        return cli_error(cli, "out of memory");
    n = read_full(STDIN_FILENO, data->data, STDIN_UPFRONT_MAX + 1);
    if (n < 0)
        return cli_error(cli, "cannot read standard input: %s", strerror((int)-n));
    if (n > STDIN_UPFRONT_MAX)
        return cli_error(cli,
                         "standard input is larger than %d bytes, which is what a workspace exec "
                         "takes (it has no stdin route)",
                         STDIN_UPFRONT_MAX);
    data->len = (size_t)n;
    spec->stdin_data = data->data;
    spec->stdin_len = data->len;
    return 0;
}

/* Fills spec's stdin. A regular file of up to 1 MiB goes up front in the exec
 * request; anything else (pipes, terminals, larger files) is pumped, except
 * in a workspace, which takes only what fits up front. data has room for
 * STDIN_UPFRONT_MAX + 1 bytes. */
static int
prepare_stdin(struct cli *cli, struct abx_exec_spec *spec, struct buf *data)
{
    struct stat st;
    off_t pos;

    if (ex.scope == CLI_WORKSPACE)
        return read_stdin_upfront(cli, spec, data);
    if (fstat(STDIN_FILENO, &st) < 0)
        return cli_error(cli, "cannot inspect standard input: %s", strerror(errno));
    if (S_ISREG(st.st_mode) && (pos = lseek(STDIN_FILENO, 0, SEEK_CUR)) >= 0 &&
        st.st_size - pos <= STDIN_UPFRONT_MAX) {
        /* Read one byte more than fits: the file may have grown. */
        if (buf_reserve(data, STDIN_UPFRONT_MAX + 1) < 0)
            return cli_error(cli, "out of memory");
        ssize_t n = read_full(STDIN_FILENO, data->data, STDIN_UPFRONT_MAX + 1);
        if (n < 0)
            return cli_error(cli, "cannot read standard input: %s", strerror((int)-n));
        if (n <= STDIN_UPFRONT_MAX) {
            data->len = (size_t)n;
            spec->stdin_data = data->data;
            spec->stdin_len = data->len;
            return 0;
        }
        if (lseek(STDIN_FILENO, pos, SEEK_SET) < 0)
            return cli_error(cli, "cannot rewind standard input: %s", strerror(errno));
    }
    spec->stdin_open = true;
    ex.pump = true;
    return 0;
}

/* --- signals --- */

static void *
signal_thread(void *userdata)
{
    struct abx_client *c = NULL;
    sigset_t set;
    int count = 0;
    (void)userdata;

    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(forwarded_signals) / sizeof(forwarded_signals[0]); i++)
        sigaddset(&set, forwarded_signals[i]);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        int pid = atomic_load(&ex.pid);
        if (pid <= 0 || ++count >= SIGNALS_TO_FORCE) {
            /* End abx as the signal would have: default action, unblocked. */
            sigset_t one;
            sigemptyset(&one);
            sigaddset(&one, sig);
            (void)signal(sig, SIG_DFL);
            (void)pthread_sigmask(SIG_UNBLOCK, &one, NULL);
            (void)raise(sig);
            _exit(128 + sig);
        }
        if (!c && abx_client_new(ex.cli->url, ex.cli->key, &c) < 0) {
            cli_warn(ex.cli, "cannot forward SIG%s: out of memory", signal_name(sig));
            continue;
        }
        int r = abx_process_signal(c, ex.id, pid, signal_name(sig), true);
        if (r < 0 && r != -ESRCH)
            cli_warn(ex.cli, "cannot forward SIG%s to process %d: %s", signal_name(sig), pid,
                     abx_client_error(c));
    }
    return NULL;
}

/* Blocks the forwarded signals in every thread and starts the forwarder. */
static int
start_signal_forwarding(struct cli *cli)
{
    sigset_t set;
    pthread_t t;
    int r;

    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(forwarded_signals) / sizeof(forwarded_signals[0]); i++)
        sigaddset(&set, forwarded_signals[i]);
    r = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (r == 0)
        r = pthread_create(&t, NULL, signal_thread, NULL);
    if (r == 0)
        r = pthread_detach(t);
    if (r != 0)
        return cli_error(cli, "cannot start the signal forwarder: %s", strerror(r));
    return 0;
}

/* --- output --- */

/* write_full() that also waits out a non-blocking descriptor. */
static int
write_all(int fd, const void *data, size_t len)
{
    const char *p = data;

    while (len > 0) {
        ssize_t k = write(fd, p, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            (void)poll(&pfd, 1, -1);
            continue;
        }
        if (k < 0)
            return -errno;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

static int
json_line_out(void)
{
    int r = buf_putc(&ex.line, '\n');
    if (r == 0)
        r = write_all(STDOUT_FILENO, ex.line.data, ex.line.len);
    buf_reset(&ex.line);
    return r;
}

static int
on_started(int pid, void *userdata)
{
    int r;
    (void)userdata;

    atomic_store(&ex.pid, pid);
    if (ex.json) {
        if ((r = buf_printf(&ex.line, "{\"pid\":%d}", pid)) < 0 || (r = json_line_out()) < 0)
            return r;
    }
    if (ex.pump) {
        r = pthread_create(&ex.stdin_thread, NULL, stdin_thread, NULL);
        if (r != 0) {
            cli_warn(ex.cli, "cannot forward standard input: %s", strerror(r));
            return 0;
        }
        ex.stdin_started = true;
    }
    return 0;
}

static int
on_output(enum abx_stream stream, const void *data, size_t len, uint64_t offset, void *userdata)
{
    struct cli *cli = userdata;
    int r;

    if (stream == ABX_STREAM_DROPPED && ex.json) {
        r = buf_printf(&ex.line, "{\"dropped\":%zu,\"offset\":%" PRIu64 "}", len, offset);
        return r < 0 ? r : json_line_out();
    }
    if (stream == ABX_STREAM_DROPPED) {
        cli_warn(cli, "%zu bytes of output are no longer kept; resuming at offset %" PRIu64, len,
                 offset);
        return 0;
    }
    if (ex.json) {
        if ((r = buf_printf(&ex.line, "{\"%s\":\"",
                            stream == ABX_STREAM_STDOUT ? "stdout" : "stderr")) < 0 ||
            (r = b64_encode(&ex.line, data, len)) < 0 ||
            (r = buf_printf(&ex.line, "\",\"offset\":%" PRIu64 "}", offset)) < 0)
            return r;
        return json_line_out();
    }
    r = write_all(stream == ABX_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
    if (r < 0)
        cli_warn(cli, "cannot write the command's %s: %s",
                 stream == ABX_STREAM_STDERR ? "stderr" : "stdout", strerror(-r));
    return r;
}

/* --- exec --- */

static int
exec_foreground(struct cli *cli, struct abx_client *c, const char *id,
                const struct abx_exec_spec *spec)
{
    struct abx_exec_result res = {0};
    int r, k;

    /* A workspace has no signal route: a signal ends abx as it would any
     * program, and the command runs on to its deadline. */
    if (ex.scope == CLI_SANDBOX && (r = start_signal_forwarding(cli)))
        return r;
    if (ex.scope == CLI_WORKSPACE)
        k = abx_workspace_exec(c, id, spec, on_started, on_output, cli, &res);
    else
        k = abx_exec(c, id, spec, on_started, on_output, cli, &res);
    if (ex.stdin_started) {
        if (atomic_load(&ex.stdin_done))
            (void)pthread_join(ex.stdin_thread, NULL);
        else
            (void)pthread_detach(ex.stdin_thread); /* blocked in read(0) */
    }
    if (k < 0)
        return cli_fail(cli, k, "cannot run '%s' in %s '%s'", spec->argv[0],
                        cli_scope_noun(ex.scope), id);
    if (ex.json) {
        r = buf_puts(&ex.line, res.json);
        if (r == 0)
            r = json_line_out();
        if (r < 0)
            (void)cli_error(cli, "cannot write to standard output: %s", strerror(-r));
    }
    r = res.exit_code < 0 ? EXIT_FAIL : res.exit_code > 255 ? 255 : res.exit_code;
    abx_exec_result_done(&res);
    return r;
}

static int
exec_background(struct cli *cli, struct abx_client *c, const char *id,
                const struct abx_exec_spec *spec)
{
    struct abx_process_info *p = NULL;
    char pid[16];
    int k, r;

    if (ex.scope == CLI_WORKSPACE)
        k = abx_workspace_exec_background(c, id, spec, &p);
    else
        k = abx_exec_background(c, id, spec, &p);
    if (k < 0)
        return cli_fail(cli, k, "cannot start '%s' in %s '%s'", spec->argv[0],
                        cli_scope_noun(ex.scope), id);
    (void)snprintf(pid, sizeof(pid), "%d", k);
    r = cli_print_line(cli, ex.json ? p->json : pid);
    abx_process_info_free(p);
    if (r == 0)
        r = cli_flush(cli);
    /* The pid is out first, so a caller can watch while stdin flows. */
    if (ex.pump && pump_stdin(c, id, k) < 0)
        r = EXIT_FAIL;
    return r;
}

int
exec_main(struct cli *cli, int argc, char **argv, enum cli_scope scope)
{
    static const struct option opts[] = {
            {"cwd", required_argument, NULL, OPT_CWD},
            {"env", required_argument, NULL, OPT_ENV},
            {"user", required_argument, NULL, OPT_USER},
            {"timeout", required_argument, NULL, OPT_TIMEOUT},
            {"idle-timeout", required_argument, NULL, OPT_IDLE},
            {"stdin", no_argument, NULL, 'i'},
            {"background", no_argument, NULL, 'd'},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_exec_spec spec = {0};
    struct cli_kv env = {0};
    struct buf in;
    struct abx_client *c;
    const char *id = NULL;
    bool background = false, with_stdin = false;
    int o, r = 0;

    buf_init(&in, STDIN_UPFRONT_MAX + 1);
    buf_init(&ex.line, BUF_UNLIMITED);
    ex.cli = cli;
    ex.scope = scope;
    /* '+': options may come before and after ID; the command starts at the
     * next operand (or after "--") and keeps its own options. */
    for (;;) {
        o = cli_getopt(cli, argc, argv, "+hid", opts);
        if (o == -1) {
            if (!id && optind < argc) {
                /* After "--" everything is an operand: ID, then the command. */
                bool after_dashes = !strcmp(argv[optind - 1], "--");
                id = argv[optind++];
                if (!after_dashes)
                    continue;
            }
            break;
        }
        switch (o) {
        case OPT_CWD:
            spec.cwd = optarg;
            break;
        case OPT_ENV:
            r = cli_kv_add(cli, &env, "--env", optarg);
            break;
        case OPT_USER:
            if (strcmp(optarg, "user") != 0 && strcmp(optarg, "root") != 0)
                r = cli_usage(cli, "--user is 'user' or 'root', not '%s'", optarg);
            spec.user = optarg;
            break;
        case OPT_TIMEOUT:
            r = cli_opt_seconds(cli, "--timeout", optarg, &spec.timeout_s);
            spec.has_timeout = true;
            break;
        case OPT_IDLE:
            r = cli_opt_seconds(cli, "--idle-timeout", optarg, &spec.idle_timeout_s);
            break;
        case 'i':
            with_stdin = true;
            break;
        case 'd':
            background = true;
            break;
        case OPT_JSON:
            ex.json = true;
            break;
        default:
            r = o;
            break;
        }
        if (r)
            goto out;
    }
    if (!id) {
        r = cli_usage(cli, "missing the %s", scope == CLI_WORKSPACE ? "workspace" : "sandbox ID");
        goto out;
    }
    if (optind >= argc) {
        r = cli_usage(cli, "missing the command to run");
        goto out;
    }
    spec.argv = (const char *const *)(argv + optind);
    spec.env = env.items;
    spec.n_env = env.n;
    if (with_stdin && (r = prepare_stdin(cli, &spec, &in)))
        goto out;
    if ((r = cli_client(cli, &c)))
        goto out;
    ex.id = id;
    r = background ? exec_background(cli, c, id, &spec) : exec_foreground(cli, c, id, &spec);
out:
    cli_kv_done(&env);
    buf_done(&in);
    buf_done(&ex.line);
    return r;
}

int
cmd_exec(struct cli *cli, int argc, char **argv)
{
    return exec_main(cli, argc, argv, CLI_SANDBOX);
}

/* --- ps, logs, signal --- */

int
cmd_ps(struct cli *cli, int argc, char **argv)
{
    struct abx_process_list *l = NULL;
    struct abx_client *c;
    bool json = false;
    char **args;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 1, "the sandbox ID", &json, &args)))
        return r;
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_process_list(c, args[0], &l);
    if (k < 0)
        return cli_fail(cli, k, "cannot list the processes of sandbox '%s'", args[0]);
    if (json) {
        r = cli_print_line(cli, l->json);
    } else {
        printf("%7s %-8s %5s %-24s %10s  %s\n", "PID", "STATE", "EXIT", "STARTED", "DURATION",
               "COMMAND");
        for (size_t i = 0; i < l->n; i++) {
            const struct abx_process_info *p = l->items[i];
            char exit_s[16] = "-", dur[24] = "-";
            if (!p->running)
                (void)snprintf(exit_s, sizeof(exit_s), "%d", p->exit_code);
            if (p->duration_ms >= 0)
                (void)snprintf(dur, sizeof(dur), "%.3f s", (double)p->duration_ms / 1000.0);
            printf("%7d %-8s %5s %-24s %10s ", p->pid, p->running ? "running" : "exited", exit_s,
                   p->started_at ? p->started_at : "-", dur);
            for (size_t a = 0; a < p->argc; a++)
                printf(" %s", p->argv[a]);
            printf("\n");
        }
    }
    abx_process_list_free(l);
    return r;
}

int
cmd_logs(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"offset", required_argument, NULL, OPT_OFFSET},
            {"follow", no_argument, NULL, 'f'},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_client *c;
    uint64_t offset = 0;
    bool follow = false;
    int o, r = 0, k, pid;

    while (r == 0 && (o = cli_getopt(cli, argc, argv, "hf", opts)) != -1) {
        if (o == OPT_OFFSET)
            r = cli_opt_u64(cli, "--offset", optarg, 0, &offset);
        else if (o == 'f')
            follow = true;
        else
            r = o;
    }
    if (r)
        return r;
    if (argc - optind < 2)
        return cli_usage(cli, "missing %s",
                         argc - optind < 1 ? "the sandbox ID and the PID" : "the PID");
    if (argc - optind > 2)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind + 2]);
    if (cli_parse_pid(argv[optind + 1], &pid) < 0)
        return cli_usage(cli, "'%s' is not a process id", argv[optind + 1]);
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_process_output(c, argv[optind], pid, offset, follow, on_output, cli, NULL);
    if (k < 0)
        return cli_fail(cli, k, "cannot get the output of process %d in sandbox '%s'", pid,
                        argv[optind]);
    return 0;
}

int
cmd_signal(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"no-group", no_argument, NULL, OPT_NO_GROUP},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_client *c;
    bool group = true;
    int o, r, k, pid;

    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1) {
        if (o != OPT_NO_GROUP)
            return o;
        group = false;
    }
    if (argc - optind < 3)
        return cli_usage(cli, "expected ID PID SIGNAL");
    if (argc - optind > 3)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind + 3]);
    if (cli_parse_pid(argv[optind + 1], &pid) < 0)
        return cli_usage(cli, "'%s' is not a process id", argv[optind + 1]);
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_process_signal(c, argv[optind], pid, argv[optind + 2], group);
    if (k < 0)
        return cli_fail(cli, k, "cannot signal process %d in sandbox '%s'", pid, argv[optind]);
    return 0;
}
