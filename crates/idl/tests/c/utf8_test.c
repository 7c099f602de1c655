/*
 * utf8_test.c: reads records (a native-endian uint32_t length, then that
 * many bytes) from stdin until EOF and writes '1' or '0' for each: whether
 * the C run time's idl_utf8 accepts it. tests/c_interop.rs compares the
 * answers with Rust's str::from_utf8.
 */
#include "idl_rt.h"

#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    uint32_t n;
    static unsigned char buf[1 << 16];
    while (fread(&n, sizeof n, 1, stdin) == 1) {
        if (n > sizeof buf || fread(buf, 1, n, stdin) != n)
            return 2;
        putchar(idl_utf8(buf, n) ? '1' : '0');
    }
    return 0;
}
