/*
 * idl_rt.h: the C runtime of fastpath's IDL stubs.
 *
 * The same shared-memory channel as the Rust runtime's `idl::rt::shm`
 * (docs/idl.md, "The transport"): one sealed memfd that client and server
 * map; the client writes its request record and strings, publishes it and
 * waits; the server checks the request once, calls the implementation
 * with pointers into the record and the string area, and replies in place.
 * A C client talks to a Rust server and the reverse: the bytes are the same.
 *
 * The generated stubs (`fastpath idl compile FILE --lang c`) call the
 * functions below; a program calls only the channel functions
 * (idl_channel_create, idl_channel_map, idl_channel_close, ...), the
 * generated client stubs and the generated `<iface>_serve` loop.
 *
 * Conventions:
 * - every function that can fail returns an `int` status: IDL_OK (0), one
 *   of the wire's status codes IDL_BAD_KEY..IDL_SERVER_FAILED (what the
 *   server answered), or a local error IDL_E_* (>= 256, never on the wire);
 * - nothing here trusts the shared memory: descriptors are copied once into
 *   private memory and checked there, so a peer that rewrites the shared
 *   bytes during a call changes values, never memory safety.
 *
 * Builds with -std=c11 -Wall -Wextra -Werror on Linux (futex, memfd).
 */
#ifndef IDL_RT_H
#define IDL_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The header (and every generated header that includes it) compiles as C11
 * and as C++11 or later: static assertions are C11's `_Static_assert` or
 * C++'s `static_assert`, alignments `_Alignof`/`_Alignas` or
 * `alignof`/`alignas`. C++ code never touches a channel's atomics
 * (idl_channel is opaque to programs), so there its atomic pointers are
 * plain pointers of the same size and alignment. */
#ifdef __cplusplus
#define IDL_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#define IDL_ALIGNOF(type) alignof(type)
#define IDL_ALIGNAS(n) alignas(n)
#define IDL_ATOMIC(type) type
#else
#include <stdatomic.h>
#define IDL_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define IDL_ALIGNOF(type) _Alignof(type)
#define IDL_ALIGNAS(n) _Alignas(n)
#define IDL_ATOMIC(type) _Atomic type
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status codes: the wire's (rt::Status) ---------------------------- */

#define IDL_OK 0            /* the call was made; the record holds results */
#define IDL_BAD_KEY 1       /* no operation has this key */
#define IDL_SHORT_MESSAGE 2 /* request shorter than its record, or too long */
#define IDL_BAD_STRING 3    /* descriptor out of range, misaligned, overlapping, too long */
#define IDL_BAD_VALUE 4     /* boolean not 0/1, string not UTF-8 */
#define IDL_OVERFLOW 5      /* the reply's strings do not fit the string area */
#define IDL_SERVER_FAILED 6 /* the implementation failed (returned nonzero) */

/* ---- Local errors: never on the wire ---------------------------------- */

#define IDL_E_CLOSED 256   /* the channel is closed (state 3) */
#define IDL_E_LIMIT 257    /* the request exceeds a limit: string too long, area full */
#define IDL_E_PROTOCOL 258 /* the peer broke the protocol: bad reply, unknown status */
#define IDL_E_SYSTEM 259   /* a system call failed; errno says why */
#define IDL_E_HEADER 260   /* the memfd is not an idl channel (magic, version, sizes, seals) */
#define IDL_E_PEER_DIED 261 /* the peer's process is gone without closing the channel */

/* A short, static description of a status or error code. */
const char *idl_strerror(int status);

/* ---- The wire --------------------------------------------------------- */

/* A string or sequence in a record: the byte offset of its first element
 * in the string area and its element count (rt::Desc). */
typedef struct idl_desc {
    uint32_t off;
    uint32_t len;
} idl_desc;
IDL_STATIC_ASSERT(sizeof(idl_desc) == 8, "idl_desc is 8 bytes");
IDL_STATIC_ASSERT(IDL_ALIGNOF(idl_desc) == 4, "idl_desc is 4-aligned");

/* Bytes of a record that travel in the descriptor's cache line. */
#define IDL_INLINE 56

