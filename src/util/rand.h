/*
 * rand.h - identifiers and secrets from the kernel's CSPRNG (getrandom).
 */
#pragma once

#include <stddef.h>

/* Fills buf with n random bytes; 0 or -errno. */
int rand_bytes(void *buf, size_t n);

/* Writes n random characters from [a-z0-9] and a NUL into out (n + 1 bytes).
 * Ids appear in host names, so nothing else is allowed. */
int rand_id(char *out, size_t n);

/* Writes a 2*n-character lowercase hex secret and a NUL (2n + 1 bytes). */
int rand_hex(char *out, size_t n);
