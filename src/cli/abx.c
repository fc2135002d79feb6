/*
 * abx.c - the abx command: the verb tables and their dispatch.
 *
 * `abx VERB [OPTIONS] ARGS...` drives one abxd (ABX_URL, ABX_API_KEY) through
 * libabx. Data goes to stdout, one-line errors to stderr; exit 0 on success,
 * 1 when the API or the transport failed, 2 for a wrong command line (exec
 * exits with the command's own code). Verb groups take one more word:
 * `abx ws VERB ...`, `abx store VERB`. The verbs live in cmd-*.c; what they
 * share, in common.c (options, the client) and output.c (errors, usage).
 * This file only dispatches: nothing calls back into it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* What exec and ws exec share in their help. */
#define EXEC_OPTIONS                                                              \
    "      --cwd DIR         working directory (absolute, or relative to HOME)\n" \
    "      --env K=V         an environment variable (repeatable)\n"              \
    "      --user USER       'user' (default) or 'root'\n"                        \
    "      --timeout S       total deadline (0 = none; exit 124 when reached)\n"  \
    "      --idle-timeout S  deadline without any output (0 = none)\n"

#define IF_MATCH_OPTION                                                                   \
    "      --if-match V      only if the file is still version V (a version or content\n" \
    "                        hash, as 'abx ws files --json' shows); '' = only if it\n"    \
    "                        does not exist. Exit 1 when it no longer holds.\n"

static const struct verb ws_verbs[] = {
        {"ws create", "[OPTIONS]", "create a workspace and print its id",
         "      --id ID           its id: 1-64 of a-z, 0-9, '-' and '_' (default: random)\n"
         "      --cpu X           cores of its sandboxes (fractions allowed, e.g. 0.5)\n"
         "      --memory-mb N     memory limit of its sandboxes in MiB\n"
         "      --pids N          process and thread limit of its sandboxes\n"
         "      --template NAME   the template (default: base)\n"
         "      --json            print the workspace as JSON instead of its id\n",
         cmd_ws_create},
        {"ws ls", "[--json]", "list workspaces and their states",
         "      --json            print the server's JSON\n", cmd_ws_ls},
        {"ws info", "WS [--json]", "show a workspace with its stored usage (never wakes it)",
         "      --json            print the server's JSON\n", cmd_ws_info},
        {"ws rm", "WS...", "delete workspaces and every file in them",
         "A warm workspace's sandbox is killed without mirroring.\n", cmd_ws_rm},
        {"ws exec", "WS [OPTIONS] [--] CMD [ARGS...]",
         "run a command in a workspace (waking it), exit with its exit code",
         EXEC_OPTIONS
         "  -i, --stdin           send our stdin to the command (up to 1 MiB, read before\n"
         "                        it starts: workspaces have no stdin route)\n"
         "  -d, --background      start it and print its pid instead of waiting\n"
         "      --json            print the server's NDJSON (or, with -d, the process)\n"
         "A cold workspace is restored from the store first. Signals end abx, not the\n"
         "command, which runs on to its --timeout: workspaces have no signal route.\n",
         cmd_ws_exec},
        {"ws cp", "SRC DST [--if-match V]",
         "copy a file into or out of a workspace (never wakes it)",
         IF_MATCH_OPTION
         "One of SRC and DST is WS:PATH, the other a local path or '-' (stdin or\n"
         "stdout). A DST that is a directory, or ends in '/', gets SRC's name.\n"
         "Files are streamed, never held in memory whole; a cold workspace's files\n"
         "come from and go to the store.\n",
         cmd_ws_cp},
        {"ws cat", "WS PATH", "print a file of a workspace", "", cmd_ws_cat},
        {"ws files", "WS [PATH] [--json]", "list everything below PATH (default /) in a workspace",
         "      --json            print the server's JSON (with versions and the state)\n",
         cmd_ws_files},
        {"ws rm-file", "[-r] WS PATH [--if-match V]",
         "remove a file of a workspace (with -r, also a directory tree)",
         "  -r, --recursive       remove directories and everything below them\n" IF_MATCH_OPTION,
         cmd_ws_rm_file},
        {"ws mkdir", "WS PATH", "create a directory and its parents in a workspace", "",
         cmd_ws_mkdir},
        {"ws mv", "WS FROM TO [--overwrite]", "rename a file or directory in a workspace",
         "      --overwrite       replace TO if it exists\n", cmd_ws_mv},
        {"ws flush", "WS [--json]", "mirror a warm workspace into the store now",
         "      --json            print the server's report\n", cmd_ws_flush},
        {"ws close", "WS [--json]", "mirror a workspace, then end its sandbox (it becomes cold)",
         "      --json            print the server's report\n", cmd_ws_close},
        {"ws manifest", "WS [--json]",
         "list the stored snapshot (what a wake restores) with content hashes",
         "      --json            print the server's JSON\n", cmd_ws_manifest},
        {0},
};