/* The channel's layout (docs/idl.md, "The shared-memory channel"). */
#define IDL_MAGIC "fpidl\0\0\x01"
#define IDL_VERSION 1u
#define IDL_DESC_LINE 4096u      /* offset of the descriptor line */
#define IDL_MSG (IDL_DESC_LINE + 8u) /* offset of the record */

/* Values of the state word; IDL_WAITER is or'ed in by a side that sleeps
 * on the futex, so that the other side calls futex_wake only then. */
#define IDL_IDLE 0u
#define IDL_REQUEST 1u
#define IDL_REPLY 2u
#define IDL_CLOSED 3u
/* Or'ed into IDL_REPLY by a side that closed the channel before the client
 * took that reply: the client still takes it; every later post or wait
 * finds the channel closed. */
#define IDL_REPLY_CLOSED 0x40000000u
#define IDL_WAITER 0x80000000u

/* Liveness (docs/idl.md, "Liveness"): the attached words in the header
 * page, the client's then the server's; each side holds an OFD write lock
 * on byte 0 (client) or 1 (server) of the memfd while its process lives. */
#define IDL_ATTACHED 64u
#define IDL_SIDE_CLIENT 0
#define IDL_SIDE_SERVER 1

/* Waiting (docs/idl.md, "Waiting"; rt::wait::WaitRule, the same rule): a
 * side polls at most `spin` times and at most IDL_SPIN_TIME_NS on every
 * wait until IDL_MISSES waits in a row ran out unanswered; it then sleeps
 * at once except for one probe (a wait that polls) every `gap` waits,
 * IDL_PROBE_MIN first, doubled after each probe that runs out up to
 * IDL_PROBE_MAX; any answered poll makes it poll on every wait again.
 * A side whose peer is attached sleeps at most IDL_LIVENESS_CHECK_NS at a
 * time and then checks the peer's lock. */
#define IDL_SPIN_TIME_NS 10000u
/* A probe, and a wait whose own post woke the peer, poll for the peer's
 * wake-up: at most IDL_PROBE_TIME_NS and IDL_PROBE_STRETCH times `spin`
 * polls (rt::wait::PROBE_TIME, PROBE_STRETCH, Budget::long). */
#define IDL_PROBE_TIME_NS 200000u
#define IDL_PROBE_STRETCH 32u
#define IDL_LIVENESS_CHECK_NS 50000000u
#define IDL_PROBE_MIN 4u
#define IDL_PROBE_MAX 32u
#define IDL_MISSES 2u /* waits in a row whose polling ran out before a side sleeps */

/* One side's waiting rule (rt::wait::WaitRule). */
typedef struct idl_wait_rule {
    uint32_t spin;   /* polls per wait at most (0: always sleep) */
    uint32_t misses; /* waits in a row whose polling ran out */
    uint32_t gap;    /* while sleeping: waits between probes (IDL_PROBE_MIN..MAX) */
    uint32_t since;  /* while sleeping: waits since the last probe */
} idl_wait_rule;

/* What a side's waits did (rt::shm::WaitCounts): waits that went to the
 * futex, waits whose polling ran out, probes, posts that woke the peer. */
typedef struct idl_wait_counts {
    uint64_t sleeps;
    uint64_t ran_out;
    uint64_t probes;
    uint64_t wakes;
} idl_wait_counts;

/* A rule that polls, at most `spin` times per wait. */
void idl_wait_rule_init(idl_wait_rule *r, uint32_t spin);
/* The polls the next wait may make (0: sleep at once); `*probe` tells
 * whether it is a sleeping side's probe. */
uint32_t idl_wait_budget(idl_wait_rule *r, bool *probe);
/* Records how a wait that polled went: `answered` if the peer's message
 * came before its polls or its time ran out. */
void idl_wait_polled(idl_wait_rule *r, bool probe, bool answered);

