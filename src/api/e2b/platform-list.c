/*
 * platform-list.c - the order and the pages of GET /sandboxes (v2).
 *
 * A listing is sorted by start time, then by E2B id, ascending or (the
 * default) descending; a page holds at most limit rows, and when more
 * follow, X-Next-Token names the last row sent as "<created ms>.<id>". The
 * next page starts after that row in the same order, so sandboxes killed
 * or created in between move no other row across the cut. Which rows are
 * listed at all: the query's state, startedAfter, template and metadata
 * (pairs form-encoded, then percent-encoded once more, as the SDKs send
 * them), and the caller's scope.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/e2b/e2b-internal.h"
#include "template/set.h"
#include "util/json.h"
#include "util/parse.h"
#include "util/timeutil.h"

/* --- which rows --- */

/* One percent-decoding pass in place ('+' as a space when form is set):
 * '%' and exactly two hex digits (not "%00"), else the bytes stay. */
static void
pct_decode(char *s, bool form)
{
    char *w = s;
    for (char *p = s; *p; p++) {
        int hi = *p == '%' ? parse_hex_digit(p[1]) : -1, lo = hi >= 0 ? parse_hex_digit(p[2]) : -1;
        if (lo >= 0 && hi * 16 + lo > 0) {
            *w++ = (char)(hi * 16 + lo);
            p += 2;
            continue;
        }
        *w++ = form && *p == '+' ? ' ' : *p;
    }
    *w = '\0';
}

int
e2b_meta_filter_parse(struct e2b_meta_filter *m, const char *v, struct err *err)
{
    m->n = 0;
    if (strlen(v) >= sizeof(m->buf))
        return err_set(err, EINVAL, "'metadata' is too long");
    (void)strscpy(m->buf, v, sizeof(m->buf)); /* fits: checked above */
    char *save = NULL;
    for (char *pair = strtok_r(m->buf, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
        if (m->n == ELEMENTSOF(m->keys))
            return err_set(err, EINVAL, "'metadata' has too many pairs");
        char *eq = strchr(pair, '=');
        if (!eq)
            return err_set(err, EINVAL, "'metadata' must be key=value pairs");
        *eq = '\0';
        /* form-decoded once, then percent-decoded once more */
        pct_decode(pair, true);
        pct_decode(eq + 1, true);
        pct_decode(pair, false);
        pct_decode(eq + 1, false);
        m->keys[m->n] = pair;
        m->vals[m->n++] = eq + 1;
    }
    return 0;
}

int
e2b_filter_decode(const char *state, const char *started_after, const char *tmpl,
                  const char *metadata, struct e2b_filter *f, struct err *err)
{
    f->running = f->paused = true;
    if (state) {
        f->running = strstr(state, "running") != NULL;
        f->paused = strstr(state, "paused") != NULL;
    }
    if (started_after && *started_after && parse_rfc3339(started_after, &f->started_after) < 0)
        return err_set(err, EINVAL, "'startedAfter' must be an RFC 3339 time");
    f->tmpl = tmpl;
    if (metadata && *metadata)
        return e2b_meta_filter_parse(&f->meta, metadata, err);
    return 0;
}

bool
e2b_filter_matches(const struct template_set *ts, const struct e2b_item *it,
                   const struct e2b_filter *f, const struct api_scope *scope)
{
    const struct template *et = it->e ? it->e->tmpl : it->c->t;
    json_t *meta = it->e ? it->e->metadata : it->c->meta;
    bool paused = it->e ? it->e->paused : true;
    if (it->e && (it->e->state != E_READY || (scope && it->e->scope != scope)))
        return false;
    if (it->c && scope && it->c->scope != scope)
        return false;
    if (!(paused ? f->paused : f->running))
        return false;
    if (it->created < f->started_after)
        return false;
    if (f->tmpl && *f->tmpl) {
        const struct template *t = template_set_find(ts, f->tmpl);
        if (!t || t != et)
            return false;
    }
    for (size_t i = 0; i < f->meta.n; i++) {
        json_t *v = json_object_get(meta, f->meta.keys[i]);
        if (!v || !json_is_string(v) || strcmp(json_string_value(v), f->meta.vals[i]))
            return false;
    }
    return true;
}

/* --- which page --- */

int
e2b_page_decode(const char *limit, const char *order, const char *token, struct e2b_page *p,
                struct err *err)
{
    *p = (struct e2b_page){.limit = E2B_LIST_MAX};
    if (limit) {
        uint64_t l;
        if (parse_u64(limit, &l) < 0 || l < 1 || l > E2B_LIST_MAX)
            return err_set(err, EINVAL, "'limit' must be between 1 and %d", E2B_LIST_MAX);
        p->limit = l;
    }
    p->asc = order && !strcasecmp(order, "asc");
    if (order && !p->asc && strcasecmp(order, "desc"))
        return err_set(err, EINVAL, "'order' must be asc or desc");
    if (token && *token) {
        /* "<ms>.<id>", id 1..API_ID_LEN of [a-z0-9] */
        const char *dot = strchr(token, '.');
        char ms[24];
        size_t il = dot ? strspn(dot + 1, "abcdefghijklmnopqrstuvwxyz0123456789") : 0;
        if (!dot || (size_t)(dot - token) >= sizeof(ms) || il == 0 || il > API_ID_LEN ||
            dot[1 + il] != '\0')
            return err_set(err, EINVAL, "'nextToken' is not a token this server gave");
        memcpy(ms, token, (size_t)(dot - token));
        ms[dot - token] = '\0';
        if (parse_u64(ms, &p->after_ms) < 0)
            return err_set(err, EINVAL, "'nextToken' is not a token this server gave");
        memcpy(p->after_id, dot + 1, il);
        p->after_id[il] = '\0';
        p->after = true;
    }
    return 0;
}

/* Start time, then id; ud points to a bool: ascending. */
static int
cmp_items(const void *pa, const void *pb, void *ud)
{
    const struct e2b_item *x = pa, *y = pb;
    int c = x->created < y->created ? -1 : x->created > y->created;
    if (c == 0)
        c = strcmp(x->id, y->id);
    return *(const bool *)ud ? c : -c;
}

void
e2b_page_cut(struct e2b_item *all, size_t n, const struct e2b_page *p, size_t *ret_start,
             size_t *ret_end)
{
    size_t start = 0;
    bool asc = p->asc;

    qsort_r(all, n, sizeof(*all), cmp_items, &asc);
    if (p->after) {
        struct e2b_item key = {.created = p->after_ms, .id = p->after_id};
        while (start < n && cmp_items(&all[start], &key, &asc) <= 0)
            start++;
    }
    *ret_start = start;
    *ret_end = p->limit < n - start ? start + p->limit : n;
}

void
e2b_page_token(const struct e2b_item *last, char *buf, size_t n)
{
    (void)snprintf(buf, n, "%llu.%s", (unsigned long long)last->created, last->id);
}
