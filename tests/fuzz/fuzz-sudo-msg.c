/*
 * fuzz-sudo-msg.c - the abx-sudo <-> init messages (src/jail/sudo/
 * sudo-proto.h). init decodes RUN and SIGNAL from code in the sandbox;
 * abx-sudo decodes EXIT and ERROR. An accepted RUN has 1 <= argc,
 * argc + envc <= SUDO_MAX_ARGS, an absolute cwd, NULL-terminated arrays of
 * strings inside the packet, and encodes back to exactly the input bytes;
 * so do accepted SIGNAL (1..64), EXIT and ERROR messages.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "jail/sudo/sudo-proto.h"

static bool
inside(const void *p, const uint8_t *data, size_t size)
{
    return (const uint8_t *)p >= data && (const uint8_t *)p < data + size;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *argv[SUDO_MAX_ARGS + 1], *env[SUDO_MAX_ARGS + 1];
    static char again[SUDO_MAX_MSG];
    struct sudo_run run;
    struct sudo_reply rep;
    int sig;
    long n;

    int type = sudo_msg_type(data, size);
    if (type < 0)
        CHECK(type == -EBADMSG);

    if (sudo_decode_run(data, size, &run, argv, env) == 0) {
        CHECK(type == SUDO_RUN);
        CHECK(run.version == SUDO_VERSION && run.cwd[0] == '/' && inside(run.cwd, data, size));
        CHECK(run.argc >= 1 && run.argc <= SUDO_MAX_ARGS && run.envc <= SUDO_MAX_ARGS - run.argc);
        CHECK(argv[run.argc] == NULL && env[run.envc] == NULL);
        for (uint32_t i = 0; i < run.argc; i++)
            CHECK(argv[i] && inside(argv[i], data, size));
        for (uint32_t i = 0; i < run.envc; i++)
            CHECK(env[i] && inside(env[i], data, size));
        n = sudo_encode_run(again, sizeof(again), run.cwd, argv, env);
        CHECK(n == (long)size && memcmp(again, data, size) == 0);
    } else {
        CHECK(argv[0] == NULL && env[0] == NULL);
    }

    if (sudo_decode_signal(data, size, &sig) == 0) {
        CHECK(type == SUDO_SIGNAL && sig >= 1 && sig <= 64);
        n = sudo_encode_signal(again, sizeof(again), sig);
        CHECK(n == (long)size && memcmp(again, data, size) == 0);
    }

    if (sudo_decode_reply(data, size, &rep) == 0) {
        CHECK(rep.type == (uint32_t)type);
        if (type == SUDO_EXIT) {
            n = sudo_encode_exit(again, sizeof(again), rep.status);
        } else {
            CHECK(type == SUDO_ERROR && rep.errnum >= 1 && rep.errnum <= 4095);
            CHECK(inside(rep.msg, data, size));
            n = sudo_encode_error(again, sizeof(again), (int)rep.errnum, rep.msg);
        }
        /* an ERROR text longer than SUDO_MAX_ERROR is cut by the encoder */
        if (type == SUDO_EXIT || strlen(rep.msg) < SUDO_MAX_ERROR)
            CHECK(n == (long)size && memcmp(again, data, size) == 0);
    }
    return 0;
}
