/*
 * unet.h: the C API of fastpath's unet (U-Net/SLE user-level network
 * endpoints). Link with libunet_capi.a (and -lpthread -ldl -lm -lrt
 * -lutil -lgcc_s) or libunet_capi.so, built by
 * `cargo build --release -p unet-capi`.
 *
 * Contract:
 * - Every function returns UNET_OK (0) or a negative UNET_E* code.
 *   unet_strerror(code) describes a code; unet_last_error() gives the
 *   calling thread's last failed call's own message (what and where).
 * - Handles are numbers checked by the library, never pointers: a zero,
 *   closed (a double close) or made-up handle, or one of another kind,
 *   is UNET_EBADHANDLE, never undefined behaviour.
 * - NULL for a required pointer is UNET_ENULL. Non-NULL pointers must be
 *   valid for the lengths given (this the library cannot check).
 * - Calls on one endpoint from several threads are serialized.
 * - An endpoint call from inside an in-place callback is UNET_EDEADLK
 *   (the callback's endpoint is held while it runs).
 *
 * Kept in step with crates/unet-capi/src/ffi.rs by tests/header.rs.
 */
#ifndef UNET_H
#define UNET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define UNET_OK 0
#define UNET_ENULL (-1)       /* a required pointer argument is NULL */
#define UNET_EBADHANDLE (-2)  /* handle not open: never issued, closed, other kind */
#define UNET_EINVAL (-3)      /* an argument's value is invalid (UTF-8, address, name) */
#define UNET_EENGINE (-4)     /* the engine refused (filter, applet, budget) or is unreachable */
#define UNET_EAGAIN (-5)      /* for now: try again (transmit queue full; the
                               * daemon's budget of engine-counter reads, or of
                               * compiling filters and applets, spent) */
#define UNET_ETOOLONG (-6)    /* message longer than the endpoint's largest */
#define UNET_ECLOSED (-7)     /* the channel's peer endpoint went away */
#define UNET_ETIMEDOUT (-8)   /* no message within the timeout */
#define UNET_ENOSPC (-9)      /* buffer smaller than the message (it stays queued) */
#define UNET_ECORRUPT (-10)   /* the endpoint's queue is corrupt */
#define UNET_EPANIC (-11)     /* internal error in the library (caught) */
#define UNET_ERANGE (-12)     /* offset, length or descriptor number outside the area or queue */
#define UNET_ENOTHELD (-13)   /* buffer given back that the application does not hold */
#define UNET_EDEADLK (-14)    /* endpoint call from inside an in-place callback */

/* What the engine did with a transmit descriptor (unet_tx_status). */
#define UNET_TX_PENDING 0  /* not yet taken by the engine */
#define UNET_TX_SENT 1     /* sent (or handed to the applet, which completed) */
#define UNET_TX_REJECTED 2 /* malformed: length, offset or channel */
#define UNET_TX_DROPPED 3  /* the applet trapped, or the transport refused it */
#define UNET_TX_CLOSED 4   /* not sent: the channel's peer went away */

/* Receive descriptors: the most bytes inline, the most buffers. */
#define UNET_INLINE_MAX 56
#define UNET_RX_BUFFERS_MAX 14

/* A connection to a `fastpath engine --socket PATH` daemon. */
typedef struct unet_client { uint64_t id; } unet_client;
/* An endpoint, of a daemon's engine or of an in-process one. */
typedef struct unet_endpoint { uint64_t id; } unet_endpoint;
/* In place. `fill` writes the `len`-byte message straight into the
 * endpoint's transmit region (the bytes it finds there are unspecified:
 * it must write all `len` of them); `piece` is given each piece of a received
 * message where it lies (the bytes inline in the descriptor, or each
 * receive buffer's share), after which the buffers go back to the engine.
 * The pointers are valid only during the call; the callbacks must return
 * normally (no longjmp, no C++ exception). */
typedef void (*unet_fill_fn)(void *ctx, void *buf, size_t len);
typedef void (*unet_piece_fn)(void *ctx, const void *piece, size_t len);
int unet_send_inplace(unet_endpoint ep, uint16_t chan, size_t len,
                      unet_fill_fn fill, void *ctx);
int unet_recv_inplace(unet_endpoint ep, unet_piece_fn piece, void *ctx,
                      size_t *len, uint16_t *chan, int timeout_ms);

/* An engine in this process on the `loop` transport. */
typedef struct unet_engine { uint64_t id; } unet_engine;

/* An address on the unet network: IPv4 octets (ip[0] first), UDP port. */
typedef struct unet_addr {
    uint8_t ip[4];
    uint16_t port;
} unet_addr;

