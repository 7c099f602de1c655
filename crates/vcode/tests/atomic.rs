//! `Atomic::swap32`: the old word comes back zero-extended, the new one is
//! stored, natively and on the reference backend, with every base register
//! the encodings treat specially (r12: a SIB byte; r8..r15: REX); and the
//! native exchange is atomic: two threads swapping tokens through one
//! word never lose or duplicate one.

use vcode::ext::Atomic;
use vcode::{Func, Leaf, P, Reference, UL};

mod common;

type SwapFn = unsafe extern "C" fn(*mut u32, u64) -> u64;

#[test]
fn swap32_returns_the_old_word_and_stores_the_new() {
    // Each base register (a temporary or a persistent one) in turn.
    for k in 0..10 {
        let code = common::on_base_register(k, |f, base, v0| {
            f.swap32(v0, base, 4);
            f.ret(v0);
        });
        // SAFETY: the signature "%p%ul" returning a ul; the code touches
        // only the word at +4 of its pointer.
        let g = unsafe { code.as_fn::<SwapFn>() }.expect("as_fn");
        let mut w = [0u32, 0xdead_beef, 0];
        // SAFETY: `w` has a word at byte 4.
        let old = unsafe { g(w.as_mut_ptr(), 0xffff_ffff_0000_0007) };
        assert_eq!(old, 0xdead_beef, "base register #{k}");
        assert_eq!(w, [0, 7, 0], "base register #{k}");
    }
    let mut f = Func::<Reference>::with_backend();
    let a = f.lambda("%p%ul", Leaf::Yes).expect("lambda");
    let (p0, v0) = (a.get::<P>(0).expect("p"), a.get::<UL>(1).expect("v"));
    f.swap32(v0, p0, 4);
    f.ret(v0);
    let code = f.end().expect("end");
    let mut w = [0u32, 0xdead_beef, 0];
    let args = [
        vcode::Value::P(w.as_mut_ptr() as usize),
        vcode::Value::UL(0xffff_ffff_0000_0007),
    ];
    // SAFETY: as above.
    let old = unsafe { vcode::Invoke::invoke(&code, &args) }.expect("invoke");
    assert_eq!(old, vcode::Value::UL(0xdead_beef));
    assert_eq!(w, [0, 7, 0]);
}

#[test]
fn native_swap32_is_atomic() {
    let mut f = Func::new();
    assert!(f.atomic_available());
    let a = f.lambda("%p%ul", Leaf::Yes).expect("lambda");
    let (p0, v0) = (a.get::<P>(0).expect("p"), a.get::<UL>(1).expect("v"));
    f.swap32(v0, p0, 0);
    f.ret(v0);
    let code = f.end().expect("end");
    // SAFETY: as above.
    let g = unsafe { code.as_fn::<SwapFn>() }.expect("as_fn");
    let word = std::sync::atomic::AtomicU32::new(0);
    let addr = word.as_ptr() as usize;
    // Each thread swaps in its own distinct tokens and keeps what it got
    // out; with a non-atomic exchange two threads could both take the
    // same token and a token would be lost.
    let n = 100_000u64;
    let taken: Vec<Vec<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u64)
            .map(|t| {
                s.spawn(move || {
                    (0..n)
                        // SAFETY: the word lives through the scope.
                        .map(|i| unsafe { g(addr as *mut u32, 1 + t * n + i) })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let mut all: Vec<u64> = taken.into_iter().flatten().collect();
    all.push(u64::from(word.load(std::sync::atomic::Ordering::SeqCst)));
    all.sort_unstable();
    let want: Vec<u64> = (0..=2 * n).collect();
    assert!(all == want, "a token was lost or duplicated");
}
