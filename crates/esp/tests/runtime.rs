//! The runtime as a specification: the scheduling rules, rendezvous, `alt`
//! fairness, external channels as queues and callbacks, host functions,
//! errors, fast-path entry and leave, the fairness refusal, the automaton
//! driver, statistics and code sizes — on every backend.

use std::cell::RefCell;
use std::rc::Rc;

use esp::runtime::{Backend, Event, Machine, Options, Status};
use esp::{Error, compile};

const BACKENDS: [Backend; 2] = [Backend::Interp, Backend::Native];

fn machine(src: &str, backend: Backend) -> Machine {
    let program = compile(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    Machine::new(
        program,
        Options {
            backend,
            ..Options::default()
        },
    )
    .unwrap()
}

fn with_spec(src: &str, spec: &str, backend: Backend) -> Machine {
    let program = compile(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let spec = esp::spec::parse(spec, &program).unwrap_or_else(|e| panic!("{e}\n{spec}"));
    Machine::new(
        program,
        Options {
            backend,
            spec: Some(spec),
            ..Options::default()
        },
    )
    .unwrap()
}

const PIPE: &str = "
channel input(int) external in;
channel mid(int, int);
channel output(int) external out;
process Src { var x; while (true) { in(input, x); out(mid, 1, x * 2); } }
process Dst { var t, y; while (true) { in(mid, t, y); out(output, y + t); } }
";

#[test]
fn a_pipeline_runs_until_it_waits_for_input_and_resumes_when_fed() {
    for b in BACKENDS {
        let mut m = machine(PIPE, b);
        assert_eq!(m.run().unwrap(), Status::Input, "{b:?}");
        m.push("input", &[1, 2, 3]).unwrap();
        assert_eq!(m.run().unwrap(), Status::Input);
        assert_eq!(m.take_output("output").unwrap(), vec![3, 5, 7], "{b:?}");
        assert_eq!(m.take_output("output").unwrap(), Vec::<i64>::new());
        m.push("input", &[10]).unwrap();
        m.run().unwrap();
        assert_eq!(m.take_output("output").unwrap(), vec![21]);
        let s = m.stats();
        assert_eq!(s.rendezvous, 4, "{b:?}: one rendezvous a message");
        assert_eq!((s.entries, s.aborts), (0, 0));
    }
}

#[test]
fn the_reader_continues_after_a_rendezvous_and_the_writer_waits_in_line() {
    // P offers on c first and blocks; Q's `in` completes it, and Q (the
    // reader) continues to its output before P gets to its own.
    let src = "
channel c(int);
channel o(int) external out;
process P { var a; out(c, 1); out(o, 10); }
process Q { var x; in(c, x); out(o, 20 + x); }
";
    for b in BACKENDS {
        let mut m = machine(src, b);
        assert_eq!(m.run().unwrap(), Status::Halted);
        assert_eq!(m.take_output("o").unwrap(), vec![21, 10], "{b:?}");
    }
    // And when the writer finds the reader blocked, the reader runs next,
    // ahead of the writer's own next statement.
    let src = "
channel c(int);
channel o(int) external out;
process Q { var x; in(c, x); out(o, 20 + x); }
process P { var a; out(c, 1); out(o, 10); }
";
    for b in BACKENDS {
        let mut m = machine(src, b);
        assert_eq!(m.run().unwrap(), Status::Halted);
        assert_eq!(m.take_output("o").unwrap(), vec![21, 10], "{b:?}");
    }
}

#[test]
fn processes_start_ready_in_declaration_order() {
    let src = "
channel o(int) external out;
channel i(int) external in;
process A { var x; out(o, 1); in(i, x); }
process B { var x; out(o, 2); in(i, x); }
process C { var x; out(o, 3); in(i, x); }
";
    for b in BACKENDS {
        let mut m = machine(src, b);
        assert_eq!(m.run().unwrap(), Status::Input);
        assert_eq!(m.take_output("o").unwrap(), vec![1, 2, 3]);
        // The processes blocked on the input are retried in declaration
        // order once there is some.
        m.push("i", &[7, 8, 9]).unwrap();
        assert_eq!(m.run().unwrap(), Status::Halted);
        let (pcs, vars) = m.state();
        assert_eq!(pcs.len(), 3);
        assert_eq!(vars, &[7, 8, 9], "{b:?}");
    }
}

#[test]
fn alt_rotates_its_start_so_no_ready_arm_starves() {
    // Both writers are always ready; the alt must alternate between them.
    let src = "
channel a(int);
channel b(int);
channel o(int) external out;
process W1 { while (true) { out(a, 1); } }
process W2 { while (true) { out(b, 2); } }
process R {
  var x, n;
  while (n < 8) {
    alt {
      in(a, x) { out(o, x); }
      in(b, x) { out(o, x); }
    }
    n = n + 1;
  }
}
";
    for b in BACKENDS {
        let mut m = machine(src, b);
        assert_eq!(
            m.run().unwrap(),
            Status::Deadlock,
            "the writers wait forever once R halts"
        );
        let out = m.take_output("o").unwrap();
        assert_eq!(out.len(), 8);
        let ones = out.iter().filter(|&&x| x == 1).count();
        assert_eq!(ones, 4, "{b:?}: {out:?}");
        assert!(out.windows(2).all(|w| w[0] != w[1]), "{b:?}: {out:?}");
    }
}

#[test]
fn an_alt_blocked_on_all_arms_is_woken_by_any_partner_and_mixes_directions() {
    let src = "
channel req(int);
channel rep(int);
channel i(int) external in;
channel o(int) external out;
process Server {
  var x, pending, n;
  while (n < 6) {
    alt {
      in(req, x) { pending = pending + x; }
      out(rep, pending) { pending = 0; }
    }
    n = n + 1;
  }
}
process Client {
  var v, r;
  while (true) {
    in(i, v);
    out(req, v);
    in(rep, r);
    out(o, r);
  }
}
";
    for b in BACKENDS {
        let mut m = machine(src, b);
        assert_eq!(m.run().unwrap(), Status::Input);
        m.push("i", &[5, 6, 7]).unwrap();
        m.run().unwrap();
        assert_eq!(m.take_output("o").unwrap(), vec![5, 6, 7], "{b:?}");
    }
}

#[test]
fn statuses_say_why_nothing_is_ready() {
    let deadlock = "
channel a(int);
channel b(int);
process P { var x; in(a, x); out(b, 1); }
process Q { var x; in(b, x); out(a, 1); }
";
    for b in BACKENDS {
        assert_eq!(machine(deadlock, b).run().unwrap(), Status::Deadlock);
        assert_eq!(machine(PIPE, b).run().unwrap(), Status::Input);
    }
}

#[test]
fn failed_assertions_and_divisions_stop_the_run_with_the_process_and_position() {
    let src = "
channel i(int) external in;
process P {
  var x, y;
  while (true) {
    in(i, x);
    y = 100 / x;
    assert(y != 50);
  }
}
";
    for b in BACKENDS {
        let mut m = machine(src, b);
        m.push("i", &[5, 0]).unwrap();
        match m.run() {
            Err(Error::DivisionByZero { process, pos }) => {
                assert_eq!(process, "P");
                assert_eq!((pos.line, pos.col), (7, 5), "{b:?}");
            }
            other => panic!("{b:?}: {other:?}"),
        }
        let mut m = machine(src, b);
        m.push("i", &[5, 2]).unwrap();
        match m.run() {
            Err(Error::AssertionFailed { process, pos }) => {
                assert_eq!(process, "P");
                assert_eq!(pos.line, 8, "{b:?}");
                // The failing process stays at the assertion: it fails again.
                assert!(matches!(m.run(), Err(Error::AssertionFailed { .. })));
            }
            other => panic!("{b:?}: {other:?}"),
        }
    }
}

/// A fault leaves the process at the faulting statement, with what its
/// local code did before it: running again retries that statement, and
/// does not run the code before it a second time (`x = x + 1` twice, which
/// it once did, from where the local code had started).
#[test]
fn running_again_after_a_fault_retries_the_faulting_statement() {
    let src = "
channel i(int) external in;
channel o(int) external out;
extern f(int);
process P {
  var x, y;
  while (true) {
    in(i, x);
    x = x + 1;
    y = f(x);
    out(o, x);
  }
}
";
    for b in BACKENDS {
        let mut m = machine(src, b);
        let calls = Rc::new(RefCell::new(Vec::new()));
        let c = calls.clone();
        m.bind_extern_fallible("f", move |a| {
            c.borrow_mut().push(a[0]);
            if c.borrow().len() == 1 {
                Err("not yet".into())
            } else {
                Ok(0)
            }
        })
        .unwrap();
        m.push("i", &[5]).unwrap();
        assert!(matches!(m.run(), Err(Error::Host { .. })), "{b:?}");
        assert_eq!(m.run().unwrap(), Status::Input, "{b:?}");
        assert_eq!(m.take_output("o").unwrap(), [6], "{b:?}");
        assert_eq!(*calls.borrow(), [6, 6], "{b:?}");
    }
}

#[test]
fn arithmetic_is_wrapping_64_bit_and_min_over_minus_one_does_not_trap() {
    let src = "
channel i(int) external in;
channel o(int) external out;
process P {
  var a, b;
  while (true) {
    in(i, a); in(i, b);
    out(o, a / b); out(o, a % b); out(o, a * b); out(o, a << b); out(o, a >> b);
    out(o, -a); out(o, ~a); out(o, !a); out(o, a < b); out(o, a >= b);
    out(o, (a && b) + (a || b) * 2);
  }
}
";
    let cases: [(i64, i64); 6] = [
        (i64::MIN, -1),
        (-7, 2),
        (7, -2),
        (1, 65),
        (-1, 63),
        (0, 0x7fff_ffff_ffff),
    ];
    let mut want = Vec::new();
    for &(a, b) in &cases {
        want.extend([
            a.wrapping_div(b),
            a.wrapping_rem(b),
            a.wrapping_mul(b),
            a.wrapping_shl((b & 63) as u32),
            a.wrapping_shr((b & 63) as u32),
            a.wrapping_neg(),
            !a,
            (a == 0) as i64,
            (a < b) as i64,
            (a >= b) as i64,
            ((a != 0 && b != 0) as i64) + ((a != 0 || b != 0) as i64) * 2,
        ]);
    }
    for b in BACKENDS {
        let mut m = machine(src, b);
        for &(x, y) in &cases {
            m.push("i", &[x, y]).unwrap();
        }
        m.run().unwrap();
        assert_eq!(m.take_output("o").unwrap(), want, "{b:?}");
    }
}

#[test]
fn deep_expressions_and_nested_host_calls_agree_with_the_interpreter() {
    // Deep enough to run out of expression registers; calls inside calls
    // and inside deep operands.
    let src = "
channel i(int) external in;
channel o(int) external out;
extern f(int, int);
extern g(int);
process P {
  var a, b, c;
  while (true) {
    in(i, a);
    b = (a + (a * (a - (a + (a * (a - (a + (a ^ 3)))))))) + f(a, g(a + 1));
    c = ((a + 1) * ((a + 2) * ((a + 3) * ((a + 4) * ((a + 5) * (g(a) + 6)))))) / (f(b, 2) | 1);
    if ((a < b && b < c) || g(c) == 0) { out(o, 1); } else { out(o, 0); }
    out(o, b); out(o, c);
  }
}
";
    let run = |b: Backend| {
        let mut m = machine(src, b);
        let log = Rc::new(RefCell::new(Vec::new()));
        let l = log.clone();
        m.bind_extern("f", move |a| {
            l.borrow_mut().push(('f', a.to_vec()));
            a[0].wrapping_mul(31) ^ a[1]
        })
        .unwrap();
        let l = log.clone();
        m.bind_extern("g", move |a| {
            l.borrow_mut().push(('g', a.to_vec()));
            a[0] % 7 - 3
        })
        .unwrap();
        m.push("i", &[0, 1, -5, 1 << 40, 123_456_789]).unwrap();
        m.run().unwrap();
        let out = m.take_output("o").unwrap();
        (out, log.borrow().clone())
    };
    let reference = run(Backend::Interp);
    assert_eq!(reference.0.len(), 15);
    assert_eq!(run(Backend::Native), reference);
}

#[test]
fn host_functions_must_be_bound_and_their_panics_become_errors() {
    let src = "
channel i(int) external in;
channel o(int) external out;
extern twice(int);
process P { var x; while (true) { in(i, x); out(o, twice(x)); } }
";
    for b in BACKENDS {
        let mut m = machine(src, b);
        assert!(matches!(m.run(), Err(Error::Binding(msg)) if msg.contains("twice")));
        assert!(matches!(
            m.bind_extern("thrice", |_| 0),
            Err(Error::Binding(_))
        ));
        m.bind_extern("twice", |a| {
            if a[0] < 0 {
                panic!("negative");
            }
            a[0] * 2
        })
        .unwrap();
        m.push("i", &[4, -1, 5]).unwrap();
        match m.run() {
            Err(Error::Host { name, msg }) => {
                assert_eq!(name, "twice");
                assert!(msg.contains("negative"), "{msg}");
            }
            other => panic!("{b:?}: {other:?}"),
        }
        assert_eq!(m.take_output("o").unwrap(), vec![8]);
    }
}

#[test]
fn external_channels_bind_to_callbacks_and_the_trace_records_every_event() {
    let src = "
channel i(int, int) external in;
channel o(int) external out;
process P { var a, b; while (true) { in(i, a, b); out(o, a - b); } }
";
    for b in BACKENDS {
        let mut m = machine(src, b);
        let mut feed = vec![vec![9, 4], vec![1, 1]].into_iter();
        m.bind_in("i", move || feed.next()).unwrap();
        let seen = Rc::new(RefCell::new(Vec::new()));
        let s = seen.clone();
        m.bind_out("o", move |f| s.borrow_mut().extend_from_slice(f))
            .unwrap();
        m.set_tracing(true);
        assert_eq!(m.run().unwrap(), Status::Input);
        assert_eq!(*seen.borrow(), vec![5, 0]);
        assert_eq!(
            m.trace(),
            &[
                Event::In {
                    chan: 0,
                    fields: vec![9, 4]
                },
                Event::Out {
                    chan: 1,
                    fields: vec![5]
                },
                Event::In {
                    chan: 0,
                    fields: vec![1, 1]
                },
                Event::Out {
                    chan: 1,
                    fields: vec![0]
                },
            ]
        );
        assert!(
            matches!(m.push("i", &[1, 2]), Err(Error::Binding(_))),
            "bound to a callback"
        );
    }
}

#[test]
fn bindings_are_checked_against_the_channels_kind_and_arity() {
    let mut m = machine(PIPE, Backend::Native);
    assert!(matches!(m.push("output", &[1]), Err(Error::Binding(_))));
    assert!(matches!(m.push("mid", &[1, 2]), Err(Error::Binding(_))));
    assert!(matches!(m.push("nope", &[1]), Err(Error::Binding(_))));
    assert!(matches!(m.take_output("input"), Err(Error::Binding(_))));
    assert!(matches!(
        m.bind_out("input", |_| {}),
        Err(Error::Binding(_))
    ));
    assert!(matches!(
        m.bind_in("output", || None),
        Err(Error::Binding(_))
    ));
    let src = "channel i(int, int) external in; process P { var a, b; in(i, a, b); }";
    let mut m = machine(src, Backend::Native);
    assert!(matches!(m.push("i", &[1, 2, 3]), Err(Error::Binding(_))));
    m.push("i", &[1, 2, 3, 4]).unwrap();
    assert_eq!(m.run().unwrap(), Status::Halted);
    assert_eq!(m.state().1, &[1, 2]);
}

#[test]
fn a_callback_returning_the_wrong_arity_is_an_error_not_a_crash() {
    let src = "channel i(int, int) external in; process P { var a, b; in(i, a, b); }";
    for b in BACKENDS {
        let mut m = machine(src, b);
        m.bind_in("i", || Some(vec![1])).unwrap();
        assert!(matches!(m.run(), Err(Error::Host { .. })), "{b:?}");
    }
}

#[test]
fn native_code_sizes_are_reported_and_listings_are_readable() {
    let m = machine(PIPE, Backend::Native);
    let size = m.code_size();
    assert!(size.processes > 10 && size.processes < 200, "{size:?}");
    assert_eq!((size.fast_paths, size.automaton), (0, 0));
    let listing = m.native().unwrap().processes()[0].listing();
    assert!(listing.contains("ret"), "{listing}");
    assert_eq!(machine(PIPE, Backend::Interp).code_size().processes, 0);
}

#[test]
fn hand_built_programs_that_break_the_invariants_are_rejected() {
    let mut p = compile(PIPE).unwrap();
    if let esp::ir::NodeKind::Comm { next, .. } = &mut p.processes[0]
        .nodes
        .iter_mut()
        .find(|n| matches!(n.kind, esp::ir::NodeKind::Comm { .. }))
        .unwrap()
        .kind
    {
        *next = 999;
    }
    assert!(matches!(
        Machine::new(p, Options::default()),
        Err(Error::Check { .. })
    ));
    let mut p = compile(PIPE).unwrap();
    p.channels[1].arity = 3;
    assert!(matches!(
        Machine::new(p, Options::default()),
        Err(Error::Check { .. })
    ));
}

// -- Fast paths ---------------------------------------------------------------

const CHAIN: &str = "
channel input(int) external in;
channel output(int) external out;
channel c1(int, int);
channel c2(int, int);
process Src {
  var n, b;
  while (true) {
    in(input, n);
    while (n > 0) {
      #1
      in(input, b);
      n = n - 1;
      out(c1, 1, b);
    }
    #2
    out(c1, 0, 0);
  }
}
process Inc {
  var f, b;
  while (true) {
    in(c1, f, b);
    if (f != 0) { out(c2, 1, b + 1); } else { #1 out(c2, 0, 0); }
  }
}
process Sink {
  var f, b, count;
  while (true) {
    in(c2, f, b);
    if (f != 0) { out(output, b); count = count + 1; } else { #1 out(output, -count); count = 0; }
  }
}
";

const CHAIN_SPEC: &str = "
fastpath stream {
  process Src { statement #1, #2; start #1; follows #1*; exit #2; }
  process Inc { statement c1, #1; start c1; follows c1*; exit #1; }
  process Sink { statement c2, #1; start c2; follows c2*; exit #1; }
}
";

fn chain_output(m: &mut Machine, streams: &[&[i64]]) -> Vec<i64> {
    for s in streams {
        m.push("input", &[s.len() as i64]).unwrap();
        m.push("input", s).unwrap();
    }
    assert_eq!(m.run().unwrap(), Status::Input);
    m.take_output("output").unwrap()
}

#[test]
fn a_fast_path_is_a_hint_the_output_is_the_same_and_it_is_entered_and_exited() {
    let streams: [&[i64]; 3] = [&[1, 2, 3, 4], &[], &[9; 300]];
    let reference = chain_output(&mut machine(CHAIN, Backend::Interp), &streams);
    assert_eq!(&reference[..5], &[2, 3, 4, 5, -4]);
    for b in BACKENDS {
        let mut m = with_spec(CHAIN, CHAIN_SPEC, b);
        assert_eq!(chain_output(&mut m, &streams), reference, "{b:?}");
        let s = m.stats();
        assert!(s.entries >= 2, "{b:?}: {s:?}");
        assert!(s.exits >= 2, "{b:?}: {s:?}");
        // The steady state runs on the fast path: far fewer rendezvous in
        // the scheduler than messages.
        assert!(s.rendezvous < 100, "{b:?}: {s:?}");
        // Stream by stream, with the host feeding between runs.
        let mut m = with_spec(CHAIN, CHAIN_SPEC, b);
        let mut out = Vec::new();
        for s in streams {
            out.extend(chain_output(&mut m, &[s]));
        }
        assert_eq!(out, reference, "{b:?}");
    }
}

#[test]
fn a_fast_path_that_aborts_at_once_does_not_loop() {
    // With no input, the path aborts at its first receive; the processes
    // are not checked again at the pcs they left at, so `run` returns.
    for b in BACKENDS {
        let mut m = with_spec(CHAIN, CHAIN_SPEC, b);
        m.push("input", &[2]).unwrap();
        assert_eq!(m.run().unwrap(), Status::Input);
        let s = m.stats();
        assert!(s.entries >= 1 && s.aborts >= 1, "{b:?}: {s:?}");
        m.push("input", &[5, 6]).unwrap();
        m.run().unwrap();
        assert_eq!(m.take_output("output").unwrap(), vec![6, 7, -2], "{b:?}");
    }
}

#[test]
fn a_nondeterministic_fast_path_is_refused_now_and_then() {
    // The server's alt has two arms on the path: extraction takes a
    // nondeterministic choice, and every 4th eligible entry is refused.
    let src = "
channel a(int);
channel b(int);
channel ia(int) external in;
channel o(int) external out;
process Server {
  var x;
  while (true) {
    alt {
      in(a, x) { out(o, x); }
      in(b, x) { out(o, 100 + x); }
    }
  }
}
process ClientA { var v; while (true) { in(ia, v); out(a, v); } }
process ClientB { var v; while (v < 30) { out(b, v); v = v + 1; } }
";
    let spec = "
fastpath serve {
  process Server { statement a as A, b as B; start A; follows (A | B)*; }
  process ClientA { statement a; start a; follows a*; }
}
";
    for backend in BACKENDS {
        let program = compile(src).unwrap();
        let spec = esp::spec::parse(spec, &program).unwrap();
        let mut m = Machine::new(
            program,
            Options {
                backend,
                spec: Some(spec),
                refuse_every: 4,
                ..Options::default()
            },
        )
        .unwrap();
        for i in 0..40 {
            m.push("ia", &[i]).unwrap();
            m.run().unwrap();
        }
        let s = m.stats();
        let nondeterministic = m.fast_paths().any(|g| {
            matches!(
                g.kind,
                esp::fp::Kind::FastPath {
                    nondeterministic: true
                }
            )
        });
        if nondeterministic {
            assert!(s.refusals >= 1, "{backend:?}: {s:?}");
        }
        // Both clients are served completely.
        let out = m.take_output("o").unwrap();
        assert_eq!(
            out.iter().filter(|&&x| x >= 100).count(),
            30,
            "{backend:?}: {out:?}"
        );
        assert!(
            out.iter().filter(|&&x| x < 100).count() == 40,
            "{backend:?}: {out:?}"
        );
    }
}

#[test]
fn traces_are_the_same_with_and_without_fast_paths_and_on_the_automaton() {
    let streams: [&[i64]; 2] = [&[5, 6, 7], &[1; 40]];
    let trace_of = |mut m: Machine| {
        m.set_tracing(true);
        let out = chain_output(&mut m, &streams);
        (out, m.trace().to_vec())
    };
    let reference = trace_of(machine(CHAIN, Backend::Interp));
    assert_eq!(reference.1.len(), (1 + 3) * 2 + (1 + 40) * 2);
    assert!(matches!(reference.1[0], Event::In { chan: 0, .. }));
    for b in BACKENDS {
        assert_eq!(
            trace_of(with_spec(CHAIN, CHAIN_SPEC, b)),
            reference,
            "{b:?}"
        );
    }
    assert_eq!(trace_of(machine(CHAIN, Backend::Automata)), reference);
}

#[test]
fn figure_2_with_figure_5_gives_the_same_packets_on_every_backend() {
    let src = include_str!("../programs/figure2.esp");
    let spec = include_str!("../programs/figure5.fp");
    let run = |mut m: Machine| {
        m.bind_extern("translationUnavailable", |a| (a[0] % 40960 == 0) as i64)
            .unwrap();
        m.bind_extern("translate", |a| a[0] + 0x100000).unwrap();
        m.bind_extern("preparePacket", |a| a[0] * 1000 + a[1] / 4096)
            .unwrap();
        m.set_tracing(true);
        // Requests of one or two pages (under Figure 5's 10000 bytes), one
        // whose translation is unavailable (#2 aborts), a large one (the
        // start predicate fails), and a fetch request in between.
        for (k, pages) in [1i64, 2, 2, 1, 2].iter().enumerate() {
            m.push(
                "hostSendRequestC",
                &[4096 * 16 * (k as i64 + 1), 4096 * pages],
            )
            .unwrap();
            assert_eq!(m.run().unwrap(), Status::Input);
        }
        m.push("hostSendRequestC", &[40960 * 3, 4096]).unwrap();
        m.push("hostSendRequestC", &[4096 * 100, 4096 * 3]).unwrap();
        m.push("hostFetchRequestC", &[7]).unwrap();
        m.push("hostSendRequestC", &[4096 * 200, 4096 * 2]).unwrap();
        assert_eq!(m.run().unwrap(), Status::Input);
        let packets = m.take_output("networkSendC").unwrap();
        (packets, m.stats())
    };
    let program = compile(src).unwrap();
    let (reference, _) = run(Machine::new(
        program,
        Options {
            backend: Backend::Interp,
            ..Options::default()
        },
    )
    .unwrap());
    assert_eq!(reference.len(), 1 + 2 + 2 + 1 + 2 + 1 + 3 + 2);
    for b in BACKENDS {
        let (packets, stats) = run(with_spec(src, spec, b));
        assert_eq!(packets, reference, "{b:?}");
        // Each small request enters the path (but for the entries refused
        // for fairness: the alt makes it nondeterministic), which exits
        // after the first packet (networkSend's `exit #3`).
        assert!(stats.refusals >= 1, "{b:?}: {stats:?}");
        assert!(stats.exits + stats.refusals >= 5, "{b:?}: {stats:?}");
        assert!(stats.aborts >= 2, "{b:?}: {stats:?}");
    }
}

// -- The automaton --------------------------------------------------------------

#[test]
fn the_automaton_suspends_for_input_resumes_and_agrees_with_the_interpreter() {
    let streams: [&[i64]; 3] = [&[1, 2, 3, 4], &[], &[9; 50]];
    let reference = chain_output(&mut machine(CHAIN, Backend::Interp), &streams);
    let mut m = machine(CHAIN, Backend::Automata);
    assert!(m.automaton().is_some());
    let mut out = Vec::new();
    for s in streams {
        out.extend(chain_output(&mut m, &[s]));
    }
    assert_eq!(out, reference);
    let s = m.stats();
    assert!(s.suspends >= 3, "{s:?}");
    assert_eq!(s.aborts, 0, "{s:?}");
    assert_eq!(s.rendezvous, 0, "no process-based rendezvous: {s:?}");
    let size = m.code_size();
    assert!(size.automaton > 0 && size.processes > 0, "{size:?}");
    // All at once, too.
    let mut m = machine(CHAIN, Backend::Automata);
    assert_eq!(chain_output(&mut m, &streams), reference);
}

#[test]
fn an_automaton_that_aborts_hands_over_to_the_process_based_code() {
    // The assertion fails on the third message: the automaton aborts before
    // it and the process-based code reports it, with the messages before it
    // delivered.
    let src = "
channel i(int) external in;
channel c(int);
channel o(int) external out;
process A { var x; while (true) { in(i, x); out(c, x); } }
process B { var y; while (true) { in(c, y); assert(y != 3); out(o, y * 10); } }
";
    let mut m = machine(src, Backend::Automata);
    m.push("i", &[1, 2]).unwrap();
    assert_eq!(m.run().unwrap(), Status::Input);
    m.push("i", &[3, 4]).unwrap();
    match m.run() {
        Err(Error::AssertionFailed { process, pos }) => {
            assert_eq!((process.as_str(), pos.line), ("B", 6))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m.take_output("o").unwrap(), vec![10, 20]);
    assert!(m.stats().aborts >= 1);
    // A program that halts: the automaton aborts at the end, and the
    // process-based code finds every process halted.
    let src = "
channel c(int);
channel o(int) external out;
process A { out(c, 5); }
process B { var y; in(c, y); out(o, y + 1); }
";
    let mut m = machine(src, Backend::Automata);
    assert_eq!(m.run().unwrap(), Status::Halted);
    assert_eq!(m.take_output("o").unwrap(), vec![6]);
}

#[test]
fn the_automaton_backend_refuses_programs_with_alt() {
    let src = "
channel a(int);
channel b(int);
process W { while (true) { out(a, 1); out(b, 2); } }
process R { var x; while (true) { alt { in(a, x) { } in(b, x) { } } } }
";
    let program = compile(src).unwrap();
    let r = Machine::new(
        program,
        Options {
            backend: Backend::Automata,
            ..Options::default()
        },
    );
    assert!(matches!(r, Err(Error::Unsupported { .. })), "{r:?}");
}

// -- Loops that never yield --------------------------------------------------

/// `Counter` counts to each number it reads, in a loop through no channel
/// operation: for a negative one it would count for 2^64 steps.
const COUNTER: &str = "
channel i(int) external in;
channel o(int) external out;
process Counter {
  var x, n;
  while (true) {
    in(i, n);
    x = 0;
    while (x != n) { x = x + 1; }
    out(o, x);
  }
}
";

/// A fast path over `Counter`'s messages, whose graph contains the loop.
const COUNTER_FP: &str =
    "fastpath f { process Counter { statement i, o; start i; follows (o i)*; } }";

/// Every way `esp run` runs a program: each backend, and the two that take
/// a specification with it.
const CONFIGS: [(Backend, bool); 5] = [
    (Backend::Interp, false),
    (Backend::Native, false),
    (Backend::Automata, false),
    (Backend::Interp, true),
    (Backend::Native, true),
];

fn bounded(src: &str, spec: Option<&str>, backend: Backend, limit: u64) -> Machine {
    let program = compile(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let spec = spec.map(|s| esp::spec::parse(s, &program).unwrap_or_else(|e| panic!("{e}\n{s}")));
    Machine::new(
        program,
        Options {
            backend,
            spec,
            max_local_iterations: limit,
            ..Options::default()
        },
    )
    .unwrap()
}

/// The position of process `p`'s pc.
fn at(m: &Machine, p: usize) -> (u32, u32) {
    let pc = m.state().0[p];
    let pos = m.program().processes[p].nodes[pc as usize].pos;
    (pos.line, pos.col)
}

#[test]
fn a_loop_that_never_yields_stops_the_run_with_the_process_and_the_loop() {
    for (b, fp) in CONFIGS {
        let mut m = bounded(COUNTER, fp.then_some(COUNTER_FP), b, 1000);
        m.push("i", &[3, 5, -1, 7]).unwrap();
        let e = m.run().unwrap_err();
        match &e {
            Error::Diverges {
                process,
                pos,
                limit,
            } => {
                assert_eq!(process, "Counter");
                assert_eq!((pos.line, pos.col, *limit), (9, 5, 1000), "{b:?} {fp}");
            }
            other => panic!("{b:?} {fp}: {other:?}"),
        }
        assert!(
            e.to_string().starts_with(
                "9:5: process Counter ran more than 1000 loop iterations without a channel operation"
            ),
            "{e}"
        );
        // The messages before the loop were delivered, and the process
        // stays at the loop's head: running again goes on counting.
        assert_eq!(m.take_output("o").unwrap(), vec![3, 5], "{b:?} {fp}");
        assert_eq!(at(&m, 0), (9, 5), "{b:?} {fp}");
        assert!(matches!(m.run(), Err(Error::Diverges { .. })), "{b:?} {fp}");
        assert_eq!(at(&m, 0), (9, 5), "{b:?} {fp}");
    }
}

/// The process-based backends count exactly: a loop of `n` iterations
/// passes with a bound of `n` and is reported with `n - 1`; reported, it
/// resumes where it stopped, with a fresh count, and computes what it
/// would have. Graphs (fast paths, the automaton) never report a loop
/// within the bound either.
#[test]
fn the_bound_is_exact_and_a_reported_loop_resumes_where_it_stopped() {
    for (b, fp) in CONFIGS {
        let mut m = bounded(COUNTER, fp.then_some(COUNTER_FP), b, 2500);
        m.push("i", &[2500, 10, 2500]).unwrap();
        assert_eq!(m.run(), Ok(Status::Input), "{b:?} {fp}");
        assert_eq!(m.take_output("o").unwrap(), vec![2500, 10, 2500]);
    }
    for b in BACKENDS {
        let mut m = bounded(COUNTER, None, b, 2499);
        m.push("i", &[2500]).unwrap();
        assert!(matches!(m.run(), Err(Error::Diverges { limit: 2499, .. })));
        let mut m = bounded(COUNTER, None, b, 1000);
        m.push("i", &[2500, 4]).unwrap();
        // 1,000 iterations, 1,000 more, then the last 500 and the 4.
        for _ in 0..2 {
            assert!(matches!(m.run(), Err(Error::Diverges { limit: 1000, .. })));
            assert_eq!(m.take_output("o").unwrap(), Vec::<i64>::new());
        }
        assert_eq!(m.run(), Ok(Status::Input), "{b:?}");
        assert_eq!(m.take_output("o").unwrap(), vec![2500, 4], "{b:?}");
    }
}

/// A loop through a statement where a fast path may start returns to the
/// runtime on every iteration (to try the path); its count goes on across
/// those returns rather than starting afresh.
#[test]
fn a_loop_through_a_fast_path_start_is_counted_across_the_returns() {
    let src = "
channel c(int);
channel o(int) external out;
process P { var x; out(o, 1); while (true) { #1 x = x + 1; } }
process Q { var y; in(c, y); #2 out(o, y); }
process R { out(c, 2); }
";
    // Q is never at #2 while P loops (P never yields): never entered.
    let spec = "fastpath f {
  process P { statement #1; start #1; }
  process Q { statement #2; start #2; }
}";
    for b in BACKENDS {
        let mut m = bounded(src, Some(spec), b, 100);
        match m.run() {
            Err(Error::Diverges { process, pos, .. }) => {
                assert_eq!((process.as_str(), pos.line), ("P", 4), "{b:?}")
            }
            other => panic!("{b:?}: {other:?}"),
        }
        assert_eq!(m.stats().entries, 0);
        assert_eq!(m.take_output("o").unwrap(), vec![1]);
    }
}

/// A library host running untrusted programs gets the bound without asking.
#[test]
fn the_library_bounds_loops_by_default() {
    assert_eq!(
        Options::default().max_local_iterations,
        esp::ir::DEFAULT_MAX_LOCAL_ITERATIONS
    );
    let mut m = machine(COUNTER, Backend::Native);
    m.push("i", &[-1]).unwrap();
    assert!(
        matches!(
            m.run(),
            Err(Error::Diverges { limit, .. }) if limit == esp::ir::DEFAULT_MAX_LOCAL_ITERATIONS
        ),
        "the default bound stops a loop that never yields"
    );
}

/// The automaton is the whole program, with no fast paths: a specification
/// with it is refused by the library, with what to do instead, not ignored.
#[test]
fn the_automaton_backend_refuses_a_specification() {
    let program = compile(COUNTER).unwrap();
    let spec = esp::spec::parse(COUNTER_FP, &program).unwrap();
    let e = Machine::new(
        program,
        Options {
            backend: Backend::Automata,
            spec: Some(spec),
            ..Options::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        e,
        Error::SpecWithAutomata {
            fast_paths: vec!["f".into()]
        }
    );
    let text = e.to_string();
    assert!(
        text.contains("(f) cannot be used with the automata backend")
            && text.contains("run the specification on the native or interp backend"),
        "{text}"
    );
}

// -- Counted loops: the count charged at the loop's entry ------------------------------------

/// A counted loop (`while (k < n)` with `k = k + 1` its only change), which
/// the compiled graphs charge once at its entry rather than per iteration.
const SUM: &str = "
channel i(int) external in;
channel o(int) external out;
process Sum {
  var s, k, n;
  while (true) {
    in(i, n);
    s = 0; k = 0;
    while (k < n) { s = s + k; k = k + 1; }
    out(o, s);
  }
}
";

const SUM_FP: &str = "fastpath f { process Sum { statement i, o; start i; follows (o i)*; } }";

fn sum_below(n: u64) -> i64 {
    (0..n as i64).sum()
}

/// On the process-based backends a counted loop of exactly the bound
/// passes and one more iteration stops at the loop's head, resumable; in a
/// graph (a fast path, the automaton) it passes without an abort, one more
/// aborts to the process-based code, which finishes it with a full budget,
/// so that `2 * bound + 1` iterations pass and one more stops at the head:
/// the charge at the loop's entry keeps every one of these points.
#[test]
fn a_counted_loop_of_the_bound_passes_and_one_more_is_stopped_on_every_backend() {
    let bound = 300u64;
    for (b, fp) in CONFIGS {
        let graph = fp || b == Backend::Automata;
        let at = format!("{b:?}, fast path {fp}");
        let run = |n: u64| {
            let mut m = bounded(SUM, fp.then_some(SUM_FP), b, bound);
            m.push("i", &[n as i64]).unwrap();
            let r = m.run();
            (m, r)
        };
        let (mut m, r) = run(bound);
        assert_eq!(r, Ok(Status::Input), "{at}");
        assert_eq!(m.take_output("o").unwrap(), vec![sum_below(bound)], "{at}");
        let aborts = m.stats().aborts;
        let (mut m, r) = run(bound + 1);
        let stopped_at = if graph {
            assert_eq!(r, Ok(Status::Input), "{at}");
            if b == Backend::Automata {
                // (A fast path also aborts at the empty queue after it.)
                assert_eq!(
                    (aborts, m.stats().aborts),
                    (0, 1),
                    "{at}: one abort, at the loop"
                );
            }
            assert_eq!(m.take_output("o").unwrap(), vec![sum_below(bound + 1)]);
            let (mut m, r) = run(2 * bound + 1);
            assert_eq!(r, Ok(Status::Input), "{at}");
            assert_eq!(m.take_output("o").unwrap(), vec![sum_below(2 * bound + 1)]);
            2 * bound + 2
        } else {
            drop(r);
            bound + 1
        };
        let (mut m, r) = run(stopped_at);
        match r {
            Err(Error::Diverges {
                process,
                pos,
                limit,
            }) => {
                assert_eq!(
                    (process.as_str(), pos.line, pos.col, limit),
                    ("Sum", 9, 5, bound),
                    "{at}"
                )
            }
            other => panic!("{at}: {other:?}"),
        }
        assert_eq!(m.take_output("o").unwrap(), Vec::<i64>::new(), "{at}");
        assert_eq!(at_pos(&m), (9, 5), "{at}");
        // Running again goes on from the head and finishes the loop.
        assert_eq!(m.run(), Ok(Status::Input), "{at}");
        assert_eq!(
            m.take_output("o").unwrap(),
            vec![sum_below(stopped_at)],
            "{at}"
        );
    }
}

fn at_pos(m: &Machine) -> (u32, u32) {
    at(m, 0)
}

/// Loops of every shape the charge handles or must refuse, each reading
/// `(n, stop)` and sending `(k, s)`.
const SHAPES: [&str; 7] = [
    // Counted, until equal: `n = -1` never ends.
    "k = 0; while (k != n) { s = s + 1; k = k + 1; }",
    // A break, then a loop that is not counted (the refund of the first
    // decides where the second stops).
    "k = 0; while (k < n) { if (k == stop) { break; } s = s + k; k = k + 1; }
     x = n; while (x > 0) { x = x - 2; }",
    // The increment before the break.
    "k = 0; while (k < n) { k = k + 1; if (k == stop) { break; } s = s + k; }
     x = stop; while (x > 0) { x = x - 3; }",
    // The bound changes in the body: not counted.
    "k = 0; while (k < n) { k = k + 1; n = n - 1; s = s + n; }",
    // Nested: the inner loop is counted, the outer is not.
    "k = 0; while (k < n) { x = 0; while (x < stop) { s = s + x; x = x + 1; } k = k + 1; }",
    // A branch in the body (two counts a way round in a graph), a break in
    // one arm.
    "k = 0; while (k < n) { if (k & 1) { s = s + 3; if (s > stop) { break; } } else { s = s - 1; } k = k + 1; }
     x = stop; while (x > 0) { x = x - 3; }",
    // Counting down to a constant.
    "k = n; while (k > 0) { k = k - 1; s = s + k; }",
];

/// Runs `m` on `input` to the end, running again after each report of a
/// loop that never yields (at most `runs` times): what happened, in order,
/// and the messages sent.
fn drive(m: &mut Machine, input: &[i64], runs: usize) -> (Vec<String>, Vec<i64>) {
    m.push("i", input).unwrap();
    let mut events = Vec::new();
    let mut sent = Vec::new();
    for _ in 0..runs {
        let r = m.run();
        sent.extend(m.take_output("o").unwrap());
        match r {
            Err(Error::Diverges { process, pos, .. }) => events.push(format!(
                "diverges {process} {}:{} after {} fields",
                pos.line,
                pos.col,
                sent.len()
            )),
            other => {
                events.push(format!("{other:?}"));
                break;
            }
        }
    }
    (events, sent)
}

/// The same programs on every backend, with and without fast paths, on
/// random inputs whose loops run from 0 to past twice the bound (and for
/// ever): the same messages in the end, the same first report of a loop
/// that never yields (the same loop, after the same messages) where one
/// never ends, exactly the same reports and statistics between the two
/// process-based backends and between the two runs of each graph (its
/// interpreter against its compiled code, which charges counted loops at
/// their entry).
#[test]
fn counted_loops_agree_on_every_backend() {
    let bound = 25u64;
    let runs = 400;
    for (shape, body) in SHAPES.iter().enumerate() {
        let src = format!(
            "channel i(int, int) external in;
channel o(int, int) external out;
process P {{
  var s, k, n, stop, x;
  while (true) {{
    in(i, n, stop);
    {body}
    out(o, k, s);
  }}
}}"
        );
        let spec = "fastpath f { process P { statement i, o; start i; follows (o i)*; } }";
        let mut seed = 0x1234_5678u64 ^ shape as u64;
        let mut next = |below: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % below
        };
        for trial in 0..40 {
            let mut input = Vec::new();
            for _ in 0..1 + next(4) {
                let n = match next(12) {
                    0 if shape == 0 => -1,
                    1 => bound as i64,
                    2 => bound as i64 + 1,
                    3 => 2 * bound as i64 + 1,
                    4 => 2 * bound as i64 + 2,
                    _ => next(3 * bound) as i64,
                };
                input.extend([n, next(2 * bound + 4) as i64 - 2]);
            }
            let mut results = Vec::new();
            for (b, fp) in CONFIGS {
                let mut m = bounded(&src, fp.then_some(spec), b, bound);
                let (events, sent) = drive(&mut m, &input, runs);
                results.push((b, fp, events, sent, m.stats()));
            }
            let at = format!("shape {shape}, trial {trial}, input {input:?}\n{src}");
            let (_, _, ev0, sent0, _) = &results[0];
            let endless = ev0.len() == runs && ev0.iter().all(|e| e.starts_with("diverges"));
            for (b, fp, events, sent, _) in &results {
                // The same messages; where a loop never ends, reported
                // there after them, for ever.
                assert_eq!(sent, sent0, "{b:?} {fp}: {at}");
                assert_eq!(events.last(), ev0.last(), "{b:?} {fp}: {at}");
                if endless {
                    assert!(
                        events.len() == runs && events.iter().all(|e| e.starts_with("diverges")),
                        "{b:?} {fp}: {events:?} {at}"
                    );
                }
            }
            // Interp and native, without and with the fast path: exactly alike.
            let same = |x: usize, y: usize| {
                let (bx, fx, ex, sx, tx) = &results[x];
                let (_, _, ey, sy, ty) = &results[y];
                assert_eq!((ex, sx, tx), (ey, sy, ty), "{bx:?} {fx}: {at}");
            };
            assert_eq!(
                (CONFIGS[0], CONFIGS[1]),
                ((Backend::Interp, false), (Backend::Native, false))
            );
            assert_eq!(
                (CONFIGS[3], CONFIGS[4]),
                ((Backend::Interp, true), (Backend::Native, true))
            );
            same(0, 1);
            same(3, 4);
        }
    }
}
