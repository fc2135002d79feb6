/*
 * csv-summary - a sample abx tool in C: summaries of the columns of a CSV
 * file, built on libabxtool (include/abx/tool.h).
 *
 *   columns   {path, delimiter}                 -> {"columns": [...]}
 *   summarize {path, column?, delimiter, top}   -> {"rows": N, "columns": [...]}
 *
 * The parser follows RFC 4180 (quoted fields with "" escapes and embedded
 * newlines, CRLF or LF records) and is strict where guessing would
 * mislead: an unterminated quote or text after a closing quote is an error
 * naming the line. Everything the input can make us hold is bounded: bytes
 * per record, columns, distinct values remembered per column and in all.
 * Rows shorter than the header count the missing cells as missing; cells
 * beyond the header are ignored and the rows counted as ragged.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "abx/tool.h"

#define RECORD_MAX       (1024 * 1024)      /* bytes of one record */
#define COLUMNS_MAX      4096               /* columns of the header */
#define DISTINCT_MAX     10000              /* distinct values remembered per column */
#define DISTINCT_TOTAL   (64 * 1024 * 1024) /* bytes of distinct values over all columns */
#define OUTPUT_PRECISION 12                 /* significant digits of reals in the output */

struct field {
    char *s; /* into the record buffer, NUL-terminated */
    size_t len;
};

struct reader {
    FILE *f;
    char delim;
    unsigned long line; /* line the current record starts on, 1-based */
    unsigned long next_line;
    char *rec; /* the record's fields, each NUL-terminated */
    size_t rec_len, rec_cap;
    struct field *fields;
    size_t nfields, fields_cap;
    char err[256];
};

static int
rec_put(struct reader *r, char c)
{
    if (r->rec_len == r->rec_cap) {
        size_t cap = r->rec_cap ? r->rec_cap * 2 : 4096;
        if (r->rec_len >= RECORD_MAX) {
            snprintf(r->err, sizeof(r->err), "line %lu: record longer than %d bytes", r->line,
                     RECORD_MAX);
            return -EFBIG;
        }
        char *n = realloc(r->rec, cap);
        if (!n)
            return -ENOMEM;
        r->rec = n;
        r->rec_cap = cap;
    }
    r->rec[r->rec_len++] = c;
    return 0;
}

/* Ends the current field; field pointers are fixed up once the record is
 * complete, as the buffer may move. */
