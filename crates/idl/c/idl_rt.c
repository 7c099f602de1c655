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
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u

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
    case IDL_E_PEER_DIED: return "the peer's process is gone without closing the channel";
    default: return "unknown status";
    }
}

/* ---- futex ------------------------------------------------------------ */

/* The memfd is shared between processes: no FUTEX_PRIVATE_FLAG. Sleeps
 * while the word is `expected`, at most `timeout` (NULL: no limit). */
static void futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *timeout)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, timeout, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---- liveness (docs/idl.md, "Liveness"; rt::shm's `Liveness`) ---------- */

/* F_OFD_SETLK: takes a write lock on byte `at`, true if taken.
 * F_OFD_GETLK: true if another description holds a lock on byte `at`, and
 * true if the query fails, so that a failing check never declares a peer
 * dead. */
static bool ofd_lock(int fd, int at, int cmd)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl); /* l_pid 0, as OFD locks require */
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = at;
    fl.l_len = 1;
    int r = fcntl(fd, cmd, &fl);
    if (cmd == F_OFD_GETLK)
        return r < 0 || fl.l_type != F_UNLCK;
    return r == 0;
}

/* A new open file description of the channel's memfd (a dup would share
 * the description, and with it the lock), or -1. */
static int reopen(const idl_channel *ch)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", ch->fd);
    return open(path, O_RDWR | O_CLOEXEC);
}

static _Atomic uint32_t *attached_word(const idl_channel *ch, int side)
{
    return (_Atomic uint32_t *)(ch->base + IDL_ATTACHED + 4u * (unsigned)side);
}

/* Makes the mapping `side` on its first call or wait: takes the side's
 * lock through a description of its own and sets its attached word. A side
 * that cannot take it (no /proc, the side already taken by another
 * mapping) is not watched by its peer. */
static void announce(idl_channel *ch, int side)
{
    ch->side = side;
    int fd = reopen(ch);
    if (fd >= 0 && !ofd_lock(fd, side, F_OFD_SETLK)) {
        close(fd);
        fd = -1;
    }
    ch->lock_fd = fd;
    if (fd >= 0)
        atomic_store_explicit(attached_word(ch, side), 1, memory_order_release);
}

/* Whether the peer attached and so can be watched. */
static bool watching(const idl_channel *ch)
{
    return atomic_load_explicit(attached_word(ch, 1 - ch->side), memory_order_acquire) != 0;
}

/* Whether the peer's process still holds its lock (true if it never
 * attached or the check fails). The query goes through our own
 * description: our lock is on the other byte. */
static bool peer_alive(const idl_channel *ch)
{
    if (!watching(ch))
        return true;
    int fd = ch->lock_fd >= 0 ? ch->lock_fd : reopen(ch);
    if (fd < 0)
        return true;
    bool held = ofd_lock(fd, 1 - ch->side, F_OFD_GETLK);
    if (fd != ch->lock_fd)
        close(fd);
    return held;
}

/* ---- posting and waiting ---------------------------------------------- */

/* Posts `value` (a request or a reply): a compare-and-swap from the
 * current state with release order, unless the channel is closed; wakes
 * the peer if it sleeps (bit 31 of the replaced state). */
static int post(idl_channel *ch, uint32_t value)
{
    uint32_t s = atomic_load_explicit(ch->state, memory_order_relaxed);
    do {
        if ((s & ~IDL_WAITER) == IDL_CLOSED || (s & IDL_REPLY_CLOSED))
            return IDL_E_CLOSED;
    } while (!atomic_compare_exchange_weak_explicit(ch->state, &s, value, memory_order_release,
                                                    memory_order_relaxed));
    if (s & IDL_WAITER) {
        futex_wake(ch->state);
        ch->counts.wakes++;
        ch->woke = true;
    }
    return IDL_OK;
}

