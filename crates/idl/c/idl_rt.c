/*
 * idl_rt.c: the C runtime of fastpath's IDL stubs: the shared-memory
 * channel of docs/idl.md ("The transport"), byte for byte the protocol of
 * the Rust runtime's `idl::rt::shm`, and the checks of `rt::Request`.
 */
#define _GNU_SOURCE
#include "idl_rt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u
#define DEFAULT_SPIN 2000u

const char *idl_strerror(int status)
{
    switch (status) {
    case IDL_OK: return "ok";
    case IDL_BAD_KEY: return "no operation has this key";
    case IDL_SHORT_MESSAGE: return "the request's length does not match its operation";
    case IDL_BAD_STRING: return "a string descriptor is out of range, misaligned or overlapping";
    case IDL_BAD_VALUE: return "a value is invalid for its type (boolean not 0/1, string not UTF-8)";
    case IDL_OVERFLOW: return "the reply's strings do not fit the string area";
    case IDL_SERVER_FAILED: return "the server's implementation failed";
    case IDL_E_CLOSED: return "the channel is closed";
    case IDL_E_LIMIT: return "the request exceeds a limit of the channel";
    case IDL_E_PROTOCOL: return "the peer broke the channel's protocol";
    case IDL_E_SYSTEM: return "a system call failed";
    case IDL_E_HEADER: return "not an idl channel (magic, version, sizes or seals)";
    default: return "unknown status";
    }
}

/* ---- futex ------------------------------------------------------------ */

/* The memfd is shared between processes: no FUTEX_PRIVATE_FLAG. */
static void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Publishes `value` with release order; wakes the peer if it sleeps. */
static void publish(idl_channel *ch, uint32_t value)
{
    uint32_t old = atomic_exchange_explicit(ch->state, value, memory_order_release);
    if (old & IDL_WAITER)
        futex_wake(ch->state);
}

/* Waits (acquire) until the state, without the waiter bit, is `want` or
 * IDL_CLOSED; spins first, then sets the waiter bit and sleeps. */
static uint32_t await_state(idl_channel *ch, uint32_t want)
{
    for (uint32_t i = 0; i < ch->spin; i++) {
        uint32_t s = atomic_load_explicit(ch->state, memory_order_acquire) & ~IDL_WAITER;
        if (s == want || s == IDL_CLOSED)
            return s;
        cpu_relax();
    }
    for (;;) {
        uint32_t s = atomic_load_explicit(ch->state, memory_order_acquire);
        uint32_t v = s & ~IDL_WAITER;
        if (v == want || v == IDL_CLOSED)
            return v;
        if (!(s & IDL_WAITER) &&
            !atomic_compare_exchange_weak_explicit(ch->state, &s, s | IDL_WAITER,
                                                   memory_order_acquire,
                                                   memory_order_acquire))
            continue;
        futex_wait(ch->state, s | IDL_WAITER);
    }
}

/* ---- the channel ------------------------------------------------------ */

static uint32_t round_up(uint32_t x, uint32_t a)
{
    return (x + a - 1) / a * a;
}

static int attach(idl_channel *ch, int fd, unsigned char *base, size_t size)
{
    idl_header h;
    memcpy(&h, base, sizeof h);
    if (memcmp(h.magic, IDL_MAGIC, 8) != 0 || h.version != IDL_VERSION)
        return IDL_E_HEADER;
    uint64_t msg_end = (uint64_t)IDL_MSG + h.capacity;
    if (h.capacity < IDL_INLINE || h.capacity > UINT16_MAX || h.max_record > h.capacity ||
        h.strings_off % PAGE != 0 || h.strings_off < msg_end ||
        (uint64_t)h.strings_off + h.strings_len > size)
        return IDL_E_HEADER;
    ch->base = base;
    ch->size = size;
    ch->fd = fd;
    ch->state = (_Atomic uint32_t *)(base + IDL_DESC_LINE);
    ch->word = (uint16_t *)(base + IDL_DESC_LINE + 4);
    ch->len = (uint16_t *)(base + IDL_DESC_LINE + 6);
    ch->msg = base + IDL_MSG;
    ch->capacity = h.capacity;
    ch->strings = base + h.strings_off;
    ch->strings_len = h.strings_len;
    ch->max_strings = h.max_strings;
    ch->max_string_bytes = h.max_string_bytes;
    ch->max_record = h.max_record;
    ch->cursor = 0;
    ch->nstrings = 0;
    ch->spin = DEFAULT_SPIN;
    return IDL_OK;
}

