//! What the bound on loops that never yield costs a tight local loop
//! (`docs/esp.md`, "Loops that never yield"), in one run:
//!
//! - `automaton, no count`: the automaton's code with its counts taken out
//!   (the code before the bound existed);
//! - `automaton, count per iteration`: every iteration counted
//!   (`fpgen::Options::charge_counted_loops` false);
//! - `automaton, charged at entry`: the count of a counted loop charged once
//!   at its entry (the default);
//! - `native` and `automata` through `Machine`, end to end (the
//!   process-based code counts every backward jump).
//!
//! `cargo bench -p esp --bench local_loops`: criterion times each row on
//! 10^8 iterations (so that a `Machine`'s construction, some 0.2 ms, is
//! under 1% of its rows) of `s = s + i; i = i + 1` (the rows in one run, so
//! compare their ratios). `ESP_LOOP_ROW=K` (with `ESP_LOOP_N`, default
//! 10^6) runs row `K` once instead and prints nothing but its result, for
//! `valgrind --tool=callgrind`, whose instruction counts per iteration (the
//! difference between two `N`s over the difference in `N`) are the exact
//! cost. `ESP_BENCH_LISTING=1` prints the code of each automaton row and
//! the process-based code.

use std::ffi::c_void;
use std::hint::black_box;

use criterion::{Criterion, Throughput};

use esp::abi::{Ctx, InPort, OutPort};
use esp::explore::ExploreOptions;
use esp::fp::{Graph, Leave, Term};
use esp::fpgen;
use esp::ir::Program;
use esp::runtime::{Backend, Machine, Options};

const SRC: &str = "
channel n(int) external in;
channel o(int) external out;
process P {
  var s, i, m;
  in(n, m);
  while (i < m) { s = s + i; i = i + 1; }
  out(o, s);
}
";

/// A bound the loop stays within.
const BOUND: u64 = 1 << 40;

unsafe extern "C" fn no_call(_: *mut c_void, _: u32, _: *const i64) -> i64 {
    0
}
unsafe extern "C" fn no_recv(_: *mut c_void, _: u32, _: *mut i64) -> u32 {
    0
}
unsafe extern "C" fn no_send(_: *mut c_void, _: u32, _: *const i64) {}

/// Runs the automaton's code from its start on input `m`: the sum sent.
fn run_graph(code: &fpgen::NativeGraph, program: &Program, m: i64) -> i64 {
    let slots = esp::ir::Layout::of(program).slots as usize;
    let mut vars = vec![0i64; slots];
    let mut pcs = vec![0u32; program.processes.len()];
    let input = [m];
    let mut out = [0i64; 1];
    let chans = program.channels.len();
    let mut ins = vec![
        InPort {
            next: std::ptr::null(),
            end: std::ptr::null(),
        };
        chans
    ];
    let mut outs = vec![
        OutPort {
            next: std::ptr::null_mut(),
            end: std::ptr::null_mut(),
        };
        chans
    ];
    let (n, o) = (
        program.channel("n").unwrap() as usize,
        program.channel("o").unwrap() as usize,
    );
    ins[n] = InPort {
        next: input.as_ptr(),
        // SAFETY: one past the end of `input`.
        end: unsafe { input.as_ptr().add(1) },
    };
    outs[o] = OutPort {
        next: out.as_mut_ptr(),
        // SAFETY: one past the end of `out`.
        end: unsafe { out.as_mut_ptr().add(1) },
    };
    let mut ctx = Ctx {
        vars: vars.as_mut_ptr(),
        pcs: pcs.as_mut_ptr(),
        ins: ins.as_mut_ptr(),
        outs: outs.as_mut_ptr(),
        host: std::ptr::null_mut(),
        call: no_call,
        recv: no_recv,
        send: no_send,
    };
    // SAFETY: every slot, pc and port is there; the ports' windows lie in
    // `input` and `out`; the callbacks do nothing and do not unwind.
    let leave = unsafe { code.run(&mut ctx, 0) };
    assert_eq!(leave, Leave::Abort, "P halts after its message");
    assert_eq!(
        outs[o].next,
        out.as_mut_ptr().wrapping_add(1),
        "one message"
    );
    out[0]
}

/// The graph with its counts taken out.
fn without_counts(g: &Graph) -> Graph {
    let mut g = g.clone();
    for b in &mut g.blocks {
        if let Term::Count { next, .. } = b.term {
            b.term = Term::Jump(next);
        }
    }
    g
}

fn run_machine(program: &Program, backend: Backend, m: i64) -> i64 {
    let mut machine = Machine::new(
        program.clone(),
        Options {
            backend,
            max_local_iterations: BOUND,
            explore: ExploreOptions {
                local_loop_bound: BOUND,
                ..ExploreOptions::default()
            },
            ..Options::default()
        },
    )
    .unwrap();
    machine.push("n", &[m]).unwrap();
    machine.run().unwrap();
    machine.take_output("o").unwrap()[0]
}

/// The rows: the three automaton codes, then `Machine` with the native
/// and the automata backends.
const ROWS: [&str; 5] = [
    "automaton, no count",
    "automaton, count per iteration",
    "automaton, charged at entry",
    "native (Machine)",
    "automata (Machine)",
];

fn main() {
    let program = esp::compile(SRC).unwrap();
    let options = ExploreOptions {
        local_loop_bound: BOUND,
        ..ExploreOptions::default()
    };
    let mut g = esp::automata::automaton(&program, &options).unwrap();
    esp::opt::optimize(&program, &mut g);
    let per_iteration = fpgen::Options {
        charge_counted_loops: false,
    };
    let codes = [
        fpgen::compile_with(&without_counts(&g), &program, &per_iteration).unwrap(),
        fpgen::compile_with(&g, &program, &per_iteration).unwrap(),
        fpgen::compile(&g, &program).unwrap(),
    ];
    assert_eq!(codes[2].charged_loops(), 1, "the loop is counted");
    if std::env::var_os("ESP_BENCH_LISTING").is_some() {
        for (name, code) in ROWS.iter().zip(&codes) {
            println!("== {name}\n{}", code.listing());
        }
        let failed = 0i64;
        let hooks = esp::native::HostHooks {
            host: std::ptr::null_mut(),
            call: no_call,
            failed: &failed,
        };
        let native = esp::native::NativeProgram::compile(&program, &[], hooks).unwrap();
        println!("== native (process P)\n{}", native.processes()[0].listing());
    }
    let run = |row: usize, n: i64| -> i64 {
        match row {
            r if r < codes.len() => run_graph(&codes[r], &program, n),
            3 => run_machine(&program, Backend::Native, n),
            _ => run_machine(&program, Backend::Automata, n),
        }
    };
    // The sum below n, wrapped as the loop wraps it.
    let want = |n: i64| ((n as i128) * (n as i128 - 1) / 2) as i64;
    let env = |name: &str| std::env::var(name).ok();
    if let Some(row) = env("ESP_LOOP_ROW") {
        let row: usize = row.parse().expect("ESP_LOOP_ROW: a row's number");
        let n: i64 = env("ESP_LOOP_N").map_or(1_000_000, |n| n.parse().expect("ESP_LOOP_N"));
        assert_eq!(run(row, n), want(n), "{}", ROWS[row]);
        println!("{}: {n} iterations", ROWS[row]);
        return;
    }
    const N: i64 = 100_000_000;
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("local_loops");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N as u64));
    for (row, name) in ROWS.iter().enumerate() {
        assert_eq!(run(row, N), want(N), "{name}");
        group.bench_function(*name, |b| b.iter(|| run(row, black_box(N))));
    }
    group.finish();
    c.final_summary();
}
