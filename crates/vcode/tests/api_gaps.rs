//! Small API pieces a compiler client needs, on both backends: a conversion into the
//! same register (`cv_in_place`), the number of registers `getreg` would
//! still hand out (`free_regs`), the fixed names parameters arrive in
//! (`Params::fixed`), and the size of `vcode::Error`.

use vcode::{
    Backend, Class, D, F, Func, I, Invoke, L, Leaf, P, Reference, Reg, Type, U, UL, Value, X64,
};

/// `S -> D` in place, run natively and on the reference backend.
fn in_place<S: Type, D: Type, B: Backend>(sig: &str, arg: Value) -> Value {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda(sig, Leaf::Yes).unwrap();
    let x = p.get::<S>(0).unwrap();
    let y = f.cv_in_place::<D>(x);
    assert_eq!(y.num(), x.num(), "the same register");
    f.ret(y);
    let code = f.end().unwrap();
    // SAFETY: register arithmetic only.
    unsafe { code.invoke(&[arg]) }.unwrap()
}

fn both<S: Type, D: Type>(sig: &str, arg: Value, want: Value) {
    let native = in_place::<S, D, X64>(sig, arg);
    let reference = in_place::<S, D, Reference>(sig, arg);
    assert!(
        native.same(want),
        "native {sig} {arg:?}: {native:?}, want {want:?}"
    );
    assert!(
        reference.same(want),
        "reference {sig} {arg:?}: {reference:?}, want {want:?}"
    );
}

#[test]
fn cv_in_place_converts_in_the_same_register() {
    for v in [0i32, 1, -1, i32::MIN, i32::MAX, 0x1234_5678] {
        both::<I, P>("%i", Value::I(v), Value::P(v as i64 as usize));
        both::<I, L>("%i", Value::I(v), Value::L(v as i64));
        both::<I, U>("%i", Value::I(v), Value::U(v as u32));
        both::<U, UL>("%u", Value::U(v as u32), Value::UL(v as u32 as u64));
        both::<U, P>("%u", Value::U(v as u32), Value::P(v as u32 as usize));
    }
    for v in [0i64, -1, i64::MIN, 0x1234_5678_9abc_def0] {
        both::<L, I>("%l", Value::L(v), Value::I(v as i32));
        both::<UL, U>("%ul", Value::UL(v as u64), Value::U(v as u32));
    }
    for v in [0.0f32, -1.5, 1e30, f32::INFINITY] {
        both::<F, D>("%f", Value::F(v), Value::D(v as f64));
    }
    for v in [0.0f64, -1.5, 1e300, 3.25] {
        both::<D, F>("%d", Value::D(v), Value::F(v as f32));
    }
}

/// `free_regs` is what `getreg` still hands out, for every class and
/// register file, leaf or not, and drops when a fixed name is used.
fn free_regs_count<B: Backend>() {
    for leaf in [Leaf::Yes, Leaf::No] {
        for (class, float) in [
            (Class::Temp, false),
            (Class::Persistent, false),
            (Class::Temp, true),
            (Class::Persistent, true),
        ] {
            let mut f = Func::<B>::with_backend();
            f.lambda("%p%i%d", leaf).unwrap();
            let take = |f: &mut Func<B>| {
                if float {
                    f.getreg::<D>(class).is_ok()
                } else {
                    f.getreg::<L>(class).is_ok()
                }
            };
            let count = |f: &Func<B>| {
                if float {
                    f.free_regs::<D>(class)
                } else {
                    f.free_regs::<L>(class)
                }
            };
            let n = count(&f);
            assert!(n > 0, "{class:?} float={float} {leaf:?}");
            // A fixed name in use is no longer free.
            if float {
                f.set(Reg::<D>::t(0), 1.0);
            } else {
                f.set(Reg::<L>::t(0), 1);
            }
            let fixed_was_free = count(&f) == n - 1;
            let n = count(&f);
            let mut got = 0;
            while take(&mut f) {
                got += 1;
                assert_eq!(count(&f), n - got);
            }
            assert_eq!(got, n, "{class:?} float={float} {leaf:?}");
            // T0 is in the temporary pools (not among the persistent
            // integer registers of a non-leaf function).
            if class == Class::Temp || float || leaf == Leaf::Yes {
                assert!(fixed_was_free, "{class:?} float={float} {leaf:?}");
            }
            f.retv();
            f.end().unwrap();
        }
    }
}

#[test]
fn free_regs_is_what_getreg_hands_out() {
    free_regs_count::<X64>();
    free_regs_count::<Reference>();
}

/// The fixed names of parameters, the same on both backends.
fn fixed_names<B: Backend>() -> Vec<Option<usize>> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p%i%d%f%l%l", Leaf::Yes).unwrap();
    assert_eq!(p.get::<P>(0).unwrap(), Reg::<P>::t(5));
    assert_eq!(p.get::<I>(1).unwrap(), Reg::<I>::t(4));
    assert_eq!(p.get::<D>(2).unwrap(), Reg::<D>::t(14));
    assert_eq!(p.get::<F>(3).unwrap(), Reg::<F>::t(13));
    let names = (0..p.len()).map(|i| p.fixed(i)).collect();
    f.retv();
    f.end().unwrap();
    names
}

#[test]
fn params_name_their_fixed_registers() {
    // The third integer parameter arrives in rdx = T3; the fourth would
    // arrive in rcx, which the backend keeps, so it is copied into a
    // register from getreg: r10 = T0.
    let want = vec![Some(5), Some(4), Some(14), Some(13), Some(3), Some(0)];
    assert_eq!(fixed_names::<X64>(), want);
    assert_eq!(fixed_names::<Reference>(), want);
    let mut f = Func::new();
    assert_eq!(f.lambda("", Leaf::Yes).unwrap().fixed(0), None);
}