/* The waiting rule (rt::wait::WaitRule, step for step; docs/idl.md,
 * "Waiting"): a side polls on every wait until IDL_MISSES waits in a row
 * ran out; then it sleeps at once except one probe in `gap` waits. */
void idl_wait_rule_init(idl_wait_rule *r, uint32_t spin)
{
    r->spin = spin;
    r->misses = 0;
    r->gap = IDL_PROBE_MIN;
    r->since = 0;
}

uint32_t idl_wait_budget(idl_wait_rule *r, bool *probe)
{
    *probe = false;
    if (r->spin == 0 || r->misses < IDL_MISSES)
        return r->spin;
    if (++r->since >= r->gap) {
        r->since = 0;
        *probe = true;
        return r->spin;
    }
    return 0;
}

void idl_wait_polled(idl_wait_rule *r, bool probe, bool answered)
{
    if (answered) {
        if (r->misses != 0) {
            r->misses = 0;
            r->gap = IDL_PROBE_MIN;
            r->since = 0;
        }
        return;
    }
    if (r->misses < UINT32_MAX)
        r->misses++;
    if (probe)
        r->gap = r->gap * 2 < IDL_PROBE_MAX ? r->gap * 2 : IDL_PROBE_MAX;
}

/* What a wait for `want` makes of the state word `s`: 1 the wanted state,
 * -1 closed, 0 keep waiting. A reply posted before the close still counts
 * (IDL_REPLY_CLOSED). */
static int settled(uint32_t s, uint32_t want)
{
    uint32_t v = s & ~(IDL_WAITER | IDL_REPLY_CLOSED);
    if (v == want)
        return 1;
    if (v == IDL_CLOSED || (s & IDL_REPLY_CLOSED))
        return -1;
    return 0;
}

/* Waits (acquire) until the state, without the waiter bit, is `want`:
 * IDL_OK, IDL_E_CLOSED, or IDL_E_PEER_DIED. Polls while the waiting rule
 * says it pays (idl_wait_budget, at most IDL_SPIN_TIME_NS), then sets the waiter
 * bit and sleeps on the futex; a side whose peer attached wakes every
 * IDL_LIVENESS_CHECK_NS to check the peer's lock. */
static int await_state(idl_channel *ch, uint32_t want)
{
    bool probing;
    uint32_t polls = idl_wait_budget(&ch->wait, &probing);
    bool woke = ch->woke;
    ch->woke = false;
    if (polls > 0) {
        uint64_t limit = IDL_SPIN_TIME_NS;
        if (probing || woke) {
            polls = polls > UINT32_MAX / IDL_PROBE_STRETCH ? UINT32_MAX : polls * IDL_PROBE_STRETCH;
            limit = IDL_PROBE_TIME_NS;
        }
        if (probing)
            ch->counts.probes++;
        uint64_t start = 0;
        uint32_t n = 0;
        for (;;) {
            int v = settled(atomic_load_explicit(ch->state, memory_order_acquire), want);
            if (v > 0) {
                idl_wait_polled(&ch->wait, probing, true);
                return IDL_OK;
            }
            if (v < 0)
                return IDL_E_CLOSED;
            if (++n >= polls)
                break;
            /* The clock is read only once a wait outlasts the polls a
             * quick answer takes, and then every 64 polls. */
            if (n % 64 == 0) {
                uint64_t t = now_ns();
                if (start == 0)
                    start = t;
                else if (t - start >= limit)
                    break;
            }
            cpu_relax();
        }
        idl_wait_polled(&ch->wait, probing, false);
        ch->counts.ran_out++;
    }
    ch->counts.sleeps++;
    const struct timespec check = {0, IDL_LIVENESS_CHECK_NS};
    uint64_t checked = now_ns();
    for (;;) {
        uint32_t s = atomic_load_explicit(ch->state, memory_order_acquire);
        int v = settled(s, want);
        if (v > 0)
            return IDL_OK;
        if (v < 0)
            return IDL_E_CLOSED;
        if (!(s & IDL_WAITER) &&
            !atomic_compare_exchange_strong_explicit(ch->state, &s, s | IDL_WAITER,
                                                     memory_order_relaxed, memory_order_relaxed))
            continue;
        bool watch = watching(ch);
        futex_wait(ch->state, s | IDL_WAITER, watch ? &check : NULL);
        if (watch && now_ns() - checked >= IDL_LIVENESS_CHECK_NS) {
            checked = now_ns();
            if (!peer_alive(ch)) {
                /* Re-read: a reply or a close posted just before the peer
                 * died still counts. */
                v = settled(atomic_load_explicit(ch->state, memory_order_acquire), want);
                if (v > 0)
                    return IDL_OK;
                return v < 0 ? IDL_E_CLOSED : IDL_E_PEER_DIED;
            }
        }
    }
}

