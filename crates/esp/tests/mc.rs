//! The model checker (`fastpath esp check`): it finds planted deadlocks,
//! assertion failures and divisions by zero with shortest traces, proves
//! the paper's filter programs and Figure 2 free of them on small inputs,
//! and judges observed traces (`accepts`).

use std::sync::Arc;

use esp::ir::Pos;
use esp::mc::{self, CheckOptions, Event, ExternModel, StepKind, Violation};

fn compile(src: &str) -> esp::ir::Program {
    esp::compile(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn check(src: &str) -> mc::Report {
    mc::check(&compile(src), &CheckOptions::default()).expect("check runs")
}

#[test]
fn two_processes_sending_to_each_other_deadlock_at_once() {
    let r = check(
        "channel a(int); channel b(int);
         process P { var x; out(a, 1); in(b, x); }
         process Q { var y; out(b, 2); in(a, y); }",
    );
    let Some(Violation::Deadlock { stuck }) = &r.violation else {
        panic!("no deadlock: {r}")
    };
    let who: Vec<(&str, Pos)> = stuck.iter().map(|b| (b.process.as_str(), b.pos)).collect();
    assert_eq!(
        who,
        [
            ("P", Pos { line: 2, col: 29 }),
            ("Q", Pos { line: 3, col: 29 })
        ]
    );
    assert_eq!(stuck[0].waits, "out(a)");
    // The shortest trace is the start alone.
    assert_eq!(r.trace.len(), 1);
    assert_eq!(r.trace[0].kind, StepKind::Start);
    let text = r.to_string();
    assert!(text.contains("deadlock: process P waits forever at 2:29 on out(a), process Q waits forever at 3:29 on out(b)"), "{text}");
    assert!(text.contains("1. start"), "{text}");
}

#[test]
fn a_deadlock_that_needs_one_particular_input_is_found_with_that_input() {
    // P sends on b before a when it receives 2; Q always expects a first.
    let r = check(
        "channel req(int) external in; channel a(int); channel b(int); channel log(int) external out;
         process P { var x; while (true) { in(req, x); if (x == 2) { out(b, x); } out(a, x); } }
         process Q { var y; while (true) { in(a, y); if (y == 2) { in(b, y); } out(log, y); } }",
    );
    let Some(Violation::Deadlock { stuck }) = &r.violation else {
        panic!("no deadlock: {r}")
    };
    assert_eq!(stuck.len(), 2);
    assert_eq!(r.trace.len(), 2, "{r}");
    let StepKind::Input {
        chan,
        process,
        values,
        ..
    } = &r.trace[1].kind
    else {
        panic!("{r}")
    };
    assert_eq!(
        (chan.as_str(), process.as_str(), values.as_slice()),
        ("req", "P", &[2][..])
    );
    // The search stops at the first violation: it is not exhaustive.
    assert!(!r.exhaustive && r.stopped.is_none(), "{r}");
    assert!(
        r.to_string()
            .contains("NOT exhaustive: stopped at the first violation after"),
        "{r}"
    );
}

#[test]
fn waiting_for_more_input_is_not_a_deadlock() {
    // A pipeline that has consumed its (bounded) input and waits for more.
    let r = check(
        "channel req(int) external in; channel a(int); channel log(int) external out;
         process P { var x; while (true) { in(req, x); out(a, x + 1); } }
         process Q { var y; while (true) { in(a, y); out(log, y * 2); } }",
    );
    assert!(r.is_ok(), "{r}");
    // Three inputs of three values each, interleaved with the pipeline.
    assert!(r.states > 40, "{r}");
}

#[test]
fn a_process_stuck_behind_a_live_one_is_not_deadlocked_but_two_waiting_on_each_other_are() {
    // R waits on c, which only S writes; S waits on external input, so R
    // could still move. T and U wait on each other: stuck whatever comes.
    let src = "channel inp(int) external in; channel c(int); channel d(int); channel e(int);
         process S { var x; while (true) { in(inp, x); if (x == 7) { out(c, x); } } }
         process R { var y; in(c, y); }
         process T { var z; in(d, z); out(e, z); }
         process U { var w; in(e, w); out(d, w); }";
    let r = check(src);
    let Some(Violation::Deadlock { stuck }) = &r.violation else {
        panic!("{r}")
    };
    let names: Vec<&str> = stuck.iter().map(|b| b.process.as_str()).collect();
    assert_eq!(names, ["T", "U"]);
}

#[test]
fn an_assertion_failure_is_found_with_a_shortest_trace() {
    let src = "channel inp(int) external in;
process P {
  var x, y;
  in(inp, x);
  in(inp, y);
  assert(x + y != 3);
}";
    let r = check(src);
    assert_eq!(
        r.violation,
        Some(Violation::AssertionFailed {
            process: "P".into(),
            pos: Pos { line: 6, col: 3 }
        }),
        "{r}"
    );
    assert_eq!(r.trace.len(), 3, "{r}");
    let sent: Vec<i64> = r.trace[1..]
        .iter()
        .map(|s| match &s.kind {
            StepKind::Input { values, .. } => values[0],
            k => panic!("{k:?}"),
        })
        .collect();
    assert_eq!(sent.iter().sum::<i64>(), 3);
    let text = r.to_string();
    assert!(
        text.starts_with("6:3: assertion failed in process P\ntrace (3 steps):"),
        "{text}"
    );
    assert!(
        text.contains("the environment sends (") && text.contains(") on inp to P (4:3)"),
        "{text}"
    );
}

#[test]
fn an_assertion_failure_across_processes_shows_every_rendezvous() {
    let src = "channel inp(int) external in; channel mid(int, int);
process A { var x; while (true) { in(inp, x); out(mid, x, x * 2); } }
process B { var u, v; while (true) { in(mid, u, v); assert(u + v < 6); } }";
    let r = check(src);
    assert_eq!(
        r.violation,
        Some(Violation::AssertionFailed {
            process: "B".into(),
            pos: Pos { line: 3, col: 53 }
        }),
        "{r}"
    );
    assert_eq!(r.trace.len(), 3, "{r}");
    assert!(
        matches!(&r.trace[1].kind, StepKind::Input { values, .. } if values == &[2]),
        "{r}"
    );
    let StepKind::Rendezvous {
        chan,
        writer,
        reader,
        values,
        writer_pos,
        reader_pos,
    } = &r.trace[2].kind
    else {
        panic!("{r}")
    };
    assert_eq!(
        (chan.as_str(), writer.as_str(), reader.as_str()),
        ("mid", "A", "B")
    );
    assert_eq!(values, &[2, 4]);
    assert_eq!(
        (*writer_pos, *reader_pos),
        (Pos { line: 2, col: 47 }, Pos { line: 3, col: 38 })
    );
    assert!(
        r.to_string()
            .contains("A (2:47) sends (2, 4) on mid to B (3:38)"),
        "{r}"
    );
}

#[test]
fn a_division_by_zero_is_found() {
    let r = check(
        "channel inp(int) external in; channel out1(int) external out;
         process P { var x, z; while (true) { in(inp, x); z = 10 / (x - 1); out(out1, z); } }",
    );
    assert_eq!(
        r.violation,
        Some(Violation::DivisionByZero {
            process: "P".into(),
            pos: Pos { line: 2, col: 59 }
        }),
        "{r}"
    );
    assert!(
        matches!(&r.trace[1].kind, StepKind::Input { values, .. } if values == &[1]),
        "{r}"
    );
}

#[test]
fn host_functions_return_any_domain_value_unless_modelled() {
    let src = "channel inp(int) external in; channel o(int) external out; extern f(int);
         process P { var x; while (true) { in(inp, x); x = f(x); assert(x != 2); out(o, x); } }";
    let program = compile(src);
    let r = mc::check(&program, &CheckOptions::default()).unwrap();
    assert!(
        matches!(r.violation, Some(Violation::AssertionFailed { .. })),
        "{r}"
    );
    let calls = &r.trace.last().unwrap().calls;
    assert_eq!((calls[0].name.as_str(), calls[0].result), ("f", 2), "{r}");
    assert!(r.to_string().contains("P calls f(0) = 2"), "{r}");

    let mut options = CheckOptions::default();
    options
        .externs
        .insert("f".into(), ExternModel::Function(Arc::new(|a| a[0] * 3)));
    let r = mc::check(&program, &options).unwrap();
    assert!(r.is_ok(), "{r}");
    options
        .externs
        .insert("f".into(), ExternModel::Values(vec![5, 6]));
    assert!(mc::check(&program, &options).unwrap().is_ok());
}

#[test]
fn a_loop_that_never_yields_is_reported() {
    let r = mc::check(
        &compile(
            "channel c(int);
             process P { var x; in(c, x); while (true) { x = x + 1; } }
             process Q { out(c, 1); }",
        ),
        &CheckOptions {
            max_local_steps: 10_000,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    assert!(
        matches!(&r.violation, Some(Violation::Diverges { process, .. }) if process == "P"),
        "{r}"
    );
}

#[test]
fn the_state_bound_makes_a_report_not_exhaustive() {
    let src = "channel inp(int) external in; channel o(int) external out;
         process P { var x, s; while (true) { in(inp, x); s = s * 3 + x; out(o, s); } }";
    let program = compile(src);
    let full = mc::check(&program, &CheckOptions::default()).unwrap();
    assert!(full.is_ok(), "{full}");
    let cut = mc::check(
        &program,
        &CheckOptions {
            max_states: 5,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    assert!(!cut.exhaustive && cut.violation.is_none());
    assert_eq!(cut.states, 5);
    assert!(cut.to_string().contains("NOT exhaustive"));
}

#[test]
fn per_channel_domains_and_input_bounds_shape_the_search() {
    let src = "channel inp(int) external in;
         process P { var x, n; while (true) { in(inp, x); n = n + 1; assert(x != 9 || n < 3); } }";
    let program = compile(src);
    // The default domain never sends 9.
    assert!(
        mc::check(&program, &CheckOptions::default())
            .unwrap()
            .is_ok()
    );
    let mut options = CheckOptions::default();
    options.domains.insert("inp".into(), vec![9]);
    let r = mc::check(&program, &options).unwrap();
    assert!(
        matches!(r.violation, Some(Violation::AssertionFailed { .. })),
        "{r}"
    );
    assert_eq!(r.trace.len(), 4);
    options.max_inputs = 2;
    assert!(mc::check(&program, &options).unwrap().is_ok());
}

#[test]
fn options_that_do_not_fit_the_program_are_errors() {
    let program = compile("channel inp(int) external in; process P { var x; in(inp, x); }");
    let mut options = CheckOptions::default();
    options.domains.insert("nope".into(), vec![1]);
    assert!(
        matches!(mc::check(&program, &options), Err(esp::Error::Binding(m)) if m.contains("nope"))
    );
    let options = CheckOptions {
        domain: vec![],
        ..CheckOptions::default()
    };
    assert!(
        matches!(mc::check(&program, &options), Err(esp::Error::Binding(m)) if m.contains("empty"))
    );
    let mut options = CheckOptions::default();
    options.externs.insert("g".into(), ExternModel::Any);
    assert!(mc::check(&program, &options).is_err());
}

#[test]
fn a_malformed_program_is_an_error_not_a_panic() {
    let mut program = compile("channel inp(int) external in; process P { var x; in(inp, x); }");
    if let esp::ir::NodeKind::Comm { next, .. } = &mut program.processes[0].nodes[0].kind {
        *next = 99;
    }
    assert!(matches!(
        mc::check(&program, &CheckOptions::default()),
        Err(esp::Error::Check { .. })
    ));
}

#[test]
fn the_four_filter_programs_are_deadlock_free_on_small_inputs() {
    for (i, f) in esp::filters::PROGRAMS.iter().enumerate() {
        let program = compile(f.source);
        // Three messages of input: a stream of length 2 and two bytes, or
        // shorter streams; every value out of {0, 2, 0x7D, 0x7E} (PES's
        // special bytes).
        let mut options = CheckOptions {
            max_inputs: 3,
            ..CheckOptions::default()
        };
        options
            .domains
            .insert("arrayIn".into(), vec![0, 2, 0x7D, 0x7E]);
        let r = mc::check(&program, &options).unwrap();
        assert!(r.is_ok(), "program {}: {r}", i + 1);
        assert!(r.states > 20, "program {}: only {} states", i + 1, r.states);
    }
}

#[test]
fn figure_2_holds_its_assertions_when_the_host_sends_whole_pages() {
    let program = compile(esp::filters::FIGURE2);
    let mut options = CheckOptions::default();
    options
        .domains
        .insert("hostSendRequestC".into(), vec![0, 4096, 8192]);
    options.max_inputs = 2;
    let r = mc::check(&program, &options).unwrap();
    assert!(r.is_ok(), "{r}");
    // With arbitrary addresses the assumptions of Figure 2 are violated, by
    // translateAddress, after the request has crossed over.
    let r = mc::check(&program, &CheckOptions::default()).unwrap();
    let Some(Violation::AssertionFailed { process, .. }) = &r.violation else {
        panic!("{r}")
    };
    assert_eq!(process, "translateAddress");
    assert!(
        matches!(&r.trace[2].kind, StepKind::Rendezvous { chan, .. } if chan == "translateRequestC"),
        "{r}"
    );
}

// --- accepts ----------------------------------------------------------------

const MERGE: &str =
    "channel x(int) external in; channel y(int) external in; channel o(int) external out;
channel m(int);
process A { var v; while (true) { in(x, v); out(m, v); } }
process B { var v; while (true) { in(y, v); out(m, v + 10); } }
process M { var v; while (true) { alt { in(m, v) { out(o, v); } } } }";

fn ev_in(chan: u32, v: i64) -> Event {
    Event::In {
        chan,
        fields: vec![v],
    }
}

fn ev_out(chan: u32, v: i64) -> Event {
    Event::Out {
        chan,
        fields: vec![v],
    }
}

#[test]
fn accepts_every_interleaving_of_a_merge_and_nothing_else() {
    let program = compile(MERGE);
    let (x, y, o) = (0, 1, 2);
    let inputs = vec![(x, vec![1, 2]), (y, vec![5])];
    let options = CheckOptions::default();
    let ok = |trace: &[Event]| mc::accepts(&program, &inputs, trace, &options).unwrap();
    // x's messages in order, y's anywhere.
    assert!(ok(&[
        ev_in(x, 1),
        ev_out(o, 1),
        ev_in(x, 2),
        ev_out(o, 2),
        ev_in(y, 5),
        ev_out(o, 15)
    ]));
    assert!(ok(&[
        ev_in(y, 5),
        ev_in(x, 1),
        ev_out(o, 15),
        ev_out(o, 1),
        ev_in(x, 2),
        ev_out(o, 2)
    ]));
    assert!(ok(&[
        ev_in(x, 1),
        ev_in(y, 5),
        ev_out(o, 1),
        ev_in(x, 2),
        ev_out(o, 15),
        ev_out(o, 2)
    ]));
    // A value the program never sends.
    assert!(!ok(&[
        ev_in(x, 1),
        ev_out(o, 1),
        ev_in(x, 2),
        ev_out(o, 2),
        ev_in(y, 5),
        ev_out(o, 5)
    ]));
    // x's order broken.
    assert!(!ok(&[
        ev_in(x, 1),
        ev_in(x, 2),
        ev_out(o, 2),
        ev_out(o, 1),
        ev_in(y, 5),
        ev_out(o, 15)
    ]));
    // Stopping before the program is idle.
    assert!(!ok(&[ev_in(x, 1), ev_out(o, 1), ev_in(x, 2), ev_out(o, 2)]));
    // An input nobody was given.
    assert!(!ok(&[
        ev_in(x, 3),
        ev_out(o, 3),
        ev_in(x, 2),
        ev_out(o, 2),
        ev_in(y, 5),
        ev_out(o, 15)
    ]));
    // Three reads of x can hold at most two messages... and this trace
    // consumed a third input that was never queued.
    assert!(!ok(&[
        ev_in(x, 1),
        ev_out(o, 1),
        ev_in(x, 2),
        ev_out(o, 2),
        ev_in(y, 5),
        ev_out(o, 15),
        ev_in(x, 1)
    ]));
}

#[test]
fn accepts_models_host_functions() {
    let src = "channel x(int) external in; channel o(int) external out; extern f(int);
         process P { var v; while (true) { in(x, v); out(o, f(v)); } }";
    let program = compile(src);
    let mut options = CheckOptions::default();
    options
        .externs
        .insert("f".into(), ExternModel::Function(Arc::new(|a| a[0] + 100)));
    let inputs = vec![(0, vec![4])];
    assert!(mc::accepts(&program, &inputs, &[ev_in(0, 4), ev_out(1, 104)], &options).unwrap());
    assert!(!mc::accepts(&program, &inputs, &[ev_in(0, 4), ev_out(1, 4)], &options).unwrap());
}

#[test]
fn accepts_rejects_inputs_that_are_not_whole_messages() {
    let program = compile("channel x(int, int) external in; process P { var a, b; in(x, a, b); }");
    let e = mc::accepts(
        &program,
        &[(0, vec![1, 2, 3])],
        &[],
        &CheckOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, esp::Error::Binding(m) if m.contains("whole number")));
    assert!(
        mc::accepts(
            &program,
            &[(0, vec![1, 2])],
            &[Event::In {
                chan: 0,
                fields: vec![1, 2]
            }],
            &CheckOptions::default()
        )
        .unwrap()
    );
}

/// A program whose state space grows with every input: `s` keeps each
/// input's value.
const GROWING: &str = "channel inp(int) external in; channel o(int) external out;
     process P { var x, s; while (true) { in(inp, x); s = s * 3 + x; out(o, s); } }";

#[test]
fn the_memory_budget_stops_the_search_and_says_how_deep_it_is_complete() {
    let program = compile(GROWING);
    let options = CheckOptions {
        max_inputs: 1000,
        max_memory: 200 * mc::state_bytes(6),
        ..CheckOptions::default()
    };
    let r = mc::check(&program, &options).unwrap();
    assert!(!r.exhaustive && r.violation.is_none(), "{r}");
    assert_eq!(r.stopped, Some(mc::Bound::Memory(options.max_memory)));
    // Never more states than the budget holds (a state takes at least
    // `state_bytes(1)`), and not far fewer.
    assert!(
        r.states * mc::state_bytes(1) <= options.max_memory,
        "{}",
        r.states
    );
    assert!(r.states >= 100, "{}", r.states);
    // Inputs 3^k states deep: the levels of 1, 3, 9, 27 and 81 states fit.
    assert!(r.complete_depth >= 4, "{}", r.complete_depth);
    let text = r.to_string();
    assert!(text.contains("memory budget"), "{text}");
    assert!(text.contains("--max-memory"), "{text}");
    assert!(
        text.contains(&format!("within {} transitions", r.complete_depth)),
        "{text}"
    );
}

#[test]
fn the_state_bound_names_its_flag_and_the_depth_covered() {
    let r = mc::check(
        &compile(GROWING),
        &CheckOptions {
            max_inputs: 1000,
            max_states: 50,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    assert_eq!(r.stopped, Some(mc::Bound::States(50)));
    assert!(r.to_string().contains("--max-states"), "{r}");
}

#[test]
fn progress_is_reported_while_the_search_runs() {
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = calls.clone();
    let r = mc::check(
        &compile(GROWING),
        &CheckOptions {
            max_inputs: 1000,
            max_states: 3 * mc::PROGRESS_EVERY,
            progress: Some(mc::ProgressFn(Arc::new(move |p| {
                seen.lock().unwrap().push(p)
            }))),
            ..CheckOptions::default()
        },
    )
    .unwrap();
    let calls = calls.lock().unwrap();
    assert!(calls.len() >= 2, "{}", calls.len());
    assert!(calls.windows(2).all(|w| w[0].explored < w[1].explored));
    assert!(calls.iter().all(|p| p.states <= r.states && p.bytes > 0));
}

#[test]
fn a_finite_loop_longer_than_the_step_limit_says_the_limit() {
    let src = "channel c(int) external out;
         process P { var i; while (i < 20000) { i = i + 1; } out(c, i); }";
    let program = compile(src);
    let short = mc::check(
        &program,
        &CheckOptions {
            max_local_steps: 10_000,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    assert!(
        matches!(
            &short.violation,
            Some(Violation::Diverges { limit: 10_000, .. })
        ),
        "{short}"
    );
    let text = short.to_string();
    assert!(text.contains("more than 10000 steps"), "{text}");
    assert!(text.contains("--max-local-steps"), "{text}");
    let long = mc::check(
        &program,
        &CheckOptions {
            max_local_steps: 100_000,
            ..CheckOptions::default()
        },
    )
    .unwrap();
    assert!(long.is_ok(), "{long}");
}

/// The search stops at the first violation, so a report with one is never
/// exhaustive: it says after how many states it stopped. The program with
/// an `assert` stops after 3 states, where without it the search explores
/// 19 (and is exhaustive); the same for a deadlock, a division by zero and
/// the step limit (which stops before the first state).
#[test]
fn a_report_that_stops_at_a_violation_is_not_exhaustive() {
    let with = |body: &str| {
        format!(
            "channel i(int) external in; channel o(int) external out;
             process P {{ var a; while (true) {{ in(i, a); {body} out(o, a); }} }}"
        )
    };
    let full = check(&with(""));
    assert!(full.exhaustive && full.is_ok(), "{full}");
    assert_eq!(full.states, 19, "{full}");
    assert!(full.to_string().contains("exhaustive within the bounds"));
    let cases = [
        with("assert(a != 2);"),
        with("a = 10 / (a - 2);"),
        "channel a(int); channel b(int);
         process P { var x; out(a, 1); in(b, x); }
         process Q { var y; out(b, 2); in(a, y); }"
            .to_string(),
    ];
    for src in &cases {
        let r = check(src);
        assert!(r.violation.is_some(), "{r}");
        assert!(!r.exhaustive && !r.is_ok() && r.stopped.is_none(), "{r}");
        assert!(r.states < full.states, "{r}");
        let text = r.to_string();
        assert!(
            text.contains(&format!(
                "NOT exhaustive: stopped at the first violation after {} states",
                r.states
            )) && !text.contains("exhaustive within the bounds"),
            "{text}"
        );
    }
    let options = CheckOptions {
        max_local_steps: 0,
        ..CheckOptions::default()
    };
    let r = mc::check(&compile(&with("")), &options).unwrap();
    assert!(
        matches!(r.violation, Some(Violation::Diverges { .. })),
        "{r}"
    );
    assert!(!r.exhaustive && r.states == 0, "{r}");
    assert!(
        r.to_string()
            .contains("NOT exhaustive: stopped at the first violation after 0 states"),
        "{r}"
    );
}