static int
field_end(struct reader *r, size_t start)
{
    int e = rec_put(r, '\0');
    if (e < 0)
        return e;
    if (r->nfields == COLUMNS_MAX * 4) {
        snprintf(r->err, sizeof(r->err), "line %lu: more than %d fields", r->line, COLUMNS_MAX * 4);
        return -EFBIG;
    }
    if (r->nfields == r->fields_cap) {
        size_t cap = r->fields_cap ? r->fields_cap * 2 : 64;
        struct field *n = realloc(r->fields, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        r->fields = n;
        r->fields_cap = cap;
    }
    r->fields[r->nfields].s = (char *)(uintptr_t)start; /* offset for now */
    r->fields[r->nfields].len = r->rec_len - 1 - start;
    r->nfields++;
    return 0;
}

/* Reads one record. Returns 1 with fields set, 0 at end of input, <0 with
 * r->err set. */
static int
read_record(struct reader *r)
{
    enum { FIELD_START, UNQUOTED, QUOTED, QUOTE_IN_QUOTED } st = FIELD_START;
    size_t start = 0;
    int c, e;
    bool any = false;

    r->rec_len = 0;
    r->nfields = 0;
    r->line = r->next_line;
    for (;;) {
        c = getc_unlocked(r->f);
        if (c == EOF) {
            if (ferror(r->f)) {
                snprintf(r->err, sizeof(r->err), "cannot read: %s", strerror(errno));
                return -EIO;
            }
            if (st == QUOTED) {
                snprintf(r->err, sizeof(r->err), "line %lu: unterminated quoted field", r->line);
                return -EINVAL;
            }
            if (!any)
                return 0;
            e = field_end(r, start);
            if (e < 0)
                return e;
            break;
        }
        any = true;
        if (c == '\0') {
            snprintf(r->err, sizeof(r->err), "line %lu: NUL byte (not a text file?)", r->next_line);
            return -EINVAL;
        }
        if (c == '\n')
            r->next_line++;
        if (st == QUOTED) {
            if (c == '"')
                st = QUOTE_IN_QUOTED;
            else if ((e = rec_put(r, (char)c)) < 0)
                return e;
            continue;
        }
        if (st == QUOTE_IN_QUOTED) {
            if (c == '"') {
                st = QUOTED;
                if ((e = rec_put(r, '"')) < 0)
                    return e;
                continue;
            }
            if (c == '\r') {
                int d = getc_unlocked(r->f);
                if (d != '\n') {
                    snprintf(r->err, sizeof(r->err),
                             "line %lu: unexpected carriage return after a closing quote",
                             r->next_line);
                    return -EINVAL;
                }
                c = '\n';
                r->next_line++;
            }
            if (c != r->delim && c != '\n') {
                snprintf(r->err, sizeof(r->err),
                         "line %lu: unexpected character after a closing quote", r->next_line);
                return -EINVAL;
            }
            st = UNQUOTED; /* handled below as the end of an unquoted field */
        }
        if (c == '"' && st == FIELD_START) {
            st = QUOTED;
            continue;
        }
        if (c == '\r') {
            int d = getc_unlocked(r->f);
            if (d == '\n') {
                c = '\n';
                r->next_line++;
            } else if (d != EOF) {
                ungetc(d, r->f);
            }
        }
        if (c == r->delim || c == '\n') {
            e = field_end(r, start);
            if (e < 0)
                return e;
            start = r->rec_len;
            st = FIELD_START;
            if (c == '\n')
                break;
            continue;
        }
        st = UNQUOTED;
        if ((e = rec_put(r, (char)c)) < 0)
            return e;
    }
    for (size_t i = 0; i < r->nfields; i++)
        r->fields[i].s = r->rec + (uintptr_t)r->fields[i].s;
    return 1;
}

/* A JSON string of s, with invalid UTF-8 replaced by U+FFFD. */
static json_t *
json_text(const char *s, size_t len)
{
    json_t *v = json_stringn(s, len);
    if (v)
        return v;
    char *t = malloc(len * 3 + 1), *o = t;
    if (!t)
        return NULL;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80                 ? 1
                   : c >= 0xc2 && c <= 0xdf ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
        bool ok = n > 0 && i + n <= len;
        if (ok && n > 1) {
            /* overlong forms, surrogates, beyond U+10FFFF: jansson knows */
            json_t *probe = json_stringn(s + i, n);
            ok = probe != NULL;
            json_decref(probe);
        }
        if (ok) {
            memcpy(o, s + i, n);
            o += n;
            i += n;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    v = json_stringn(t, (size_t)(o - t));
    free(t);
    return v;
}

struct entry {
    char *s;
    size_t len;
    uint64_t count;
};

struct column {
    json_t *name;
    uint64_t count, missing, numeric;
    double min, max, mean, m2; /* Welford */
    struct entry *tab;         /* open addressing, NULL s = empty */
    size_t tab_cap, distinct;
    bool distinct_capped;
};

static size_t distinct_bytes; /* over all columns */

static uint64_t
hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int
count_value(struct column *c, const char *s, size_t n)
{
    if (c->tab_cap == 0 || (c->distinct + 1) * 2 > c->tab_cap) {
        if (c->distinct >= DISTINCT_MAX)
            goto lookup_only;
        size_t cap = c->tab_cap ? c->tab_cap * 2 : 64;
        struct entry *t = calloc(cap, sizeof(*t));
        if (!t)
            return -ENOMEM;
        for (size_t i = 0; i < c->tab_cap; i++) {
            if (!c->tab[i].s)
                continue;
            size_t j = hash(c->tab[i].s, c->tab[i].len) & (cap - 1);
            while (t[j].s)
                j = (j + 1) & (cap - 1);
            t[j] = c->tab[i];
        }
        free(c->tab);
        c->tab = t;
        c->tab_cap = cap;
    }
lookup_only:;
    size_t j = hash(s, n) & (c->tab_cap - 1);
    while (c->tab[j].s) {
        if (c->tab[j].len == n && !memcmp(c->tab[j].s, s, n)) {
            c->tab[j].count++;
            return 0;
        }
        j = (j + 1) & (c->tab_cap - 1);
    }
    if (c->distinct >= DISTINCT_MAX || distinct_bytes + n + 1 > DISTINCT_TOTAL ||
        (c->distinct + 1) * 2 > c->tab_cap) {
        c->distinct_capped = true;
        return 0;
    }
    c->tab[j].s = malloc(n + 1);
    if (!c->tab[j].s)
        return -ENOMEM;
    memcpy(c->tab[j].s, s, n);
    c->tab[j].s[n] = '\0';
    c->tab[j].len = n;
    c->tab[j].count = 1;
    c->distinct++;
    distinct_bytes += n + 1;
    return 0;
}

/* A finite number, allowing blanks around it; "nan", "inf" and hex are text. */
static bool
parse_number(const char *s, double *ret)
{
    char *end;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s || strpbrk(s, "xXnNiI"))
        return false;
    errno = 0;
    double d = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(d))
        return false;
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end)
        return false;
    *ret = d;
    return true;
}