/* An endpoint's sizes; unet_config_default gives the defaults. */
typedef struct unet_config {
    uint32_t buffers;     /* buffers in the buffer area (512) */
    uint32_t buffer_size; /* bytes per buffer, power of two 64..65536 (4096) */
    uint32_t tx_depth;    /* transmit queue depth, power of two (256) */
    uint32_t rx_depth;    /* receive queue depth, power of two (256) */
    uint32_t free_depth;  /* free queue depth, power of two >= buffers (512) */
} unet_config;

/* An endpoint's counters (the engine's per-endpoint statistics). */
typedef struct unet_counts {
    uint64_t tx_descriptors;
    uint64_t tx_frames;
    uint64_t tx_rejected;
    uint64_t tx_closed;
    uint64_t rx_delivered;
    uint64_t rx_no_buffer;
    uint64_t rx_queue_full;
    uint64_t rx_too_long;
    uint64_t rx_bad_checksum;
    uint64_t applet_traps;
    uint64_t applet_drops;
    uint64_t free_invalid;
    uint64_t queue_corrupt;
    uint64_t applet_overruns;
    uint64_t applet_throttled;
} unet_counts;

/* An endpoint's layout: where its buffers lie (unet_endpoint_layout). */
typedef struct unet_layout {
    unet_config config;   /* its sizes */
    uint32_t max_message; /* longest message one descriptor carries (14 buffers) */
    uint64_t area_len;    /* bytes in the buffer area */
    uint64_t tx_region;   /* [0, tx_region): unet_send's transmit region; the
                           * buffers after it are the engine's, for reception */
} unet_layout;

/* A received message's descriptor (unet_recv_desc): inline (nbufs 0, the
 * bytes in data) or in nbufs buffers of the area, in order, each but the
 * last full. */
typedef struct unet_rx_desc {
    uint32_t len;  /* bytes */
    uint16_t chan; /* the channel it arrived on */
    uint16_t nbufs;
    uint32_t offsets[UNET_RX_BUFFERS_MAX]; /* the buffers' offsets in the area */
    uint8_t data[UNET_INLINE_MAX];         /* the message, if inline */
} unet_rx_desc;

/* A channel's options (unet_open_channel_with). */
typedef struct unet_channel_options {
    uint32_t checksum; /* 1: frames carry a UDP checksum, checked by the
                        * receiver; 0: none; other values: UNET_EINVAL */
} unet_channel_options;

/* An engine's own counters: an in-process engine's (unet_engine_counts)
 * or a daemon's (unet_client_engine_counts). */
typedef struct unet_engine_counters {
    uint64_t frames_in;            /* frames received from the transport */
    uint64_t unmatched;            /* matched no filter, or endpoint gone */
    uint64_t malformed;            /* failed the header check */
    uint64_t frames_out;           /* handed to the transport */
    uint64_t send_errors;          /* the transport refused or failed to send */
    uint64_t transport_no_route;   /* no port at the destination (loop) */
    uint64_t transport_queue_full; /* destination queue full (loop) */
    uint64_t transport_overruns;   /* lost before the transport saw them */
    uint64_t transport_not_unet;   /* not unet frames */
    uint64_t closed;               /* their endpoint closed */
} unet_engine_counters;

/* Errors. */
const char *unet_strerror(int code);
const char *unet_last_error(void);

/* The default endpoint config. */
int unet_config_default(unet_config *out);

/* A daemon's engine. */
int unet_connect(const char *path, unet_client *out);
int unet_disconnect(unet_client client); /* endpoints stay open until closed */
int unet_client_local_addr(unet_client client, unet_addr *out);
/* The daemon's engine's own counters (totals over every client; a
 * client reads its own endpoints' with unet_endpoint_counts, never
 * another's). A process may read them 100 times a second by default,
 * UNET_EAGAIN past it (unet_last_error says when to try again). */
int unet_client_engine_counts(unet_client client, unet_engine_counters *out);
/* config NULL: defaults; applet NULL with length 0: standard U-Net.
 * Through a daemon, an applet is loaded as unet_set_applet loads one:
 * UNET_EAGAIN past the process's budget of compiling. */
int unet_endpoint_create(unet_client client, const unet_config *config,
                         const uint8_t *applet, size_t applet_len,
                         unet_endpoint *out);

/* Endpoints. */
int unet_endpoint_close(unet_endpoint ep);
int unet_endpoint_id(unet_endpoint ep, uint32_t *out);
int unet_endpoint_max_message(unet_endpoint ep, size_t *out);
int unet_endpoint_counts(unet_endpoint ep, unet_counts *out);
int unet_open_channel(unet_endpoint ep, unet_addr remote, uint32_t remote_ep,
                      uint16_t *chan);
/* With options; opts NULL: the defaults (as unet_open_channel). */
int unet_open_channel_with(unet_endpoint ep, unet_addr remote, uint32_t remote_ep,
                           const unet_channel_options *opts, uint16_t *chan);
