/*
 * command.c - render a template's custom command: coerce, quote, substitute.
 *
 * Rendering is one pass over the template text. Literal text is copied (it
 * is the template author's shell code); each placeholder is replaced by its
 * value's canonical text in single quotes, the one POSIX sh quoting with no
 * special characters inside, so nothing in a value is ever read as shell
 * syntax or as another placeholder. Single quotes only protect a value
 * where a shell word can start, so a small lexer follows the literal text's
 * quoting and refuses placeholders anywhere else. The lexer is deliberately
 * conservative: where it cannot tell (substitutions nested in double
 * quotes, here-documents) it refuses every later placeholder rather than
 * guess. It does not model bash-only syntax beyond what it refuses.
 */
#include "template/command.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

/* Room for COMMAND_SHOW_MAX characters escaped (at most 6 bytes each),
 * quotes and "...". */
#define SHOW_SIZE (COMMAND_SHOW_MAX * 6 + 8)

/* ---- messages ---- */

/* Whether code point c is shown escaped: C0 and C1 controls, DEL, and the
 * invisible direction and line-separator characters a terminal or log
 * viewer would act on. */
static bool
cp_escaped(uint32_t c)
{
    return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x200e || c == 0x200f ||
           (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c == 0xfeff;
}

/* Decodes one strict UTF-8 sequence of s (NUL-terminated): no overlong
 * forms, surrogates or code points past U+10FFFF. Returns its length, or 0
 * for an invalid byte. */
static size_t
utf8_next(const unsigned char *s, uint32_t *ret)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp, min;

    if (c < 0x80) {
        *ret = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    *ret = cp;
    return len;
}

/* Writes s for a message into out[SHOW_SIZE]: in quote characters when
 * quote is not 0 (quote and '\' then escaped), control and invisible
 * characters as \n, \t, \r or \uXXXX, invalid bytes as \xNN, cut after
 * COMMAND_SHOW_MAX characters with "...". Returns out. */
static const char *
show(char *out, const char *s, char quote)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0, chars = 0;

    if (quote)
        out[o++] = quote;
    for (size_t i = 0; u[i];) {
        uint32_t c;
        size_t l = utf8_next(u + i, &c);
        if (chars++ == COMMAND_SHOW_MAX) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (l == 0) {
            o += (size_t)snprintf(out + o, SHOW_SIZE - o, "\\x%02x", u[i]);
            l = 1;
        } else if (c == '\n' || c == '\t' || c == '\r') {
            out[o++] = '\\';
            out[o++] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        } else if (cp_escaped(c)) {
            o += (size_t)snprintf(out + o, SHOW_SIZE - o, "\\u%04x", (unsigned)c);
        } else if (quote && (c == (unsigned char)quote || c == '\\')) {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else {
            memcpy(out + o, s + i, l);
            o += l;
        }
        i += l;
    }
    if (quote)
        out[o++] = quote;
    out[o] = '\0';
    return out;
}

/* A value as the caller wrote it: strings in double quotes, literals bare. */
static const char *
show_value(char *out, const char *text, bool is_string)
{
    return show(out, text, is_string ? '"' : 0);
}

static const char *
show_name(char *out, const char *name)
{
    return show(out, name, '\'');
}

/* ---- coercion ---- */

static bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int
coerce_int(const char *text, bool is_string, struct buf *out, struct err *err)
{
    char s[SHOW_SIZE];
    const char *p = text;
    bool neg = *p == '-';
    uint64_t v = 0;

    if (neg)
        p++;
    if (!is_digit(*p) || (p[0] == '0' && p[1]) || p[strspn(p, "0123456789")])
        return err_set(err, EINVAL, "%s is not an integer (decimal digits, optional '-')",
                       show_value(s, text, is_string));
    /* 2^63 - 1, or 2^63 for a negative number */
    uint64_t max = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (max - d) / 10)
            return err_set(err, EINVAL, "%s is out of range for a 64-bit integer",
                           show_value(s, text, is_string));
        v = v * 10 + d;
    }
    if (v == 0)
        return buf_putc(out, '0'); /* "-0" */
    return buf_puts(out, text);
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool
json_number(const char *p)
{
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (is_digit(*p))
        while (is_digit(*p))
            p++;
    else
        return false;
    if (*p == '.') {
        p++;
        if (!is_digit(*p))
            return false;
        while (is_digit(*p))
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!is_digit(*p))
            return false;
        while (is_digit(*p))
            p++;
    }
    return *p == '\0';
}

