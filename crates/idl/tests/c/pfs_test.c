/*
 * pfs_test.c: the C side of the interop tests of the paper's pfs calls
 * (crates/idl/idl/pfs.idl; crates/idl/tests/c_interop.rs compiles it with
 * the generated pfs.c).
 *
 *   pfs_test client FD [CALLS]  calls the server on the channel in memfd FD,
 *                               each call checked against the same call made
 *                               locally; closes the channel at the end
 *   pfs_test server FD          serves the channel until the client closes it
 *   pfs_test c2c [CALLS]        creates a channel, forks a server, runs the client
 *
 * The server is a toy file system: one file of FILE_WORDS ints per handle
 * slot. The Rust side of c_interop.rs implements the same semantics.
 */
#define _GNU_SOURCE
#include "pfs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FILES 4
#define FILE_WORDS 16384

typedef struct fs {
    int32_t words[FILES][FILE_WORDS];
} fs;

/* ---- the implementation (also the local reference) --------------------- */

static int do_open(void *self, int32_t client, int32_t fobj, int32_t flags, int32_t mode,
                   int32_t *handle, int32_t *ret)
{
    (void)self;
    *handle = (int32_t)(((uint32_t)client ^ (uint32_t)fobj) % FILES);
    *ret = flags == -1 ? -1 : (int32_t)((uint32_t)mode + (uint32_t)flags);
    return 0;
}

static int do_write(void *self, int32_t handle, int32_t *pos, int32_t len, int32_t data_size,
                    const int32_t *data, int32_t *ret)
{
    fs *f = self;
    if (handle < 0 || handle >= FILES || *pos < 0) {
        *ret = -1;
        return 0;
    }
    int32_t n = 0;
    for (int32_t i = 0; i < data_size && *pos < FILE_WORDS; i++, n++)
        f->words[handle][(*pos)++] = data[i];
    *ret = (int32_t)((uint32_t)n + (uint32_t)len);
    return 0;
}

static int do_get_direntries(void *self, int32_t handle, int32_t *pos, int32_t count,
                             int32_t *data_size, int32_t *data, uint32_t data_cap, int32_t *ret)
{
    fs *f = self;
    if (handle < 0 || handle >= FILES || *pos < 0 || count < 0) {
        *data_size = 0;
        *ret = -1;
        return 0;
    }
    int32_t n = 0;
    while (n < count && (uint32_t)n < data_cap && *pos < FILE_WORDS)
        data[n++] = f->words[handle][(*pos)++];
    *data_size = n;
    *ret = n;
    return 0;
}

static const pfs_impl impl = {
    .pfs_open = do_open,
    .pfs_write = do_write,
    .pfs_get_direntries = do_get_direntries,
};

/* ---- the client -------------------------------------------------------- */

static uint64_t rng = 0x243f6a8885a308d3u;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

#define CALL(expr)                                                                   \
    do {                                                                             \
        int st_ = (expr);                                                            \
        if (st_ != IDL_OK) {                                                         \
            fprintf(stderr, "pfs_test: call %d: %s: %s\n", k, #expr, idl_strerror(st_)); \
            return 1;                                                                \
        }                                                                            \
    } while (0)

#define EXPECT(cond)                                                                 \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "pfs_test: %s:%d: call %d: %s\n", __FILE__, __LINE__, k, #cond); \
            return 1;                                                                \
        }                                                                            \
    } while (0)

static int run_client(idl_client *ch, int calls)
{
    static fs local;
    static int32_t buf[FILE_WORDS], out[FILE_WORDS];
    for (int k = 0; k < calls; k++) {
        int32_t client = (int32_t)next(), fobj = (int32_t)next(), flags = (int32_t)(next() % 8);
        int32_t mode = (int32_t)(next() % 512);
        int32_t h, r, h_l, r_l;
        CALL(pfs_open(ch, client, fobj, flags, mode, &h, &r));
        do_open(&local, client, fobj, flags, mode, &h_l, &r_l);
        EXPECT(h == h_l && r == r_l);

        int32_t n = (int32_t)(k % 5 == 4 ? 4096 : next() % 300);
        for (int32_t i = 0; i < n; i++)
            buf[i] = (int32_t)next();
        int32_t pos = (int32_t)(next() % FILE_WORDS), pos_l = pos, len = n * 4;
        CALL(pfs_write(ch, h, &pos, len, n, buf, &r));
        do_write(&local, h, &pos_l, len, n, buf, &r_l);
        EXPECT(pos == pos_l && r == r_l);

        int32_t count = (int32_t)(next() % 2000), size, size_l = 0;
        int32_t *data;
        pos = pos_l = (int32_t)(next() % FILE_WORDS);
        CALL(pfs_get_direntries(ch, h, &pos, count, &size, &data, &r));
        do_get_direntries(&local, h, &pos_l, count, &size_l, out, FILE_WORDS, &r_l);
        EXPECT(pos == pos_l && r == r_l && size == size_l);
        EXPECT(memcmp(data, out, sizeof *out * (size_t)size) == 0);
    }
    printf("pfs_test: ok %d rounds\n", calls);
    return 0;
}

static int serve(idl_server *s)
{
    fs *f = calloc(1, sizeof *f);
    if (!f)
        return 2;
    int st = pfs_serve(s, &impl, f);
    free(f);
    if (st != IDL_OK) {
        fprintf(stderr, "pfs_test: server: %s\n", idl_strerror(st));
        return 1;
    }
    printf("pfs_test: served\n");
    return 0;
}

int main(int argc, char **argv)
{
    idl_channel ch;
    int st;
    if (argc >= 3 && (strcmp(argv[1], "client") == 0 || strcmp(argv[1], "server") == 0)) {
        if ((st = idl_channel_map(&ch, atoi(argv[2]))) != IDL_OK) {
            fprintf(stderr, "pfs_test: map: %s\n", idl_strerror(st));
            return 2;
        }
        int rc = argv[1][0] == 'c' ? run_client(&ch, argc >= 4 ? atoi(argv[3]) : 50) : serve(&ch);
        idl_channel_unmap(&ch);
        return rc;
    }
    if (argc >= 2 && strcmp(argv[1], "c2c") == 0) {
        if ((st = idl_channel_create(&ch, 4096, 4u << 20)) != IDL_OK) {
            fprintf(stderr, "pfs_test: create: %s\n", idl_strerror(st));
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
        int rc = run_client(&ch, argc >= 3 ? atoi(argv[2]) : 50);
        idl_channel_unmap(&ch);
        int ws;
        if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "pfs_test: the server failed\n");
            return 1;
        }
        return rc;
    }
    fprintf(stderr, "usage: pfs_test client FD [CALLS] | server FD | c2c [CALLS]\n");
    return 2;
}
