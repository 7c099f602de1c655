//! Smoke tests of the aarch64 backend under emulation.
#![cfg(feature = "emu")]

use vcode::aarch64::{A64, Aapcs64};
use vcode::{Func, I, Invoke, L, Leaf, P, Value};

type Ref = vcode::reference::Reference<Aapcs64>;

#[test]
fn plus1() {
    let mut f = Func::<A64>::with_backend();
    let p = f.lambda("%i", Leaf::Yes).unwrap();
    let x = p.get::<I>(0).unwrap();
    f.add(x, x, 1);
    f.ret(x);
    let code = f.end().unwrap();
    println!("{}", code.listing());
    let v = unsafe { code.invoke(&[Value::I(41)]) };
    assert_eq!(v, Ok(Value::I(42)));
}

#[test]
fn sum_array() {
    fn build<B: vcode::Backend>() -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%p%l", Leaf::Yes).unwrap();
        let (a, n) = (p.get::<P>(0).unwrap(), p.get::<L>(1).unwrap());
        let s = f.getreg::<L>(vcode::Class::Temp).unwrap();
        let x = f.getreg::<L>(vcode::Class::Temp).unwrap();
        let end = f.getreg::<P>(vcode::Class::Temp).unwrap();
        f.set(s, 0);
        let (top, done) = (f.genlabel(), f.genlabel());
        f.ble(n, 0, done);
        f.lsh(n, n, 3);
        f.add(end, a, n.cast::<P>());
        f.label(top);
        f.ld(x, a, 0);
        f.add(s, s, x);
        f.add(a, a, 8);
        f.blt(a, end, top);
        f.label(done);
        f.ret(s);
        f.end().unwrap()
    }
    let data: Vec<i64> = (1..=100).collect();
    let args = [Value::P(data.as_ptr() as usize), Value::L(100)];
    let a = unsafe { build::<A64>().invoke(&args) };
    let r = unsafe { build::<Ref>().invoke(&args) };
    assert_eq!(a, Ok(Value::L(5050)));
    assert_eq!(a, r);
}