/* Whether channel chan was closed because its peer went away (1) or not (0). */
int unet_is_closed(unet_endpoint ep, uint16_t chan, int *closed);
/* A dpf filter (pcap syntax) delivering what it matches to `chan`;
 * through a daemon, UNET_EAGAIN past the process's budget of compiling
 * (unet_last_error says when to try again). */
int unet_install_filter(unet_endpoint ep, uint16_t chan, const char *filter,
                        int32_t priority, uint64_t *filter_id);
int unet_remove_filter(unet_endpoint ep, uint64_t filter_id);
/* A JIVE applet's class file; NULL with length 0: standard U-Net.
 * Through a daemon, UNET_EAGAIN past the process's budget of compiling
 * (unet_last_error says when to try again; removing is free), and
 * UNET_EENGINE past its share of the JIT's code cache or its budget of
 * applet memory (the endpoint keeps its applet; unet_last_error names the
 * budget). */
int unet_set_applet(unet_endpoint ep, const uint8_t *applet, size_t applet_len);
/* A built-in applet's class file by class name (e.g. "StandardUnet"). */
int unet_applet_builtin(const char *name, const uint8_t **bytes, size_t *len);

/* Sends a copy of `len` bytes at `msg` on channel `chan`. */
int unet_send(unet_endpoint ep, uint16_t chan, const void *msg, size_t len);
/* Copies the next message into `buf` (`cap` bytes): length to *len,
 * channel to *chan (NULL: not wanted). Waits up to timeout_ms (0: one
 * poll; negative: no limit). UNET_ENOSPC: the message has *len bytes,
 * more than cap, and stays queued for the next call. */
int unet_recv(unet_endpoint ep, void *buf, size_t cap, size_t *len,
              uint16_t *chan, int timeout_ms);

/* Descriptors and buffers by hand (U-Net's own interface). The buffer
 * area is mapped in this process: unet_endpoint_area gives its address,
 * valid until the endpoint is closed; descriptors name offsets in it. */
int unet_endpoint_layout(unet_endpoint ep, unet_layout *out);
int unet_endpoint_area(unet_endpoint ep, void **base, size_t *len);
/* Copies len bytes into the area at offset (UNET_ERANGE outside it). */
int unet_write_area(unet_endpoint ep, uint32_t offset, const void *data, size_t len);
/* Queues the len bytes at offset in the area on channel chan; the
 * descriptor's number to *seq (NULL: not wanted). The bytes must stay
 * as they are until its status is no longer UNET_TX_PENDING. */
int unet_push_tx(unet_endpoint ep, uint16_t chan, uint32_t offset, uint32_t len,
                 uint32_t *seq);
/* UNET_TX_* of descriptor seq; only the last tx_depth pushed have one
 * (UNET_ERANGE otherwise). */
int unet_tx_status(unet_endpoint ep, uint32_t seq, int *status);
/* Descriptors pushed in all (wrapping): the number the next one gets. */
int unet_tx_pushed(unet_endpoint ep, uint32_t *out);
/* Waits (as unet_recv) until the engine has taken every pushed descriptor. */
int unet_flush(unet_endpoint ep, int timeout_ms);
/* The next message's descriptor, waiting as unet_recv; its buffers are
 * the application's until each is given back with unet_give_buffer. */
int unet_recv_desc(unet_endpoint ep, unet_rx_desc *out, int timeout_ms);
/* UNET_ERANGE: no buffer starts at offset; UNET_ENOTHELD: the
 * application does not hold it (never handed out, or given back). */
int unet_give_buffer(unet_endpoint ep, uint32_t offset);
/* Messages waiting to be received. */
int unet_pending(unet_endpoint ep, size_t *out);
/* Receive descriptors the engine published malformed (skipped). */
int unet_endpoint_bad_descriptors(unet_endpoint ep, uint64_t *out);
/* Whether the endpoint's calls drive an in-process engine (nonzero, the
 * default); the engine work they would drive, done now. */
int unet_set_drive(unet_endpoint ep, int drive);
int unet_poll_engine(unet_endpoint ep);

/* An engine in this process on the `loop` transport ("a.b.c.d:port"),
 * with `threads` threads of its own, at most 64 (0: endpoints' calls
 * drive it). */
int unet_engine_start(const char *addr, unsigned int threads, unet_engine *out);
/* Serves the daemon's protocol on a Unix socket, as `fastpath engine`;
 * start the engine with threads for its clients to be served while this
 * process makes no calls. */
int unet_engine_serve(unet_engine engine, const char *socket_path);
int unet_engine_local_addr(unet_engine engine, unet_addr *out);
/* Its own counters (a daemon's: unet_client_engine_counts). */
int unet_engine_counts(unet_engine engine, unet_engine_counters *out);
int unet_engine_endpoint_create(unet_engine engine, const unet_config *config,
                                const uint8_t *applet, size_t applet_len,
                                unet_endpoint *out);
int unet_engine_stop(unet_engine engine);

#ifdef __cplusplus
}
#endif

#endif /* UNET_H */