static int
coerce_float(const char *text, bool is_string, struct buf *out, struct err *err)
{
    char s[SHOW_SIZE], b[32];
    char *end = NULL;

    if (!json_number(text))
        return err_set(err, EINVAL, "%s is not a number", show_value(s, text, is_string));
    errno = 0;
    double d = strtod(text, &end);
    if (!end || *end) /* a locale with another decimal point */
        return err_set(err, EINVAL, "%s is not a number", show_value(s, text, is_string));
    /* Overflow gives HUGE_VAL; underflow of a nonzero number to 0 gives
     * ERANGE too (a subnormal result is kept). */
    if (!isfinite(d) || (d == 0 && errno == ERANGE))
        return err_set(err, EINVAL, "%s is out of range for a double",
                       show_value(s, text, is_string));
    for (int prec = 15; prec <= 17; prec++) {
        int n = snprintf(b, sizeof(b), "%.*g", prec, d);
        if (n <= 0 || (size_t)n >= sizeof(b))
            break;
        double back = strtod(b, NULL);
        if (prec == 17 || !memcmp(&back, &d, sizeof(d)))
            return buf_puts(out, b);
    }
    return err_set(err, EINVAL, "%s cannot be formatted", show_value(s, text, is_string));
}

static int
coerce_bool(const char *text, bool is_string, struct buf *out, struct err *err)
{
    static const char *const yes[] = {"true", "1", "yes", "y", "on"};
    static const char *const no[] = {"false", "0", "no", "n", "off"};
    char s[SHOW_SIZE];

    for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
        if (!strcasecmp(text, yes[i]))
            return buf_puts(out, "true");
        if (!strcasecmp(text, no[i]))
            return buf_puts(out, "false");
    }
    return err_set(err, EINVAL, "%s is not a boolean (true/false, 1/0, yes/no, y/n, on/off)",
                   show_value(s, text, is_string));
}

static int
coerce_str(const char *text, bool is_string, struct buf *out, struct err *err)
{
    const unsigned char *u = (const unsigned char *)text;
    char s[SHOW_SIZE];

    for (size_t i = 0; u[i];) {
        uint32_t c;
        size_t l = utf8_next(u + i, &c);
        if (l == 0)
            return err_set(err, EINVAL, "%s is not valid UTF-8 (byte %zu)",
                           show_value(s, text, is_string), i);
        i += l;
    }
    return buf_puts(out, text);
}

int
command_coerce(enum template_arg_type t, const char *text, bool is_string, struct buf *out,
               struct err *err)
{
    switch (t) {
    case TEMPLATE_ARG_STR:
        return coerce_str(text, is_string, out, err);
    case TEMPLATE_ARG_INT:
        return coerce_int(text, is_string, out, err);
    case TEMPLATE_ARG_FLOAT:
        return coerce_float(text, is_string, out, err);
    case TEMPLATE_ARG_BOOL:
        return coerce_bool(text, is_string, out, err);
    default:
        return err_set(err, EINVAL, "unknown argument type %d", (int)t);
    }
}

int
command_quote(struct buf *b, const char *s)
{
    int r = buf_putc(b, '\'');
    for (const char *p = s; r >= 0 && *p; p++) {
        const char *q = strchr(p, '\'');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        r = buf_put(b, p, n);
        if (r >= 0 && q)
            r = buf_puts(b, "'\\''");
        p += n;
        if (!q)
            break;
    }
    if (r >= 0)
        r = buf_putc(b, '\'');
    return r;
}

