//! Tests of [`crate::workload`], kept apart so that the workload file
//! holds only the workload.

use crate::workload::*;
use vcode::{Func, Invoke, Value};

#[test]
fn counts_are_about_100_and_equal() {
    let (v, x, e) = instruction_counts().unwrap();
    assert_eq!(v, x);
    assert!((95..=110).contains(&v), "{v}");
    assert!(e <= 2, "{e}");
}

#[test]
fn the_branchy_variants_agree_with_each_other_and_the_reference() {
    let n = branchy_count().unwrap();
    assert!((85..=110).contains(&n), "{n}");
    let mut f = Func::new();
    let virt = branchy_virtual(&mut f).unwrap();
    let fixed = branchy_fixed(&mut f).unwrap();
    assert_eq!(virt.bytes(), fixed.bytes());
    let mut r = Func::<vcode::Reference>::with_backend();
    let refc = branchy_virtual(&mut r).unwrap();
    for n in [1, 2, 5, 40] {
        let (got, buf) = run_native(&virt, n).unwrap();
        let mut rbuf: Vec<u8> = (0..MIXED_BUF_BYTES).map(|i| (i * 7 + 3) as u8).collect();
        // SAFETY: the reference backend checks every access; the program
        // writes buf[0..32] of MIXED_BUF_BYTES.
        let want =
            unsafe { refc.invoke(&[Value::P(rbuf.as_mut_ptr() as usize), Value::I(n)]) }.unwrap();
        assert_eq!(Value::I(got), want, "n = {n}");
        assert_eq!(buf, rbuf, "n = {n}");
    }
}

#[test]
fn both_variants_emit_identical_code_that_matches_the_reference() {
    let mut f = Func::new();
    let virt = mixed_virtual(&mut f).unwrap();
    let fixed = mixed_fixed(&mut f).unwrap();
    assert_eq!(virt.bytes(), fixed.bytes());
    let mut r = Func::<vcode::Reference>::with_backend();
    let refc = mixed_virtual(&mut r).unwrap();
    for n in [1, 2, 5] {
        let (got, buf) = run_native(&virt, n).unwrap();
        let mut rbuf: Vec<u8> = (0..MIXED_BUF_BYTES).map(|i| (i * 7 + 3) as u8).collect();
        // SAFETY: the reference backend checks every access; the buffer
        // is MIXED_BUF_BYTES long and the program touches less.
        let want =
            unsafe { refc.invoke(&[Value::P(rbuf.as_mut_ptr() as usize), Value::I(n)]) }.unwrap();
        assert_eq!(Value::I(got), want, "n = {n}");
        assert_eq!(buf, rbuf, "n = {n}");
    }
}

#[test]
fn the_framed_empty_function_saves_its_register_and_returns_its_parameter() {
    let mut f = Func::new();
    let code = empty_framed(&mut f).unwrap();
    // push rbp: the persistent register is callee-saved, so there is a frame.
    assert_eq!(code.bytes()[0], 0x55, "{}", code.disassemble());
    for n in [0, 7, -3] {
        // SAFETY: no side effects; Value::I is the C `int` parameter.
        assert_eq!(unsafe { code.invoke(&[Value::I(n)]) }.unwrap(), Value::I(n));
    }
    let mut r = Func::<vcode::Reference>::with_backend();
    assert_eq!(empty_framed(&mut r).unwrap().len(), 2, "mov, ret");
}
