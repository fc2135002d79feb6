/*
 * rand.c - getrandom()-backed ids and tokens (rejection sampling, no bias).
 */
#include "util/rand.h"

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>

int
rand_bytes(void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = getrandom((char *)buf + done, n - done, 0);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        done += (size_t)k;
    }
    return 0;
}

int
rand_id(char *out, size_t n)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    size_t i = 0;

    while (i < n) {
        uint8_t b[32];
        int r = rand_bytes(b, sizeof(b));
        if (r < 0)
            return r;
        for (size_t k = 0; k < sizeof(b) && i < n; k++) {
            if (b[k] >= 252) /* 252 = 7 * 36: reject to keep the draw uniform */
                continue;
            out[i++] = alphabet[b[k] % 36];
        }
    }
    out[n] = '\0';
    return 0;
}

int
rand_hex(char *out, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t b[64];

    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof(b) ? n - done : sizeof(b);
        int r = rand_bytes(b, k);
        if (r < 0)
            return r;
        for (size_t i = 0; i < k; i++) {
            out[2 * (done + i)] = hex[b[i] >> 4];
            out[2 * (done + i) + 1] = hex[b[i] & 15];
        }
        done += k;
    }
    out[2 * n] = '\0';
    return 0;
}
