/*
 * test-hashmap.c - the string map against a reference: a long random mix of
 * inserts, lookups and removals, backward-shift deletion on crafted probe
 * runs (including runs that wrap around the end of the table), growth, and
 * iteration.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/hashmap.h"
#include "util/parse.h"

#define NKEYS 4096

static uint64_t rng = 0x243f6a8885a308d3ULL;

static uint32_t
rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 16) % n);
}

/* The map's own hash, so the test can build collisions on purpose. */
static uint64_t
ref_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static void
test_basic(void **state)
{
    struct hashmap *m = NULL;
    int a = 1, b = 2;
    (void)state;

    assert_int_equal(hashmap_new(&m), 0);
    assert_int_equal(hashmap_size(m), 0);
    assert_null(hashmap_get(m, "a"));
    assert_null(hashmap_remove(m, "a"));
    assert_int_equal(hashmap_put(m, "a", &a), 0);
    assert_int_equal(hashmap_put(m, "a", &b), -EEXIST);
    assert_ptr_equal(hashmap_get(m, "a"), &a);   /* not replaced */
    assert_int_equal(hashmap_put(m, "", &b), 0); /* the empty key is a key */
    assert_ptr_equal(hashmap_get(m, ""), &b);
    assert_int_equal(hashmap_size(m), 2);
    /* keys are compared by content, not pointer */
    char copy[] = "a";
    assert_ptr_equal(hashmap_get(m, copy), &a);
    assert_ptr_equal(hashmap_remove(m, copy), &a);
    assert_null(hashmap_get(m, "a"));
    assert_null(hashmap_remove(m, "a"));
    assert_int_equal(hashmap_size(m), 1);
    hashmap_free(m);
    hashmap_free(NULL);
}

static void
test_random_against_reference(void **state)
{
    static char keys[NKEYS][16];
    static int vals[NKEYS];
    static bool present[NKEYS];
    struct hashmap *m = NULL;
    size_t n = 0;
    (void)state;

    for (int i = 0; i < NKEYS; i++) {
        (void)snprintf(keys[i], sizeof(keys[i]), "k%d", i * 7919);
        vals[i] = i;
        present[i] = false;
    }
    assert_int_equal(hashmap_new(&m), 0);
    for (int step = 0; step < 400000; step++) {
        uint32_t i = rnd(NKEYS);
        switch (rnd(4)) {
        case 0:
        case 1: {
            int r = hashmap_put(m, keys[i], &vals[i]);
            if (present[i]) {
                assert_int_equal(r, -EEXIST);
            } else {
                assert_int_equal(r, 0);
                present[i] = true;
                n++;
            }
            break;
        }
        case 2: {
            void *v = hashmap_remove(m, keys[i]);
            if (present[i]) {
                assert_ptr_equal(v, &vals[i]);
                present[i] = false;
                n--;
            } else {
                assert_null(v);
            }
            break;
        }
        default:
            assert_ptr_equal(hashmap_get(m, keys[i]), present[i] ? &vals[i] : NULL);
        }
        assert_int_equal(hashmap_size(m), n);
        /* every so often, the whole map against the reference */
        if (step % 20000 == 0) {
            for (int k = 0; k < NKEYS; k++)
                assert_ptr_equal(hashmap_get(m, keys[k]), present[k] ? &vals[k] : NULL);
        }
    }
    for (int k = 0; k < NKEYS; k++)
        assert_ptr_equal(hashmap_get(m, keys[k]), present[k] ? &vals[k] : NULL);
    /* drain completely, then reuse */
    for (int k = 0; k < NKEYS; k++)
        if (present[k])
            assert_ptr_equal(hashmap_remove(m, keys[k]), &vals[k]);
    assert_int_equal(hashmap_size(m), 0);
    size_t it = 0;
    assert_null(hashmap_next(m, &it));
    assert_int_equal(hashmap_put(m, keys[0], &vals[0]), 0);
    assert_ptr_equal(hashmap_get(m, keys[0]), &vals[0]);
    hashmap_free(m);
}

/* Finds keys whose home slot in a table of cap slots is home. */
static void
keys_with_home(size_t cap, size_t home, size_t count, char (*out)[24], int *next)
{
    for (size_t found = 0; found < count; (*next)++) {
        char k[24];
        (void)snprintf(k, sizeof(k), "c%d", *next);
        if ((ref_hash(k) & (cap - 1)) == home)
            memcpy(out[found++], k, sizeof(k));
    }
}

static void
check_all(struct hashmap *m, char (*keys)[24], const bool *alive, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        void *v = hashmap_get(m, keys[i]);
        if (alive[i] && v != keys[i])
            fail_msg("key %s lost", keys[i]);
        if (!alive[i] && v)
            fail_msg("key %s still there", keys[i]);
    }
}

