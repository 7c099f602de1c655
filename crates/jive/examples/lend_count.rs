//! What a lent `byte[]` costs an invocation (`Applet::lend`,
//! `Applet::prepare_lending`), for callgrind: each way of invoking in a
//! function of its own, so that `--toggle-collect` counts it per call.
//!
//! ```text
//! cargo build --release -p jive --example lend_count
//! valgrind --tool=callgrind --toggle-collect=lend_count_plain \
//!     --toggle-collect=lend_count_in_lend --toggle-collect=lend_count_lend \
//!     target/release/examples/lend_count jit 100000
//! callgrind_annotate --inclusive=yes callgrind.out.<pid>
//! ```
//!
//! Each function runs `N` times (argument 2, default 100,000), on the
//! engine of argument 1 (`jit` or `int`), on `applets/src/Lending.java`:
//!
//! - `lend_count_plain`: `plain(int, int)` (`a + b`), prepared
//!   ([`Applet::run_prepared`]): an invocation of two ints, no lend;
//! - `lend_count_in_lend`: `length(byte[] msg, int n)` (`msg.length`)
//!   inside one lend made before: the lent call's own cost (the handle
//!   stored into the arguments) and the body's `arraylength`;
//! - `lend_count_lend`: the lend made, `length` run, the lend ended, per
//!   call: a host that lends each message (unet's `doRx`).
//!
//! `lend_count_lend` less `lend_count_in_lend` is the lend and its end.

use std::hint::black_box;

use jive::{Applet, Engine, Lend, Limits, Natives, Prepared, PreparedLending};

/// One plain prepared invocation.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn lend_count_plain(a: &mut Applet, p: &mut Prepared<2>, x: i32) -> i32 {
    a.run_prepared(p, [x, 16], None).value().unwrap_or(-1)
}

/// One lent invocation inside a lend made before.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn lend_count_in_lend(l: &mut Lend<'_>, p: &mut PreparedLending<2>, x: i32) -> i32 {
    l.run_prepared(p, [0, x], None).value().unwrap_or(-1)
}

/// A lend, one lent invocation, the lend's end.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn lend_count_lend(a: &mut Applet, p: &mut PreparedLending<2>, msg: &[u8], x: i32) -> i32 {
    // SAFETY: `msg` outlives the lend, which ends in this function;
    // nothing writes it meanwhile.
    match unsafe { a.lend(msg.as_ptr(), msg.len()) } {
        Ok(mut l) => l.run_prepared(p, [0, x], None).value().unwrap_or(-1),
        Err(_) => -2,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let engine = match args.next().as_deref() {
        Some("int") => Engine::Interpreter,
        _ => Engine::Jit,
    };
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let Some(dir) = jive::APPLET_CLASSES else {
        eprintln!("javac was not found at build time: no applets");
        return;
    };
    let bytes = std::fs::read(format!("{dir}/default/Lending.class")).expect("Lending.class");
    let mut a = Applet::load_with_engine(&bytes, &Natives::new(), Limits::default(), engine)
        .expect("Lending loads");
    let mut plain = a.prepare::<2>("plain").expect("plain");
    let mut length = a.prepare_lending::<2>("length", 0).expect("length");
    let msg = vec![7u8; 40];
    let mut sum = 0i64;
    for i in 0..n {
        sum += i64::from(lend_count_plain(&mut a, &mut plain, black_box(i as i32)));
    }
    {
        // SAFETY: `msg` outlives the lend, dropped at the end of this
        // block; nothing writes it.
        let mut l = unsafe { a.lend(msg.as_ptr(), msg.len()) }.expect("a lend");
        for i in 0..n {
            sum += i64::from(lend_count_in_lend(&mut l, &mut length, black_box(i as i32)));
        }
    }
    for i in 0..n {
        sum += i64::from(lend_count_lend(
            &mut a,
            &mut length,
            black_box(&msg),
            i as i32,
        ));
    }
    println!("{engine:?}: {n} calls each, checksum {sum}");
}