static int map_fd(idl_channel *ch, int fd, size_t size)
{
    if (size < IDL_MSG + IDL_INLINE)
        return IDL_E_HEADER;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return IDL_E_SYSTEM;
    int st = attach(ch, fd, p, size);
    if (st != IDL_OK)
        munmap(p, size);
    return st;
}

int idl_channel_create(idl_channel *ch, uint32_t capacity, uint32_t strings_len)
{
    idl_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, IDL_MAGIC, 8);
    h.version = IDL_VERSION;
    h.max_strings = 31;
    h.max_string_bytes = 2u << 20;
    h.max_record = 4096;
    if (capacity < h.max_record)
        capacity = h.max_record;
    if (capacity > UINT16_MAX || strings_len > UINT32_MAX - 2 * PAGE - UINT16_MAX)
        return IDL_E_LIMIT;
    h.capacity = capacity;
    h.strings_off = round_up(IDL_MSG + capacity, PAGE);
    h.strings_len = round_up(strings_len, PAGE);
    size_t size = (size_t)h.strings_off + h.strings_len;

    int fd = memfd_create("idl-channel", MFD_ALLOW_SEALING);
    if (fd < 0)
        return IDL_E_SYSTEM;
    if (ftruncate(fd, (off_t)size) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
        pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        close(fd);
        return IDL_E_SYSTEM;
    }
    int st = map_fd(ch, fd, size);
    if (st != IDL_OK)
        close(fd);
    return st;
}

int idl_channel_map(idl_channel *ch, int fd)
{
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
        return IDL_E_HEADER;
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return IDL_E_SYSTEM;
    if (sb.st_size < 0 || (uint64_t)sb.st_size > SIZE_MAX)
        return IDL_E_HEADER;
    return map_fd(ch, fd, (size_t)sb.st_size);
}

void idl_channel_close(idl_channel *ch)
{
    publish(ch, IDL_CLOSED);
}

void idl_channel_unmap(idl_channel *ch)
{
    if (ch->base)
        munmap(ch->base, ch->size);
    if (ch->fd >= 0)
        close(ch->fd);
    ch->base = NULL;
    ch->fd = -1;
}

/* ---- client ----------------------------------------------------------- */

void *idl_client_begin(idl_channel *ch)
{
    ch->cursor = 0;
    ch->nstrings = 0;
    return ch->msg;
}

int idl_client_put(idl_channel *ch, idl_desc *d, const void *src, uint32_t n,
                   uint32_t size, uint32_t align)
{
    uint64_t bytes = (uint64_t)n * size;
    uint64_t off = ((uint64_t)ch->cursor + align - 1) / align * align;
    if (bytes > ch->max_string_bytes || off + bytes > ch->strings_len ||
        ch->nstrings >= ch->max_strings)
        return IDL_E_LIMIT;
    ch->nstrings++;
    if (bytes)
        memcpy(ch->strings + off, src, (size_t)bytes);
    d->off = (uint32_t)off;
    d->len = n;
    ch->cursor = (uint32_t)(off + bytes);
    return IDL_OK;
}

int idl_client_call(idl_channel *ch, uint16_t key, uint32_t request_len, uint32_t reply_len)
{
    if (request_len > ch->capacity || reply_len > ch->capacity)
        return IDL_E_LIMIT;
    uint32_t s = atomic_load_explicit(ch->state, memory_order_relaxed) & ~IDL_WAITER;
    if (s == IDL_CLOSED)
        return IDL_E_CLOSED;
    if (s == IDL_REQUEST)
        return IDL_E_PROTOCOL;
    *ch->word = key;
    *ch->len = (uint16_t)request_len;
    publish(ch, IDL_REQUEST);
    if (await_state(ch, IDL_REPLY) == IDL_CLOSED)
        return IDL_E_CLOSED;
    uint16_t status = *ch->word;
    uint16_t len = *ch->len;
    if (status > IDL_SERVER_FAILED)
        return IDL_E_PROTOCOL;
    if (status != IDL_OK)
        return status;
    if (len < reply_len || len > ch->capacity)
        return IDL_E_PROTOCOL;
    return IDL_OK;
}

/* The common descriptor check: in range, aligned, within the limit. */
static int check_desc(const idl_channel *ch, idl_desc d, uint32_t size, uint32_t align,
                      uint64_t *end)
{
    uint64_t bytes = (uint64_t)d.len * size;
    if (align == 0 || d.off % align != 0 || bytes > ch->max_string_bytes ||
        (uint64_t)d.off + bytes > ch->strings_len)
        return IDL_BAD_STRING;
    *end = (uint64_t)d.off + bytes;
    return IDL_OK;
}

