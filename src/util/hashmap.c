/*
 * hashmap.c - open-addressing string map.
 */
#include "util/hashmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    const char *key;
    void *value;
    uint64_t hash;
};

struct hashmap {
    struct slot *slots;
    size_t cap, n;
};

uint64_t
hashmap_fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t
hash_str(const char *s)
{
    uint64_t h = hashmap_fnv1a(s);
    return h ^ (h >> 29);
}

int
hashmap_new(struct hashmap **ret)
{
    struct hashmap *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->cap = 64;
    m->slots = calloc(m->cap, sizeof(*m->slots));
    if (!m->slots) {
        free(m);
        return -ENOMEM;
    }
    *ret = m;
    return 0;
}

void
hashmap_free(struct hashmap *m)
{
    if (!m)
        return;
    free(m->slots);
    free(m);
}

void
hashmap_free_keys(struct hashmap *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            free((char *)(uintptr_t)m->slots[i].key);
    hashmap_free(m);
}

static int
grow(struct hashmap *m)
{
    size_t cap = m->cap * 2;
    struct slot *s = calloc(cap, sizeof(*s));
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key)
            continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (s[j].key)
            j = (j + 1) & (cap - 1);
        s[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = s;
    m->cap = cap;
    return 0;
}

int
hashmap_put(struct hashmap *m, const char *key, void *value)
{
    if ((m->n + 1) * 4 > m->cap * 3) {
        int r = grow(m);
        if (r < 0)
            return r;
    }
    uint64_t h = hash_str(key);
    size_t i = h & (m->cap - 1);
    while (m->slots[i].key) {
        if (m->slots[i].hash == h && !strcmp(m->slots[i].key, key))
            return -EEXIST;
        i = (i + 1) & (m->cap - 1);
    }
    m->slots[i] = (struct slot){key, value, h};
    m->n++;
    return 0;
}

static size_t
find(const struct hashmap *m, const char *key)
{
    uint64_t h = hash_str(key);
    size_t i = h & (m->cap - 1);
    while (m->slots[i].key) {
        if (m->slots[i].hash == h && !strcmp(m->slots[i].key, key))
            return i;
        i = (i + 1) & (m->cap - 1);
    }
    return SIZE_MAX;
}

void *
hashmap_get(const struct hashmap *m, const char *key)
{
    size_t i = find(m, key);
    return i == SIZE_MAX ? NULL : m->slots[i].value;
}

void *
hashmap_remove(struct hashmap *m, const char *key)
{
    size_t i = find(m, key);
    if (i == SIZE_MAX)
        return NULL;
    void *v = m->slots[i].value;
    /* Backward-shift: pull later members of the probe run into the hole. */
    size_t j = i;
    for (;;) {
        m->slots[i].key = NULL;
        for (;;) {
            j = (j + 1) & (m->cap - 1);
            if (!m->slots[j].key) {
                m->n--;
                return v;
            }
            size_t k = m->slots[j].hash & (m->cap - 1);
            /* Move j back to i unless its home k lies cyclically in (i, j]. */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                continue;
            break;
        }
        m->slots[i] = m->slots[j];
        i = j;
    }
}

size_t
hashmap_size(const struct hashmap *m)
{
    return m->n;
}

void *
hashmap_next(const struct hashmap *m, size_t *iter)
{
    while (*iter < m->cap) {
        size_t i = (*iter)++;
        if (m->slots[i].key)
            return m->slots[i].value;
    }
    return NULL;
}