static const struct verb store_verbs[] = {
        {"store check", "[--json]", "check every stored file's blob and hash; exit 1 when not ok",
         "      --json            print the server's JSON (exit 1 still when not ok)\n",
         cmd_store_check},
        {"store gc", "[--json]", "delete blobs no stored file references",
         "      --json            print the server's JSON\n", cmd_store_gc},
        {0},
};

static const struct verb tools_verbs[] = {
        {"tools ls", "[--allowed LIST] [--format openai|mcp] [--json]",
         "list the tools abxd offers to language models",
         "      --allowed LIST    a selection: comma-separated PKG and PKG:CMD items\n"
         "                        (default: every tool; '' = none)\n"
         "      --format F        print the server's JSON in format F: 'openai' (function\n"
         "                        calling) or 'mcp' (the MCP tools/list form)\n"
         "      --json            print the server's JSON (OpenAI format)\n"
         "Without --json or --format: a table of NAME, PACKAGE and DESCRIPTION.\n",
         cmd_tools_ls},
        {"tools schema", "NAME [--json]", "print a tool's argument schema (JSON Schema)",
         "      --json            print the whole tool as abxd sent it\n"
         "NAME is the command (\"summarize\") or PKG:CMD when two packages export it.\n",
         cmd_tools_schema},
        {"tools call", "[--sandbox] WS NAME [ARGS_JSON|-] [OPTIONS]",
         "run a tool in a workspace (or a sandbox), exit with its exit code",
         "      --sandbox         WS is a sandbox id, not a workspace\n"
         "      --timeout S       total deadline (0 = none; exit 124 when reached)\n"
         "      --idle-timeout S  deadline without any output (0 = none)\n"
         "      --stream          print the tool's output as it arrives\n"
         "      --json            print the server's result object (with --stream, its\n"
         "                        NDJSON)\n"
         "ARGS_JSON is a JSON object of the tool's arguments (default {}); '-' reads it\n"
         "from stdin (up to 1 MiB). The tool's stdout and stderr go to ours, then each\n"
         "workspace file it wrote is named on stderr. abxd checks the arguments against\n"
         "the schema: exit 1 with its message when they do not fit.\n",
         cmd_tools_call},
        {"tools build", "[-f] [-o DIR] [SRC...]",
         "build tool packages into bundles for abxd --tools-dir",
         "  -o, --out DIR         where the bundles go (default: $ABX_TOOLS_DIR, else\n"
         "                        build/tools)\n"
         "  -f, --force           rebuild bundles that are up to date\n"
         "SRC is a package (a directory with abx-tool.json) or a directory of them\n"
         "(default: ./sample-tools). Works on local files only; abxd loads the\n"
         "bundles at start.\n",
         cmd_tools_build},
        {0},
};

static const struct verb template_verbs[] = {
        {"template ls", "[--json]", "list the templates abxd serves",
         "      --json            print the server's JSON\n", cmd_template_ls},
        {"template show", "NAME [--json]",
         "show a template: capabilities, resources and its commands with their arguments",
         "      --json            print the server's JSON (with each command's JSON Schema)\n"
         "NAME is a template's name or one of its aliases.\n",
         cmd_template_show},
        {"template build", "DIR [--json]",
         "build the template in DIR on abxd and offer it at once; exit non-zero if a step fails",
         "      --json            print {\"template\": NAME} at the end\n"
         "DIR holds sandbox-template.yaml and the files its copy steps use; it is sent\n"
         "as a tar (files, directories, symlinks only). The build log streams as it runs.\n",
         cmd_template_build},
        {0},
};

