/*
 * command.h - render a template's custom command into a safe `sh -c` line.
 *
 * A template declares commands as shell text with {placeholders} and typed
 * arguments (template.h). This module turns one call's values into the
 * command line: every value is coerced to its argument's type, written in
 * its canonical form and single-quoted, in one pass over the text, so a
 * value can never become shell syntax or another placeholder. It does not
 * run anything, look commands up or decode JSON (the api layer converts a
 * JSON value into a struct command_value).
 *
 * Template text rules (docs/templates.md, "Running custom commands"):
 * "{name}" is a placeholder for the argument name; "{{" and "}}" are a
 * literal '{' and '}'; any other '{' or '}' is an error. A placeholder must
 * stand where a shell word can start unquoted: not inside '...', "...",
 * `...`, $((...)), a comment or a here-document, and not right after '\' or
 * '$' (a quoted value there would be read differently, or not be quoted at
 * all). Templates that break these rules are refused by command_check().
 *
 * Functions return 0 on success and -errno on failure (-EINVAL for a bad
 * template or value, -E2BIG for a line past COMMAND_LINE_MAX, -ENOMEM); they
 * never log. struct err (optional) says why; messages show user values
 * escaped (no control characters) and cut after COMMAND_SHOW_MAX
 * characters. ret_ parameters are written only on success. Thread-safe: no
 * global state.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "template/template.h"
#include "util/buf.h"
#include "util/err.h"

#define COMMAND_LINE_MAX (128 * 1024) /* bytes of a rendered command line */
#define COMMAND_SHOW_MAX 48           /* characters of a user value a message shows */

/* One value of a call, as the caller got it. */
struct command_value {
    const char *name; /* the argument it is for */
    const char *text; /* a JSON string's contents, or the text of a number,
                       * true or false literal */
    size_t len;       /* bytes of text when known (a JSON string may hold
                       * "\u0000"); 0 = strlen(text). A NUL within len bytes
                       * is refused. */
    bool is_string;   /* text came from a JSON string */
};

/* Checks c->cmd against c->args without values: brace syntax, placeholders
 * naming declared arguments, and placeholders only where a quoted word is
 * safe (see above). The template parser may call it at load time;
 * command_render() applies the same checks. */
int command_check(const struct template_command *c, struct err *err);

/* Renders c->cmd with n values into *ret (malloc'ed, NUL-terminated, for
 * `sh -c`; at most COMMAND_LINE_MAX bytes). -EINVAL when a value names no
 * declared argument or one named twice, a required argument has no value,
 * a value or default does not coerce to its type, a placeholder's argument
 * has neither value nor default, or command_check() fails; -E2BIG when the
 * line would be longer than COMMAND_LINE_MAX. Arguments the text does not
 * use are still checked. values and c are borrowed. */
int command_render(const struct template_command *c, const struct command_value *values, size_t n,
                   char **ret, struct err *err);

/* Coerces text to type t and appends its canonical form to out:
 *   int   [-](0|[1-9][0-9]*) within int64, written the same ("-0" -> "0");
 *         no '+', leading zeros, blanks, fraction, exponent or hex
 *   float a JSON number (-?int[.digits][e[+-]digits]) that is finite as a
 *         double, written as the shortest of %.15g, %.16g, %.17g that reads
 *         back to the same double ("1e+300", "0.1", "-0")
 *   bool  true/1/yes/y/on -> "true", false/0/no/n/off -> "false", any case
 *   str   as is; must be valid UTF-8 (and is a C string, so has no NUL)
 * is_string only changes how messages show text. -EINVAL with a message
 * that does not name the argument (command_render() adds it), -EFBIG when
 * out is full, -ENOMEM. */
int command_coerce(enum template_arg_type t, const char *text, bool is_string, struct buf *out,
                   struct err *err);

/* Appends s single-quoted for POSIX sh: 'it'\''s', "" -> ''. Returns 0,
 * -EFBIG when b is full or -ENOMEM (b may then hold part of the quote). */
int command_quote(struct buf *b, const char *s);

/* The JSON Schema type of an argument type: "string", "integer", "number",
 * "boolean"; NULL when out of range. (template_arg_type_name() gives the
 * template spelling "str", "int", ....) */
const char *command_json_type(enum template_arg_type t);
