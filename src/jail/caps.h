/*
 * caps.h - the capabilities sandbox root keeps in its user namespace (the
 * rest leave its bounding set): Docker's default set. abx-init applies it
 * to itself before it spawns anything; the file helper (abx-fileops) that
 * acts as sandbox root keeps the same, never more.
 */
#pragma once

#include <linux/capability.h>

static const int jail_keep_caps[] = {
        CAP_CHOWN,      CAP_DAC_OVERRIDE, CAP_FOWNER,      CAP_FSETID,           CAP_KILL,
        CAP_SETGID,     CAP_SETUID,       CAP_SETPCAP,     CAP_NET_BIND_SERVICE, CAP_NET_RAW,
        CAP_SYS_CHROOT, CAP_MKNOD,        CAP_AUDIT_WRITE, CAP_SETFCAP,
};