static const struct verb verbs[] = {
        {"create", "[OPTIONS]", "create a sandbox and print its id",
         "      --memory-mb N     memory limit in MiB, /tmp included\n"
         "      --cpu X           cores (fractions allowed, e.g. 0.5)\n"
         "      --pids N          process and thread limit\n"
         "      --timeout S       kill the sandbox S seconds after creation (0 = never;\n"
         "                        units s, m, h allowed)\n"
         "      --env K=V         a variable every exec sees (repeatable)\n"
         "      --meta K=V        a metadata entry (repeatable)\n"
         "      --template NAME   the template (default: base)\n"
         "      --json            print the sandbox as JSON instead of its id\n",
         cmd_create},
        {"ls", "[--json]", "list sandboxes", "      --json            print the server's JSON\n",
         cmd_ls},
        {"info", "ID [--json]", "show a sandbox with its usage",
         "      --json            print the server's JSON\n", cmd_info},
        {"update", "ID [OPTIONS]", "resize a running sandbox or reset its deadline",
         "      --memory-mb N     memory limit in MiB\n"
         "      --cpu X           cores\n"
         "      --pids N          process and thread limit\n"
         "      --timeout S       remaining life from now (0 = no deadline)\n"
         "      --json            print the updated sandbox as JSON\n",
         cmd_update},
        {"kill", "ID...", "kill sandboxes and remove them", "", cmd_kill},
        {"exec", "ID [OPTIONS] [--] CMD [ARGS...]",
         "run a command, stream its output, exit with its exit code",
         EXEC_OPTIONS
         "  -i, --stdin           forward our stdin to the command\n"
         "  -d, --background      start it and print its pid instead of waiting\n"
         "      --json            print the server's NDJSON (or, with -d, the process)\n"
         "Signals abx gets (INT, TERM, HUP, QUIT) are forwarded to the command;\n"
         "a third one ends abx at once.\n",
         cmd_exec},
        {"ps", "ID [--json]", "list a sandbox's processes",
         "      --json            print the server's JSON\n", cmd_ps},
        {"logs", "ID PID [OPTIONS]", "print a process's output",
         "      --offset N        start at output byte N (default 0)\n"
         "  -f, --follow          wait for more output until the process ends\n",
         cmd_logs},
        {"signal", "ID PID SIGNAL", "send a signal (TERM, KILL, INT, 9, ...) to a process",
         "      --no-group        signal only the process, not its process group\n", cmd_signal},
        {"cp", "SRC DST", "copy a file into or out of a sandbox",
         "One of SRC and DST is ID:PATH, the other a local path or '-' (stdin or\n"
         "stdout). A DST that is a directory, or ends in '/', gets SRC's name.\n"
         "Files are streamed, never held in memory whole.\n",
         cmd_cp},
        {"files", "ID [PATH] [--json]", "list everything below PATH (default /)",
         "      --json            print the server's JSON\n", cmd_files},
        {"rm", "[-r] ID PATH", "remove a file (with -r, also a directory tree)",
         "  -r, --recursive       remove directories and everything below them\n", cmd_rm},
        {"mkdir", "ID PATH", "create a directory and its parents", "", cmd_mkdir},
        {"mv", "ID FROM TO [--overwrite]", "rename a file or directory",
         "      --overwrite       replace TO if it exists\n", cmd_mv},
        {"cat", "ID PATH", "print a file", "", cmd_cat},
        {"health", "[--json]", "check that abxd serves",
         "      --json            print the server's JSON\n", cmd_health},
        {"ready", "[--json]", "check that abxd is ready; exit 1 when not",
         "      --json            print the server's JSON\n", cmd_ready},
        {"drain", "[--json]", "stop abxd from taking new sandboxes",
         "      --json            print the server's JSON\n", cmd_drain},
        {"metrics", "", "print abxd's Prometheus metrics", "", cmd_metrics},
        {"ws", "VERB [OPTIONS] [ARGS...]", "workspaces: durable file trees (abx ws --help)",
         "A workspace is a named file tree that outlives sandboxes: cold, its files\n"
         "live in abxd's store; 'abx ws exec' wakes it into a sandbox (warm), which\n"
         "abxd mirrors back into the store. The file verbs work in either state and\n"
         "never wake it.\n",
         NULL, ws_verbs},
        {"store", "VERB [OPTIONS]", "the workspace store: check, gc (abx store --help)",
         "The store keeps the files of cold workspaces, each blob named by its\n"
         "SHA-256.\n",
         NULL, store_verbs},
        {"template", "VERB [OPTIONS] [ARGS...]",
         "sandbox templates: ls, show, build (abx template --help)",
         "Templates abxd serves (--templates-dir, and those built): what a sandbox is made of,\n"
         "what it may do (its capabilities) and the custom commands it declares.\n",
         NULL, template_verbs},
        {"commands", "TEMPLATE_DIR|ID [--json]",
         "list the custom commands of a template directory or a sandbox",
         "      --json            print the commands as JSON (abxd's form)\n"
         "An operand that is a directory is read offline: its sandbox-template.yaml is\n"
         "validated as abxd would (exit 1 with file:line and the reason when invalid).\n"
         "Anything else is a sandbox ID, asked of abxd.\n",
         cmd_commands},
        {"run", "ID CMD [--arg K=V]... [--NAME V] [--FLAG|--no-FLAG] [--json-args JSON]",
         "run a custom command of a sandbox's template, exit with its exit code",
         "      --arg K=V         the argument K (repeatable)\n"
         "      --NAME V          the declared argument NAME ('-' may stand for '_');\n"
         "                        --NAME=V works too\n"
         "      --FLAG, --no-FLAG a bool argument: true, false\n"
         "      --json-args JSON  all arguments as one JSON object (alone)\n"
         "      --json            print the server's NDJSON\n"
         "The command's options come after CMD; 'abx commands ID' lists them. Values of\n"
         "int and float arguments that are numbers go as numbers, the rest as text for\n"
         "abxd to check. An argument named like an option of run itself (arg, json,\n"
         "json_args, help) is given with --arg. Exit 2 for an unknown command or option,\n"
         "124 when the command reached its deadline.\n",
         cmd_run},
        {"code", "ID --language LANG [FILE|-]", "run a code snippet, exit with its exit code",
         "  -l, --language LANG   python, javascript or bash (required)\n"
         "      --json            print the server's NDJSON\n"
         "The snippet is FILE, or standard input (default, or '-'), at most 1 MiB. The\n"
         "sandbox needs the 'code' capability; 127 when it has no such interpreter.\n",
         cmd_code},
        {"tools", "VERB [OPTIONS] [ARGS...]", "tools for language models: ls, schema, call, build",
         "Tool bundles abxd loaded at start (--tools-dir), offered to language models\n"
         "as functions (OpenAI function calling or MCP) and run in a workspace or a\n"
         "sandbox. A tool is named by its command, or PKG:CMD.\n",
         NULL, tools_verbs},
        {0},
};

