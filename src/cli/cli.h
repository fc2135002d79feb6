/*
 * cli.h - what the files of the abx command share; never installed.
 *
 * abx.c holds main(), the verb tables and the common option and error
 * handling; cmd-*.c implement the verbs on libabx (include/abx/abx.h is the
 * only client header they use); cli-parse.c holds the pure argument parsers,
 * which the unit tests reach through the abx-cli static library. A verb
 * group (`abx ws ...`, `abx store ...`) is a verb whose sub-verbs have their
 * own table. exec and the file verbs are written once for a sandbox and a
 * workspace (enum cli_scope); `abx exec` and `abx ws exec` differ only there.
 */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "abx/abx.h"
#include "util/buf.h"

#define EXIT_FAIL  1 /* the API or the transport failed */
#define EXIT_USAGE 2 /* the command line is wrong */

#define CLI_ID_MAX       64   /* bytes of a sandbox or workspace id */
#define CLI_IF_MATCH_MAX 128  /* bytes of an --if-match value */
#define CLI_KV_MAX       512  /* --env/--meta options per command */
#define CLI_HELP         -100 /* cli_getopt(): --help was printed */
#define CLI_BAD          -101 /* cli_getopt(): a usage error was printed */

struct verb;

struct cli {
    const char *url; /* ABX_URL or the default */
    const char *key; /* ABX_API_KEY, NULL when unset */
    const struct verb *verb;
    struct abx_client *client; /* made by cli_client() */
};

struct verb {
    const char *name;     /* "create"; in a group with the group's name: "ws create" */
    const char *synopsis; /* "ID [--json]" */
    const char *summary;  /* one line */
    const char *help;     /* the options, preformatted; for a group, what it is about */
    int (*run)(struct cli *cli, int argc, char **argv); /* NULL for a group */
    const struct verb *sub; /* a group's verbs, ended by an entry without a name */
};

/* Whose files and processes exec and the file verbs work on: the operand is
 * a sandbox id (`abx exec ID`) or a workspace (`abx ws exec WS`). */
enum cli_scope {
    CLI_SANDBOX,
    CLI_WORKSPACE,
};

/* --- output.c --- */

