/*
 * sudo-proto.c - encoder and strict decoder for the abx-sudo <-> init
 * messages, on top of proto.c's packet writer and reader.
 *
 * Linked into abx-sudo, abx-init and the fuzz target; no allocation, no
 * stdio.
 */
#include "jail/sudo/sudo-proto.h"

#include <errno.h>
#include <string.h>

#define SUDO_MAX_SIGNAL 64

long
sudo_encode_run(void *buf, size_t cap, const char *cwd, const char *const *argv,
                const char *const *env)
{
    struct proto_writer w;
    uint32_t argc = 0, envc = 0;

    while (argv[argc])
        argc++;
    while (env && env[envc])
        envc++;
    if (argc == 0 || argc > SUDO_MAX_ARGS || envc > SUDO_MAX_ARGS - argc)
        return -E2BIG;
    proto_writer_init(&w, buf, cap, SUDO_RUN);
    proto_put_u32(&w, SUDO_VERSION);
    proto_put_str(&w, cwd);
    proto_put_u32(&w, argc);
    proto_put_u32(&w, envc);
    for (uint32_t i = 0; i < argc; i++)
        proto_put_str(&w, argv[i]);
    for (uint32_t i = 0; i < envc; i++)
        proto_put_str(&w, env[i]);
    return proto_writer_finish(&w);
}

long
sudo_encode_signal(void *buf, size_t cap, int signo)
{
    struct proto_writer w;

    proto_writer_init(&w, buf, cap, SUDO_SIGNAL);
    proto_put_u32(&w, (uint32_t)signo);
    return proto_writer_finish(&w);
}

long
sudo_encode_exit(void *buf, size_t cap, int status)
{
    struct proto_writer w;

    proto_writer_init(&w, buf, cap, SUDO_EXIT);
    proto_put_u32(&w, (uint32_t)status);
    return proto_writer_finish(&w);
}

long
sudo_encode_error(void *buf, size_t cap, int errnum, const char *msg)
{
    struct proto_writer w;
    char tmp[SUDO_MAX_ERROR];
    size_t n = strlen(msg);

    /* Cut, never fail: the message is for a human. */
    if (n >= sizeof(tmp))
        n = sizeof(tmp) - 1;
    memcpy(tmp, msg, n);
    tmp[n] = '\0';
    proto_writer_init(&w, buf, cap, SUDO_ERROR);
    proto_put_u32(&w, (uint32_t)errnum);
    proto_put_str(&w, tmp);
    return proto_writer_finish(&w);
}

int
sudo_msg_type(const void *buf, size_t n)
{
    struct proto_reader r;

    return proto_reader_init(&r, buf, n);
}

int
sudo_decode_run(const void *buf, size_t n, struct sudo_run *run, const char **argv,
                const char **env)
{
    struct proto_reader r;

    memset(run, 0, sizeof(*run));
    argv[0] = NULL;
    env[0] = NULL;
    if (proto_reader_init(&r, buf, n) != SUDO_RUN)
        return -EBADMSG;
    run->version = proto_get_u32(&r);
    run->cwd = proto_get_str(&r, NULL);
    run->argc = proto_get_u32(&r);
    run->envc = proto_get_u32(&r);
    if (r.bad || run->version != SUDO_VERSION || run->cwd[0] != '/' || run->argc == 0 ||
        run->argc > SUDO_MAX_ARGS || run->envc > SUDO_MAX_ARGS - run->argc)
        return -EBADMSG;
    for (uint32_t i = 0; i < run->argc; i++)
        argv[i] = proto_get_str(&r, NULL);
    argv[run->argc] = NULL;
    for (uint32_t i = 0; i < run->envc; i++)
        env[i] = proto_get_str(&r, NULL);
    env[run->envc] = NULL;
    if (proto_reader_done(&r) < 0) {
        argv[0] = NULL;
        env[0] = NULL;
        return -EBADMSG;
    }
    return 0;
}

int
sudo_decode_signal(const void *buf, size_t n, int *ret_signo)
{
    struct proto_reader r;

    if (proto_reader_init(&r, buf, n) != SUDO_SIGNAL)
        return -EBADMSG;
    uint32_t sig = proto_get_u32(&r);
    if (proto_reader_done(&r) < 0 || sig < 1 || sig > SUDO_MAX_SIGNAL)
        return -EBADMSG;
    *ret_signo = (int)sig;
    return 0;
}

int
sudo_decode_reply(const void *buf, size_t n, struct sudo_reply *ret)
{
    struct proto_reader r;
    int type = proto_reader_init(&r, buf, n);

    memset(ret, 0, sizeof(*ret));
    ret->msg = "";
    if (type == SUDO_EXIT) {
        ret->status = (int32_t)proto_get_u32(&r);
    } else if (type == SUDO_ERROR) {
        ret->errnum = proto_get_u32(&r);
        ret->msg = proto_get_str(&r, NULL);
        if (ret->errnum < 1 || ret->errnum > 4095)
            return -EBADMSG;
    } else {
        return -EBADMSG;
    }
    if (proto_reader_done(&r) < 0)
        return -EBADMSG;
    ret->type = (uint32_t)type;
    return 0;
}
