/*
 * fileops-blob.S - embeds the static abx-fileops helper into abxd (like
 * init-blob.S). FILEOPS_PATH is defined by the build.
 */
    .section .rodata
    .global abx_fileops_blob
    .global abx_fileops_blob_end
    .balign 16
abx_fileops_blob:
    .incbin FILEOPS_PATH
abx_fileops_blob_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
