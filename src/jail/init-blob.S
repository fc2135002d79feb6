/*
 * init-blob.S - embeds the static abx-init binary into abxd, so the daemon
 * is one file and always execs the init it was built with. INIT_PATH is
 * defined by the build.
 */
    .section .rodata
    .global abx_init_blob
    .global abx_init_blob_end
    .balign 16
abx_init_blob:
    .incbin INIT_PATH
abx_init_blob_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
