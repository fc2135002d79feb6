/*
 * abx/tool.h - write an abx tool in C.
 *
 * A tool is one program with one or more commands. You declare each
 * command's arguments once, in static tables; abx_tool_main() turns the
 * declaration into the JSON Schema abxd shows to models and uses the same
 * schema to validate every call before your code runs. It implements the
 * launch contract every tool bundle obeys (docs/tools.md):
 *
 *   launch                   prints [{"name": ..., "description": ...}, ...]
 *   launch <cmd>             prints <cmd>'s JSON Schema
 *   launch <cmd> <json>      validates <json>, runs <cmd>, exits with its code
 *
 * An unknown command, invalid JSON, arguments that do not validate, or more
 * than two arguments print one line on stderr ("csv-summary: summarize:
 * 'limit' must be an integer, not a string") and exit 2. A mistake in the
 * declaration itself (a bad name, a default of the wrong type, a duplicate
 * argument) is the author's bug: it is reported on stderr and every stage
 * exits 70, so a bundle with a broken declaration never builds.
 *
 *   static const struct abx_tool_arg greet_args[] = {
 *       {.name = "name", .description = "Who to greet", .required = true},
 *       {.name = "times", .type = ABX_ARG_INTEGER, .default_json = "1", .minimum = "1"},
 *       {0},
 *   };
 *
 *   static int
 *   greet(const struct abx_tool_args *a, void *userdata)
 *   {
 *       for (long long i = 0; i < abx_tool_get_int(a, "times"); i++)
 *           printf("\"hello, %s\"\n", abx_tool_get_string(a, "name"));
 *       return 0;
 *   }
 *
 *   static const struct abx_tool_command commands[] = {
 *       {"greet", "Greets someone", greet_args, greet},
 *       {0},
 *   };
 *   static const struct abx_tool tool = {"hello", "Greetings", commands};
 *
 *   int
 *   main(int argc, char **argv)
 *   {
 *       return abx_tool_main(&tool, argc, argv, NULL);
 *   }
 *
 * Link with libabxtool.a and -ljansson. Schemas print as compact JSON with
 * keys in declaration order, byte for byte what sdk/python/abx_tool.py
 * prints for the same declaration. The library is not thread-safe; call
 * everything from the thread that runs abx_tool_main().
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ABX_TOOL_EXIT_USAGE 2  /* unknown command, invalid JSON or arguments */
#define ABX_TOOL_EXIT_DECL  70 /* the declaration is wrong (sysexits EX_SOFTWARE) */

enum abx_arg_type {
    ABX_ARG_STRING,       /* {"type": "string"} */
    ABX_ARG_INTEGER,      /* {"type": "integer"}: a JSON integer, 64-bit */
    ABX_ARG_NUMBER,       /* {"type": "number"}: integer or decimal */
    ABX_ARG_BOOLEAN,      /* {"type": "boolean"}: true or false, nothing else */
    ABX_ARG_ENUM,         /* {"type": "string", "enum": choices} */
    ABX_ARG_STRING_ARRAY, /* {"type": "array", "items": {"type": "string"}}, with
                             choices: items {"type": "string", "enum": choices} */
};

/* One argument. Lists end with an entry whose name is NULL ({0}). */
struct abx_tool_arg {
    const char *name; /* [A-Za-z_][A-Za-z0-9_-]{0,63} */
    enum abx_arg_type type;
    const char *description; /* shown to the model; NULL = none */
    bool required;           /* a required argument has no default */
    /* The default as JSON text: "10", "0.5", "\"mean\"", "true",
     * "[\"a\",\"b\"]"; NULL = none. Checked against the type at start. */
    const char *default_json;
    const char *const *choices; /* ENUM (and optionally STRING_ARRAY): NULL-terminated */
    const char *minimum;        /* INTEGER, NUMBER: inclusive bound as JSON text; NULL = none */
    const char *maximum;
};

/* A call's validated arguments, with defaults applied. Valid during run. */
struct abx_tool_args;

/* Runs a command; returns its exit code (0..255; anything else becomes 1).
 * The result goes to stdout (JSON, by convention), messages to stderr. */
typedef int (*abx_tool_fn)(const struct abx_tool_args *args, void *userdata);

/* One command. Lists end with an entry whose name is NULL ({0}). */
struct abx_tool_command {
    const char *name;                /* [a-z0-9][a-z0-9_-]{0,63}: it becomes a function name */
    const char *description;         /* required: what the model reads to choose the command */
    const struct abx_tool_arg *args; /* NULL = no arguments */
    abx_tool_fn run;
};

struct abx_tool {
    const char *name;        /* [a-z0-9][a-z0-9_-]{0,63}, the package name */
    const char *description; /* NULL = none */
    const struct abx_tool_command *commands;
};

/* The launch contract over argv (argv[0] is ignored). Returns the process's
 * exit code: 0, the command's code, 2 (usage) or 70 (declaration); stdout is
 * flushed, and a failed write to it is an error (1). userdata is passed to
 * every run function. */
int abx_tool_main(const struct abx_tool *tool, int argc, char **argv, void *userdata);

/*
 * Getters. An absent optional argument without a default reads as NULL, 0,
 * 0.0, false or an empty list. Asking for a name the command does not
 * declare, or with the wrong getter for its type, is a bug in the tool: the
 * getter prints it on stderr and exits with ABX_TOOL_EXIT_DECL.
 */

/* Whether the call gave the argument or it has a default. */
bool abx_tool_has(const struct abx_tool_args *args, const char *name);
/* STRING and ENUM; the string lives as long as args. */
const char *abx_tool_get_string(const struct abx_tool_args *args, const char *name);
/* INTEGER. */
long long abx_tool_get_int(const struct abx_tool_args *args, const char *name);
/* NUMBER and INTEGER (converted). */
double abx_tool_get_number(const struct abx_tool_args *args, const char *name);
/* BOOLEAN. */
bool abx_tool_get_bool(const struct abx_tool_args *args, const char *name);
/* STRING_ARRAY: the count; *ret is a NULL-terminated array that lives as
 * long as args (never NULL). */
size_t abx_tool_get_strings(const struct abx_tool_args *args, const char *name,
                            const char *const **ret);

/* The command being run, e.g. for messages. */
const char *abx_tool_command_name(const struct abx_tool_args *args);

/* Prints "<tool>: <command>: <message>\n" on stderr and returns code, so a
 * run function can end with: return abx_tool_error(a, 1, "cannot open '%s'", p); */
int abx_tool_error(const struct abx_tool_args *args, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