/* ---- the channel ------------------------------------------------------ */

#define SPIN_MAX (1u << 20)

/* Checks the header's private copy `h` against the file's `size`. */
static int check_header(const idl_header *h, uint64_t size)
{
    if (memcmp(h->magic, IDL_MAGIC, 8) != 0 || h->version != IDL_VERSION)
        return IDL_E_HEADER;
    if (h->capacity < IDL_INLINE || h->capacity > UINT16_MAX)
        return IDL_E_HEADER;
    if (h->area_off % PAGE != 0 || (uint64_t)h->area_off < (uint64_t)IDL_MSG + h->capacity)
        return IDL_E_HEADER;
    if ((uint64_t)h->area_off + h->area_len > size || h->max_strings == 0)
        return IDL_E_HEADER;
    return IDL_OK;
}

static void attach(idl_channel *ch, int fd, unsigned char *base, size_t size,
                   const idl_header *h)
{
    ch->base = base;
    ch->size = size;
    ch->fd = fd;
    ch->state = (_Atomic uint32_t *)(base + IDL_DESC_LINE);
    ch->word = (_Atomic uint16_t *)(base + IDL_DESC_LINE + 4);
    ch->len = (_Atomic uint16_t *)(base + IDL_DESC_LINE + 6);
    ch->msg = base + IDL_MSG;
    ch->capacity = h->capacity;
    ch->strings = base + h->area_off;
    ch->strings_len = h->area_len;
    ch->max_strings = h->max_strings;
    ch->max_string_bytes = h->max_string_bytes;
    idl_wait_rule_init(&ch->wait, h->spin < SPIN_MAX ? h->spin : SPIN_MAX);
    memset(&ch->counts, 0, sizeof ch->counts);
    ch->woke = false;
    ch->cursor = 0;
    ch->nstrings = 0;
    ch->side = -1;
    ch->lock_fd = -1;
}

/* Maps `fd` after checking its seals, its header (a private copy) and its
 * size. */
static int map_fd(idl_channel *ch, int fd)
{
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
        return IDL_E_HEADER;
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return IDL_E_SYSTEM;
    idl_header h;
    if (sb.st_size < (off_t)sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        return IDL_E_HEADER;
    int st = check_header(&h, (uint64_t)sb.st_size);
    if (st != IDL_OK)
        return st;
    size_t size = (size_t)h.area_off + h.area_len;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return IDL_E_SYSTEM;
    attach(ch, fd, p, size, &h);
    return IDL_OK;
}

int idl_channel_create(idl_channel *ch, uint32_t capacity, uint32_t area_len)
{
    idl_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, IDL_MAGIC, 8);
    h.version = IDL_VERSION;
    h.max_strings = 31;
    h.max_string_bytes = 2u << 20;
    h.spin = 2000;
    if (capacity < IDL_INLINE || capacity > UINT16_MAX)
        return IDL_E_LIMIT;
    uint64_t area_off = ((uint64_t)IDL_MSG + capacity + PAGE - 1) / PAGE * PAGE;
    uint64_t len = ((uint64_t)area_len + PAGE - 1) / PAGE * PAGE;
    if (area_off + len > UINT32_MAX)
        return IDL_E_LIMIT;
    h.capacity = capacity;
    h.area_off = (uint32_t)area_off;
    h.area_len = (uint32_t)len;

    int fd = memfd_create("fastpath-idl", MFD_ALLOW_SEALING);
    if (fd < 0)
        return IDL_E_SYSTEM;
    if (ftruncate(fd, (off_t)(area_off + len)) != 0 ||
        pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        close(fd);
        return IDL_E_SYSTEM;
    }
    int st = map_fd(ch, fd);
    if (st != IDL_OK)
        close(fd);
    return st;
}

