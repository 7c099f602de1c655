/*
 * guard_test.c: a C program of tests/c/guard.idl, whose names are the
 * include guard its header would have (crates/idl/tests/c_interop.rs,
 * `the_include_guard_yields_to_the_files_names`, compiles it with the
 * generated guard.c).
 *
 *   guard_test c2c    creates a channel, forks a server, calls it
 *
 * The program names the struct field, the parameter and the constant that
 * are spelled like the guard, so it compiles only if the guard is another.
 */
#define _GNU_SOURCE
#include "guard.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int do_f(void *self, const P *p, int32_t GUARD_IDL_H_, P *q, int32_t *ret)
{
    (void)self;
    q->GUARD_IDL_H = p->GUARD_IDL_H + GUARD_IDL_H_;
    q->y = p->y * GUARD_IDL_H__;
    *ret = p->GUARD_IDL_H - p->y;
    return 0;
}

static const G_impl impl = {.f = do_f};

static int client(idl_client *ch)
{
    for (int32_t k = 0; k < 20; k++) {
        P p = {.GUARD_IDL_H = k, .y = 3 * k + 1}, q, q_l;
        int32_t r, r_l;
        int st = G_f(ch, &p, k - 5, &q, &r);
        if (st != IDL_OK) {
            fprintf(stderr, "guard_test: call %d: %s\n", (int)k, idl_strerror(st));
            return 1;
        }
        do_f(NULL, &p, k - 5, &q_l, &r_l);
        if (q.GUARD_IDL_H != q_l.GUARD_IDL_H || q.y != q_l.y || r != r_l) {
            fprintf(stderr, "guard_test: call %d: a wrong reply\n", (int)k);
            return 1;
        }
    }
    printf("guard_test: ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    idl_channel ch;
    if (argc != 2 || strcmp(argv[1], "c2c") != 0) {
        fprintf(stderr, "usage: guard_test c2c\n");
        return 2;
    }
    if (idl_channel_create(&ch, 4096, 1u << 16) != IDL_OK)
        return 2;
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0) {
        idl_channel srv;
        if (idl_channel_map(&srv, dup(ch.fd)) != IDL_OK)
            _exit(2);
        _exit(G_serve(&srv, &impl, NULL) == IDL_OK ? 0 : 1);
    }
    int rc = client(&ch);
    idl_channel_unmap(&ch);
    int ws;
    if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "guard_test: the server failed\n");
        return 1;
    }
    return rc;
}
