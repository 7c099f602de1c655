//! Long left-associative chains as a specification: `x + 1 + 1 + ... + 1`
//! with 100,000 terms is a flat chain, not nesting. It parses, lowers to
//! bounded steps (no expression in the program deeper than
//! `sema::MAX_EXPR_DEPTH`), and the interpreter, native code, fast-path
//! extraction and compilation, the automaton and the model checker all
//! handle it on a 1 MiB stack, computing what the chain means. Real nesting
//! (parentheses) keeps its limit, with a line:column error.

use esp::ir::{Expr, NodeKind};
use esp::runtime::{Backend, Machine, Options, Status};

const TERMS: usize = 100_000;

/// `a` is `x + 99,999`; `b` is `x != 0` through an `&&` chain; `c` calls
/// `f(x)` before a parenthesized chain that must be split into steps, and is
/// `f(x) - (x - 99,999)`.
fn program() -> String {
    let plus = " + 1".repeat(TERMS - 1);
    let and = " && 1".repeat(TERMS - 1);
    let minus = " - 1".repeat(TERMS - 1);
    format!(
        "channel input(int) external in;
         channel output(int, int, int) external out;
         extern f(int);
         process P {{
           var x, a, b, c;
           while (true) {{
             in(input, x);
             a = x{plus};
             b = x{and};
             c = f(x) + (x{minus});
             out(output, a, b, c);
           }}
         }}"
    )
}

const SPEC: &str = "fastpath steady { process P {
    statement input, output; start input; follows output (input output)*; } }";

fn depth(e: &Expr) -> u32 {
    match e {
        Expr::Const(_) | Expr::Var(_) => 1,
        Expr::Unary(_, a) => 1 + depth(a),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => 1 + depth(a).max(depth(b)),
        Expr::Call(_, args) => 1 + args.iter().map(depth).max().unwrap_or(0),
    }
}

fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    // A stack overflow aborts the test binary; a panic fails `join`.
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

fn expected(inputs: &[i64]) -> Vec<i64> {
    let n = TERMS as i64 - 1;
    inputs
        .iter()
        .flat_map(|&x| [x + n, (x != 0) as i64, 2 * x + (x - n)])
        .collect()
}

#[test]
fn a_100000_term_chain_compiles_to_bounded_steps() {
    on_small_stack(|| {
        let p = esp::compile(&program()).unwrap();
        let mut assigns = 0;
        for node in &p.processes[0].nodes {
            let e = match &node.kind {
                NodeKind::Assign { value, .. } => {
                    assigns += 1;
                    value
                }
                NodeKind::Branch { cond, .. } | NodeKind::Assert { cond, .. } => cond,
                NodeKind::Eval { value, .. } => value,
                _ => continue,
            };
            assert!(depth(e) <= esp::sema::MAX_EXPR_DEPTH + 1, "{}", depth(e));
        }
        // About one step per 100 operators, for each of the three chains.
        assert!((2_900..3_100).contains(&assigns), "{assigns}");
    });
}

#[test]
fn every_backend_runs_a_100000_term_chain_on_a_small_stack() {
    on_small_stack(|| {
        let inputs = [0, 5, -7, 1 << 40];
        for (backend, spec) in [
            (Backend::Interp, false),
            (Backend::Native, false),
            (Backend::Interp, true),
            (Backend::Native, true),
            (Backend::Automata, false),
        ] {
            let program = esp::compile(&program()).unwrap();
            let spec = spec.then(|| esp::spec::parse(SPEC, &program).unwrap());
            let with_spec = spec.is_some();
            let mut m = Machine::new(
                program,
                Options {
                    backend,
                    spec,
                    ..Options::default()
                },
            )
            .unwrap_or_else(|e| panic!("{backend:?} spec {with_spec}: {e}"));
            m.bind_extern("f", |args| 2 * args[0]).unwrap();
            for &x in &inputs {
                m.push("input", &[x]).unwrap();
            }
            assert_eq!(m.run().unwrap(), Status::Input);
            assert_eq!(
                m.take_output("output").unwrap(),
                expected(&inputs),
                "{backend:?} spec {with_spec}"
            );
        }
    });
}

#[test]
fn the_checker_and_the_fast_path_dump_handle_a_100000_term_chain() {
    on_small_stack(|| {
        let program = esp::compile(&program()).unwrap();
        let options = esp::mc::CheckOptions {
            max_inputs: 2,
            ..esp::mc::CheckOptions::default()
        };
        let report = esp::mc::check(&program, &options).unwrap();
        assert!(report.is_ok(), "{report}");
        let spec = esp::spec::parse(SPEC, &program).unwrap();
        let mut g = esp::explore::fast_path(
            &program,
            &spec.fastpaths[0],
            &esp::explore::ExploreOptions::default(),
        )
        .unwrap();
        esp::opt::optimize(&program, &mut g);
        let native = esp::fpgen::compile(&g, &program).unwrap();
        assert!(!g.display(&program).to_string().is_empty());
        assert!(native.instructions() > 0);
    });
}

#[test]
fn parentheses_keep_a_nesting_limit_with_line_and_column() {
    let src = format!(
        "process P {{ var a;\n  a = {}1{}; }}",
        "(".repeat(200),
        ")".repeat(200)
    );
    let e = esp::compile(&src).unwrap_err().to_string();
    assert!(
        e.starts_with("2:106: syntax error: nested more than 100 levels deep"),
        "{e}"
    );
}

#[test]
fn a_long_chain_keeps_evaluation_order_and_short_circuits() {
    // `g(1)` runs before the steps of the chain that starts with `g(2)`;
    // `k`'s first argument, `g(3)`, before the steps of its second, which
    // start with `g(4)`. The chain in the `&&` right operand is pure (`z`
    // is 0, not a constant, so nothing folds), so evaluating it early is
    // unobservable.
    let chain = " + 1".repeat(500);
    let src = format!(
        "channel o(int, int, int) external out; extern g(int); extern k(int, int);
         process P {{ var z, a, b, c; a = g(1) + (g(2){chain}); b = z && (a{chain});
           c = k(g(3), g(4){chain}); out(o, a, b, c); }}"
    );
    let program = esp::compile(&src).unwrap();
    for backend in [Backend::Interp, Backend::Native] {
        let mut m = Machine::new(
            program.clone(),
            Options {
                backend,
                ..Options::default()
            },
        )
        .unwrap();
        let calls = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let seen = calls.clone();
        m.bind_extern("g", move |args| {
            seen.borrow_mut().push(args[0]);
            args[0] * 10
        })
        .unwrap();
        m.bind_extern("k", |args| args[0] - args[1]).unwrap();
        assert_eq!(m.run().unwrap(), Status::Halted);
        assert_eq!(*calls.borrow(), vec![1, 2, 3, 4], "{backend:?}");
        assert_eq!(
            m.take_output("o").unwrap(),
            vec![10 + 20 + 500, 0, 30 - (40 + 500)]
        );
    }
    // A right operand of `&&` that would have to be split and calls a host
    // function cannot run early: it is refused where the operator is.
    let src = format!(
        "extern g(int);
         process P {{ var a; a = a && (g(1){chain}); }}"
    );
    let e = esp::compile(&src).unwrap_err().to_string();
    assert!(e.starts_with("2:35: the right operand of `&&`"), "{e}");
}