static void
print_main_help(FILE *f)
{
    fprintf(f, "Usage: abx VERB [OPTIONS] [ARGS...]\n\n"
               "Drive an abxd sandbox host. The host is ABX_URL (default " ABX_DEFAULT_URL
               "),\nthe key ABX_API_KEY.\n\nVerbs:\n");
    for (const struct verb *v = verbs; v->name; v++)
        fprintf(f, "  %-8s %s\n", v->name, v->summary);
    fprintf(f, "\n'abx VERB --help' describes a verb. Exit status: 0 success, 1 failure,\n"
               "2 usage error; exec exits with the command's own status.\n");
}

/* Runs verb v with argv[0] its own name. */
static int
run_verb(struct cli *cli, const struct verb *v, int argc, char **argv)
{
    int r;

    cli->verb = v;
    opterr = 0;
    optind = 0; /* re-initialise getopt for this argv */
    r = v->run(cli, argc, argv);
    if (r == CLI_HELP)
        r = 0;
    else if (r == CLI_BAD)
        r = EXIT_USAGE;
    if (r == 0)
        r = cli_flush(cli);
    cli->client = abx_client_free(cli->client);
    return r;
}

static bool
is_help(const char *s)
{
    return !strcmp(s, "-h") || !strcmp(s, "--help") || !strcmp(s, "help");
}

/* `abx help VERB [SUB]`: args are VERB and SUB. */
static int
help_for(int argc, char **args)
{
    const struct verb *v = cli_find_verb(verbs, NULL, args[0]), *sub = NULL;

    if (v && v->sub && argc > 1) {
        sub = cli_find_verb(v->sub, v->name, args[1]);
        if (!sub) {
            fprintf(stderr, "abx %s: unknown verb '%s'\n", v->name, args[1]);
            cli_print_group_help(stderr, v);
            return EXIT_USAGE;
        }
        v = sub;
    }
    if (!v) {
        fprintf(stderr, "abx: unknown verb '%s'\n", args[0]);
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    cli_print_verb_help(stdout, v);
    return 0;
}

int
main(int argc, char **argv)
{
    struct cli cli = {0};
    const struct verb *v, *sub;

    cli.url = getenv("ABX_URL");
    if (!cli.url || !*cli.url)
        cli.url = ABX_DEFAULT_URL;
    cli.key = getenv("ABX_API_KEY");
    if (cli.key && !*cli.key)
        cli.key = NULL;

    if (argc < 2) {
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (is_help(name)) {
        if (argc > 2 && strcmp(name, "help") == 0)
            return help_for(argc - 2, argv + 2);
        print_main_help(stdout);
        return 0;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "version")) {
        printf("abx %s\n", abx_version());
        return 0;
    }
    v = cli_find_verb(verbs, NULL, name);
    if (!v) {
        fprintf(stderr, "abx: unknown verb '%s'\n", name);
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    if (!v->sub)
        return run_verb(&cli, v, argc - 1, argv + 1);

    /* A group: the next word names the verb. */
    if (argc < 3) {
        fprintf(stderr, "abx %s: missing the verb\n", v->name);
        cli_print_group_help(stderr, v);
        return EXIT_USAGE;
    }
    if (is_help(argv[2])) {
        if (argc > 3 && strcmp(argv[2], "help") == 0)
            return help_for(2, (char *[]){argv[1], argv[3]});
        cli_print_group_help(stdout, v);
        return 0;
    }
    sub = cli_find_verb(v->sub, v->name, argv[2]);
    if (!sub) {
        fprintf(stderr, "abx %s: unknown verb '%s'\n", v->name, argv[2]);
        cli_print_group_help(stderr, v);
        return EXIT_USAGE;
    }
    return run_verb(&cli, sub, argc - 2, argv + 2);
}
