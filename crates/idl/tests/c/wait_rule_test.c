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
 *
 *   wait_rule_test client FD CPU SLOW FAST
 *
 * maps the channel in descriptor FD as its client, pins itself to CPU (-1:
 * not), makes SLOW calls with key 1 (which tests/waiting.rs's busy peer
 * answers late) and then FAST calls with key 2 (answered at once), and
 * prints the futex sleeps of each phase ("slow N fast M").
 */
#define _GNU_SOURCE
#include "idl_rt.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int client(int fd, int cpu, long slow, long fast)
{
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    idl_channel ch;
    int st = idl_channel_map(&ch, fd);
    for (long i = 0; st == IDL_OK && i < slow; i++)
        st = idl_client_call(&ch, 1, 0, 0);
    uint64_t before = idl_channel_wait_counts(&ch).sleeps;
    for (long i = 0; st == IDL_OK && i < fast; i++)
        st = idl_client_call(&ch, 2, 0, 0);
    if (st != IDL_OK) {
        fprintf(stderr, "wait_rule_test: call: %s\n", idl_strerror(st));
        return 1;
    }
    uint64_t after = idl_channel_wait_counts(&ch).sleeps;
    printf("slow %llu fast %llu\n", (unsigned long long)before,
           (unsigned long long)(after - before));
    idl_channel_close(&ch);
    idl_channel_unmap(&ch);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "client") == 0)
        return client(atoi(argv[2]), atoi(argv[3]), atol(argv[4]), atol(argv[5]));
    if (argc != 2) {
        fprintf(stderr, "usage: wait_rule_test SPIN < SCRIPT | client FD CPU SLOW FAST\n");
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
