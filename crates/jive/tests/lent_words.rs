//! The words a typed host lends an invocation's inline natives
//! (`Natives::set_words`, `Applet::run_prepared_lent`): taken by the
//! lender the program finds its words through, and only by that one; a
//! host naming another lender gets the words the untyped invocation
//! finds (`applets/src/LentWords.java`, whose `ask()` returns the inline
//! `size()`: `ints[0]` of the words lent).

mod common;

use jive::{Applet, Arrays, Engine, FastNative, HostWords, InlineForm, Limits, NativeError};
use jive::{FastError, Natives};

/// A host with two sets of words, which the two lenders below lend.
#[derive(Default)]
struct Host {
    a: HostWords,
    b: HostWords,
}

impl Host {
    fn new() -> Host {
        let mut h = Host::default();
        for (w, v) in [(&mut h.a, 111), (&mut h.b, 222)] {
            w.bound = 1 << 20;
            w.ints[0] = v;
        }
        h
    }
}

/// `size()`'s fast form, lending `a`.
struct Size;

impl FastNative for Size {
    type Host = Host;
    fn call(_: &mut Host, _: Arrays<'_>, _: &[i32]) -> Option<Result<i32, NativeError>> {
        Some(Ok(5))
    }
    fn words(host: &mut Host) -> Option<&mut HostWords> {
        Some(&mut host.a)
    }
}

/// A lender of `b` (bound to no native).
struct OtherWords;

impl FastNative for OtherWords {
    type Host = Host;
    fn call(_: &mut Host, _: Arrays<'_>, _: &[i32]) -> Option<Result<i32, NativeError>> {
        None
    }
    fn words(host: &mut Host) -> Option<&mut HostWords> {
        Some(&mut host.b)
    }
}

/// A lender for another host type.
struct Foreign;

impl FastNative for Foreign {
    type Host = u32;
    fn call(_: &mut u32, _: Arrays<'_>, _: &[i32]) -> Option<Result<i32, NativeError>> {
        None
    }
}

fn table() -> Natives {
    let mut t = Natives::new().with("size", "()I", |_, _| Ok(5));
    t.set_fast::<Size>("size", "()I").unwrap();
    t.set_inline("size", "()I", InlineForm::Int(0)).unwrap();
    t
}

fn load(t: &Natives) -> Option<Applet> {
    if !jive::jit::available() {
        return None;
    }
    let bytes = common::class_bytes("default", "LentWords")?;
    Some(Applet::load_with_engine(&bytes, t, Limits::default(), Engine::Jit).unwrap())
}

#[test]
fn the_programs_lender_lends_and_no_other() {
    // The table names `OtherWords`: the program finds `b`, typed or not.
    let mut t = table();
    t.set_words::<OtherWords>().unwrap();
    let Some(mut a) = load(&t) else { return };
    let mut p = a.prepare::<0>("ask").unwrap();
    let mut other = a.prepare_lent::<OtherWords, 0>("ask").unwrap();
    let mut size = a.prepare_lent::<Size, 0>("ask").unwrap();
    let mut host = Host::new();
    for round in 1..=3u64 {
        let c = a.run_prepared_lent::<OtherWords, 0>(&mut other, [], &mut host);
        assert_eq!(c.value(), Some(222), "typed, round {round}");
        let c = a.run_prepared(&mut p, [], Some(&mut host));
        assert_eq!(c.value(), Some(222), "untyped, round {round}");
        assert_eq!((host.a.work, host.b.work), (0, 2 * round), "charged to b");
    }
    // A host naming another lender (`Size`, which lends `a`) than the
    // program's gets the program's words, not its own lender's: its
    // handle's word, made when it was prepared, says the lender is not
    // its, and says so again after the code's stamp changes.
    for round in 1..=3u64 {
        let c = a.run_prepared_lent::<Size, 0>(&mut size, [], &mut host);
        assert_eq!(c.value(), Some(222), "another lender, round {round}");
        if round == 2 {
            // A new stamp: the handle's word is made again.
            a.set_run_limits(Some(1 << 20), 64);
        }
    }
    assert_eq!((host.a.work, host.b.work), (0, 9), "all charged to b");

    // Without a lender named, the program's is its first inline native's
    // fast form, `Size`: `a`, whichever lender the host names.
    let Some(mut a) = load(&table()) else { return };
    let mut other = a.prepare_lent::<OtherWords, 0>("ask").unwrap();
    let mut size = a.prepare_lent::<Size, 0>("ask").unwrap();
    let mut host = Host::new();
    let c = a.run_prepared_lent::<OtherWords, 0>(&mut other, [], &mut host);
    assert_eq!(c.value(), Some(111), "the program's lender, not the host's");
    let c = a.run_prepared_lent::<Size, 0>(&mut size, [], &mut host);
    assert_eq!(c.value(), Some(111));
    assert_eq!((host.a.work, host.b.work), (2, 0));
}

#[test]
fn a_lender_of_another_host_type_is_refused() {
    let mut t = table();
    assert!(matches!(
        t.set_words::<Foreign>().err(),
        Some(FastError::HostType { .. })
    ));
    // Named first, it makes the table's host type `u32`, and `Size`'s is refused.
    let mut t = Natives::new().with("size", "()I", |_, _| Ok(5));
    t.set_words::<Foreign>().unwrap();
    assert!(matches!(
        t.set_fast::<Size>("size", "()I").err(),
        Some(FastError::HostType { .. })
    ));
}