/* Prints "abx VERB: <message>" and the verb's usage on stderr; returns EXIT_USAGE. */
int cli_usage(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "abx VERB: <what>: <libabx's error>" on stderr; returns EXIT_FAIL. */
int cli_fail(struct cli *cli, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prints "abx VERB: <message>" on stderr; returns EXIT_FAIL. */
int cli_error(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "abx VERB: warning: <message>" on stderr. */
void cli_warn(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes all of s and a newline to stdout; EXIT_FAIL (printed) on a write error. */
int cli_print_line(struct cli *cli, const char *s);
/* s made safe for a terminal (util/utf8.h: backslash, control characters
 * and bytes that are not UTF-8 as \\, \n, \xNN); a file name may hold
 * any of them. The caller frees it; aborts on OOM, like the CLI does. */
char *cli_escaped(const char *s);
/* Flushes stdout; EXIT_FAIL (printed) on a write error, else 0. */
int cli_flush(struct cli *cli);
/* v's help (for a group: its verbs) on f, as --help prints it. */
void cli_print_verb_help(FILE *f, const struct verb *v);
/* A group's usage and verbs on f. */
void cli_print_group_help(FILE *f, const struct verb *g);

/* --- common.c --- */

/* getopt_long() for a verb (argv[0] is the verb). Handles -h/--help
 * (prints the verb's help on stdout, returns CLI_HELP) and unknown or
 * incomplete options (prints what is wrong and the usage on stderr, returns
 * CLI_BAD). Returns the option, or -1 at the end. */
int cli_getopt(struct cli *cli, int argc, char **argv, const char *shortopts,
               const struct option *longopts);
/* For verbs whose only option is --json: parses it and exactly nargs
 * operands (what names them in "missing ..."), left at *ret_args. Returns 0,
 * or what the verb should exit with (help printed, usage error). */
int cli_json_operands(struct cli *cli, int argc, char **argv, int nargs, const char *what,
                      bool *ret_json, char ***ret_args);
/* The client (made on first use). Prints the failure; returns EXIT_FAIL then, else 0. */
int cli_client(struct cli *cli, struct abx_client **ret);

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
int cmd_ws_create(struct cli *cli, int argc, char **argv);
int cmd_ws_ls(struct cli *cli, int argc, char **argv);
int cmd_ws_info(struct cli *cli, int argc, char **argv);
int cmd_ws_rm(struct cli *cli, int argc, char **argv);
int cmd_ws_exec(struct cli *cli, int argc, char **argv);
int cmd_ws_cp(struct cli *cli, int argc, char **argv);
int cmd_ws_cat(struct cli *cli, int argc, char **argv);
int cmd_ws_files(struct cli *cli, int argc, char **argv);
int cmd_ws_rm_file(struct cli *cli, int argc, char **argv);
int cmd_ws_mkdir(struct cli *cli, int argc, char **argv);
int cmd_ws_mv(struct cli *cli, int argc, char **argv);
int cmd_ws_flush(struct cli *cli, int argc, char **argv);
int cmd_ws_close(struct cli *cli, int argc, char **argv);
int cmd_ws_manifest(struct cli *cli, int argc, char **argv);
int cmd_store_check(struct cli *cli, int argc, char **argv);
int cmd_store_gc(struct cli *cli, int argc, char **argv);
int cmd_tools_ls(struct cli *cli, int argc, char **argv);
int cmd_tools_schema(struct cli *cli, int argc, char **argv);
int cmd_tools_call(struct cli *cli, int argc, char **argv);
int cmd_tools_build(struct cli *cli, int argc, char **argv); /* cmd-tools-build.c */
int cmd_template_ls(struct cli *cli, int argc, char **argv); /* cmd-templates.c */
int cmd_template_show(struct cli *cli, int argc, char **argv);
int cmd_template_build(struct cli *cli, int argc, char **argv);
int cmd_commands(struct cli *cli, int argc, char **argv);
int cmd_run(struct cli *cli, int argc, char **argv);
int cmd_code(struct cli *cli, int argc, char **argv);

/* The verbs shared by both scopes: cmd_exec() is exec_main(..., CLI_SANDBOX),
 * cmd_ws_exec() exec_main(..., CLI_WORKSPACE), and so on. */
int exec_main(struct cli *cli, int argc, char **argv, enum cli_scope scope); /* cmd-exec.c */
int files_cp(struct cli *cli, int argc, char **argv, enum cli_scope scope);  /* cmd-files.c */
int files_cat(struct cli *cli, int argc, char **argv, enum cli_scope scope);
int files_list(struct cli *cli, int argc, char **argv, enum cli_scope scope);
int files_rm(struct cli *cli, int argc, char **argv, enum cli_scope scope);
int files_mkdir(struct cli *cli, int argc, char **argv, enum cli_scope scope);
int files_mv(struct cli *cli, int argc, char **argv, enum cli_scope scope);
/* "sandbox" or "workspace", for messages (common.c). */
const char *cli_scope_noun(enum cli_scope scope);

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

/* An --if-match value: a version or content hash, optionally in ETag quotes
 * ("\"abc\"" is "abc"); "" means "only if the file does not exist". ret is a
 * heap copy without the quotes. -EINVAL for a '"' inside, a control
 * character or more than CLI_IF_MATCH_MAX bytes. */
int cli_parse_if_match(const char *arg, char **ret);

/* --- cli-args.c: a custom command's arguments (abx run); pure --- */

#define CLI_ARGS_MAX      64            /* values in one abx run */
#define CLI_ARGS_JSON_MAX (1024 * 1024) /* bytes of the arguments' JSON */

/* The JSON object of a command's arguments, built one option at a time.
 * Functions return 0 (or the words used) or -errno with error set. */
struct cli_args {
    const struct abx_command *cmd; /* borrowed; its declared arguments */
    struct buf json;               /* "{" and the members so far */
    char *names[CLI_ARGS_MAX];     /* the names given so far */
    size_t n;
    char error[512]; /* why the last call failed */
};

void cli_args_init(struct cli_args *a, const struct abx_command *cmd);
void cli_args_done(struct cli_args *a);
/* "--arg NAME=VALUE": a declared NAME gets its type's form; an undeclared
 * one goes as a string (abxd refuses it, listing the declared ones).
 * -EINVAL without '=' or NAME, -EEXIST when NAME is given twice. */
int cli_args_add_kv(struct cli_args *a, const char *kv);
/* The option argv[0]: "--NAME VALUE" (uses argv[1]), "--NAME=VALUE", for a
 * bool argument "--NAME" (true) and "--no-NAME" (false); '-' in NAME
 * stands for '_'. Returns the words used (1 or 2); -ENOENT for an
 * undeclared option (error lists the declared ones), -EINVAL for a missing
 * value or a non-option, -EEXIST when the argument is given twice. */
int cli_args_add_option(struct cli_args *a, int argc, char **argv);
/* Closes the object (call once); *ret points into a, "{}" when empty. */
int cli_args_finish(struct cli_args *a, const char **ret);

/* Appends s as a JSON string (control characters escaped). */
int cli_json_string(struct buf *b, const char *s);
/* Whether s is a JSON number that abxd can take as type (ABX_ARG_INT: an
 * integer within int64; ABX_ARG_FLOAT: a finite double). */
bool cli_json_number_ok(const char *s, enum abx_arg_type type);
/* Appends v as a JSON number when cli_json_number_ok(), else as a string. */
int cli_json_value(struct buf *b, enum abx_arg_type type, const char *v);

/* The verb called name in list (ended by an entry without a name). In a
 * group's list (group != NULL) entries are named "<group> <name>". NULL when
 * there is none. */
const struct verb *cli_find_verb(const struct verb *list, const char *group, const char *name);
