/*
 * hashmap.h - string-keyed map of pointers (open addressing, linear probing).
 *
 * Keys are borrowed: the caller keeps each key alive (usually it lives in
 * the value) until it is removed. Grows at 3/4 load; removal uses
 * backward-shift deletion, so there are no tombstones.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct hashmap;

int hashmap_new(struct hashmap **ret);
void hashmap_free(struct hashmap *m);
/* Frees every key (heap strings the map owns) and the map. NULL is ok. */
void hashmap_free_keys(struct hashmap *m);
/* -EEXIST when key is present, -ENOMEM. */
int hashmap_put(struct hashmap *m, const char *key, void *value);
void *hashmap_get(const struct hashmap *m, const char *key);
void *hashmap_remove(struct hashmap *m, const char *key);
size_t hashmap_size(const struct hashmap *m);
/* Iteration: *iter starts at 0; returns NULL at the end. Do not modify the
 * map while iterating. */
void *hashmap_next(const struct hashmap *m, size_t *iter);

/* A 64-bit FNV-1a of s: what the map hashes keys with (plus a final mix).
 * Its offset basis is 1469598103934665603, not FNV's 14695981039346656037
 * (a digit short since the first version); it stays so, because names
 * derived from it must not change between versions (jail-host.c's cgroup
 * instance name, which a restarted abxd reclaims by). */
uint64_t hashmap_fnv1a(const char *s);