/* The header at offset 0 of the memfd (rt::shm's `Header`). */
typedef struct idl_header {
    uint8_t magic[8];          /* IDL_MAGIC */
    uint32_t version;          /* IDL_VERSION */
    uint32_t capacity;         /* bytes of the message buffer: the largest record, 56..65535 */
    uint32_t area_off;         /* offset of the string area, page aligned, >= 4104 + capacity */
    uint32_t area_len;         /* bytes of the string area */
    uint32_t max_strings;      /* strings per message (at least 1) */
    uint32_t max_string_bytes; /* bytes per string */
    uint32_t spin;             /* polls before a side sleeps (advisory) */
    uint32_t reserved;         /* 0 */
} idl_header;
IDL_STATIC_ASSERT(sizeof(idl_header) == 40, "idl_header is rt::shm's 40 bytes");

/* ---- The channel ------------------------------------------------------ */

/* One side of a mapped channel. The fields are the runtime's; programs
 * treat the struct as opaque. A channel carries one call at a time: one
 * client thread, one server thread. */
typedef struct idl_channel {
    unsigned char *base;       /* the mapping */
    size_t size;               /* its bytes */
    int fd;                    /* the memfd (owned: closed by idl_channel_unmap) */
    IDL_ATOMIC(uint32_t) *state; /* the futex word */
    IDL_ATOMIC(uint16_t) *word;  /* key (request) or status (reply) */
    IDL_ATOMIC(uint16_t) *len;   /* bytes of the record */
    unsigned char *msg;        /* the record */
    uint32_t capacity;         /* bytes the record may have */
    unsigned char *strings;    /* the string area */
    uint32_t strings_len;      /* its bytes */
    uint32_t max_strings;      /* from the header's private copy */
    uint32_t max_string_bytes;
    uint32_t cursor;           /* client: next free byte of the string area */
    uint32_t nstrings;         /* client: strings put in this request */
    int side;                  /* IDL_SIDE_*, or -1 before the first call or wait */
    int lock_fd;               /* the description holding this side's lock, or -1 */
    idl_wait_rule wait;        /* the waiting rule */
    idl_wait_counts counts;    /* what this side's waits did */
    bool woke;                 /* its last post woke the peer: the next wait polls for the wake-up */
} idl_channel;

/* The client and the server use the same channel type. */
typedef idl_channel idl_client;
typedef idl_channel idl_server;

/* Creates a channel as rt::shm::create does: a sealed memfd with a header
 * page, a message buffer of `capacity` bytes (56..65535) and a string area
 * of `area_len` bytes (rounded up to pages), L4's default limits (31
 * strings of at most 2 MiB each) and a spin count of 2000; then maps it.
 * The fd is not close-on-exec, so that a child process can map it. */
int idl_channel_create(idl_channel *ch, uint32_t capacity, uint32_t area_len);

/* Maps the channel in memfd `fd` (e.g. inherited from the process that
 * created it), checking its seals and a private copy of its header (magic,
 * version, sizes), as rt::shm does. On success the channel owns `fd`; on
 * failure it stays the caller's and `ch` is untouched.
 *
 * The mapping becomes a side at its first idl_client_call (the client) or
 * idl_server_wait (the server): it then takes that side's liveness lock
 * through a description of its own, so a process may create a channel,
 * fork and let each process take one side. A process that forks after its
 * side's first call shares the lock with its child (the lock goes only
 * when both are gone). */
int idl_channel_map(idl_channel *ch, int fd);

/* Marks the channel closed (state 3) and wakes the peer: a server loop
 * returns, a waiting client gets IDL_E_CLOSED. A posted reply stays for
 * the client to take (IDL_REPLY | IDL_REPLY_CLOSED). */
void idl_channel_close(idl_channel *ch);

/* What this side's waits did so far (see idl_wait_counts). */
idl_wait_counts idl_channel_wait_counts(const idl_channel *ch);

/* Closes the channel (as dropping an rt::shm end does), unmaps it and
 * closes its fd. */
void idl_channel_unmap(idl_channel *ch);

/* ---- Client side (called by generated client stubs) ------------------- */

/* Starts a request of an operation whose record is `size` bytes: resets
 * the string cursor and returns the record, or NULL if the record does not
 * fit the channel's message buffer (the stub then fails with IDL_E_LIMIT
 * before writing anything). */
void *idl_client_begin(idl_channel *ch, uint32_t size);

