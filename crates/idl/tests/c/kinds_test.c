/*
 * kinds_test.c: the C side of the interop tests of tests/c/kinds.idl
 * (crates/idl/tests/c_interop.rs compiles it with the generated kinds.c).
 *
 *   kinds_test client FD [CALLS]  calls the server on the channel in memfd FD,
 *                                 each call checked against the same call
 *                                 made locally; closes the channel at the end
 *   kinds_test server FD          serves the channel until the client closes it
 *   kinds_test c2c [CALLS]        creates a channel, forks a server, runs the client
 *
 * The operations' semantics are also written in Rust in c_interop.rs; the
 * two must stay the same.
 */
#define _GNU_SOURCE
#include "kinds.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the implementation (also the local reference) --------------------- */

static int do_nothing(void *self)
{
    (*(uint64_t *)self)++;
    return 0;
}

static int do_scalars(void *self, char c8, uint8_t u8, int16_t i16, uint16_t u16, int32_t i32,
                      uint32_t u32, int64_t i64, uint64_t u64, bool flag, int64_t *acc,
                      bool *flipped, bool *ret)
{
    (void)self;
    uint64_t a = (uint64_t)*acc;
    a += (uint8_t)c8;
    a += u8;
    a += (uint64_t)(int64_t)i16;
    a += u16;
    a += (uint64_t)(int64_t)i32;
    a += u32;
    a += (uint64_t)i64;
    a += u64;
    a += flag ? 1 : 0;
    *acc = (int64_t)a;
    *flipped = !flag;
    *ret = ((u64 ^ (uint64_t)i64) & 1) == 1;
    return 0;
}

static int do_structs(void *self, const point *p, frame *bx, point *q, point *ret)
{
    (void)self;
    bx->corner.x = (int16_t)(uint16_t)((uint16_t)bx->corner.x + (uint16_t)p->x);
    bx->corner.y ^= p->y;
    for (int i = 0; i < 3; i++)
        bx->tag[i] = (uint8_t)(bx->tag[i] + i + 1);
    bx->n = bx->n * (uint32_t)SCALE + 1;
    point nq = {(int16_t)(uint16_t)(uint64_t)p->y, p->x};
    point nr = {(int16_t)(uint16_t)bx->n, (int64_t)((uint64_t)p->y - 1)};
    *q = nq;
    *ret = nr;
    return 0;
}

static int do_arrays(void *self, const int16_t a[3], int32_t b[2], uint8_t c[5])
{
    (void)self;
    for (int i = 0; i < 2; i++)
        b[i] = (int32_t)((uint32_t)b[i] * 2u + (uint32_t)(int32_t)a[i]);
    for (int j = 0; j < 5; j++)
        c[j] = (uint8_t)(a[0] + j);
    return 0;
}

static int do_strings(void *self, const char *s, uint32_t s_len, char *t, uint32_t *t_len,
                      uint32_t t_cap, char *u, uint32_t *u_len, uint32_t u_cap, uint32_t *ret)
{
    (void)self;
    uint32_t old = *t_len;
    if ((uint64_t)old + s_len > t_cap || s_len > u_cap)
        return -1;
    memcpy(t + old, s, s_len);
    *t_len = old + s_len;
    for (uint32_t i = 0; i < s_len; i++)
        u[i] = (s[i] >= 'a' && s[i] <= 'z') ? (char)(s[i] - 'a' + 'A') : s[i];
    *u_len = s_len;
    *ret = s_len * 1000u + old;
    return 0;
}

static int do_seqs(void *self, const int16_t *a, uint32_t a_len, int64_t *b, uint32_t b_len,
                   point *c, uint32_t *c_len, uint32_t c_cap, uint32_t n, const uint8_t *d,
                   int16_t *m, int32_t *e, uint32_t e_cap, int32_t *ret)
{
    (void)self;
    int64_t sa = 0;
    for (uint32_t i = 0; i < a_len; i++)
        sa += a[i];
    for (uint32_t i = 0; i < b_len; i++)
        b[i] = (int64_t)((uint64_t)b[i] + (uint64_t)sa + i);
    if (a_len > c_cap || n > e_cap || n > INT16_MAX)
        return -1;
    for (uint32_t i = 0; i < a_len; i++) {
        point pt = {a[i], (int64_t)i};
        c[i] = pt;
    }
    *c_len = a_len;
    uint32_t sd = 0;
    for (uint32_t i = 0; i < n; i++) {
        e[i] = (int32_t)d[i] * 3;
        sd += d[i];
    }
    *m = (int16_t)n;
    *ret = (int32_t)(sd + a_len);
    return 0;
}

