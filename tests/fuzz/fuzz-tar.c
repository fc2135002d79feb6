/*
 * fuzz-tar.c - the tar reader (util/tar.h) on arbitrary streams, fed in
 * two pieces split at a point the input chooses. Whatever it accepts, every
 * entry has a NUL-terminated name of at most TAR_NAME_MAX bytes, a known
 * type, content only for files, and exactly the announced bytes of it.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "util/tar.h"

struct state {
    uint64_t want, got;
    bool in_file;
};

static int
on_entry(void *ud, const struct tar_entry *e)
{
    struct state *s = ud;
    CHECK(!s->in_file || s->got == s->want);
    CHECK(e->name && strlen(e->name) <= TAR_NAME_MAX && e->name[0]);
    CHECK(e->link && strlen(e->link) <= TAR_NAME_MAX);
    CHECK(e->type <= TAR_OTHER);
    CHECK(e->type == TAR_FILE || e->size == 0);
    char clean[TAR_NAME_MAX + 1];
    if (tar_clean_name(e->name, clean, sizeof(clean)) == 0)
        CHECK(clean[0] != '/' && !strstr(clean, "//"));
    s->want = e->size;
    s->got = 0;
    s->in_file = e->type == TAR_FILE;
    return 0;
}

static int
on_data(void *ud, const void *p, size_t n)
{
    struct state *s = ud;
    (void)p;
    CHECK(s->in_file);
    s->got += n;
    CHECK(s->got <= s->want);
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct tar_reader_ops ops = {.entry = on_entry, .data = on_data};
    struct state s = {0};
    struct tar_reader *t = NULL;
    struct err err = {0};

    if (size < 1)
        return 0;
    size_t cut = size > 1 ? data[0] % size : 0;
    data++;
    size--;
    if (cut > size)
        cut = size;
    CHECK(tar_reader_new(&ops, &s, &t) == 0);
    int r = tar_reader_feed(t, data, cut, &err);
    if (r == 0)
        r = tar_reader_feed(t, data + cut, size - cut, &err);
    if (r == 0) {
        r = tar_reader_finish(t, &err);
        if (r == 0 && s.in_file)
            CHECK(s.got == s.want);
    }
    CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM || r == -EFBIG);
    tar_reader_free(t);
    return 0;
}
