//! What one `Applet::call` of a benchmark method costs on the JIT, for
//! callgrind: the calls of `fastpath bench jive` (`Applet::call(method,
//! &[n], None)`, fuel metering on with a budget never reached) in a
//! function of their own, so that `--toggle-collect` counts only them.
//!
//! ```text
//! cargo build --release -p jive --example call_count
//! for r in 1000 2000; do
//!   valgrind --tool=callgrind --toggle-collect=call_count_loop --callgrind-out-file=/dev/null \
//!     target/release/examples/call_count fibonacci 40 $r
//! done   # (Ir(2000) - Ir(1000)) / 1000 = instructions per call of fibonacci(40)
//! ```
//!
//! Arguments: the method of `applets/src/Bench.java`, its `n`, the calls
//! (default 1000), and `int` to run on the interpreter instead.

use std::hint::black_box;

use jive::{Applet, Engine, Limits, Method, Natives};

/// `reps` calls of `m(n)`, as the bench's `jive_once` makes them.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn call_count_loop(a: &mut Applet, m: &Method, n: i32, reps: u32) -> i64 {
    let mut sum = 0i64;
    for _ in 0..reps {
        match a.call(m, &[black_box(n)], None) {
            Ok(o) => sum += i64::from(o.value.unwrap_or(0)),
            Err(_) => return -1,
        }
    }
    sum
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let method = args.first().map_or("fibonacci", String::as_str);
    let n: i32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(40);
    let reps: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let engine = if args.get(3).map(String::as_str) == Some("int") {
        Engine::Interpreter
    } else {
        Engine::Jit
    };
    let Some(dir) = jive::APPLET_CLASSES else {
        eprintln!("the applets were not compiled (javac was missing when jive was built)");
        std::process::exit(2);
    };
    let path = std::path::Path::new(dir).join("default/Bench.class");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let limits = Limits {
        fuel: Some(u64::MAX / 2),
        ..Limits::default()
    };
    let mut a = Applet::load_with_engine(&bytes, &Natives::new(), limits, engine)
        .unwrap_or_else(|e| panic!("Bench.class: {e}"));
    let m = a.method(method).unwrap_or_else(|e| panic!("{method}: {e}"));
    // One call outside the count (first-use set-up).
    let first = call_count_loop(&mut a, &m, n, 1);
    let t = std::time::Instant::now();
    let sum = call_count_loop(&mut a, &m, n, reps);
    let ns = t.elapsed().as_secs_f64() * 1e9 / f64::from(reps);
    println!(
        "{method}({n}) x {reps} on {:?}: first {first}, sum {sum}, {ns:.2} ns per call (wall clock)",
        a.engine()
    );
}