int idl_channel_map(idl_channel *ch, int fd)
{
    return map_fd(ch, fd);
}

idl_wait_counts idl_channel_wait_counts(const idl_channel *ch)
{
    return ch->counts;
}

void idl_channel_close(idl_channel *ch)
{
    /* A posted reply stays for the client to take: a server that answers
     * and then goes away must not take its last answer with it. */
    uint32_t s = atomic_load_explicit(ch->state, memory_order_relaxed);
    uint32_t closed;
    do {
        closed = (s & ~(IDL_WAITER | IDL_REPLY_CLOSED)) == IDL_REPLY
                     ? IDL_REPLY | IDL_REPLY_CLOSED
                     : IDL_CLOSED;
    } while (!atomic_compare_exchange_weak_explicit(ch->state, &s, closed, memory_order_acq_rel,
                                                    memory_order_relaxed));
    if (s & IDL_WAITER)
        futex_wake(ch->state);
}

void idl_channel_unmap(idl_channel *ch)
{
    if (ch->base) {
        idl_channel_close(ch);
        munmap(ch->base, ch->size);
    }
    if (ch->fd >= 0)
        close(ch->fd);
    if (ch->lock_fd >= 0)
        close(ch->lock_fd);
    ch->base = NULL;
    ch->fd = -1;
    ch->lock_fd = -1;
}

/* ---- client ----------------------------------------------------------- */

void *idl_client_begin(idl_channel *ch, uint32_t size)
{
    ch->cursor = 0;
    ch->nstrings = 0;
    return size <= ch->capacity ? ch->msg : NULL;
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
    if (ch->side < 0)
        announce(ch, IDL_SIDE_CLIENT);
    atomic_store_explicit(ch->word, key, memory_order_relaxed);
    atomic_store_explicit(ch->len, (uint16_t)request_len, memory_order_relaxed);
    int st = post(ch, IDL_REQUEST);
    if (st != IDL_OK)
        return st;
    st = await_state(ch, IDL_REPLY);
    if (st != IDL_OK)
        return st;
    uint16_t status = atomic_load_explicit(ch->word, memory_order_relaxed);
    uint32_t len = atomic_load_explicit(ch->len, memory_order_relaxed);
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
    if (ch->side < 0)
        announce(ch, IDL_SIDE_SERVER);
    for (;;) {
        int st = await_state(ch, IDL_REQUEST);
        if (st != IDL_OK)
            return st;
        *key = atomic_load_explicit(ch->word, memory_order_relaxed);
        *len = atomic_load_explicit(ch->len, memory_order_relaxed);
        if (*len <= ch->capacity)
            return IDL_OK;
        st = idl_server_reply(ch, IDL_SHORT_MESSAGE, 0);
        if (st != IDL_OK)
            return st;
    }
}

int idl_server_reply(idl_channel *ch, uint16_t status, uint32_t len)
{
    if (status != IDL_OK)
        len = 0;
    else if (len > ch->capacity)
        len = ch->capacity;
    atomic_store_explicit(ch->word, status, memory_order_relaxed);
    atomic_store_explicit(ch->len, (uint16_t)len, memory_order_relaxed);
    return post(ch, IDL_REPLY);
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
