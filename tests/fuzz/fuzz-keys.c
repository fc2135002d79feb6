/*
 * fuzz-keys.c - the scoped API keys file (ABX_KEYS_FILE, api/keys.c) on
 * arbitrary bytes, against a template set of "base" and two templates
 * made once per process ("toolbox" with the alias "tb", and "locked").
 *
 * Invariants: api_load_keys() returns the number of keys, or -EINVAL or
 * -EFBIG with a message naming the file and no key kept; every loaded key
 * is 16..255 bytes, unlike abxd's full key and every other key, and is
 * found by api_scope_of() (and a prefix of it is not); its templates are
 * canonical names of the set (an alias becomes the name), so
 * api_scope_template() admits exactly those; a key without "commands"
 * may run every command of its templates, one with a list only what
 * "template:command" or "template:*" names.
 */
#include <errno.h>
#include <ftw.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "fuzz-common.h"
#include "template/set.h"

static char full_key[] = "the-full-key-of-abxd-0123456789";
static struct api a = {.api_key = full_key};
static int memfd = -1;
static char path[64];

static const char toolbox[] = "name: toolbox\n"
                              "aliases: [tb]\n"
                              "custom_commands:\n"
                              "  echo:\n"
                              "    cmd: echo hi\n"
                              "  greet:\n"
                              "    cmd: echo {who}\n"
                              "    args:\n"
                              "      - {name: who, required: true}\n";
static const char locked[] = "name: locked\n"
                             "custom_commands:\n"
                             "  run:\n"
                             "    cmd: 'true'\n";

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(p);
}

static void
write_template(const char *dir, const char *name, const char *yaml)
{
    char p[512];
    (void)snprintf(p, sizeof(p), "%s/%s", dir, name);
    if (mkdir(p, 0755) < 0)
        abort();
    (void)snprintf(p, sizeof(p), "%s/%s/sandbox-template.yaml", dir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(yaml, f) < 0 || fclose(f) != 0)
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char dir[] = "/tmp/fuzz-keys.XXXXXX";
    struct err err = {0};
    if (!mkdtemp(dir))
        abort();
    write_template(dir, "toolbox", toolbox);
    write_template(dir, "locked", locked);
    if (template_set_load(dir, NULL, &a.templates, &err) < 0) {
        fprintf(stderr, "fuzz-keys: templates: %s\n", err.msg);
        abort();
    }
    (void)nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    memfd = memfd_create("keys.json", MFD_CLOEXEC);
    if (memfd < 0)
        abort();
    (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
    return 0;
}

static void
check_scope(const struct api_scope *s)
{
    size_t kl = strlen(s->key);
    CHECK(kl >= 16 && kl <= 255 && strcmp(s->key, a.api_key) != 0);
    CHECK(api_scope_of(&a, s->key, kl) == s);
    CHECK(api_scope_of(&a, s->key, kl - 1) != s);
    for (size_t i = 0; i < s->n_templates; i++) {
        const struct template *t = template_set_find(a.templates, s->templates[i]);
        CHECK(t && !strcmp(t->name, s->templates[i]));
    }
    for (size_t i = 0; i < template_set_count(a.templates); i++) {
        const struct template *t = template_set_at(a.templates, i);
        bool listed = false;
        for (size_t m = 0; m < s->n_templates; m++)
            listed |= !strcmp(s->templates[m], t->name);
        CHECK(api_scope_template(s, t) == listed);
        for (size_t c = 0; c < t->n_cmds; c++) {
            const char *cmd = t->cmds[c].name;
            bool named = s->all_commands;
            size_t tl = strlen(t->name);
            for (size_t m = 0; m < s->n_commands; m++) {
                const char *e = s->commands[m];
                if (!strncmp(e, t->name, tl) && e[tl] == ':' &&
                    (!strcmp(e + tl + 1, "*") || !strcmp(e + tl + 1, cmd)))
                    named = true;
            }
            CHECK(api_scope_command(s, t, cmd) == (listed && named));
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct err err = {0};
    if (ftruncate(memfd, 0) < 0 || pwrite(memfd, data, size, 0) != (ssize_t)size)
        abort();
    int r = api_load_keys(&a, path, &err);
    if (r < 0) {
        CHECK(r == -EINVAL || r == -EFBIG);
        CHECK(strstr(err.msg, "keys file '") == err.msg);
        CHECK(a.n_scopes == 0 && a.scopes == NULL);
        return 0;
    }
    CHECK((size_t)r == a.n_scopes);
    for (size_t i = 0; i < a.n_scopes; i++) {
        check_scope(&a.scopes[i]);
        for (size_t m = 0; m < i; m++)
            CHECK(strcmp(a.scopes[m].key, a.scopes[i].key) != 0);
    }
    api_keys_free(&a);
    return 0;
}