static void
test_backward_shift(void **state)
{
    /* The table starts with 64 slots and grows past 48 entries; stay
     * below that so the crafted homes hold. Runs: 5 keys homed at 10,
     * 3 at 12 (displaced behind the first run), 4 at 62 and 3 at 63 (so
     * the run wraps around to slots 0..4), and 2 at 1 (displaced by the
     * wrapped run). Removing from the front, middle and end of each run
     * in every order must keep all the others reachable. */
    static char keys[17][24];
    int next = 0;
    keys_with_home(64, 10, 5, keys, &next);
    keys_with_home(64, 12, 3, keys + 5, &next);
    keys_with_home(64, 62, 4, keys + 8, &next);
    keys_with_home(64, 63, 3, keys + 12, &next);
    keys_with_home(64, 1, 2, keys + 15, &next);
    (void)state;

    /* The layout is what the comment says: iterating walks slots 0..63,
     * so the wrapped part of the 62/63 runs comes first, then the keys
     * homed at 1, the run at 10 and the displaced run homed at 12, and
     * last the two keys left in slots 62 and 63. This proves the test's
     * copy of the hash matches the map's. */
    {
        static const int expect[17] = {10, 11, 12, 13, 14, 15, 16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
        struct hashmap *m = NULL;
        assert_int_equal(hashmap_new(&m), 0);
        for (int i = 0; i < 17; i++)
            assert_int_equal(hashmap_put(m, keys[i], keys[i]), 0);
        size_t it = 0;
        for (int i = 0; i < 17; i++)
            assert_ptr_equal(hashmap_next(m, &it), keys[expect[i]]);
        assert_null(hashmap_next(m, &it));
        hashmap_free(m);
    }

    for (int order = 0; order < 200; order++) {
        struct hashmap *m = NULL;
        bool alive[17];
        int perm[17];
        assert_int_equal(hashmap_new(&m), 0);
        for (int i = 0; i < 17; i++) {
            assert_int_equal(hashmap_put(m, keys[i], keys[i]), 0);
            alive[i] = true;
            perm[i] = i;
        }
        /* order 0: in insertion order; 1: reverse; then random */
        for (int i = 16; i > 0 && order > 1; i--) {
            int j = (int)rnd((uint32_t)i + 1);
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int i = 0; i < 17; i++) {
            int k = order == 1 ? perm[16 - i] : perm[i];
            assert_ptr_equal(hashmap_remove(m, keys[k]), keys[k]);
            alive[k] = false;
            assert_int_equal(hashmap_size(m), (size_t)(16 - i));
            check_all(m, keys, alive, 17);
            /* put it back and take it out again: the hole must be usable */
            if (i % 3 == 0) {
                assert_int_equal(hashmap_put(m, keys[k], keys[k]), 0);
                alive[k] = true;
                check_all(m, keys, alive, 17);
                assert_ptr_equal(hashmap_remove(m, keys[k]), keys[k]);
                alive[k] = false;
            }
        }
        hashmap_free(m);
    }
}

static int
key_index(const char *v)
{
    uint32_t idx;
    assert_int_equal(parse_u32(v + 1, &idx), 0);
    assert_true(idx < 20000);
    return (int)idx;
}

static void
test_growth_and_iteration(void **state)
{
    static char keys[20000][12];
    static bool seen[20000];
    struct hashmap *m = NULL;
    (void)state;

    assert_int_equal(hashmap_new(&m), 0);
    for (int i = 0; i < 20000; i++) {
        (void)snprintf(keys[i], sizeof(keys[i]), "g%d", i);
        assert_int_equal(hashmap_put(m, keys[i], keys[i]), 0);
        /* the first 48 fit the initial table, the 49th grows it */
        if (i == 47 || i == 48 || i % 997 == 0)
            for (int k = 0; k <= i; k++)
                assert_ptr_equal(hashmap_get(m, keys[k]), keys[k]);
    }
    assert_int_equal(hashmap_size(m), 20000);

    size_t it = 0, count = 0;
    memset(seen, 0, sizeof(seen));
    for (char *v; (v = hashmap_next(m, &it));) {
        int idx = key_index(v);
        assert_false(seen[idx]);
        seen[idx] = true;
        count++;
    }
    assert_int_equal(count, 20000);
    assert_null(hashmap_next(m, &it)); /* stays at the end */

    /* remove every other key; iteration sees exactly the rest */
    for (int i = 0; i < 20000; i += 2)
        assert_ptr_equal(hashmap_remove(m, keys[i]), keys[i]);
    it = 0;
    count = 0;
    for (char *v; (v = hashmap_next(m, &it));) {
        assert_int_equal(key_index(v) % 2, 1);
        count++;
    }
    assert_int_equal(count, 10000);
    hashmap_free(m);
}

/* Pinned values: cgroup instance names are derived from this hash. */
static void
test_fnv1a(void **state)
{
    (void)state;
    assert_true(hashmap_fnv1a("") == UINT64_C(0x14650fb0739d0383));
    assert_true(hashmap_fnv1a("a") == UINT64_C(0x44bd8ad473cd9906));
    assert_true(hashmap_fnv1a("/var/lib/abx") == UINT64_C(0x6276f220eb8494f7));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_basic),          cmocka_unit_test(test_random_against_reference),
            cmocka_unit_test(test_backward_shift), cmocka_unit_test(test_growth_and_iteration),
            cmocka_unit_test(test_fnv1a),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
