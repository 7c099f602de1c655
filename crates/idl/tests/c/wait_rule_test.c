/*
 * wait_rule_test.c: replays a script of wait outcomes through the C run
 * time's waiting rule (idl_wait_budget, idl_wait_polled) and prints what
 * each wait did, for tests/waiting.rs to compare with rt::wait::WaitRule.
 *
 *   wait_rule_test SPIN < SCRIPT
 *
 * SCRIPT is one character per wait: 'a' if a poll of that wait would be
 * answered in time, 'r' if it would run out (other bytes are skipped).
 * The output has one character per wait: 'P' polled, 'B' polled as a
 * probe, 'S' slept at once; then a newline.
 */
#include "idl_rt.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: wait_rule_test SPIN < SCRIPT\n");
        return 2;
    }
    idl_wait_rule r;
    idl_wait_rule_init(&r, (uint32_t)strtoul(argv[1], NULL, 10));
    int c;
    while ((c = getchar()) != EOF) {
        if (c != 'a' && c != 'r')
            continue;
        bool probe;
        if (idl_wait_budget(&r, &probe) == 0) {
            putchar('S');
            continue;
        }
        idl_wait_polled(&r, probe, c == 'a');
        putchar(probe ? 'B' : 'P');
    }
    putchar('\n');
    return 0;
}
