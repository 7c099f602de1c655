/*
 * echo.c: an echo server and a client measuring round trips, both C
 * programs' use of unet endpoints through a `fastpath engine` daemon.
 *
 *   echo SOCKET [ROUNDS [SIZE]]
 *
 * Connects to the daemon at SOCKET twice (one connection for the server,
 * one for the client, as two applications would), creates an endpoint on
 * each, and opens a channel each way. The server thread sends back every
 * message it receives; the client sends ROUNDS messages of SIZE bytes
 * (default 10000 of 64), one at a time, checks each echo byte for byte,
 * and prints the round trips' median, 99th percentile and minimum, then
 * both endpoints' counters. Exits 1 with unet's message on any error.
 *
 * Build (after `cargo build --release -p unet-capi`):
 *   cc -std=c11 -Wall -Werror -Icrates/unet-capi/include examples/c/echo.c \
 *      target/release/libunet_capi.a -lpthread -ldl -lm -lrt -lutil -lgcc_s \
 *      -o echo
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unet.h"

#define CHECK(call)                                                        \
    do {                                                                   \
        int rc_ = (call);                                                  \
        if (rc_ != UNET_OK) {                                              \
            fprintf(stderr, "echo: %s failed: %s (%s)\n", #call,           \
                    unet_strerror(rc_), unet_last_error());                \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

/* How long either side waits for a message before giving up. */
#define TIMEOUT_MS 10000

struct server {
    unet_endpoint ep;
    uint16_t chan; /* to the client */
    size_t max;
};

static void *serve(void *arg) {
    struct server *s = arg;
    unsigned char *buf = malloc(s->max);
    if (buf == NULL) {
        fprintf(stderr, "echo: out of memory\n");
        exit(1);
    }
    for (;;) {
        size_t len = 0;
        uint16_t chan = 0;
        CHECK(unet_recv(s->ep, buf, s->max, &len, &chan, TIMEOUT_MS));
        if (len == 0) /* the client's last message */
            break;
        int rc;
        while ((rc = unet_send(s->ep, s->chan, buf, len)) == UNET_EAGAIN)
            ;
        CHECK(rc);
    }
    free(buf);
    return NULL;
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void print_counts(const char *who, unet_endpoint ep) {
    unet_counts c;
    CHECK(unet_endpoint_counts(ep, &c));
    printf("%s counters: tx_descriptors %llu, tx_frames %llu, rx_delivered %llu, "
           "rx_no_buffer %llu\n",
           who, (unsigned long long)c.tx_descriptors, (unsigned long long)c.tx_frames,
           (unsigned long long)c.rx_delivered, (unsigned long long)c.rx_no_buffer);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s SOCKET [ROUNDS [SIZE]]\n", argv[0]);
        return 2;
    }
    long rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 10000;
    long size = argc > 3 ? strtol(argv[3], NULL, 10) : 64;
    if (rounds < 1 || size < 1) {
        fprintf(stderr, "echo: ROUNDS and SIZE must be positive\n");
        return 2;
    }

    unet_client sc, cc;
    CHECK(unet_connect(argv[1], &sc));
    CHECK(unet_connect(argv[1], &cc));
    unet_addr engine;
    CHECK(unet_client_local_addr(cc, &engine));

    struct server s;
    unet_endpoint cep;
    CHECK(unet_endpoint_create(sc, NULL, NULL, 0, &s.ep));
    CHECK(unet_endpoint_create(cc, NULL, NULL, 0, &cep));
    uint32_t sid, cid;
    CHECK(unet_endpoint_id(s.ep, &sid));
    CHECK(unet_endpoint_id(cep, &cid));
    uint16_t chan;
    CHECK(unet_open_channel(s.ep, engine, cid, &s.chan));
    CHECK(unet_open_channel(cep, engine, sid, &chan));
    CHECK(unet_endpoint_max_message(s.ep, &s.max));
    if ((size_t)size > s.max) {
        fprintf(stderr, "echo: SIZE %ld exceeds the endpoint's largest message (%zu)\n",
                size, s.max);
        return 2;
    }
    printf("echo: engine %u.%u.%u.%u:%u, server endpoint %u, client endpoint %u\n",
           engine.ip[0], engine.ip[1], engine.ip[2], engine.ip[3], engine.port, sid, cid);

    pthread_t server;
    if (pthread_create(&server, NULL, serve, &s) != 0) {
        fprintf(stderr, "echo: cannot start the server thread\n");
        return 1;
    }

    unsigned char *out = malloc((size_t)size), *in = malloc((size_t)size);
    uint64_t *rtt = malloc(sizeof(uint64_t) * (size_t)rounds);
    if (out == NULL || in == NULL || rtt == NULL) {
        fprintf(stderr, "echo: out of memory\n");
        return 1;
    }
    long warmup = rounds < 100 ? rounds : 100;
    for (long i = -warmup; i < rounds; i++) {
        for (long j = 0; j < size; j++)
            out[j] = (unsigned char)(i * 31 + j);
        uint64_t t0 = now_ns();
        CHECK(unet_send(cep, chan, out, (size_t)size));
        size_t len = 0;
        uint16_t got_chan = 0;
        CHECK(unet_recv(cep, in, (size_t)size, &len, &got_chan, TIMEOUT_MS));
        uint64_t t1 = now_ns();
        if (len != (size_t)size || got_chan != chan || memcmp(in, out, (size_t)size) != 0) {
            fprintf(stderr, "echo: round %ld: the echo differs from the message sent\n", i);
            return 1;
        }
        if (i >= 0)
            rtt[i] = t1 - t0;
    }
    CHECK(unet_send(cep, chan, out, 0)); /* tells the server to stop */
    pthread_join(server, NULL);

    qsort(rtt, (size_t)rounds, sizeof(uint64_t), cmp_u64);
    printf("echo: %ld round trips of %ld bytes: median %llu ns, p99 %llu ns, min %llu ns\n",
           rounds, size, (unsigned long long)rtt[rounds / 2],
           (unsigned long long)rtt[(rounds * 99) / 100], (unsigned long long)rtt[0]);
    print_counts("client", cep);
    print_counts("server", s.ep);

    CHECK(unet_endpoint_close(cep));
    CHECK(unet_endpoint_close(s.ep));
    CHECK(unet_disconnect(cc));
    CHECK(unet_disconnect(sc));
    free(out);
    free(in);
    free(rtt);
    return 0;
}
