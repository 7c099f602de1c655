//! `StoreRelease::st_release`: the 64-bit word is stored at `base + off`,
//! natively (x86-64: a plain `mov`, nothing else), on the reference
//! backend, and on aarch64 under emulation (`dmb ish`, then the store:
//! `aarch64_smoke.rs`).

use vcode::ext::StoreRelease;
use vcode::{Func, Leaf, P, Reference, UL};

mod common;

type StoreFn = unsafe extern "C" fn(*mut u64, u64);

#[test]
fn st_release_stores_the_word() {
    // Each base register (a temporary or a persistent one) in turn.
    for k in 0..10 {
        let code = common::on_base_register(k, |f, base, v0| {
            f.st_release(v0, base, 8);
            f.retv();
        });
        #[cfg(target_arch = "x86_64")]
        {
            let d = code.disassemble();
            assert!(!d.contains("fence") && !d.contains("lock"), "{d}");
        }
        // SAFETY: the signature "%p%ul"; the code stores only the word at
        // +8 of its pointer.
        let g = unsafe { code.as_fn::<StoreFn>() }.expect("as_fn");
        let mut w = [1u64, 2, 3];
        // SAFETY: `w` has a word at byte 8.
        unsafe { g(w.as_mut_ptr(), 0x0100_0007_0000_0028) };
        assert_eq!(w, [1, 0x0100_0007_0000_0028, 3], "base register #{k}");
    }
    let mut f = Func::<Reference>::with_backend();
    let a = f.lambda("%p%ul", Leaf::Yes).expect("lambda");
    let (p0, v0) = (a.get::<P>(0).expect("p"), a.get::<UL>(1).expect("v"));
    f.st_release(v0, p0, 8);
    f.retv();
    let code = f.end().expect("end");
    let mut w = [1u64, 2, 3];
    let args = [
        vcode::Value::P(w.as_mut_ptr() as usize),
        vcode::Value::UL(0x0100_0007_0000_0028),
    ];
    // SAFETY: as above.
    unsafe { vcode::Invoke::invoke(&code, &args) }.expect("invoke");
    assert_eq!(w, [1, 0x0100_0007_0000_0028, 3]);
}
