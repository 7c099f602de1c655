//! `data` and `addr_data`: constant tables placed with a function's code,
//! read on both backends, next to float constants from the same pool, and
//! the typed error for data of another function.

use vcode::{Backend, Class, D, Func, Invoke, Leaf, P, Reference, UL, Value, X64};

/// `f(i, x) = table[i] + 2.5 * x` style: reads a table of `n` u64s (and,
/// natively, a float constant shares the pool) and returns `table[i]`.
fn lookup<B: Backend>(tables: &[Vec<u64>]) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%ul%ul", Leaf::Yes)?;
    let (which, i) = (p.get::<UL>(0)?, p.get::<UL>(1)?);
    let d: Vec<_> = tables
        .iter()
        .map(|t| {
            let bytes: Vec<u8> = t.iter().flat_map(|v| v.to_le_bytes()).collect();
            f.data(&bytes)
        })
        .collect();
    // A float constant in the same pool, between and after the tables.
    let x = f.getreg::<D>(Class::Temp)?;
    f.set(x, 2.5f64);
    let base = f.getreg::<P>(Class::Temp)?;
    let done = f.genlabel();
    for (k, &h) in d.iter().enumerate() {
        let next = f.genlabel();
        f.bne(which, k as u64, next);
        f.addr_data(base, h);
        f.lsh(i, i, 3);
        f.ld(i, base, i.cast::<P>());
        f.jmp(done);
        f.label(next);
    }
    f.set(i, u64::MAX);
    f.label(done);
    f.ret(i);
    f.end()
}

fn call(code: &(impl Invoke + ?Sized), which: u64, i: u64) -> u64 {
    // SAFETY: the function reads table `which` at index `i` < its length.
    match unsafe { code.invoke(&[Value::UL(which), Value::UL(i)]) }.unwrap() {
        Value::UL(v) => v,
        v => panic!("{v:?}"),
    }
}

#[test]
fn tables_read_back_on_both_backends() {
    let tables: Vec<Vec<u64>> = (0..5u64)
        .map(|t| {
            (0..(1 + t * 37))
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ t)
                .collect()
        })
        .collect();
    let native = lookup::<X64>(&tables).unwrap();
    let reference = lookup::<Reference>(&tables).unwrap();
    for (k, t) in tables.iter().enumerate() {
        for (i, &want) in t.iter().enumerate() {
            assert_eq!(call(&native, k as u64, i as u64), want);
            assert_eq!(call(&reference, k as u64, i as u64), want);
        }
    }
}

#[test]
fn data_of_another_function_is_a_typed_error() {
    let mut f = Func::new();
    let _ = f.lambda("%ul", Leaf::Yes).unwrap();
    let r = f.getreg::<P>(Class::Temp).unwrap();
    let mut g = Func::new();
    let _ = g.lambda("%ul", Leaf::Yes).unwrap();
    let foreign = g.data(&[1, 2, 3]);
    f.addr_data(r, foreign);
    f.retv();
    let e = f.end().unwrap_err();
    assert_eq!(e.method(), "addr_data");
    assert_eq!(*e.kind(), vcode::ErrorKind::UnknownData { data: 0 });
}