static int do_corba(void *self, int32_t x, int32_t *y, uint16_t *z, bool *bit, int8_t small,
                    int32_t *ret)
{
    (void)self;
    *y = (int32_t)((uint32_t)*y + (uint32_t)x);
    *z = (uint16_t)((uint32_t)x * 2u);
    *bit = !*bit != (small < 0);
    *ret = (int32_t)((uint32_t)x - (uint32_t)*y + (uint32_t)(int32_t)small);
    return 0;
}

static const kinds_impl impl = {
    .nothing = do_nothing,
    .scalars = do_scalars,
    .structs = do_structs,
    .arrays = do_arrays,
    .strings = do_strings,
    .seqs = do_seqs,
    .corba = do_corba,
};

/* ---- the client -------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int failures;

#define EXPECT(cond)                                                                   \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "kinds_test: %s:%d: call %d: %s\n", __FILE__, __LINE__, k, \
                    #cond);                                                            \
            failures++;                                                                \
        }                                                                              \
    } while (0)

#define CALL(expr)                                                                      \
    do {                                                                                \
        int st_ = (expr);                                                               \
        if (st_ != IDL_OK) {                                                            \
            fprintf(stderr, "kinds_test: call %d: %s: %s\n", k, #expr, idl_strerror(st_)); \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

static void random_text(char *buf, uint32_t n)
{
    static const char *pieces[] = {"a", "z", "Q", " ", "0", "\xc3\xa9", "\xe2\x82\xac",
                                   "\xf0\x9f\x98\x80"};
    uint32_t i = 0;
    while (i < n) {
        const char *p = pieces[next() % 8];
        size_t l = strlen(p);
        if (i + l > n)
            p = "x", l = 1;
        memcpy(buf + i, p, l);
        i += (uint32_t)l;
    }
}

/* Cleared scratch for the local calls' out buffers. */
static char local_area[1 << 20];

static int run_client(idl_client *ch, int calls)
{
    uint64_t count = 0;
    for (int k = 0; k < calls; k++) {
        CALL(kinds_nothing(ch));

        {
            char c8 = (char)next();
            uint8_t u8 = (uint8_t)next();
            int16_t i16 = (int16_t)next();
            uint16_t u16 = (uint16_t)next();
            int32_t i32 = (int32_t)next();
            uint32_t u32 = (uint32_t)next();
            int64_t i64 = (int64_t)next();
            uint64_t u64 = next();
            bool flag = next() & 1;
            int64_t acc = (int64_t)next(), acc_l = acc;
            bool fl = false, fl_l = false, r = false, r_l = false;
            CALL(kinds_scalars(ch, c8, u8, i16, u16, i32, u32, i64, u64, flag, &acc, &fl, &r));
            do_scalars(&count, c8, u8, i16, u16, i32, u32, i64, u64, flag, &acc_l, &fl_l, &r_l);
            EXPECT(acc == acc_l && fl == fl_l && r == r_l);
        }

        {
            point p = {(int16_t)next(), (int64_t)next()};
            frame bx = {{(int16_t)next(), (int64_t)next()}, {1, 2, 3}, (uint32_t)next()};
            frame bx_l = bx;
            point q, q_l, r, r_l;
            CALL(kinds_structs(ch, &p, &bx, &q, &r));
            do_structs(&count, &p, &bx_l, &q_l, &r_l);
            EXPECT(memcmp(&bx.corner, &bx_l.corner, sizeof bx.corner) == 0);
            EXPECT(memcmp(bx.tag, bx_l.tag, 3) == 0 && bx.n == bx_l.n);
            EXPECT(q.x == q_l.x && q.y == q_l.y && r.x == r_l.x && r.y == r_l.y);
        }

        {
            int16_t a[3] = {(int16_t)next(), (int16_t)next(), (int16_t)next()};
            int32_t b[2] = {(int32_t)next(), (int32_t)next()};
            int32_t b_l[2] = {b[0], b[1]};
            uint8_t c[5], c_l[5];
            CALL(kinds_arrays(ch, a, b, c));
            do_arrays(&count, a, b_l, c_l);
            EXPECT(memcmp(b, b_l, sizeof b) == 0 && memcmp(c, c_l, sizeof c) == 0);
        }

        {
            char s[200], t[200];
            uint32_t s_len = (uint32_t)(next() % 120), t_len = (uint32_t)(next() % 60);
            random_text(s, s_len);
            random_text(t, t_len);
            const char *tp = t, *u;
            uint32_t tp_len = t_len, u_len, r;
            CALL(kinds_strings(ch, s, s_len, &tp, &tp_len, &u, &u_len, &r));
            char *t_out = local_area, *u_l = local_area + 512;
            uint32_t t_out_len = t_len, u_l_len = 0, r_l;
            memcpy(t_out, t, t_len);
            EXPECT(do_strings(&count, s, s_len, t_out, &t_out_len, 512, u_l, &u_l_len, 512,
                              &r_l) == 0);
            EXPECT(tp_len == t_out_len && memcmp(tp, t_out, tp_len) == 0);
            EXPECT(u_len == u_l_len && memcmp(u, u_l, u_len) == 0 && r == r_l);
        }

        {
            /* Every fourth call sends large sequences. */
            uint32_t a_len = (uint32_t)(k % 4 == 3 ? 50000 : next() % 40);
            uint32_t b_len = (uint32_t)(next() % 30), n = (uint32_t)(next() % 100);
            int16_t *a = malloc(sizeof *a * (a_len + 1));
            int64_t *b = malloc(sizeof *b * (b_len + 1));
            int64_t *b_l = malloc(sizeof *b_l * (b_len + 1));
            uint8_t *d = malloc(n + 1);
            for (uint32_t i = 0; i < a_len; i++)
                a[i] = (int16_t)next();
            for (uint32_t i = 0; i < b_len; i++)
                b[i] = b_l[i] = (int64_t)next();
            for (uint32_t i = 0; i < n; i++)
                d[i] = (uint8_t)next();
            point *c;
            uint32_t c_len;
            int16_t m;
            int32_t *e, r;
            CALL(kinds_seqs(ch, a, a_len, b, b_len, &c, &c_len, n, d, &m, &e, &r));
            point *c_l = (point *)local_area;
            uint32_t c_l_len = 0;
            int16_t m_l = 0;
            int32_t e_l[1000], r_l;
            EXPECT(do_seqs(&count, a, a_len, b_l, b_len, c_l, &c_l_len, 50000, n, d, &m_l, e_l,
                           1000, &r_l) == 0);
            EXPECT(memcmp(b, b_l, sizeof *b * b_len) == 0);
            EXPECT(c_len == c_l_len);
            for (uint32_t i = 0; i < c_len && i < c_l_len; i++)
                EXPECT(c[i].x == c_l[i].x && c[i].y == c_l[i].y);
            EXPECT(m == m_l && memcmp(e, e_l, sizeof *e * (size_t)m) == 0 && r == r_l);
            free(a);
            free(b);
            free(b_l);
            free(d);
        }

        {
            int32_t x = (int32_t)next(), y = (int32_t)next(), y_l = y, r, r_l;
            uint16_t z, z_l;
            bool bit = next() & 1, bit_l = bit;
            int8_t small = (int8_t)next();
            CALL(kinds_corba(ch, x, &y, &z, &bit, small, &r));
            do_corba(&count, x, &y_l, &z_l, &bit_l, small, &r_l);
            EXPECT(y == y_l && z == z_l && bit == bit_l && r == r_l);
        }
    }
    if (failures) {
        fprintf(stderr, "kinds_test: %d mismatches\n", failures);
        return 1;
    }
    printf("kinds_test: ok %d rounds\n", calls);
    return 0;
}

