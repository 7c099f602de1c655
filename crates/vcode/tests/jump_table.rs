//! `jump_table`, the one control-transfer instruction vcode adds to the
//! paper's Table 2 (for dpf's switch dispatch): every target reached on
//! both backends, with the index in every allocatable register, forward
//! and backward targets, tables large enough to cross buffer refills, and
//! the reference backend's fault for an index past the end.

use vcode::reference::FaultKind;
use vcode::{Backend, Class, Func, Invoke, Leaf, Reference, UL, Value, X64};

/// `f(x) = x < n ? 1000 + 7*x : -1`, dispatching through a table of `n`
/// targets, half placed before the dispatch (reached by backward jumps).
fn switch<B: Backend>(n: u64, idx_reg: usize) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let x = f.lambda("%ul", Leaf::Yes)?.get::<UL>(0)?;
    // Claim registers until the index sits in the `idx_reg`-th one handed out.
    let mut idx = f.getreg::<UL>(Class::Temp)?;
    for _ in 0..idx_reg {
        match f.getreg::<UL>(Class::Temp) {
            Ok(r) => idx = r,
            Err(_) => break,
        }
    }
    f.mov(idx, x);
    let labels: Vec<_> = (0..n).map(|_| f.genlabel()).collect();
    let (dispatch, out) = (f.genlabel(), f.genlabel());
    f.jmp(dispatch);
    for (i, &l) in labels.iter().enumerate().take(n as usize / 2) {
        f.label(l);
        f.set(x, 1000 + 7 * i as u64);
        f.ret(x);
    }
    f.label(dispatch);
    f.bge(idx, n, out);
    f.jump_table(idx, &labels);
    for &l in labels.iter().skip(n as usize / 2) {
        f.label(l);
        // The index register is intact at the target.
        f.mul(x, idx, 7);
        f.add(x, x, 1000);
        f.ret(x);
    }
    f.label(out);
    f.set(x, u64::MAX);
    f.ret(x);
    f.end()
}

fn call(code: &(impl Invoke + ?Sized), x: u64) -> u64 {
    // SAFETY: the function takes and returns one `ul`.
    match unsafe { code.invoke(&[Value::UL(x)]) }.unwrap_or_else(|e| panic!("{e}")) {
        Value::UL(v) => v,
        v => panic!("unexpected {v:?}"),
    }
}

#[test]
fn every_target_on_both_backends() {
    for n in [1u64, 2, 3, 17, 300, 5000] {
        for idx_reg in [0, 3, 6, 8, 12] {
            let native = switch::<X64>(n, idx_reg).unwrap();
            let reference = switch::<Reference>(n, idx_reg).unwrap();
            let probes = (0..n.min(64)).chain([n - 1, n, n + 1, u64::MAX]);
            for x in probes {
                let want = if x < n { 1000 + 7 * x } else { u64::MAX };
                assert_eq!(call(&native, x), want, "native n={n} reg={idx_reg} x={x}");
                assert_eq!(call(&reference, x), want, "reference n={n} x={x}");
            }
        }
    }
}

#[test]
fn reference_faults_on_an_unchecked_index() {
    let mut f = Func::<Reference>::with_backend();
    let x = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
    let (a, b) = (f.genlabel(), f.genlabel());
    f.jump_table(x, &[a, b]);
    f.label(a);
    f.label(b);
    f.ret(x);
    let code = f.end().unwrap();
    // SAFETY: the reference backend executes no native code here.
    match unsafe { code.invoke(&[Value::UL(2)]) } {
        Err(vcode::InvokeError::Fault(f)) => {
            assert_eq!(f.kind, FaultKind::JumpTableIndex { index: 2, len: 2 });
            assert_eq!(f.method, "jump_table");
        }
        other => panic!("expected a fault, got {other:?}"),
    }
}

#[test]
fn an_unplaced_target_is_a_typed_error() {
    let mut f = Func::<X64>::new();
    let x = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
    let (a, b) = (f.genlabel(), f.genlabel());
    f.jump_table(x, &[a, b]);
    f.label(a);
    f.ret(x);
    let err = f.end().unwrap_err();
    assert_eq!(err.method(), "jump_table");
    assert!(
        matches!(err.kind(), vcode::ErrorKind::UnplacedLabel { .. }),
        "{err}"
    );
}

/// A listing's table entries (the lines whose text starts with `kind`,
/// `.quad` or `.word`) as the targets they give, and the first column
/// (offset or address, hex) of every other line: `(targets, starts)`.
fn listed_table(listing: &str, kind: &str) -> (Vec<usize>, Vec<usize>) {
    let mut entries = Vec::new();
    let mut starts = Vec::new();
    for l in listing.lines().filter(|l| !l.trim_start().starts_with(';')) {
        let mut cols = l.split_whitespace();
        let Some(at) = cols.next().map(|a| a.trim_end_matches(':')) else {
            continue;
        };
        let at = usize::from_str_radix(at, 16).expect("an offset");
        let text: Vec<&str> = cols.skip(1).collect();
        if text.first() == Some(&kind) {
            entries.push(usize::from_str_radix(text[1], 16).expect("a target"));
        } else {
            starts.push(at);
        }
    }
    (entries, starts)
}

/// The x86-64 listing shows a jump table as data: one `.quad` an entry,
/// its target the offset of an instruction the listing shows, where the
/// table's addresses used to be decoded as instructions (and read as
/// anything, depending on where the code was placed).
#[test]
fn the_listing_shows_the_table_as_data() {
    for n in [1u64, 5, 17] {
        let code = switch::<X64>(n, 0).unwrap();
        let listing = code.disassemble();
        let (entries, starts) = listed_table(&listing, ".quad");
        assert_eq!(entries.len(), n as usize, "{listing}");
        for t in &entries {
            assert!(
                starts.contains(t),
                "entry {t:x} is no instruction's start:\n{listing}"
            );
        }
        // Every target differs (each label holds different code), and the
        // code after the table is listed as instructions again: the
        // function's last `ret`s.
        let mut distinct = entries.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), entries.len(), "{listing}");
        assert!(listing.trim_end().ends_with("ret"), "{listing}");
    }
}

/// As `the_listing_shows_the_table_as_data`, on aarch64: one `.word` an
/// entry, an offset from the table.
#[cfg(feature = "emu")]
#[test]
fn the_aarch64_listing_shows_the_table_as_data() {
    use vcode::aarch64::A64;
    for n in [1u64, 5, 17] {
        let code = switch::<A64>(n, 0).unwrap();
        let listing = code.disassemble();
        // The aarch64 listing's first column is the address: offsets are
        // those less the code's.
        let base = code.addr();
        let (entries, starts) = listed_table(&listing, ".word");
        let starts: Vec<usize> = starts.iter().map(|a| a - base).collect();
        assert_eq!(entries.len(), n as usize, "{listing}");
        for t in &entries {
            assert!(
                starts.contains(t),
                "entry {t:x} is no instruction's start:\n{listing}"
            );
        }
        assert!(!listing.contains("invalid"), "{listing}");
    }
}
