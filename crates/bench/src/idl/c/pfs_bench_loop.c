/*
 * pfs_bench_loop.c: the generated C stubs of pfs_bench.idl (pfs_bench.c,
 * unchanged) over the loopback carrier of loop.c: their calls of the
 * runtime's idl_client_call become calls of idlb_c_loop_call, which runs
 * the server's dispatch in place of posting and waiting.
 */
#define idl_client_call idlb_c_loop_call
#include "pfs_bench.c"