const char *
command_json_type(enum template_arg_type t)
{
    switch (t) {
    case TEMPLATE_ARG_STR:
        return "string";
    case TEMPLATE_ARG_INT:
        return "integer";
    case TEMPLATE_ARG_FLOAT:
        return "number";
    case TEMPLATE_ARG_BOOL:
        return "boolean";
    default:
        return NULL;
    }
}

/* ---- the literal text's shell context ---- */

enum lex_state {
    LEX_PLAIN,
    LEX_SQUOTE,
    LEX_DQUOTE,
    LEX_DQ_PARAM, /* ${name} inside "..." */
    LEX_BACKQUOTE,
    LEX_COMMENT,
    LEX_ARITH, /* $((...)) */
};

struct lex {
    enum lex_state state;
    bool escaped;      /* the previous character was an unquoted '\' */
    bool word_start;   /* a '#' here starts a comment */
    bool heredoc;      /* an unquoted "<<" was seen on this line */
    unsigned depth;    /* open parentheses in LEX_ARITH */
    char h1, h2;       /* the last two literal characters, 0 = none */
    const char *taint; /* why no further placeholder is allowed, NULL = none */
    size_t taint_at;   /* byte of the template where that began */
};

static bool
is_word_break(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || strchr(";&|()<>", c);
}

static void
lex_taint(struct lex *l, const char *why, size_t at)
{
    if (!l->taint) {
        l->taint = why;
        l->taint_at = at;
    }
}

/* Feeds one literal character c, which comes from byte at of the template. */
static void
lex_feed(struct lex *l, char c, size_t at)
{
    bool escaped = l->escaped;

    l->escaped = false;
    switch (l->state) {
    case LEX_PLAIN:
        if (escaped) {
            l->word_start = false;
            c = 'x'; /* an escaped character is no operator in h1/h2 */
            break;
        }
        if (c == '\\')
            l->escaped = true;
        else if (c == '\'')
            l->state = LEX_SQUOTE;
        else if (c == '"')
            l->state = LEX_DQUOTE;
        else if (c == '`')
            l->state = LEX_BACKQUOTE;
        else if (c == '#' && l->word_start)
            l->state = LEX_COMMENT;
        else if (c == '(' && l->h1 == '(' && l->h2 == '$')
            l->state = LEX_ARITH, l->depth = 2;
        else if (c == '<' && l->h1 == '<')
            l->heredoc = true;
        else if (c == '\n' && l->heredoc)
            lex_taint(l, "after a here-document", at);
        l->word_start = is_word_break(c);
        break;
    case LEX_SQUOTE:
        if (c == '\'')
            l->state = LEX_PLAIN;
        break;
    case LEX_DQUOTE:
        if (escaped) {
            c = 'x';
            break;
        }
        if (c == '\\')
            l->escaped = true;
        else if (c == '"')
            l->state = LEX_PLAIN;
        else if (c == '`' || (c == '(' && l->h1 == '$'))
            lex_taint(l, "after a command substitution inside \"...\"", at);
        else if (c == '{' && l->h1 == '$')
            l->state = LEX_DQ_PARAM;
        break;
    case LEX_DQ_PARAM:
        /* Only a plain ${name}: anything else may hold quotes of its own. */
        if (c == '}')
            l->state = LEX_DQUOTE;
        else if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) ||
                   strchr("@*#?$!-", c)))
            lex_taint(l, "after a ${...} expansion inside \"...\"", at);
        break;
    case LEX_BACKQUOTE:
        if (escaped) {
            c = 'x';
            break;
        }
        if (c == '\\')
            l->escaped = true;
        else if (c == '`')
            l->state = LEX_PLAIN;
        break;
    case LEX_COMMENT:
        if (c == '\n') {
            l->state = LEX_PLAIN;
            l->word_start = true;
            if (l->heredoc)
                lex_taint(l, "after a here-document", at);
        }
        break;
    case LEX_ARITH:
        if (c == '(')
            l->depth++;
        else if (c == ')' && --l->depth == 0)
            l->state = LEX_PLAIN;
        else if (strchr("'\"`\\", c))
            lex_taint(l, "after quoting inside $((...))", at);
        break;
    }
    l->h2 = l->h1;
    l->h1 = c;
}