static bool
is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t')
            return false;
    return true;
}

static int
add_cell(struct column *c, const struct field *f)
{
    double d;

    if (!f || is_blank(f->s, f->len)) {
        c->missing++;
        return 0;
    }
    c->count++;
    if (parse_number(f->s, &d)) {
        c->numeric++;
        if (c->numeric == 1 || d < c->min)
            c->min = d;
        if (c->numeric == 1 || d > c->max)
            c->max = d;
        double delta = d - c->mean;
        c->mean += delta / (double)c->numeric;
        c->m2 += delta * (d - c->mean);
    }
    return count_value(c, f->s, f->len);
}

static int
entry_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    size_t n = x->len < y->len ? x->len : y->len;
    int r = memcmp(x->s, y->s, n);
    return r ? r : (x->len > y->len) - (x->len < y->len);
}

static json_t *
column_json(struct column *c, long long top)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set(o, "name", c->name);
    json_object_set_new(o, "count", json_integer((json_int_t)c->count));
    json_object_set_new(o, "missing", json_integer((json_int_t)c->missing));
    if (c->count > 0 && c->numeric == c->count) {
        json_object_set_new(o, "type", json_string("numeric"));
        json_object_set_new(o, "min", json_real(c->min));
        json_object_set_new(o, "max", json_real(c->max));
        json_object_set_new(o, "mean", json_real(c->mean));
        json_object_set_new(
                o, "stddev",
                json_real(c->numeric > 1 ? sqrt(c->m2 / (double)(c->numeric - 1)) : 0.0));
        return o;
    }
    json_object_set_new(o, "type", json_string(c->count ? "text" : "empty"));
    json_object_set_new(o, "distinct", json_integer((json_int_t)c->distinct));
    json_object_set_new(o, "distinct_exact", json_boolean(!c->distinct_capped));
    struct entry *v = calloc(c->distinct ? c->distinct : 1, sizeof(*v));
    json_t *arr = json_array();
    if (!v || !arr) {
        free(v);
        json_decref(arr);
        json_decref(o);
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < c->tab_cap; i++)
        if (c->tab[i].s)
            v[n++] = c->tab[i];
    qsort(v, n, sizeof(*v), entry_cmp);
    for (size_t i = 0; i < n && i < (size_t)top; i++)
        json_array_append_new(arr, json_pack("{s:o,s:I}", "value", json_text(v[i].s, v[i].len),
                                             "count", (json_int_t)v[i].count));
    free(v);
    json_object_set_new(o, "top", arr);
    return o;
}

static char
delimiter_of(const struct abx_tool_args *a)
{
    const char *d = abx_tool_get_string(a, "delimiter");
    return d[0]; /* one of the enum's one-character values */
}

/* Opens path (relative to the cwd or absolute): a regular file only, so a
 * FIFO or /dev/zero cannot hang or stream forever. */
static int
open_csv(const struct abx_tool_args *a, struct reader *r)
{
    const char *path = abx_tool_get_string(a, "path");
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0)
        return abx_tool_error(a, -1, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return abx_tool_error(a, -1, "'%s' is not a regular file", path);
    }
    r->f = fdopen(fd, "r");
    if (!r->f) {
        close(fd);
        return abx_tool_error(a, -1, "cannot open '%s': %s", path, strerror(errno));
    }
    r->delim = delimiter_of(a);
    r->next_line = 1;
    return 0;
}

static void
reader_done(struct reader *r)
{
    if (r->f)
        fclose(r->f);
    free(r->rec);
    free(r->fields);
}

static int
print_result(json_t *o)
{
    int r = json_dumpf(o, stdout, JSON_COMPACT | JSON_REAL_PRECISION(OUTPUT_PRECISION));
    putchar('\n');
    json_decref(o);
    return r < 0 ? 1 : 0;
}

static int
read_header(const struct abx_tool_args *a, struct reader *r)
{
    int e = read_record(r);
    if (e == 0)
        return abx_tool_error(a, -1, "'%s' is empty (no header line)",
                              abx_tool_get_string(a, "path"));
    if (e == -ENOMEM)
        return abx_tool_error(a, -1, "out of memory");
    if (e < 0)
        return abx_tool_error(a, -1, "%s", r->err);
    if (r->nfields > COLUMNS_MAX)
        return abx_tool_error(a, -1, "more than %d columns", COLUMNS_MAX);
    return 0;
}

