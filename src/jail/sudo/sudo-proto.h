/*
 * sudo-proto.h - messages between abx-sudo (a sandbox's /usr/bin/sudo) and
 * the sandbox's init, which runs the command as sandbox root.
 *
 * Transport: a SOCK_SEQPACKET connection to the abstract unix socket
 * SUDO_SOCKET_NAME, which exists only in the sandbox's own network
 * namespace. One message per packet, framed like proto.h (header {type,
 * len}, u32 in host order, strings as u32 length + bytes + NUL), at most
 * SUDO_MAX_MSG bytes. A session is one connection:
 *
 *   sudo -> init  RUN     u32 version, str cwd, u32 argc, u32 envc,
 *                         argc + envc strings; SCM_RIGHTS: exactly 3 fds
 *                         (the command's stdin, stdout, stderr)
 *   sudo -> init  SIGNAL  u32 signo, for the command's process group
 *   init -> sudo  EXIT    u32 wait status; init then closes
 *   init -> sudo  ERROR   u32 errno, str message; init then closes
 *
 * Example: `sudo id -u` from /home/user sends RUN {1, "/home/user", 2, 1,
 * "id", "-u", "PATH=/usr/bin:/bin"} and gets EXIT {0}.
 *
 * init decodes what code in the sandbox sends: the decoders check every
 * length against the packet, require argc >= 1 and argc + envc <=
 * SUDO_MAX_ARGS, an absolute cwd, and reject trailing bytes (-EBADMSG).
 * Nothing here allocates or logs; decoded strings point into the packet.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "jail/proto.h"

#define SUDO_SOCKET_NAME  "abx-sudo" /* abstract: "\0abx-sudo" */
#define SUDO_VERSION      1
#define SUDO_MAX_MSG      PROTO_MAX_MSG              /* bytes per packet: argv + env + cwd */
#define SUDO_MAX_ARGS     8192                       /* argv + env entries */
#define SUDO_MAX_ERROR    512                        /* bytes of an ERROR message's text */
#define SUDO_USER_UID     1000                       /* "user" in the sandbox (rootfs.h) */
#define SUDO_SOCKET_BYTES (SUDO_MAX_MSG + 64 * 1024) /* SO_SNDBUF for a full RUN */

enum sudo_type {
    SUDO_RUN = 1,
    SUDO_SIGNAL = 2,
    SUDO_EXIT = 101,
    SUDO_ERROR = 102,
};

struct sudo_run {
    uint32_t version;
    const char *cwd;
    uint32_t argc, envc;
};

/* A message from init: EXIT (status) or ERROR (errnum, msg). */
struct sudo_reply {
    uint32_t type;
    int32_t status;
    uint32_t errnum;
    const char *msg;
};

/* Encoders write one packet into buf; they return its length or -EMSGSIZE
 * (argv/env too large, or more than SUDO_MAX_ARGS entries: -E2BIG). argv
 * and env are NULL-terminated; argv has at least one entry. */
long sudo_encode_run(void *buf, size_t cap, const char *cwd, const char *const *argv,
                     const char *const *env);
long sudo_encode_signal(void *buf, size_t cap, int signo);
long sudo_encode_exit(void *buf, size_t cap, int status);
long sudo_encode_error(void *buf, size_t cap, int errnum, const char *msg);

/* Returns the type of packet buf[0..n) or -EBADMSG. */
int sudo_msg_type(const void *buf, size_t n);

/* Decodes a RUN. argv and env must hold SUDO_MAX_ARGS + 1 pointers; they
 * are filled and NULL-terminated. Returns 0 or -EBADMSG (also for a
 * version other than SUDO_VERSION or a relative cwd). */
int sudo_decode_run(const void *buf, size_t n, struct sudo_run *run, const char **argv,
                    const char **env);
/* Decodes a SIGNAL; the signal is 1..64. Returns 0 or -EBADMSG. */
int sudo_decode_signal(const void *buf, size_t n, int *ret_signo);
/* Decodes EXIT or ERROR (errnum 1..4095). Returns 0 or -EBADMSG. */
int sudo_decode_reply(const void *buf, size_t n, struct sudo_reply *ret);
