/*
 * fuzz-b64.c - the strict base64 codec both ways. Decoding arbitrary input:
 * what is accepted is canonical (re-encoding gives the input back, up to
 * the optional padding) and has the length the input implies; a failure
 * leaves the output buffer as it was. Encoding arbitrary bytes: the result
 * has b64_encoded_len() characters of the alphabet and decodes back to the
 * input, also into a buffer whose limit is exactly the decoded size.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "util/b64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t
unpadded_len(const char *s, size_t n)
{
    while (n && s[n - 1] == '=')
        n--;
    return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    struct buf out, enc, back;

    /* decode the input, appended after a prefix */
    buf_init(&out, BUF_UNLIMITED);
    CHECK(buf_puts(&out, "pre") == 0);
    int r = b64_decode(&out, s, size);
    CHECK(r == 0 || r == -EINVAL);
    if (r == 0) {
        size_t u = unpadded_len(s, size);
        CHECK(size - u <= 2);
        CHECK(u % 4 != 1);
        CHECK(out.len == 3 + u / 4 * 3 + (u % 4 ? u % 4 - 1 : 0));
        CHECK(out.data[out.len] == '\0');
        buf_init(&enc, BUF_UNLIMITED);
        CHECK(b64_encode(&enc, out.data + 3, out.len - 3) == 0);
        /* canonical: the same characters, padding aside */
        CHECK(unpadded_len(enc.data, enc.len) == u);
        CHECK(memcmp(enc.data, s, u) == 0);
        if (size != u)
            CHECK(size == enc.len && memcmp(enc.data, s, size) == 0);
        buf_done(&enc);
    } else {
        CHECK(out.len == 3 && memcmp(out.data, "pre", 3) == 0);
        CHECK(out.data[out.len] == '\0'); /* a failed decode keeps buf's NUL */
    }
    buf_done(&out);

    /* encode the input, decode it back */
    buf_init(&enc, b64_encoded_len(size));
    CHECK(b64_encode(&enc, data, size) == 0);
    CHECK(enc.len == b64_encoded_len(size));
    CHECK(strspn(enc.data, alphabet) == unpadded_len(enc.data, enc.len));
    CHECK(enc.data[enc.len] == '\0');
    buf_init(&back, BUF_UNLIMITED);
    CHECK(b64_decode(&back, enc.data, enc.len) == 0);
    CHECK(back.len == size && memcmp(back.data, data, size) == 0);
    buf_done(&back);
    /* a buffer whose max is exactly the decoded size */
    buf_init(&back, size);
    CHECK(b64_decode(&back, enc.data, enc.len) == 0);
    CHECK(back.len == size);
    buf_done(&back);
    /* one byte less never fits */
    if (size) {
        buf_init(&back, size - 1);
        CHECK(b64_decode(&back, enc.data, enc.len) == -EFBIG);
        CHECK(back.len == 0);
        buf_done(&back);
    }
    buf_done(&enc);
    return 0;
}
