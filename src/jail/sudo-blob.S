/*
 * sudo-blob.S - embeds the static abx-sudo binary into abxd, which writes
 * it to its state directory at start (rootfs_prepare_sudo) for every
 * sandbox's init to bind at /usr/bin/sudo. SUDO_PATH is defined by the build.
 */
    .section .rodata
    .global abx_sudo_blob
    .global abx_sudo_blob_end
    .balign 16
abx_sudo_blob:
    .incbin SUDO_PATH
abx_sudo_blob_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
