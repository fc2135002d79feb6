/*
 * spawn-bench.c - the baseline: fork + exec + wait of a program, timed per run.
 *
 * `make bench` runs it on /bin/true (the floor any sandbox exec is compared
 * with) and on bwrap running /bin/true (what a fresh namespace sandbox per
 * command costs). Each iteration forks, the child execs the program with
 * the benchmark's own stdio, and the parent waits for it; the time from
 * before fork() to after waitpid() is one sample. A run that does not exit
 * 0 stops the benchmark. Besides the latencies it reports the CPU time per
 * run of the parent and of the child (getrusage). Not a general process launcher: no shell, no PATH
 * lookup (give an absolute path), no output capture.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"

static uint64_t arg_n = 2000;
static uint64_t arg_warmup = 200;
static const char *arg_name = "spawn";

static void
usage(FILE *f)
{
    fprintf(f, "Usage: spawn-bench [-n N] [-w WARMUP] [--name NAME] -- /abs/program [ARGS...]\n"
               "\n"
               "Times N fork+exec+wait runs of the program after WARMUP untimed ones and\n"
               "prints NAME.{n,min_us,p50_us,p90_us,p99_us,max_us,mean_us}=VALUE lines, and\n"
               "the CPU per run of parent and child (NAME.parent_cpu_us, NAME.child_cpu_us).\n");
}

/* One fork+exec+wait; returns the child's exit status or -errno. */
static int
run_once(char *const *argv, uint64_t *ret_ns)
{
    uint64_t t0 = bench_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    pid_t w;
    do
        w = waitpid(pid, &status, 0);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        return -errno;
    *ret_ns = bench_now_ns() - t0;
    return status;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
            {"name", required_argument, NULL, 'N'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
    };
    struct samples s;
    int c, r;

    while ((c = getopt_long(argc, argv, "+n:w:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (bench_parse_u64(optarg, &arg_n) < 0 || arg_n == 0) {
                fprintf(stderr, "spawn-bench: -n must be a positive integer, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'w':
            if (bench_parse_u64(optarg, &arg_warmup) < 0) {
                fprintf(stderr, "spawn-bench: -w must be an integer, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'N':
            arg_name = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc || argv[optind][0] != '/') {
        usage(stderr);
        return 2;
    }
    char *const *prog = argv + optind;
    uint64_t self0 = 0, kids0 = 0;

    if (samples_init(&s, (size_t)arg_n) < 0) {
        fprintf(stderr, "spawn-bench: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < arg_warmup + arg_n; i++) {
        uint64_t ns = 0;
        if (i == arg_warmup) {
            self0 = bench_self_cpu_ns();
            kids0 = bench_children_cpu_ns();
        }
        r = run_once(prog, &ns);
        if (r < 0) {
            fprintf(stderr, "spawn-bench: cannot run '%s': %s\n", prog[0], strerror(-r));
            samples_done(&s);
            return 1;
        }
        if (!WIFEXITED(r) || WEXITSTATUS(r) != 0) {
            fprintf(stderr, "spawn-bench: '%s' did not exit 0 (wait status 0x%x)\n", prog[0],
                    (unsigned)r);
            samples_done(&s);
            return 1;
        }
        if (i >= arg_warmup && samples_add(&s, ns) < 0) {
            fprintf(stderr, "spawn-bench: out of memory\n");
            samples_done(&s);
            return 1;
        }
    }
    samples_report(&s, arg_name);
    /* CPU per run: ours (fork, wait) and the child's (exec, the program, exit). */
    bench_result(arg_name, "parent_cpu_us", "%.1f",
                 (double)(bench_self_cpu_ns() - self0) / 1000.0 / (double)arg_n);
    bench_result(arg_name, "child_cpu_us", "%.1f",
                 (double)(bench_children_cpu_ns() - kids0) / 1000.0 / (double)arg_n);
    samples_done(&s);
    return 0;
}