static int serve(idl_server *s)
{
    uint64_t count = 0;
    int st = kinds_serve(s, &impl, &count);
    if (st != IDL_OK) {
        fprintf(stderr, "kinds_test: server: %s\n", idl_strerror(st));
        return 1;
    }
    printf("kinds_test: served %" PRIu64 " null calls\n", count);
    return 0;
}

int main(int argc, char **argv)
{
    idl_channel ch;
    int st;
    if (argc >= 3 && strcmp(argv[1], "client") == 0) {
        if ((st = idl_channel_map(&ch, atoi(argv[2]))) != IDL_OK) {
            fprintf(stderr, "kinds_test: map: %s\n", idl_strerror(st));
            return 2;
        }
        int rc = run_client(&ch, argc >= 4 ? atoi(argv[3]) : 20);
        idl_channel_unmap(&ch);
        return rc;
    }
    if (argc >= 3 && strcmp(argv[1], "server") == 0) {
        if ((st = idl_channel_map(&ch, atoi(argv[2]))) != IDL_OK) {
            fprintf(stderr, "kinds_test: map: %s\n", idl_strerror(st));
            return 2;
        }
        int rc = serve(&ch);
        idl_channel_unmap(&ch);
        return rc;
    }
    if (argc >= 2 && strcmp(argv[1], "c2c") == 0) {
        if ((st = idl_channel_create(&ch, 4096, 4u << 20)) != IDL_OK) {
            fprintf(stderr, "kinds_test: create: %s\n", idl_strerror(st));
            return 2;
        }
        pid_t pid = fork();
        if (pid < 0)
            return 2;
        if (pid == 0) {
            idl_channel srv;
            if (idl_channel_map(&srv, dup(ch.fd)) != IDL_OK)
                _exit(2);
            _exit(serve(&srv));
        }
        int rc = run_client(&ch, argc >= 3 ? atoi(argv[2]) : 20);
        idl_channel_unmap(&ch);
        int ws;
        if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "kinds_test: the server failed\n");
            return 1;
        }
        return rc;
    }
    fprintf(stderr, "usage: kinds_test client FD [CALLS] | server FD | c2c [CALLS]\n");
    return 2;
}