int idl_client_get(idl_channel *ch, idl_desc d, uint32_t size, uint32_t align, bool utf8,
                   void **ptr)
{
    uint64_t end;
    int st = check_desc(ch, d, size, align, &end);
    if (st != IDL_OK)
        return st;
    if (utf8 && !idl_utf8(ch->strings + d.off, d.len))
        return IDL_BAD_VALUE;
    *ptr = ch->strings + d.off;
    return IDL_OK;
}

/* ---- server ----------------------------------------------------------- */

int idl_server_wait(idl_channel *ch, uint16_t *key, uint32_t *len)
{
    if (await_state(ch, IDL_REQUEST) == IDL_CLOSED)
        return IDL_E_CLOSED;
    *key = *(volatile uint16_t *)ch->word;
    *len = *(volatile uint16_t *)ch->len;
    return IDL_OK;
}

void idl_server_reply(idl_channel *ch, uint16_t status, uint32_t len)
{
    *ch->word = status;
    *ch->len = (uint16_t)len;
    uint32_t s = atomic_load_explicit(ch->state, memory_order_relaxed) & ~IDL_WAITER;
    if (s == IDL_CLOSED)
        return;
    publish(ch, IDL_REPLY);
}

int idl_request_begin(idl_request *rq, idl_channel *ch, uint32_t len, uint32_t request_size,
                      uint32_t size)
{
    rq->ch = ch;
    rq->msg = ch->msg;
    rq->len = len;
    rq->end = 0;
    if (len < request_size || len > ch->capacity || size > ch->capacity)
        return IDL_SHORT_MESSAGE;
    return IDL_OK;
}

int idl_request_in(idl_request *rq, uint32_t field, uint32_t size, uint32_t align, bool utf8,
                   void **ptr, uint32_t *n)
{
    idl_desc d;
    /* One copy of the descriptor: the checks and the use read the copy. */
    memcpy(&d, rq->msg + field, sizeof d);
    uint64_t end;
    int st = check_desc(rq->ch, d, size, align, &end);
    if (st != IDL_OK)
        return st;
    if (d.off < rq->end)
        return IDL_BAD_STRING;
    if (utf8 && !idl_utf8(rq->ch->strings + d.off, d.len))
        return IDL_BAD_VALUE;
    rq->end = (uint32_t)end;
    *ptr = rq->ch->strings + d.off;
    *n = d.len;
    return IDL_OK;
}

int idl_request_bool(idl_request *rq, uint32_t field, bool *v)
{
    uint8_t b = *(volatile uint8_t *)(rq->msg + field);
    if (b > 1)
        return IDL_BAD_VALUE;
    *v = b == 1;
    return IDL_OK;
}

void *idl_request_out(idl_request *rq, uint32_t i, uint32_t k, uint32_t size, uint32_t align,
                      uint32_t *cap)
{
    /* As rt::Strings: the free rest of the area after the last in string,
     * from an 8-aligned start, split in k equal parts of a multiple of 8
     * bytes, each bounded by the per-string limit. */
    const idl_channel *ch = rq->ch;
    uint64_t start = ((uint64_t)rq->end + 7) / 8 * 8;
    if (start > ch->strings_len)
        start = ch->strings_len;
    uint64_t each = ((ch->strings_len - start) / (k ? k : 1)) & ~(uint64_t)7;
    uint64_t off = start + each * i;
    uint64_t bytes = each < ch->max_string_bytes ? each : ch->max_string_bytes;
    (void)align; /* parts are 8-aligned, as every element's alignment divides 8 */
    *cap = (uint32_t)(bytes / (size ? size : 1));
    return ch->strings + off;
}

int idl_request_put(idl_request *rq, uint32_t field, const void *ptr, uint32_t n, uint32_t cap)
{
    if (n > cap)
        return IDL_OVERFLOW;
    idl_desc d;
    d.off = (uint32_t)((const unsigned char *)ptr - rq->ch->strings);
    d.len = n;
    memcpy(rq->msg + field, &d, sizeof d);
    return IDL_OK;
}

/* ---- UTF-8 ------------------------------------------------------------ */

bool idl_utf8(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            if (c == 0xE0)
                lo = 0xA0; /* no overlong forms */
            else if (c == 0xED)
                hi = 0x9F; /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F; /* nothing above U+10FFFF */
        } else {
            return false;
        }
        if (n - i - 1 < k)
            return false;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return false;
        for (size_t j = 2; j <= k; j++)
            if (p[i + j] < 0x80 || p[i + j] > 0xBF)
                return false;
        i += k + 1;
    }
    return true;
}
