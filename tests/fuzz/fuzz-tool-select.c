/*
 * fuzz-tool-select.c - which tools a sandbox or a model call gets: the
 * ?allowed= list (tools_select()) and a tool's name (tools_lookup(),
 * tools/registry.c), against a registry made once per process: bundles
 * "alpha" (echo, add), "beta" (echo, sub) and "gamma_2" (x-y).
 *
 * Input: the list up to the first NUL (an input starting with NUL passes
 * NULL, every command), then the name. Both agree with models written here
 * from registry.h: items split at ',', blanks trimmed, "pkg" or "pkg:cmd",
 * unknown names skipped; picks in registry order, once each, -EEXIST
 * exactly when two picked packages export one name. A lookup of "pkg:cmd"
 * finds exactly that; of a bare name the only package exporting it,
 * -EEXIST when several do, else -ENOENT.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-common.h"
#include "tools/registry.h"

static struct tools_registry *reg;

static const struct {
    const char *pkg;
    const char *cmds[3];
} bundles[] = {
        {"alpha", {"echo", "add"}},
        {"beta", {"echo", "sub"}},
        {"gamma_2", {"x-y"}},
};
#define N_BUNDLES (sizeof(bundles) / sizeof(bundles[0]))

static void
put(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) < 0 ||
        chmod(path, mode) < 0)
        abort();
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(p);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char dir[] = "/tmp/fuzz-tools.XXXXXX", p[512], list[512];
    struct err err = {0};
    if (!mkdtemp(dir) || chmod(dir, 0755) < 0)
        abort();
    for (size_t i = 0; i < N_BUNDLES; i++) {
        (void)snprintf(p, sizeof(p), "%s/%s", dir, bundles[i].pkg);
        if (mkdir(p, 0755) < 0 || chmod(p, 0755) < 0)
            abort();
        (void)snprintf(p, sizeof(p), "%s/%s/launch", dir, bundles[i].pkg);
        put(p, "#!/bin/sh\n", 0755);
        (void)snprintf(p, sizeof(p), "%s/%s/build-stamp.json", dir, bundles[i].pkg);
        (void)snprintf(list, sizeof(list), "{\"kind\":\"cli\",\"name\":\"%s\"}", bundles[i].pkg);
        put(p, list, 0644);
        (void)snprintf(p, sizeof(p), "%s/%s/schemas", dir, bundles[i].pkg);
        if (mkdir(p, 0755) < 0)
            abort();
        size_t k = 0;
        k += (size_t)snprintf(list + k, sizeof(list) - k, "[");
        for (size_t c = 0; bundles[i].cmds[c]; c++) {
            k += (size_t)snprintf(list + k, sizeof(list) - k,
                                  "%s{\"name\":\"%s\",\"description\":\"d\"}", c ? "," : "",
                                  bundles[i].cmds[c]);
            (void)snprintf(p, sizeof(p), "%s/%s/schemas/%s.json", dir, bundles[i].pkg,
                           bundles[i].cmds[c]);
            put(p, "{\"type\":\"object\",\"properties\":{}}", 0644);
        }
        (void)snprintf(list + k, sizeof(list) - k, "]");
        (void)snprintf(p, sizeof(p), "%s/%s/commands.json", dir, bundles[i].pkg);
        put(p, list, 0644);
    }
    if (tools_registry_load(dir, &reg, &err) < 0) {
        fprintf(stderr, "fuzz-tool-select: registry: %s\n", err.msg);
        abort();
    }
    (void)nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* Registry index of package name[0..len), or -1. */
static int
model_pkg(const char *name, size_t len)
{
    for (size_t i = 0; i < tools_registry_count(reg); i++) {
        const char *n = tools_registry_at(reg, i)->name;
        if (strlen(n) == len && !memcmp(n, name, len))
            return (int)i;
    }
    return -1;
}

static int
model_cmd(const struct tools_package *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->ncmds; i++)
        if (strlen(p->cmds[i].name) == len && !memcmp(p->cmds[i].name, name, len))
            return (int)i;
    return -1;
}

