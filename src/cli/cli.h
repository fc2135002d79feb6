/*
 * cli.h - what the files of the abx command share; never installed.
 *
 * abx.c holds main(), the verb table and the common option and error
 * handling; cmd-*.c implement the verbs on libabx (include/abx/abx.h is the
 * only client header they use); cli-parse.c holds the pure argument parsers,
 * which the unit tests reach through the abx-cli static library.
 */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abx/abx.h"

#define EXIT_FAIL  1 /* the API or the transport failed */
#define EXIT_USAGE 2 /* the command line is wrong */

#define CLI_ID_MAX 64   /* bytes of a sandbox id */
#define CLI_KV_MAX 512  /* --env/--meta options per command */
#define CLI_HELP   -100 /* cli_getopt(): --help was printed */
#define CLI_BAD    -101 /* cli_getopt(): a usage error was printed */

struct verb;

struct cli {
    const char *url; /* ABX_URL or the default */
    const char *key; /* ABX_API_KEY, NULL when unset */
    const struct verb *verb;
    struct abx_client *client; /* made by cli_client() */
};

struct verb {
    const char *name;
    const char *synopsis; /* "ID [--json]" */
    const char *summary;  /* one line */
    const char *help;     /* the options, preformatted */
    int (*run)(struct cli *cli, int argc, char **argv);
};

/* --- abx.c --- */

/* getopt_long() for a verb (argv[0] is the verb). Handles -h/--help
 * (prints the verb's help on stdout, returns CLI_HELP) and unknown or
 * incomplete options (prints what is wrong and the usage on stderr, returns
 * CLI_BAD). Returns the option, or -1 at the end. */
int cli_getopt(struct cli *cli, int argc, char **argv, const char *shortopts,
               const struct option *longopts);
/* Prints "abx VERB: <message>" and the verb's usage on stderr; returns EXIT_USAGE. */
int cli_usage(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "abx VERB: <what>: <libabx's error>" on stderr; returns EXIT_FAIL. */
int cli_fail(struct cli *cli, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prints "abx VERB: <message>" on stderr; returns EXIT_FAIL. */
int cli_error(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "abx VERB: warning: <message>" on stderr. */
void cli_warn(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The client (made on first use). Prints the failure; returns EXIT_FAIL then, else 0. */
int cli_client(struct cli *cli, struct abx_client **ret);
/* Writes all of s and a newline to stdout; EXIT_FAIL (printed) on a write error. */
int cli_print_line(struct cli *cli, const char *s);
/* Flushes stdout; EXIT_FAIL (printed) on a write error, else 0. */
int cli_flush(struct cli *cli);

/* Repeated KEY=VALUE options (--env, --meta). */
struct cli_kv {
    struct abx_kv items[CLI_KV_MAX];
    char *keys[CLI_KV_MAX];
    size_t n;
};

/* Adds arg, given to option opt; EXIT_USAGE (printed) when malformed. */
int cli_kv_add(struct cli *cli, struct cli_kv *l, const char *opt, const char *arg);
void cli_kv_done(struct cli_kv *l);

/* Option values; 0, or EXIT_USAGE with the problem printed. */
int cli_opt_u64(struct cli *cli, const char *opt, const char *arg, uint64_t min, uint64_t *ret);
int cli_opt_decimal(struct cli *cli, const char *opt, const char *arg, double *ret);
int cli_opt_seconds(struct cli *cli, const char *opt, const char *arg, double *ret);

/* --- the verbs (cmd-*.c) --- */

int cmd_create(struct cli *cli, int argc, char **argv);
int cmd_ls(struct cli *cli, int argc, char **argv);
int cmd_info(struct cli *cli, int argc, char **argv);
int cmd_update(struct cli *cli, int argc, char **argv);
int cmd_kill(struct cli *cli, int argc, char **argv);
int cmd_exec(struct cli *cli, int argc, char **argv);
int cmd_ps(struct cli *cli, int argc, char **argv);
int cmd_logs(struct cli *cli, int argc, char **argv);
int cmd_signal(struct cli *cli, int argc, char **argv);
int cmd_cp(struct cli *cli, int argc, char **argv);
int cmd_files(struct cli *cli, int argc, char **argv);
int cmd_rm(struct cli *cli, int argc, char **argv);
int cmd_mkdir(struct cli *cli, int argc, char **argv);
int cmd_mv(struct cli *cli, int argc, char **argv);
int cmd_cat(struct cli *cli, int argc, char **argv);
int cmd_health(struct cli *cli, int argc, char **argv);
int cmd_ready(struct cli *cli, int argc, char **argv);
int cmd_drain(struct cli *cli, int argc, char **argv);
int cmd_metrics(struct cli *cli, int argc, char **argv);

/* --- cli-parse.c: pure parsers; 0 or -errno, ret_ written on success --- */

/* Splits "ID:PATH". Returns 1 and writes the id (NUL-terminated, idsz bytes)
 * and a pointer to PATH ("" stays "") when arg names a sandbox file; 0 when
 * arg is a local path: "-", no ':', an empty prefix, or a prefix with a
 * character outside [A-Za-z0-9_-] (so "./a:b" and "/x:y" are local).
 * -ENAMETOOLONG when the id does not fit. */
int cli_parse_remote(const char *arg, char *ret_id, size_t idsz, const char **ret_path);

/* Splits "KEY=VALUE" at the first '='. ret_key is a heap copy of KEY;
 * ret_value points into arg. -EINVAL without '=' or with an empty KEY. */
int cli_parse_kv(const char *arg, char **ret_key, const char **ret_value);

/* A non-negative decimal ("2", "0.5", ".25") without sign, exponent or
 * junk, at most 15 significant digits. */
int cli_parse_decimal(const char *s, double *ret);

/* Seconds: a decimal with an optional unit s, m or h ("90", "1.5m", "2h"). */
int cli_parse_seconds(const char *s, double *ret);

/* A process id: 1 .. INT32_MAX. */
int cli_parse_pid(const char *s, int *ret);

/* The last component of path, ignoring trailing '/', as a heap string;
 * -EINVAL when there is none ("/", ""). */
int cli_basename(const char *path, char **ret);

/* dir + "/" + name without doubling the '/'; heap string. */
int cli_join(const char *dir, const char *name, char **ret);