/* Why a placeholder cannot stand here, or NULL when it can. */
static const char *
lex_refuses(const struct lex *l)
{
    switch (l->state) {
    case LEX_SQUOTE:
        return "inside '...'";
    case LEX_DQUOTE:
    case LEX_DQ_PARAM:
        return "inside \"...\"";
    case LEX_BACKQUOTE:
        return "inside `...`";
    case LEX_COMMENT:
        return "inside a comment";
    case LEX_ARITH:
        return "inside $((...))";
    case LEX_PLAIN:
        break;
    }
    if (l->escaped)
        return "right after '\\'";
    if (l->h1 == '$')
        return "right after '$' (for a shell variable write '${{name}}')";
    return l->taint;
}

/* A placeholder was substituted: its text ends in a quote. */
static void
lex_placeholder(struct lex *l)
{
    l->word_start = false;
    l->h2 = l->h1;
    l->h1 = '\'';
}

/* ---- substitution ---- */

static bool
is_name_char(char c)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c);
}

static ssize_t
find_arg(const struct template_command *c, const char *name, size_t len)
{
    for (size_t i = 0; i < c->n_args; i++)
        if (strlen(c->args[i].name) == len && !memcmp(c->args[i].name, name, len))
            return (ssize_t)i;
    return -1;
}

/* Walks c->cmd once: checks it and, when out is not NULL, writes the line
 * with texts[i] (NULL = no value) quoted for argument i. */
static int
walk(const struct template_command *c, char *const *texts, struct buf *out, struct err *err)
{
    char s[SHOW_SIZE];
    const char *cmd = c->cmd;
    struct lex l = {.word_start = true};
    int r = 0;

    for (size_t i = 0; cmd[i];) {
        char ch = cmd[i];
        if ((ch == '{' || ch == '}') && cmd[i + 1] == ch) {
            lex_feed(&l, ch, i);
            if (out)
                r = buf_putc(out, ch);
            i += 2;
        } else if (ch == '}') {
            return err_set(err, EINVAL,
                           "command %s: '}' at byte %zu is not closing a placeholder (write '}}' "
                           "for a literal '}')",
                           show_name(s, c->name), i);
        } else if (ch == '{') {
            size_t n = 0;
            while (is_name_char(cmd[i + 1 + n]) && n <= TEMPLATE_ARG_NAME_MAX)
                n++;
            if (n == 0 || n > TEMPLATE_ARG_NAME_MAX || is_digit(cmd[i + 1]) ||
                cmd[i + 1 + n] != '}')
                return err_set(err, EINVAL,
                               "command %s: '{' at byte %zu does not start a placeholder {name} "
                               "(write '{{' for a literal '{')",
                               show_name(s, c->name), i);
            const char *name = cmd + i + 1;
            ssize_t a = find_arg(c, name, n);
            if (a < 0)
                return err_set(err, EINVAL,
                               "command %s: placeholder {%.*s} at byte %zu names no argument",
                               show_name(s, c->name), (int)n, name, i);
            const char *why = lex_refuses(&l);
            if (why)
                return err_set(err, EINVAL,
                               "command %s: placeholder {%.*s} at byte %zu is %s; values are "
                               "quoted for the shell, write {%.*s} where a word can start",
                               show_name(s, c->name), (int)n, name, i, why, (int)n, name);
            if (out) {
                if (!texts[a])
                    return err_set(err, EINVAL,
                                   "argument '%.*s' has no value and no default, but the "
                                   "command uses it",
                                   (int)n, name);
                r = command_quote(out, texts[a]);
            }
            lex_placeholder(&l);
            i += n + 2;
        } else {
            lex_feed(&l, ch, i);
            if (out)
                r = buf_putc(out, ch);
            i++;
        }
        if (r == -EFBIG)
            return err_set(err, E2BIG, "command %s: the command line would be longer than %d bytes",
                           show_name(s, c->name), COMMAND_LINE_MAX);
        if (r < 0)
            return r;
    }
    return 0;
}

int
command_check(const struct template_command *c, struct err *err)
{
    return walk(c, NULL, NULL, err);
}

