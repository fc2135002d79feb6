/*
 * fuzz-command.c - rendering custom commands from arbitrary templates and
 * values. Input: the command text, then NUL-separated values; a value's
 * first byte picks the argument (low bits) and whether it is a JSON string
 * (0x80), the rest is its text. The arguments are fixed: x str, y str with
 * a default, n int with a default, f float, b bool.
 *
 * Invariants: render returns 0, -EINVAL or -E2BIG, with a message without
 * control characters on failure and *ret untouched; command_check() refuses
 * whatever makes render refuse for the text alone. On success the line is
 * at most COMMAND_LINE_MAX bytes and reads back, in lockstep with the text,
 * as the literal segments ("{{" -> "{", "}}" -> "}") and each placeholder's
 * canonical value single-quoted; a small sh lexer run over the line finds
 * every value starting and ending in plain unquoted context and every byte
 * of it inside single quotes, apart from the '\'' sequences.
 */
#include <errno.h>
#include <math.h>

#include "fuzz-common.h"
#include "template/command.h"

static struct template_arg args[] = {
        {.name = "x", .type = TEMPLATE_ARG_STR},
        {.name = "y", .type = TEMPLATE_ARG_STR, .default_text = "d'e{x}f"},
        {.name = "n", .type = TEMPLATE_ARG_INT, .default_text = "7"},
        {.name = "f", .type = TEMPLATE_ARG_FLOAT},
        {.name = "b", .type = TEMPLATE_ARG_BOOL},
};
#define N_ARGS     (sizeof(args) / sizeof(args[0]))
#define VALUES_MAX 8

enum sh { SH_PLAIN, SH_SQ, SH_DQ, SH_BQ, SH_COMMENT, SH_ARITH };

struct sh_lex {
    enum sh state;
    bool escaped, word_start;
    unsigned depth; /* open parentheses in $((...)) */
    char h1, h2;    /* the last two characters seen in SH_PLAIN */
};

static void
sh_feed(struct sh_lex *l, char c)
{
    bool escaped = l->escaped;
    char h1 = l->h1, h2 = l->h2;

    l->escaped = false;
    l->h2 = l->h1;
    l->h1 = escaped ? 'x' : c;
    switch (l->state) {
    case SH_PLAIN:
        if (escaped) {
            l->word_start = false;
            return;
        }
        if (c == '(' && h1 == '(' && h2 == '$') {
            l->state = SH_ARITH;
            l->depth = 2;
            return;
        }
        if (c == '\\')
            l->escaped = true;
        else if (c == '\'')
            l->state = SH_SQ;
        else if (c == '"')
            l->state = SH_DQ;
        else if (c == '`')
            l->state = SH_BQ;
        else if (c == '#' && l->word_start)
            l->state = SH_COMMENT;
        l->word_start = c == ' ' || c == '\t' || c == '\n' || strchr(";&|()<>", c);
        return;
    case SH_SQ:
        if (c == '\'')
            l->state = SH_PLAIN;
        return;
    case SH_DQ:
    case SH_BQ:
        if (!escaped && c == '\\')
            l->escaped = true;
        else if (!escaped && c == (l->state == SH_DQ ? '"' : '`'))
            l->state = SH_PLAIN;
        return;
    case SH_ARITH:
        if (c == '(')
            l->depth++;
        else if (c == ')' && --l->depth == 0)
            l->state = SH_PLAIN;
        return;
    case SH_COMMENT:
        if (c == '\n') {
            l->state = SH_PLAIN;
            l->word_start = true;
        }
        return;
    }
}

