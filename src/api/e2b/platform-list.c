/*
 * platform-list.c - the order and the pages of GET /sandboxes (v2).
 *
 * A listing is sorted by start time, then by E2B id, ascending or (the
 * default) descending; a page holds at most limit rows, and when more
 * follow, X-Next-Token names the last row sent as "<created ms>.<id>". The
 * next page starts after that row in the same order, so sandboxes killed
 * or created in between move no other row across the cut. Which rows are
 * listed at all (state, template, metadata, startedAfter, the caller's
 * scope) is e2b-platform.c's filter.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/e2b/e2b-internal.h"
#include "util/parse.h"

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