/* "a, b, c" (cut with "...") into out[size]. */
static void
declared_names(const struct template_command *c, char *out, size_t size)
{
    size_t o = 0;

    out[0] = '\0';
    if (c->n_args == 0) {
        (void)snprintf(out, size, "none");
        return;
    }
    for (size_t i = 0; i < c->n_args; i++) {
        int n = snprintf(out + o, size - o, "%s%s", i ? ", " : "", c->args[i].name);
        if (n < 0 || (size_t)n >= size - o) {
            (void)snprintf(out + MIN(o, size - 4), 4, "...");
            return;
        }
        o += (size_t)n;
    }
}

/* The canonical text of each argument, NULL = no value. */
struct texts {
    char **v;
    size_t n;
};

static void
texts_done(struct texts *t)
{
    for (size_t i = 0; t->v && i < t->n; i++)
        free(t->v[i]);
    free(t->v);
}

/* Coerces text for argument a into a new canonical string *ret. */
static int
coerce_arg(const struct template_arg *a, const char *text, bool is_string, bool is_default,
           char **ret, struct err *err)
{
    _cleanup_buf_ struct buf b;
    struct err inner = {0};
    char s[SHOW_SIZE];

    buf_init(&b, COMMAND_LINE_MAX);
    int r = command_coerce(a->type, text, is_string, &b, &inner);
    if (r == -EFBIG)
        return err_set(err, E2BIG, "argument %s: the value is longer than %d bytes",
                       show_name(s, a->name), COMMAND_LINE_MAX);
    if (r < 0)
        return err_set(err, -r, "%s %s: %s", is_default ? "default of argument" : "argument",
                       show_name(s, a->name), inner.msg[0] ? inner.msg : "cannot coerce");
    *ret = buf_steal(&b);
    return *ret ? 0 : -ENOMEM;
}

int
command_render(const struct template_command *c, const struct command_value *values, size_t n,
               char **ret, struct err *err)
{
    _cleanup_buf_ struct buf out;
    _cleanup_(texts_done) struct texts texts = {NULL, c->n_args};
    _cleanup_free_ const struct command_value **given = NULL;
    char s[SHOW_SIZE], names[160];
    int r;

    buf_init(&out, COMMAND_LINE_MAX);
    given = calloc(c->n_args ? c->n_args : 1, sizeof(*given));
    texts.v = calloc(c->n_args ? c->n_args : 1, sizeof(*texts.v));
    if (!given || !texts.v)
        return -ENOMEM;

    /* Each value names a declared argument, once. This stops at the first
     * bad one, so it takes at most n_args + 1 rounds whatever n is. */
    for (size_t i = 0; i < n; i++) {
        const struct command_value *v = &values[i];
        ssize_t a = find_arg(c, v->name, strlen(v->name));
        if (a < 0) {
            declared_names(c, names, sizeof(names));
            return err_set(err, EINVAL, "unknown argument %s (declared: %s)", show_name(s, v->name),
                           names);
        }
        if (given[a])
            return err_set(err, EINVAL, "argument %s is given twice", show_name(s, v->name));
        if (v->len && memchr(v->text, '\0', v->len))
            return err_set(err, EINVAL, "argument %s: the value contains a NUL character",
                           show_name(s, v->name));
        given[a] = v;
    }

    for (size_t i = 0; i < c->n_args; i++) {
        const struct template_arg *a = &c->args[i];
        if (given[i])
            r = coerce_arg(a, given[i]->text, given[i]->is_string, false, &texts.v[i], err);
        else if (a->default_text)
            r = coerce_arg(a, a->default_text, a->type == TEMPLATE_ARG_STR, true, &texts.v[i], err);
        else if (a->required)
            r = err_set(err, EINVAL, "missing required argument %s", show_name(s, a->name));
        else
            r = 0;
        if (r < 0)
            return r;
    }

    r = walk(c, texts.v, &out, err);
    if (r < 0)
        return r;
    *ret = buf_steal(&out);
    return *ret ? 0 : -ENOMEM;
}
