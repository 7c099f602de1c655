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
#define UNET_EAGAIN (-5)      /* transmit queue full for now: try again */
#define UNET_ETOOLONG (-6)    /* message longer than the endpoint's largest */
#define UNET_ECLOSED (-7)     /* the channel's peer endpoint went away */
#define UNET_ETIMEDOUT (-8)   /* no message within the timeout */
#define UNET_ENOSPC (-9)      /* buffer smaller than the message (it stays queued) */
#define UNET_ECORRUPT (-10)   /* the endpoint's queue is corrupt */
#define UNET_EPANIC (-11)     /* internal error in the library (caught) */

/* A connection to a `fastpath engine --socket PATH` daemon. */
typedef struct unet_client { uint64_t id; } unet_client;
/* An endpoint, of a daemon's engine or of an in-process one. */
typedef struct unet_endpoint { uint64_t id; } unet_endpoint;
/* In place. `fill` writes the `len`-byte message straight into the
 * endpoint's transmit region; `piece` is given each piece of a received
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

/* Errors. */
const char *unet_strerror(int code);
const char *unet_last_error(void);

/* The default endpoint config. */
int unet_config_default(unet_config *out);

/* A daemon's engine. */
int unet_connect(const char *path, unet_client *out);
int unet_disconnect(unet_client client); /* endpoints stay open until closed */
int unet_client_local_addr(unet_client client, unet_addr *out);
/* config NULL: defaults; applet NULL with length 0: standard U-Net. */
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
/* A dpf filter (pcap syntax) delivering what it matches to `chan`. */
int unet_install_filter(unet_endpoint ep, uint16_t chan, const char *filter,
                        int32_t priority, uint64_t *filter_id);
int unet_remove_filter(unet_endpoint ep, uint64_t filter_id);
/* A JIVE applet's class file; NULL with length 0: standard U-Net. */
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

/* An engine in this process on the `loop` transport ("a.b.c.d:port"),
 * with `threads` threads of its own, at most 64 (0: endpoints' calls
 * drive it). */
int unet_engine_start(const char *addr, unsigned int threads, unet_engine *out);
/* Serves the daemon's protocol on a Unix socket, as `fastpath engine`;
 * start the engine with threads for its clients to be served while this
 * process makes no calls. */
int unet_engine_serve(unet_engine engine, const char *socket_path);
int unet_engine_local_addr(unet_engine engine, unet_addr *out);
int unet_engine_endpoint_create(unet_engine engine, const unet_config *config,
                                const uint8_t *applet, size_t applet_len,
                                unet_endpoint *out);
int unet_engine_stop(unet_engine engine);

#ifdef __cplusplus
}
#endif

#endif /* UNET_H */
