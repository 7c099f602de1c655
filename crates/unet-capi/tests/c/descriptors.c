/*
 * descriptors.c: the C API's descriptors and buffers by hand, channel
 * options and the engine's counters, from C, each function with what it
 * must do and what it must refuse (with the exact code).
 *
 *   descriptors SOCKET
 *
 * SOCKET is a `fastpath engine` daemon (the test starts one, with one
 * thread, on the loop transport). Ends with a full round trip by hand
 * through the daemon: one application writes messages into its buffer
 * area and pushes transmit descriptors; the other takes receive
 * descriptors, sends each message straight back from the receive buffer
 * it arrived in (or gathers a message of several buffers into its own
 * area), waits for the descriptor's completion and gives the buffers back.
 * Prints "descriptors: N checks passed" and exits 0, or names the first
 * check that failed and exits 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unet.h"

static unsigned checks;

static void fail(int line, const char *what) {
    fprintf(stderr, "descriptors.c:%d: %s\n  last error: %s\n", line, what, unet_last_error());
    exit(1);
}

/* `call` returns exactly `code`. */
#define EXPECT(call, code)                                                              \
    do {                                                                                \
        int rc_ = (call);                                                               \
        checks++;                                                                       \
        if (rc_ != (code)) {                                                            \
            char m_[512];                                                               \
            snprintf(m_, sizeof m_, "%s returned %d (%s), expected %s", #call, rc_,     \
                     unet_strerror(rc_), #code);                                        \
            fail(__LINE__, m_);                                                         \
        }                                                                               \
    } while (0)
#define OK(call) EXPECT(call, UNET_OK)
/* A condition. */
#define TRUE(cond)                                                                      \
    do {                                                                                \
        checks++;                                                                       \
        if (!(cond))                                                                    \
            fail(__LINE__, "not true: " #cond);                                         \
    } while (0)
/* The last failed call's message contains `text`. */
#define SAYS(text)                                                                      \
    do {                                                                                \
        checks++;                                                                       \
        if (strstr(unet_last_error(), (text)) == NULL) {                                \
            char m_[512];                                                               \
            snprintf(m_, sizeof m_, "the last error does not say: %s", (text));         \
            fail(__LINE__, m_);                                                         \
        }                                                                               \
    } while (0)

#define WAIT_MS 10000

static uint64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Waits until descriptor `seq` of `ep` is no longer pending; its status. */
static int completion(unet_endpoint ep, uint32_t seq) {
    uint64_t until = now_ms() + WAIT_MS;
    int s = UNET_TX_PENDING;
    do {
        OK(unet_tx_status(ep, seq, &s));
    } while (s == UNET_TX_PENDING && now_ms() < until);
    return s;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 131 + i * 7);
}

struct app {
    unet_client c;
    unet_endpoint ep;
    uint32_t id;
    unsigned char *area;
    unet_layout layout;
};

static struct app open_app(const char *socket, const unet_config *cfg) {
    struct app a;
    OK(unet_connect(socket, &a.c));
    OK(unet_endpoint_create(a.c, cfg, NULL, 0, &a.ep));
    OK(unet_endpoint_id(a.ep, &a.id));
    OK(unet_endpoint_layout(a.ep, &a.layout));
    void *base = NULL;
    size_t len = 0;
    OK(unet_endpoint_area(a.ep, &base, &len));
    TRUE(base != NULL && len == a.layout.area_len);
    a.area = base;
    return a;
}

/* The layout and the area. */
static void layout_and_area(struct app *a) {
    unet_layout *l = &a->layout;
    TRUE(l->config.buffers == 512 && l->config.buffer_size == 4096);
    TRUE(l->config.tx_depth == 256 && l->config.rx_depth == 256 && l->config.free_depth == 512);
    TRUE(l->area_len == 512u * 4096u && l->tx_region == 256u * 4096u);
    TRUE(l->max_message == UNET_RX_BUFFERS_MAX * 4096);
    EXPECT(unet_endpoint_layout(a->ep, NULL), UNET_ENULL);
    SAYS("unet_endpoint_layout: argument `out` is NULL");
    void *base;
    size_t len;
    EXPECT(unet_endpoint_area(a->ep, NULL, &len), UNET_ENULL);
    EXPECT(unet_endpoint_area(a->ep, &base, NULL), UNET_ENULL);
    unet_endpoint never = {0};
    EXPECT(unet_endpoint_layout(never, l), UNET_EBADHANDLE);
    EXPECT(unet_endpoint_area(never, &base, &len), UNET_EBADHANDLE);
}

/* unet_write_area: in the area, and every way out of it. */
static void write_area(struct app *a) {
    unsigned char msg[100];
    fill(msg, sizeof msg, 1);
    OK(unet_write_area(a->ep, 4096, msg, sizeof msg));
    TRUE(memcmp(a->area + 4096, msg, sizeof msg) == 0);
    uint32_t end = (uint32_t)a->layout.area_len;
    OK(unet_write_area(a->ep, end - 100, msg, 100)); /* the last 100 bytes */
    OK(unet_write_area(a->ep, end, NULL, 0));        /* nothing, at the end */
    EXPECT(unet_write_area(a->ep, end - 99, msg, 100), UNET_ERANGE);
    SAYS("unet_write_area: 100 bytes at offset 2097053 do not lie in the buffer area "
         "(2097152 bytes, offsets 0 to 2097151)");
    EXPECT(unet_write_area(a->ep, UINT32_MAX, msg, 1), UNET_ERANGE);
    /* A huge length is refused before a byte of `msg` is read. */
    EXPECT(unet_write_area(a->ep, 0, msg, SIZE_MAX), UNET_ERANGE);
    EXPECT(unet_write_area(a->ep, 0, NULL, 5), UNET_ENULL);
    SAYS("unet_write_area: argument `data` is NULL");
}

/* unet_push_tx, unet_tx_status, unet_tx_pushed, unet_flush, and the
 * receiving side's descriptors and buffers. */
static void push_and_take(struct app *a, struct app *b, uint16_t ab, uint16_t ba) {
    uint32_t n = 99, seq = 99;
    int s;
    OK(unet_tx_pushed(a->ep, &n));
    TRUE(n == 0);
    EXPECT(unet_tx_status(a->ep, 0, &s), UNET_ERANGE);
    SAYS("unet_tx_status: descriptor 0: none has been pushed yet");

    /* 100 bytes, one buffer at the receiver. */
    unsigned char msg[5000];
    fill(msg, 100, 2);
    OK(unet_write_area(a->ep, 0, msg, 100));
    OK(unet_push_tx(a->ep, ab, 0, 100, &seq));
    TRUE(seq == 0);
    OK(unet_flush(a->ep, WAIT_MS));
    TRUE(completion(a->ep, 0) == UNET_TX_SENT);
    unet_rx_desc d;
    OK(unet_recv_desc(b->ep, &d, WAIT_MS));
    TRUE(d.len == 100 && d.chan == ba && d.nbufs == 1);
    TRUE(d.offsets[0] >= b->layout.tx_region && d.offsets[0] % 4096 == 0);
    TRUE(memcmp(b->area + d.offsets[0], msg, 100) == 0);
    OK(unet_give_buffer(b->ep, d.offsets[0]));
    /* Given back twice; one the endpoint never handed out (its transmit
     * region); not a buffer's start; past the area. */
    EXPECT(unet_give_buffer(b->ep, d.offsets[0]), UNET_ENOTHELD);
    char want[200];
    snprintf(want, sizeof want, "unet_give_buffer: the buffer at offset %u is not the "
             "application's to give back", d.offsets[0]);
    SAYS(want);
    EXPECT(unet_give_buffer(b->ep, 0), UNET_ENOTHELD);
    EXPECT(unet_give_buffer(b->ep, (uint32_t)b->layout.tx_region + 4096), UNET_ENOTHELD);
    EXPECT(unet_give_buffer(b->ep, d.offsets[0] + 7), UNET_ERANGE);
    SAYS("is not the start of a buffer (the area has 512 buffers of 4096 bytes)");
    EXPECT(unet_give_buffer(b->ep, (uint32_t)b->layout.area_len), UNET_ERANGE);
    EXPECT(unet_give_buffer(b->ep, UINT32_MAX), UNET_ERANGE);

    /* Inline: no buffer. Straight from the area, in place. */
    fill(a->area + 8192, 10, 3);
    OK(unet_push_tx(a->ep, ab, 8192, 10, NULL));
    OK(unet_recv_desc(b->ep, &d, WAIT_MS));
    TRUE(d.len == 10 && d.nbufs == 0 && memcmp(d.data, a->area + 8192, 10) == 0);

    /* 5000 bytes: two buffers, each but the last full. */
    fill(msg, 5000, 4);
    OK(unet_write_area(a->ep, 65536, msg, 5000));
    OK(unet_push_tx(a->ep, ab, 65536, 5000, &seq));
    TRUE(seq == 2);
    OK(unet_recv_desc(b->ep, &d, WAIT_MS));
    TRUE(d.len == 5000 && d.nbufs == 2);
    TRUE(memcmp(b->area + d.offsets[0], msg, 4096) == 0);
    TRUE(memcmp(b->area + d.offsets[1], msg + 4096, 904) == 0);
    OK(unet_give_buffer(b->ep, d.offsets[1]));
    OK(unet_give_buffer(b->ep, d.offsets[0]));

    /* Refused before anything is queued: out of the area, longer than a
     * descriptor carries, a huge length. */
    uint32_t end = (uint32_t)a->layout.area_len;
    EXPECT(unet_push_tx(a->ep, ab, end - 50, 100, &seq), UNET_ERANGE);
    SAYS("unet_push_tx: 100 bytes at offset 2097102 do not lie in the buffer area");
    EXPECT(unet_push_tx(a->ep, ab, UINT32_MAX, 1, &seq), UNET_ERANGE);
    EXPECT(unet_push_tx(a->ep, ab, 0, a->layout.max_message + 1, &seq), UNET_ETOOLONG);
    SAYS("unet_push_tx: message of 57345 bytes exceeds this endpoint's largest message "
         "(57344 bytes)");
    EXPECT(unet_push_tx(a->ep, ab, 0, UINT32_MAX, &seq), UNET_ETOOLONG);
    OK(unet_tx_pushed(a->ep, &n));
    TRUE(n == 3);

    /* A channel never opened: queued, and the engine rejects it. */
    OK(unet_push_tx(a->ep, 999, 0, 10, &seq));
    TRUE(seq == 3 && completion(a->ep, 3) == UNET_TX_REJECTED);
    unet_counts c;
    OK(unet_endpoint_counts(a->ep, &c));
    TRUE(c.tx_descriptors == 4 && c.tx_rejected == 1 && c.tx_frames == 3);

    /* Descriptor numbers without a status: not yet pushed, far ahead,
     * before the first (the count wraps). */
    OK(unet_tx_status(a->ep, 0, &s));
    TRUE(s == UNET_TX_SENT);
    EXPECT(unet_tx_status(a->ep, 4, &s), UNET_ERANGE);
    SAYS("unet_tx_status: descriptor 4: only the last 4 pushed have a status (numbers 0 to 3)");
    EXPECT(unet_tx_status(a->ep, 1000000, &s), UNET_ERANGE);
    EXPECT(unet_tx_status(a->ep, UINT32_MAX, &s), UNET_ERANGE);
    EXPECT(unet_tx_status(a->ep, 0, NULL), UNET_ENULL);

    /* Nothing waiting: one poll. */
    EXPECT(unet_recv_desc(b->ep, &d, 0), UNET_ETIMEDOUT);
    SAYS("unet_recv_desc: no message arrived within 0 ms");
    EXPECT(unet_recv_desc(b->ep, NULL, 0), UNET_ENULL);

    /* A message too long for unet_recv's buffer stays in its receive
     * buffers; unet_recv_desc hands it over, buffers and all. */
    size_t pending = 99;
    OK(unet_pending(b->ep, &pending));
    TRUE(pending == 0);
    OK(unet_send(a->ep, ab, msg, 5000));
    uint64_t until = now_ms() + WAIT_MS;
    do
        OK(unet_pending(b->ep, &pending));
    while (pending == 0 && now_ms() < until);
    TRUE(pending == 1);
    char small[16];
    size_t len = 0;
    EXPECT(unet_recv(b->ep, small, sizeof small, &len, NULL, WAIT_MS), UNET_ENOSPC);
    TRUE(len == 5000);
    OK(unet_pending(b->ep, &pending));
    TRUE(pending == 1);
    OK(unet_recv_desc(b->ep, &d, 0));
    TRUE(d.len == 5000 && d.nbufs == 2 && memcmp(b->area + d.offsets[0], msg, 4096) == 0);
    OK(unet_give_buffer(b->ep, d.offsets[0]));
    OK(unet_give_buffer(b->ep, d.offsets[1]));
    EXPECT(unet_pending(b->ep, NULL), UNET_ENULL);

    uint64_t bad = 99;
    OK(unet_endpoint_bad_descriptors(b->ep, &bad));
    TRUE(bad == 0);
    EXPECT(unet_endpoint_bad_descriptors(b->ep, NULL), UNET_ENULL);
    /* A daemon's endpoint drives nothing: both are accepted, no-ops. */
    OK(unet_set_drive(a->ep, 0));
    OK(unet_poll_engine(a->ep));
    OK(unet_set_drive(a->ep, 1));
}

/* Huge lengths elsewhere: refused before the bytes are read. */
static void huge_lengths(struct app *a, uint16_t ab) {
    unsigned char x[8] = {0};
    EXPECT(unet_send(a->ep, ab, x, SIZE_MAX), UNET_ETOOLONG);
    SAYS("unet_send: message of");
    EXPECT(unet_set_applet(a->ep, x, SIZE_MAX), UNET_ERANGE);
    SAYS("unet_set_applet: argument `applet`: a length of");
}

/* The zero-copy echo: `b` sends each message back from the receive
 * buffer it arrived in. */
static void round_trips(struct app *a, struct app *b, uint16_t ab, uint16_t ba) {
    static const uint32_t sizes[] = {1, 56, 57, 1000, 4096, 4097, 20000, 57344};
    unsigned char *msg = malloc(57344);
    if (msg == NULL)
        fail(__LINE__, "out of memory");
    for (unsigned i = 0; i < 400; i++) {
        uint32_t size = sizes[i % (sizeof sizes / sizeof *sizes)];
        /* a: the message in place in its area (8 slots of 64 KiB, each
         * reused only after its descriptor completed), pushed. */
        uint32_t at = (i % 8) * 65536, seq;
        fill(a->area + at, size, i);
        OK(unet_push_tx(a->ep, ab, at, size, &seq));

        /* b: the descriptor; one buffer or inline goes straight back;
         * several are gathered into b's own area first. */
        unet_rx_desc d;
        OK(unet_recv_desc(b->ep, &d, WAIT_MS));
        TRUE(d.len == size && d.chan == ba);
        uint32_t bseq;
        if (d.nbufs == 0) {
            OK(unet_write_area(b->ep, 0, d.data, d.len));
            OK(unet_push_tx(b->ep, ba, 0, d.len, &bseq));
        } else if (d.nbufs == 1) {
            OK(unet_push_tx(b->ep, ba, d.offsets[0], d.len, &bseq));
        } else {
            uint32_t left = d.len;
            for (unsigned j = 0; j < d.nbufs; j++) {
                uint32_t n = left < 4096 ? left : 4096;
                OK(unet_write_area(b->ep, j * 4096, b->area + d.offsets[j], n));
                left -= n;
            }
            OK(unet_push_tx(b->ep, ba, 0, d.len, &bseq));
        }
        TRUE(completion(b->ep, bseq) == UNET_TX_SENT);
        for (unsigned j = 0; j < d.nbufs; j++)
            OK(unet_give_buffer(b->ep, d.offsets[j]));

        /* a: the echo, read in place, compared with what a sent. */
        unet_rx_desc e;
        OK(unet_recv_desc(a->ep, &e, WAIT_MS));
        TRUE(e.len == size && e.chan == ab);
        fill(msg, size, i);
        if (e.nbufs == 0) {
            TRUE(memcmp(e.data, msg, size) == 0);
        } else {
            uint32_t left = size;
            for (unsigned j = 0; j < e.nbufs; j++) {
                uint32_t n = left < 4096 ? left : 4096;
                TRUE(memcmp(a->area + e.offsets[j], msg + (size - left), n) == 0);
                left -= n;
                OK(unet_give_buffer(a->ep, e.offsets[j]));
            }
        }
        TRUE(completion(a->ep, seq) == UNET_TX_SENT);
    }
    free(msg);
    unet_counts c;
    OK(unet_endpoint_counts(b->ep, &c));
    TRUE(c.free_invalid == 0 && c.rx_no_buffer == 0);
}

/* unet_open_channel_with: a checksummed channel's frames carry a UDP
 * checksum (a filter on the field sees it), a plain one's do not. */
static void channel_options(struct app *a, struct app *b, uint16_t ab, uint16_t ba,
                            unet_addr engine) {
    unet_channel_options sum = {.checksum = 1}, bad = {.checksum = 2};
    uint16_t abs = 0, side = 0;
    OK(unet_open_channel_with(a->ep, engine, b->id, &sum, &abs));
    TRUE(abs != ab);
    EXPECT(unet_open_channel_with(a->ep, engine, b->id, &bad, &abs), UNET_EINVAL);
    SAYS("unet_open_channel_with: argument `opts`: field `checksum` is 2; it must be 0 or 1");
    EXPECT(unet_open_channel_with(a->ep, engine, b->id, &sum, NULL), UNET_ENULL);
    uint16_t plain;
    OK(unet_open_channel_with(a->ep, engine, b->id, NULL, &plain));

    unet_addr nowhere = {{10, 9, 9, 9}, 1};
    OK(unet_open_channel(b->ep, nowhere, 1, &side));
    uint64_t f;
    OK(unet_install_filter(b->ep, side, "udp and udp[6:2] != 0", 5, &f));
    char buf[64];
    size_t len;
    uint16_t chan;
    OK(unet_send(a->ep, abs, "summed", 6));
    OK(unet_recv(b->ep, buf, sizeof buf, &len, &chan, WAIT_MS));
    TRUE(chan == side && len == 6 && memcmp(buf, "summed", 6) == 0);
    OK(unet_send(a->ep, plain, "plain", 5));
    OK(unet_recv(b->ep, buf, sizeof buf, &len, &chan, WAIT_MS));
    TRUE(chan == ba && len == 5);
    OK(unet_remove_filter(b->ep, f));
    unet_counts c;
    OK(unet_endpoint_counts(b->ep, &c));
    TRUE(c.rx_bad_checksum == 0);
}

/* unet_is_closed, and closed handles. */
static void closing(struct app *a, struct app *b, uint16_t ab) {
    int closed = 99;
    OK(unet_is_closed(a->ep, ab, &closed));
    TRUE(closed == 0);
    EXPECT(unet_is_closed(a->ep, ab, NULL), UNET_ENULL);
    unet_endpoint gone = b->ep;
    OK(unet_endpoint_close(b->ep));
    uint64_t until = now_ms() + WAIT_MS;
    do
        OK(unet_is_closed(a->ep, ab, &closed));
    while (closed == 0 && now_ms() < until);
    TRUE(closed == 1);
    /* Every new function on a closed handle. */
    unet_layout l;
    void *base;
    size_t len;
    uint32_t n;
    int s;
    unet_rx_desc d;
    uint64_t u;
    uint16_t chan;
    EXPECT(unet_endpoint_layout(gone, &l), UNET_EBADHANDLE);
    EXPECT(unet_endpoint_area(gone, &base, &len), UNET_EBADHANDLE);
    EXPECT(unet_write_area(gone, 0, "x", 1), UNET_EBADHANDLE);
    EXPECT(unet_push_tx(gone, 0, 0, 1, &n), UNET_EBADHANDLE);
    EXPECT(unet_tx_status(gone, 0, &s), UNET_EBADHANDLE);
    EXPECT(unet_tx_pushed(gone, &n), UNET_EBADHANDLE);
    EXPECT(unet_flush(gone, 0), UNET_EBADHANDLE);
    EXPECT(unet_recv_desc(gone, &d, 0), UNET_EBADHANDLE);
    EXPECT(unet_give_buffer(gone, 0), UNET_EBADHANDLE);
    EXPECT(unet_pending(gone, &len), UNET_EBADHANDLE);
    EXPECT(unet_is_closed(gone, 0, &s), UNET_EBADHANDLE);
    EXPECT(unet_endpoint_bad_descriptors(gone, &u), UNET_EBADHANDLE);
    EXPECT(unet_set_drive(gone, 1), UNET_EBADHANDLE);
    EXPECT(unet_poll_engine(gone), UNET_EBADHANDLE);
    EXPECT(unet_open_channel_with(gone, (unet_addr){{10, 0, 0, 1}, 7000}, 1, NULL, &chan),
           UNET_EBADHANDLE);
    SAYS("unet_open_channel_with: endpoint handle");
    /* A client's handle is no endpoint's, nor an engine's. */
    EXPECT(unet_tx_pushed((unet_endpoint){a->c.id}, &n), UNET_EBADHANDLE);
    unet_engine_counters ec;
    EXPECT(unet_engine_counts((unet_engine){a->c.id}, &ec), UNET_EBADHANDLE);
}

/* The daemon's engine's own counters, read through a client: the totals
 * move with this application's traffic; a flood of reads meets the
 * daemon's budget for this process (UNET_EAGAIN, saying when to try
 * again) and the connection goes on. */
static void daemon_counters(struct app *a) {
    unet_engine_counters before, after;
    OK(unet_client_engine_counts(a->c, &before));
    EXPECT(unet_client_engine_counts(a->c, NULL), UNET_ENULL);
    EXPECT(unet_client_engine_counts((unet_client){a->ep.id}, &after), UNET_EBADHANDLE);
    SAYS("unet_client_engine_counts: client handle");
    /* Two frames to an address nobody attached: the engine hands them to
     * the loop network, which has no route for them. */
    unet_addr nowhere = {{10, 9, 9, 9}, 1};
    uint16_t out;
    OK(unet_open_channel(a->ep, nowhere, 1, &out));
    OK(unet_send(a->ep, out, "nowhere", 7));
    OK(unet_send(a->ep, out, "nowhere", 7));
    OK(unet_flush(a->ep, 10000));
    OK(unet_client_engine_counts(a->c, &after));
    TRUE(after.frames_out == before.frames_out + 2);
    TRUE(after.transport_no_route == before.transport_no_route + 2);
    /* The budget: 100 reads a second by default, a second's worth at once. */
    long served = 0;
    int rc;
    while ((rc = unet_client_engine_counts(a->c, &after)) == UNET_OK && served < 1000000)
        served++;
    EXPECT(rc, UNET_EAGAIN);
    SAYS("budget of 100 reads a second is spent; try again in ");
    TRUE(served >= 98); /* two were read above, the rest of the second's worth here */
    uint32_t n;
    OK(unet_tx_pushed(a->ep, &n));
    unet_addr engine;
    OK(unet_client_local_addr(a->c, &engine));
}

/* An in-process engine without threads: its counters, and an endpoint
 * whose calls do not drive it until told. */
static void in_process(void) {
    unet_engine e;
    OK(unet_engine_start("10.0.0.5:7000", 0, &e));
    unet_engine_counters ec;
    OK(unet_engine_counts(e, &ec));
    TRUE(ec.frames_in == 0 && ec.frames_out == 0);
    EXPECT(unet_engine_counts(e, NULL), UNET_ENULL);
    unet_endpoint a;
    OK(unet_engine_endpoint_create(e, NULL, NULL, 0, &a));
    /* A channel to an engine nobody attached: the frame leaves, and the
     * loop network has no route for it. */
    unet_addr nowhere = {{10, 9, 9, 9}, 1};
    uint16_t out;
    OK(unet_open_channel(a, nowhere, 1, &out));
    OK(unet_set_drive(a, 0));
    OK(unet_write_area(a, 0, "undriven", 8));
    uint32_t seq;
    OK(unet_push_tx(a, out, 0, 8, &seq));
    EXPECT(unet_flush(a, 50), UNET_ETIMEDOUT);
    SAYS("unet_flush: the engine has not taken every pushed transmit descriptor within 50 ms");
    int s;
    OK(unet_tx_status(a, seq, &s));
    TRUE(s == UNET_TX_PENDING);
    OK(unet_poll_engine(a));
    OK(unet_flush(a, 0));
    OK(unet_tx_status(a, seq, &s));
    TRUE(s == UNET_TX_SENT);
    OK(unet_engine_counts(e, &ec));
    TRUE(ec.frames_out == 1 && ec.transport_no_route == 1 && ec.frames_in == 0);
    OK(unet_set_drive(a, 1));
    OK(unet_send(a, out, "driven", 6));
    OK(unet_engine_counts(e, &ec));
    TRUE(ec.frames_out == 2 && ec.transport_no_route == 2);
    OK(unet_endpoint_close(a));
    OK(unet_engine_stop(e));
    EXPECT(unet_engine_counts(e, &ec), UNET_EBADHANDLE);
    SAYS("unet_engine_counts: engine handle");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SOCKET\n", argv[0]);
        return 2;
    }
    struct app a = open_app(argv[1], NULL), b = open_app(argv[1], NULL);
    unet_addr engine;
    OK(unet_client_local_addr(a.c, &engine));
    uint16_t ab, ba;
    OK(unet_open_channel(a.ep, engine, b.id, &ab));
    OK(unet_open_channel(b.ep, engine, a.id, &ba));

    layout_and_area(&a);
    write_area(&a);
    push_and_take(&a, &b, ab, ba);
    huge_lengths(&a, ab);
    round_trips(&a, &b, ab, ba);
    channel_options(&a, &b, ab, ba, engine);
    closing(&a, &b, ab);
    daemon_counters(&a);
    in_process();

    OK(unet_endpoint_close(a.ep));
    OK(unet_disconnect(a.c));
    OK(unet_disconnect(b.c));
    printf("descriptors: %u checks passed\n", checks);
    return 0;
}
