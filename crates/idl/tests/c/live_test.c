/*
 * live_test.c: the C side of tests/c_liveness.rs. Raw calls through the C
 * runtime (no generated stubs): key 1 is answered at once, key 9 (the held
 * call) only when a line arrives on stdin.
 *
 *   live_test client FD idle   call key 1, print "child: called", sleep
 *   live_test client FD hold   call key 1, print "child: called", call key 9,
 *                              print "child: returned STATUS" and exit
 *   live_test client FD slow N make N calls of key 2, print "child: cpu US"
 *                              (this process's CPU time over them, in µs)
 *   live_test client FD last   call key 1, print "child: returned STATUS",
 *                              call again, print "child: again STATUS"
 *   live_test server FD        print "child: serving", serve until the wait
 *                              fails, print "child: ended STATUS" and exit
 *   live_test server FD once   answer one call (adding its key to the first
 *                              byte), then close the channel at once
 */
#include "idl_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define KEY_HOLD 9

static void say(const char *what, int st)
{
    if (st < 0)
        printf("child: %s\n", what);
    else
        printf("child: %s %d\n", what, st);
    fflush(stdout);
}

static long long cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

static int slow(idl_channel *ch, int n)
{
    long long t0 = cpu_us();
    for (int i = 0; i < n; i++) {
        idl_client_begin(ch, 0);
        int st = idl_client_call(ch, 2, 0, 0);
        if (st != IDL_OK) {
            fprintf(stderr, "live_test: call %d: %s\n", i, idl_strerror(st));
            return 1;
        }
    }
    printf("child: cpu %lld\n", cpu_us() - t0);
    fflush(stdout);
    return 0;
}

static int last(idl_channel *ch)
{
    idl_client_begin(ch, 0);
    say("returned", idl_client_call(ch, 1, 0, 0));
    idl_client_begin(ch, 0);
    say("again", idl_client_call(ch, 1, 0, 0));
    return 0;
}

static int once(idl_channel *ch)
{
    uint16_t key;
    uint32_t len;
    int st = idl_server_wait(ch, &key, &len);
    if (st != IDL_OK || len == 0) {
        say("ended", st);
        return 1;
    }
    unsigned char *msg = (unsigned char *)ch->base + IDL_MSG;
    msg[0] = (unsigned char)(msg[0] + key);
    st = idl_server_reply(ch, IDL_OK, len);
    if (st != IDL_OK)
        say("ended", st);
    return st != IDL_OK; /* main closes the channel now */
}

static int client(idl_channel *ch, int hold)
{
    idl_client_begin(ch, 0);
    int st = idl_client_call(ch, 1, 0, 0);
    if (st != IDL_OK) {
        fprintf(stderr, "live_test: first call: %s\n", idl_strerror(st));
        return 1;
    }
    say("called", -1);
    if (hold) {
        idl_client_begin(ch, 0);
        say("returned", idl_client_call(ch, KEY_HOLD, 0, 0));
        return 0;
    }
    sleep(60);
    return 0;
}

static int server(idl_channel *ch)
{
    say("serving", -1);
    for (;;) {
        uint16_t key;
        uint32_t len;
        int st = idl_server_wait(ch, &key, &len);
        if (st != IDL_OK) {
            say("ended", st);
            return 0;
        }
        if (key == KEY_HOLD) {
            say("holding", -1);
            char line[16];
            if (!fgets(line, sizeof line, stdin))
                sleep(60);
        }
        st = idl_server_reply(ch, IDL_OK, 0);
        if (st != IDL_OK) {
            say("ended", st);
            return 0;
        }
    }
}

int main(int argc, char **argv)
{
    idl_channel ch;
    if (argc < 3) {
        fprintf(stderr, "usage: live_test client FD idle|hold|last|slow N | server FD [once]\n");
        return 2;
    }
    int st = idl_channel_map(&ch, atoi(argv[2]));
    if (st != IDL_OK) {
        fprintf(stderr, "live_test: map: %s\n", idl_strerror(st));
        return 2;
    }
    int rc;
    if (strcmp(argv[1], "client") == 0 && argc >= 5 && strcmp(argv[3], "slow") == 0)
        rc = slow(&ch, atoi(argv[4]));
    else if (strcmp(argv[1], "client") == 0 && argc >= 4 && strcmp(argv[3], "last") == 0)
        rc = last(&ch);
    else if (strcmp(argv[1], "server") == 0 && argc >= 4 && strcmp(argv[3], "once") == 0)
        rc = once(&ch);
    else if (strcmp(argv[1], "client") == 0)
        rc = client(&ch, argc >= 4 && strcmp(argv[3], "hold") == 0);
    else if (strcmp(argv[1], "server") == 0)
        rc = server(&ch);
    else
        rc = 2;
    idl_channel_unmap(&ch);
    return rc;
}
