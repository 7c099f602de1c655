/*
 * loop.c: the single-threaded loopback carrier of the idl suite's C stubs,
 * the C twin of the Rust stubs' `FpLoop` (crates/bench/src/idl/fastpath_family.rs).
 *
 * A loop is an idl_channel made by the C runtime (idl_channel_create: the
 * real channel's buffer, string area and limits), seen by the client stubs
 * as an idl_client and by the server stubs as an idl_server, with no
 * second thread: `idlb_c_loop_call` runs one request through the loop's
 * `serve_one` on the same memory and returns the reply's status, where the
 * runtime's idl_client_call would post and wait. pfs_bench_loop.c compiles
 * the generated pfs_bench.c with idl_client_call defined as
 * idlb_c_loop_call (as this file does before it includes the header, so
 * the definition below is checked against the runtime's prototype): the
 * generated stubs are byte for byte `fastpath idl compile --lang c`'s and
 * only the carrier differs; the runtime's other functions (begin, put, get,
 * the request checks) are idl_rt.c's.
 *
 * The functions the counter cuts at are out of line with stable names: the
 * client stubs (pfs_open, ...), `idlb_c_loop_call`, the loop's
 * `serve_one` and the implementation's functions (Rust, each calling the
 * method marker). The empty call (the carrier alone) is `idlb_c_loop_call`
 * on a loop whose `serve_one` calls an empty method.
 */
#define idl_client_call idlb_c_loop_call
#include "pfs_bench.h"

#include <stdlib.h>

typedef struct idlb_c_loop idlb_c_loop;

/* Answers the request `key` of `len` record bytes found in the loop's
 * channel: the reply's status, and its record length in `*reply_len`. */
typedef int (*idlb_c_serve_one)(idlb_c_loop *l, uint16_t key, uint32_t len, uint32_t *reply_len);

struct idlb_c_loop {
    idl_channel ch; /* first: a stub's idl_client * is the loop */
    idlb_c_serve_one serve_one;
    const pfs_impl *impl;          /* the pfs server's table */
    void (*empty)(void *self);     /* the empty server's method */
    void *self;
};

/* The empty server's method. */
typedef void (*idlb_c_empty_method)(void *self);

/* The loop's "receive" for the pfs interface: the generated dispatch. */
__attribute__((noinline)) static int pfs_serve_one(idlb_c_loop *l, uint16_t key, uint32_t len,
                                                   uint32_t *reply_len)
{
    return pfs_dispatch(&l->ch, key, len, l->impl, l->self, reply_len);
}

/* The baseline's "receive": an empty method, an empty reply. */
__attribute__((noinline)) static int empty_serve_one(idlb_c_loop *l, uint16_t key, uint32_t len,
                                                     uint32_t *reply_len)
{
    (void)key;
    (void)len;
    l->empty(l->self);
    *reply_len = 0;
    return IDL_OK;
}

/* idl_client_call over the loop: the runtime's checks of the lengths and of
 * the reply, with the server's dispatch in place of post and wait. */
__attribute__((noinline)) int idlb_c_loop_call(idl_channel *ch, uint16_t key, uint32_t request_len,
                                               uint32_t reply_len)
{
    idlb_c_loop *l = (idlb_c_loop *)ch;
    uint32_t n;
    if (request_len > ch->capacity || reply_len > ch->capacity)
        return IDL_E_LIMIT;
    int st = l->serve_one(l, key, request_len, &n);
    if (st != IDL_OK)
        return st;
    if (n < reply_len || n > ch->capacity)
        return IDL_E_PROTOCOL;
    return IDL_OK;
}

static idlb_c_loop *make(idlb_c_serve_one serve_one, void *self, uint32_t capacity,
                         uint32_t area)
{
    idlb_c_loop *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    if (idl_channel_create(&l->ch, capacity, area) != IDL_OK) {
        free(l);
        return NULL;
    }
    l->serve_one = serve_one;
    l->self = self;
    return l;
}

/* A loop serving pfs with `impl` and `self` (both outlive it), a message
 * buffer of `capacity` bytes and a string area of `area` bytes; NULL if
 * the channel could not be made. */
idlb_c_loop *idlb_c_pfs_loop(const pfs_impl *impl, void *self, uint32_t capacity, uint32_t area)
{
    idlb_c_loop *l = make(pfs_serve_one, self, capacity, area);
    if (l != NULL)
        l->impl = impl;
    return l;
}

/* A loop whose server calls `method(self)` for every request. */
idlb_c_loop *idlb_c_empty_loop(idlb_c_empty_method method, void *self, uint32_t capacity,
                               uint32_t area)
{
    idlb_c_loop *l = make(empty_serve_one, self, capacity, area);
    if (l != NULL)
        l->empty = method;
    return l;
}

/* Frees a loop and its channel. */
void idlb_c_loop_free(idlb_c_loop *l)
{
    if (l == NULL)
        return;
    idl_channel_unmap(&l->ch);
    free(l);
}