static int
cmd_columns(const struct abx_tool_args *a, void *userdata)
{
    struct reader r = {0};
    json_t *names = NULL;
    int code = 1;

    (void)userdata;
    if (open_csv(a, &r) < 0 || read_header(a, &r) < 0)
        goto out;
    names = json_array();
    for (size_t i = 0; names && i < r.nfields; i++)
        if (json_array_append_new(names, json_text(r.fields[i].s, r.fields[i].len)) < 0)
            goto out;
    code = print_result(json_pack("{s:O}", "columns", names));
out:
    json_decref(names);
    reader_done(&r);
    return code;
}

static int
cmd_summarize(const struct abx_tool_args *a, void *userdata)
{
    const char *want = abx_tool_get_string(a, "column");
    long long top = abx_tool_get_int(a, "top");
    struct reader r = {0};
    struct column *cols = NULL;
    size_t ncols = 0, first = 0, last = 0;
    uint64_t rows = 0, ragged = 0;
    json_t *out = NULL, *arr = NULL;
    int code = 1, e;

    (void)userdata;
    if (open_csv(a, &r) < 0 || read_header(a, &r) < 0)
        goto out;
    ncols = r.nfields;
    cols = calloc(ncols, sizeof(*cols));
    if (!cols) {
        abx_tool_error(a, 1, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ncols; i++)
        cols[i].name = json_text(r.fields[i].s, r.fields[i].len);
    first = 0;
    last = ncols;
    if (want) {
        for (first = 0; first < ncols; first++)
            if (!strcmp(r.fields[first].s, want))
                break;
        if (first == ncols) {
            abx_tool_error(a, 1, "no column '%s' in the header", want);
            goto out;
        }
        last = first + 1;
    }

    while ((e = read_record(&r)) > 0) {
        if (r.nfields == 1 && r.fields[0].len == 0)
            continue; /* a blank line */
        rows++;
        if (r.nfields != ncols)
            ragged++;
        for (size_t i = first; i < last; i++) {
            if (add_cell(&cols[i], i < r.nfields ? &r.fields[i] : NULL) < 0) {
                abx_tool_error(a, 1, "out of memory");
                goto out;
            }
        }
    }
    if (e < 0) {
        abx_tool_error(a, 1, "%s", e == -ENOMEM ? "out of memory" : r.err);
        goto out;
    }

    arr = json_array();
    for (size_t i = first; arr && i < last; i++)
        if (json_array_append_new(arr, column_json(&cols[i], top)) < 0) {
            abx_tool_error(a, 1, "out of memory");
            goto out;
        }
    out = json_pack("{s:I,s:I,s:O}", "rows", (json_int_t)rows, "ragged_rows", (json_int_t)ragged,
                    "columns", arr);
    if (!out) {
        abx_tool_error(a, 1, "out of memory");
        goto out;
    }
    code = print_result(out);
out:
    json_decref(arr);
    for (size_t i = 0; cols && i < ncols; i++) {
        for (size_t j = 0; j < cols[i].tab_cap; j++)
            free(cols[i].tab[j].s);
        free(cols[i].tab);
        json_decref(cols[i].name);
    }
    free(cols);
    reader_done(&r);
    return code;
}

static const char *const delimiters[] = {",", ";", "\t", "|", NULL};

static const struct abx_tool_arg columns_args[] = {
        {.name = "path",
         .description = "CSV file, relative to the working directory or absolute",
         .required = true},
        {.name = "delimiter",
         .type = ABX_ARG_ENUM,
         .description = "Field separator",
         .default_json = "\",\"",
         .choices = delimiters},
        {0},
};

static const struct abx_tool_arg summarize_args[] = {
        {.name = "path",
         .description = "CSV file, relative to the working directory or absolute",
         .required = true},
        {.name = "column", .description = "Summarize only this column (default: all)"},
        {.name = "delimiter",
         .type = ABX_ARG_ENUM,
         .description = "Field separator",
         .default_json = "\",\"",
         .choices = delimiters},
        {.name = "top",
         .type = ABX_ARG_INTEGER,
         .description = "Most frequent values listed for text columns",
         .default_json = "5",
         .minimum = "0",
         .maximum = "100"},
        {0},
};

static const struct abx_tool_command commands[] = {
        {"columns", "Lists the header names of a CSV file", columns_args, cmd_columns},
        {"summarize",
         "Summarizes the columns of a CSV file: counts and missing cells; min, max, mean and "
         "standard deviation of numeric columns; distinct and most frequent values of text columns",
         summarize_args, cmd_summarize},
        {0},
};

static const struct abx_tool tool = {"csv-summary", "Summaries of CSV files", commands};

int
main(int argc, char **argv)
{
    return abx_tool_main(&tool, argc, argv, NULL);
}