static void
check_select(const char *allowed)
{
    bool picked[N_BUNDLES][3] = {{false}};
    for (const char *s = allowed; s;) {
        const char *e = strchrnul(s, ',');
        const char *a = s, *z = e;
        while (a < z && (*a == ' ' || *a == '\t'))
            a++;
        while (z > a && (z[-1] == ' ' || z[-1] == '\t'))
            z--;
        const char *colon = memchr(a, ':', (size_t)(z - a));
        int pi = model_pkg(a, (size_t)((colon ? colon : z) - a));
        if (pi >= 0) {
            const struct tools_package *p = tools_registry_at(reg, (size_t)pi);
            for (size_t c = 0; c < p->ncmds; c++)
                if (!colon || (int)c == model_cmd(p, colon + 1, (size_t)(z - colon - 1)))
                    picked[pi][c] = true;
        }
        s = *e ? e + 1 : NULL;
    }
    if (!allowed)
        memset(picked, 1, sizeof(picked));
    bool clash = false;
    size_t want = 0;
    for (size_t i = 0; i < tools_registry_count(reg); i++)
        for (size_t c = 0; c < tools_registry_at(reg, i)->ncmds; c++) {
            if (!picked[i][c])
                continue;
            want++;
            for (size_t j = 0; j < i; j++)
                for (size_t d = 0; d < tools_registry_at(reg, j)->ncmds; d++)
                    clash |= picked[j][d] && !strcmp(tools_registry_at(reg, j)->cmds[d].name,
                                                     tools_registry_at(reg, i)->cmds[c].name);
        }

    struct tools_pick *picks = NULL;
    size_t n = 99;
    struct err err = {0};
    int r = tools_select(reg, allowed, &picks, &n, &err);
    if (clash) {
        CHECK(r == -EEXIST && err.msg[0] && !picks && n == 0);
        return;
    }
    CHECK(r == 0 && n == want && (n == 0) == (picks == NULL));
    size_t k = 0;
    for (size_t i = 0; i < tools_registry_count(reg); i++) {
        const struct tools_package *p = tools_registry_at(reg, i);
        for (size_t c = 0; c < p->ncmds; c++)
            if (picked[i][c]) {
                CHECK(picks[k].pkg == p && picks[k].cmd == &p->cmds[c]);
                k++;
            }
    }
    free(picks);
}

static void
check_lookup(const char *name)
{
    struct tools_pick pick = {0}, want = {0};
    struct err err = {0};
    int expect = -ENOENT;
    const char *colon = strchr(name, ':');
    if (colon) {
        int pi = model_pkg(name, (size_t)(colon - name));
        const struct tools_package *p = pi >= 0 ? tools_registry_at(reg, (size_t)pi) : NULL;
        int ci = p ? model_cmd(p, colon + 1, strlen(colon + 1)) : -1;
        if (ci >= 0) {
            want = (struct tools_pick){p, &p->cmds[ci]};
            expect = 0;
        }
    } else {
        for (size_t i = 0; i < tools_registry_count(reg); i++) {
            const struct tools_package *p = tools_registry_at(reg, i);
            int ci = model_cmd(p, name, strlen(name));
            if (ci < 0)
                continue;
            expect = expect == 0 ? -EEXIST : expect == -EEXIST ? -EEXIST : 0;
            want = (struct tools_pick){p, &p->cmds[ci]};
        }
    }
    int r = tools_lookup(reg, name, &pick, &err);
    CHECK(r == expect);
    if (r == 0)
        CHECK(pick.pkg == want.pkg && pick.cmd == want.cmd);
    else
        CHECK(err.msg[0] != '\0');
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = fuzz_string(data, size);
    size_t l = strlen(in);
    const char *name = l + 1 < size ? in + l + 1 : in;
    check_select(size && l == 0 ? NULL : in);
    check_lookup(name);
    free(in);
    return 0;
}