static bool
no_controls(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* The reference quoting: ' -> '\'' inside single quotes. */
static size_t
quoted_len(const char *s)
{
    size_t n = 2;
    for (; *s; s++)
        n += *s == '\'' ? 4 : 1;
    return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size + 1);
    struct command_value values[VALUES_MAX];
    const char *given[N_ARGS] = {0};
    bool given_string[N_ARGS] = {0};
    size_t n = 0;

    CHECK(in);
    memcpy(in, data, size);
    in[size] = '\0';

    /* split at NULs: text, then values */
    size_t off = strlen(in) + 1;
    while (off < size && n < VALUES_MAX) {
        const char *part = in + off;
        size_t len = strlen(part);
        off += len + 1;
        if (len == 0)
            continue;
        unsigned sel = (unsigned char)part[0];
        values[n] = (struct command_value){
                .name = args[(sel & 0x7f) % N_ARGS].name,
                .text = part + 1,
                .is_string = sel & 0x80,
        };
        n++;
    }

    struct template_command c = {.name = "fuzz", .cmd = in, .args = args, .n_args = N_ARGS};
    struct err err = {0}, check_err = {0};
    char *line = (char *)"untouched";
    int r = command_render(&c, values, n, &line, &err);
    int rc = command_check(&c, &check_err);

    CHECK(rc == 0 || rc == -EINVAL);
    CHECK(rc == 0 || check_err.msg[0]);
    CHECK(no_controls(check_err.msg));
    CHECK(r == 0 || r == -EINVAL || r == -E2BIG);
    if (r < 0) {
        CHECK(err.msg[0]);
        CHECK(no_controls(err.msg));
        CHECK(!strcmp(line, "untouched"));
        free(in);
        return 0;
    }
    CHECK(rc == 0);
    CHECK(strlen(line) <= COMMAND_LINE_MAX);

    /* the canonical text each argument should have: its last value (there
     * is at most one, render refuses twice), else its default */
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < N_ARGS; a++)
            if (!strcmp(values[i].name, args[a].name)) {
                given[a] = values[i].text;
                given_string[a] = values[i].is_string;
            }
    char *canon[N_ARGS] = {0};
    for (size_t a = 0; a < N_ARGS; a++) {
        const char *t = given[a] ? given[a] : args[a].default_text;
        if (!t)
            continue;
        struct buf b;
        buf_init(&b, COMMAND_LINE_MAX);
        CHECK(command_coerce(args[a].type, t, given[a] ? given_string[a] : true, &b, NULL) == 0);
        canon[a] = buf_steal(&b);
        CHECK(canon[a]);
        /* canonical forms */
        if (args[a].type == TEMPLATE_ARG_BOOL)
            CHECK(!strcmp(canon[a], "true") || !strcmp(canon[a], "false"));
        if (args[a].type == TEMPLATE_ARG_INT) {
            const char *p = canon[a] + (canon[a][0] == '-');
            CHECK(*p && strspn(p, "0123456789") == strlen(p));
            CHECK(p[0] != '0' || (!p[1] && p == canon[a]));
        }
        if (args[a].type == TEMPLATE_ARG_FLOAT) {
            double d = strtod(canon[a], NULL), want = strtod(t, NULL);
            CHECK(isfinite(d) && !memcmp(&d, &want, sizeof(d)));
        }
    }

    /* lockstep: the text against the line */
    struct sh_lex lex = {.state = SH_PLAIN, .word_start = true};
    const char *t = in, *o = line;
    while (*t) {
        if ((t[0] == '{' || t[0] == '}') && t[1] == t[0]) {
            CHECK(*o == t[0]);
            sh_feed(&lex, *o++);
            t += 2;
            continue;
        }
        CHECK(*t != '}');
        if (*t != '{') {
            CHECK(*o == *t);
            sh_feed(&lex, *o++);
            t++;
            continue;
        }
        const char *close = strchr(t, '}');
        CHECK(close);
        size_t a = 0;
        while (a < N_ARGS && !(strlen(args[a].name) == (size_t)(close - t - 1) &&
                               !memcmp(args[a].name, t + 1, (size_t)(close - t - 1))))
            a++;
        CHECK(a < N_ARGS && canon[a]);
        /* the value starts where a word can start */
        CHECK(lex.state == SH_PLAIN && !lex.escaped);
        CHECK(*o == '\'');
        const char *v = canon[a];
        size_t qlen = quoted_len(v);
        CHECK(strlen(o) >= qlen);
        sh_feed(&lex, *o++);
        for (; *v; v++) {
            if (*v == '\'') {
                /* close, escaped quote, open */
                CHECK(!memcmp(o, "'\\''", 4));
                for (int k = 0; k < 4; k++)
                    sh_feed(&lex, *o++);
                CHECK(lex.state == SH_SQ);
            } else {
                CHECK(lex.state == SH_SQ);
                CHECK(*o == *v);
                sh_feed(&lex, *o++);
            }
        }
        CHECK(*o == '\'');
        sh_feed(&lex, *o++);
        CHECK(lex.state == SH_PLAIN && !lex.escaped);
        t = close + 1;
    }
    CHECK(*o == '\0');

    for (size_t a = 0; a < N_ARGS; a++)
        free(canon[a]);
    free(line);
    free(in);
    return 0;
}