/* Copies `n` elements of `size` bytes (alignment `align`) from `src` into
 * the string area at the next aligned offset and fills `*d`. IDL_E_LIMIT
 * if the value exceeds the per-string limit or the area, or the request
 * already has the channel's number of strings. */
int idl_client_put(idl_channel *ch, idl_desc *d, const void *src, uint32_t n,
                   uint32_t size, uint32_t align);

/* Posts the request (`key`, `request_len` bytes of the record), waits for
 * the reply and returns its status. IDL_E_PROTOCOL if the reply is shorter
 * than `reply_len` or its status word names no status; IDL_E_PEER_DIED if
 * the server's process is gone without replying. */
int idl_client_call(idl_channel *ch, uint16_t key, uint32_t request_len,
                    uint32_t reply_len);

/* Checks a descriptor of the reply (copied into `d` by the caller) and
 * returns a pointer to its elements in the string area, valid until the
 * next call on the channel. IDL_BAD_STRING if it is out of range,
 * misaligned or exceeds the limit. For a string, also IDL_BAD_VALUE if it
 * is not UTF-8 (set `utf8`). */
int idl_client_get(idl_channel *ch, idl_desc d, uint32_t size, uint32_t align,
                   bool utf8, void **ptr);

/* ---- Server side (called by generated server stubs and loops) --------- */

/* Waits for a request; returns IDL_OK with its key and length,
 * IDL_E_CLOSED when the channel is closed, or IDL_E_PEER_DIED when the
 * client's process is gone without closing it. A request longer than the
 * buffer is answered IDL_SHORT_MESSAGE here and not returned. */
int idl_server_wait(idl_channel *ch, uint16_t *key, uint32_t *len);

/* Posts the reply: `status` and `len` bytes of the record (0 unless
 * IDL_OK). IDL_E_CLOSED if the client closed the channel. */
int idl_server_reply(idl_channel *ch, uint16_t status, uint32_t len);

/* The checked view of one request (rt::Request). */
typedef struct idl_request {
    idl_channel *ch;
    unsigned char *msg; /* the record */
    uint32_t len;       /* bytes the client sent */
    uint32_t end;       /* end of the last checked in string; then the out cursor */
} idl_request;

/* Starts checking a request of `len` bytes for an operation whose request
 * is `request_size` bytes and whole record `size` bytes: IDL_SHORT_MESSAGE
 * if `len` is shorter than the request or longer than the buffer. */
int idl_request_begin(idl_request *rq, idl_channel *ch, uint32_t len,
                      uint32_t request_size, uint32_t size);

/* Checks the in (or inout) descriptor at byte `field` of the record, in
 * record order: in range, aligned to `align`, not before the end of the
 * previous one, within the per-string limit (IDL_BAD_STRING); a string
 * (`utf8`) must be UTF-8 (IDL_BAD_VALUE). Returns its element count and a
 * pointer to its elements. */
int idl_request_in(idl_request *rq, uint32_t field, uint32_t size, uint32_t align,
                   bool utf8, void **ptr, uint32_t *n);

/* Checks the boolean at byte `field` of the record: 0 or 1, else
 * IDL_BAD_VALUE. */
int idl_request_bool(idl_request *rq, uint32_t field, bool *v);

/* Room for the out values: `k` out strings or sequences (and new values of
 * inout strings) share the free part of the string area after the last in
 * string, from an 8-aligned start, in equal parts of a multiple of 8 bytes.
 * Returns the start of the `i`-th part and its capacity in elements (at
 * most the per-string limit). */
void *idl_request_out(idl_request *rq, uint32_t i, uint32_t k, uint32_t size,
                      uint32_t align, uint32_t *cap);

/* Records the out value written at `ptr` (from idl_request_out) with `n`
 * elements in the descriptor at byte `field` of the record: IDL_OVERFLOW
 * if `n` exceeds `cap`. */
int idl_request_put(idl_request *rq, uint32_t field, const void *ptr, uint32_t n,
                    uint32_t cap);

/* Whether `n` bytes at `p` are UTF-8 (as Rust's str::from_utf8). */
bool idl_utf8(const unsigned char *p, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* IDL_RT_H */
