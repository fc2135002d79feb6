/*
 * cli-parse.c - the pure parsers of the abx command line.
 *
 * No I/O and no global state, so unit tests drive them directly: ID:PATH
 * operands, KEY=VALUE options, decimals and durations, pids, the path
 * joining cp needs, --if-match values, and finding a verb in a table.
 * Numbers are parsed strictly (util/parse.h style): no sign, no blanks, no
 * exponent, no trailing junk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "util/parse.h"

#define DECIMAL_DIGITS_MAX 15 /* exact in a double */

static bool
id_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

int
cli_parse_remote(const char *arg, char *ret_id, size_t idsz, const char **ret_path)
{
    const char *colon;
    size_t n;

    if (!arg || !strcmp(arg, "-"))
        return 0;
    colon = strchr(arg, ':');
    if (!colon || colon == arg)
        return 0;
    n = (size_t)(colon - arg);
    for (size_t i = 0; i < n; i++)
        if (!id_char(arg[i]))
            return 0;
    if (n >= idsz || n > CLI_ID_MAX)
        return -ENAMETOOLONG;
    memcpy(ret_id, arg, n);
    ret_id[n] = '\0';
    *ret_path = colon + 1;
    return 1;
}

int
cli_parse_kv(const char *arg, char **ret_key, const char **ret_value)
{
    const char *eq = arg ? strchr(arg, '=') : NULL;
    char *key;

    if (!eq || eq == arg)
        return -EINVAL;
    key = strndup(arg, (size_t)(eq - arg));
    if (!key)
        return -ENOMEM;
    *ret_key = key;
    *ret_value = eq + 1;
    return 0;
}

int
cli_parse_decimal(const char *s, double *ret)
{
    uint64_t whole = 0, frac = 0, scale = 1;
    unsigned digits = 0;
    bool dot = false, any = false;

    if (!s || !*s)
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if (*p == '.') {
            if (dot)
                return -EINVAL;
            dot = true;
            continue;
        }
        if (*p < '0' || *p > '9')
            return -EINVAL;
        any = true;
        unsigned d = (unsigned)(*p - '0');
        if (digits > 0 || d != 0)
            digits++;
        if (digits > DECIMAL_DIGITS_MAX)
            return -ERANGE;
        if (dot) {
            frac = frac * 10 + d;
            scale *= 10;
        } else {
            whole = whole * 10 + d;
        }
    }
    if (!any)
        return -EINVAL;
    *ret = (double)whole + (double)frac / (double)scale;
    return 0;
}

int
cli_parse_seconds(const char *s, double *ret)
{
    char num[32];
    double mult = 1, v;
    size_t n;
    int r;

    if (!s || !*s)
        return -EINVAL;
    n = strlen(s);
    switch (s[n - 1]) {
    case 's':
        n--;
        break;
    case 'm':
        mult = 60;
        n--;
        break;
    case 'h':
        mult = 3600;
        n--;
        break;
    default:
        break;
    }
    if (n == 0 || n >= sizeof(num))
        return -EINVAL;
    memcpy(num, s, n);
    num[n] = '\0';
    r = cli_parse_decimal(num, &v);
    if (r < 0)
        return r;
    *ret = v * mult;
    return 0;
}

int
cli_parse_pid(const char *s, int *ret)
{
    uint32_t v;
    int r = parse_u32(s, &v);

    if (r < 0)
        return r;
    if (v == 0 || v > INT32_MAX)
        return -ERANGE;
    *ret = (int)v;
    return 0;
}

int
cli_basename(const char *path, char **ret)
{
    size_t end = path ? strlen(path) : 0;
    size_t start;

    while (end > 0 && path[end - 1] == '/')
        end--;
    if (end == 0)
        return -EINVAL;
    start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    if ((end - start == 1 && path[start] == '.') ||
        (end - start == 2 && path[start] == '.' && path[start + 1] == '.'))
        return -EINVAL;
    *ret = strndup(path + start, end - start);
    return *ret ? 0 : -ENOMEM;
}

int
cli_join(const char *dir, const char *name, char **ret)
{
    size_t dn = strlen(dir), nn;
    char *p;

    while (dn > 1 && dir[dn - 1] == '/')
        dn--;
    while (*name == '/')
        name++;
    nn = strlen(name);
    bool slash = !(dn > 0 && dir[dn - 1] == '/');
    p = malloc(dn + slash + nn + 1);
    if (!p)
        return -ENOMEM;
    memcpy(p, dir, dn);
    if (slash)
        p[dn] = '/';
    memcpy(p + dn + slash, name, nn + 1);
    *ret = p;
    return 0;
}

int
cli_parse_if_match(const char *arg, char **ret)
{
    size_t n = arg ? strlen(arg) : 0;
    char *v;

    if (!arg)
        return -EINVAL;
    if (n >= 2 && arg[0] == '"' && arg[n - 1] == '"') {
        arg++;
        n -= 2;
    }
    if (n > CLI_IF_MATCH_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)arg[i] < ' ' || arg[i] == 0x7f || arg[i] == '"')
            return -EINVAL;
    v = strndup(arg, n);
    if (!v)
        return -ENOMEM;
    *ret = v;
    return 0;
}

const struct verb *
cli_find_verb(const struct verb *list, const char *group, const char *name)
{
    size_t skip = group ? strlen(group) + 1 : 0;

    if (!name)
        return NULL;
    for (const struct verb *v = list; v->name; v++) {
        if (group && (strncmp(v->name, group, skip - 1) != 0 || v->name[skip - 1] != ' '))
            continue;
        if (!strcmp(v->name + skip, name))
            return v;
    }
    return NULL;
}
