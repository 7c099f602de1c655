//! A `byte[]` the host lends an invocation (`Applet::lend`,
//! `Applet::prepare_lending`; `applets/src/Lending.java` and
//! `LendingNatives.java`): both engines read the lent bytes alike, its
//! length is the lent length, an index past it traps at the same bytecode
//! on both, a reading native reads it and a writing one is refused, a
//! native the JIT emits inline (`LendingInline.java`) copies the lent
//! bytes, the lend ends when its guard is dropped whatever the invocation
//! did, a handle kept past the lend reads as an empty array, and one lend
//! is active at a time. The methods are declared lent at load (`LENT`), so
//! that the verifier proves them readers (`tests/lend.rs` tests that
//! proof); the two that keep or write the array are prepared without it
//! (`prepare_lending_unverified`), to test the runtime's own defences.

mod common;

use jive::{
    Applet, AreaBytes, Arrays, Engine, FastNative, HostWords, InlineForm, InvokeError, LendError,
    LentParam, Limits, NativeError, Natives, Trap, TrapKind,
};

fn engines() -> Vec<Engine> {
    let mut v = vec![Engine::Interpreter];
    if jive::jit::available() {
        v.push(Engine::Jit);
    }
    v
}

fn natives() -> Natives {
    let mut n = Natives::new()
        .with("checksum", "([BII)I", |cx, a| {
            let b = cx.bytes_read(a[0])?;
            let r = usize::try_from(a[1])
                .ok()
                .zip(usize::try_from(a[2]).ok())
                .and_then(|(o, n)| b.get(o..o.checked_add(n)?))
                .ok_or_else(|| NativeError("checksum: out of bounds".into()))?;
            Ok(r.iter()
                .fold(0i32, |s, &x| s.wrapping_mul(31).wrapping_add(i32::from(x))))
        })
        .with("fill", "([BI)V", |cx, a| {
            cx.bytes(a[0])?.fill(a[1] as i8);
            Ok(0)
        });
    n.set_read_only("checksum", "([BII)I", &[0]).unwrap();
    n
}

/// The methods of `Lending` and `LendingNatives` whose `byte[]` is lent.
const LENT: &[LentParam] = &[
    LentParam {
        method: "sum",
        descriptor: "([BI)I",
        param: 0,
    },
    LentParam {
        method: "length",
        descriptor: "([BI)I",
        param: 0,
    },
    LentParam {
        method: "at",
        descriptor: "([BI)I",
        param: 0,
    },
    LentParam {
        method: "doRx",
        descriptor: "(I[BI)I",
        param: 1,
    },
    LentParam {
        method: "viaNative",
        descriptor: "([BI)I",
        param: 0,
    },
];

fn load(class: &str, engine: Engine) -> Option<Applet> {
    let bytes = common::class_bytes("default", class)?;
    let mut a = Applet::load_lending(&bytes, &natives(), Limits::default(), LENT, None).unwrap();
    a.set_engine(engine).unwrap();
    Some(a)
}

/// What `Lending.sum(msg, n)` computes, in Rust.
fn sum(msg: &[u8]) -> i32 {
    msg.iter().fold(0i32, |s, &x| {
        s.wrapping_mul(31).wrapping_add(i32::from(x as i8))
    })
}

/// Bytes of every value, negative ones (as Java's `byte`) among them.
fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 97 + 13) as u8).collect()
}

fn trap_of(e: InvokeError) -> Trap {
    match e {
        InvokeError::Trap(t) => t,
        e => panic!("not a trap: {e}"),
    }
}

/// The interpreter and the JIT read the same lent bytes: every element
/// (`sum`), the length (`arraylength`), and with the lent parameter
/// second (`doRx(channel, msg, length)`).
#[test]
fn both_engines_read_the_lent_bytes_alike() {
    for engine in engines() {
        let Some(mut a) = load("Lending", engine) else {
            return;
        };
        let mut s = a.prepare_lending::<2>("sum", 0).unwrap();
        let mut length = a.prepare_lending::<2>("length", 0).unwrap();
        let mut rx = a.prepare_lending::<3>("doRx", 1).unwrap();
        // Each length lent by address and length (`lend`) and as a slice
        // (`lend_slice`, unet's).
        let lens = [0, 1, 7, 64, 255, 1500, 4096];
        for (len, slice) in lens.into_iter().flat_map(|l| [(l, false), (l, true)]) {
            let msg = message(len);
            let mut lend = if slice {
                // SAFETY: `msg` outlives the lend (dropped in this block)
                // and nothing writes it.
                unsafe { a.lend_slice(&msg) }.unwrap()
            } else {
                // SAFETY: as above.
                unsafe { a.lend(msg.as_ptr(), msg.len()) }.unwrap()
            };
            // The lent argument's value is the lend's, whatever is passed.
            let got = lend.run_prepared(&mut s, [12345, len as i32], None);
            assert_eq!(got.value(), Some(sum(&msg)), "{engine:?}, {len} bytes");
            let got = lend.run_prepared(&mut length, [0, 0], None);
            assert_eq!(got.value(), Some(len as i32), "{engine:?}: msg.length");
            if len > 0 {
                let got = lend.run_prepared(&mut rx, [7, 0, len as i32], None);
                assert_eq!(got.value(), Some(7000 + i32::from(msg[0])), "{engine:?}");
            }
            assert!(lend.applet().heap().is_lending());
            assert_eq!(
                lend.applet().heap().bytes_read(jive::LENT),
                Some(bytemuck_i8(&msg)),
                "the host reads the lent bytes through the heap during the lend"
            );
        }
        assert!(!a.heap().is_lending(), "each lend ended with its guard");
    }
}

fn bytemuck_i8(b: &[u8]) -> &[i8] {
    // SAFETY: `u8` and `i8` have the same size and alignment, every bit
    // pattern valid in both.
    unsafe { core::slice::from_raw_parts(b.as_ptr().cast(), b.len()) }
}

/// An index past the lent length (or negative) traps with the lent
/// length, at the same bytecode on both engines; the lend lasts past the
/// trap until its guard is dropped, and then ends.
#[test]
fn an_index_past_the_lent_length_traps_at_the_same_bci_on_both() {
    let msg = message(10);
    let mut traps = Vec::new();
    for engine in engines() {
        let Some(mut a) = load("Lending", engine) else {
            return;
        };
        let mut at = a.prepare_lending::<2>("at", 0).unwrap();
        {
            // SAFETY: as above.
            let mut lend = unsafe { a.lend(msg.as_ptr(), msg.len()) }.unwrap();
            for i in [10, 11, -1, i32::MAX] {
                let c = lend.run_prepared(&mut at, [0, i], None);
                assert!(!c.is_ok(), "{engine:?}: index {i}");
                let t = trap_of(*lend.take_error().unwrap());
                assert_eq!(
                    t.kind,
                    TrapKind::ArrayIndexOutOfBounds {
                        index: i,
                        length: 10
                    },
                    "{engine:?}"
                );
                traps.push((i, t.method, t.bci));
            }
            // The trap ended the invocation, not the lend.
            assert!(lend.applet().heap().is_lending());
            let c = lend.run_prepared(&mut at, [0, 9], None);
            assert_eq!(c.value(), Some(i32::from(msg[9] as i8)), "{engine:?}");
        }
        assert!(
            !a.heap().is_lending(),
            "{engine:?}: the guard ended the lend"
        );
    }
    if engines().len() == 2 {
        let (i, j) = traps.split_at(traps.len() / 2);
        assert_eq!(i, j, "the interpreter's traps, then the JIT's");
    }
}

/// A native that only reads its array (`Context::bytes_read`) reads the
/// lent bytes; one that writes (`Context::bytes`) is refused, on both
/// engines, and the bytes stay as they were.
#[test]
fn a_reading_native_reads_the_lent_array_and_a_writing_one_is_refused() {
    let msg = message(300);
    for engine in engines() {
        let Some(mut a) = load("LendingNatives", engine) else {
            return;
        };
        let mut via = a.prepare_lending::<2>("viaNative", 0).unwrap();
        // SAFETY: `writes` passes the array to `fill`, a native the JIT
        // calls (no inline form): its accessor refuses the lent array, and
        // no compiled code writes it.
        let mut writes = unsafe { a.prepare_lending_unverified::<2>("writes", 0) }.unwrap();
        // SAFETY: as above.
        let mut lend = unsafe { a.lend(msg.as_ptr(), msg.len()) }.unwrap();
        let c = lend.run_prepared(&mut via, [0, 300], None);
        assert_eq!(c.value(), Some(sum(&msg)), "{engine:?}");
        let c = lend.run_prepared(&mut via, [0, 301], None);
        assert!(!c.is_ok(), "{engine:?}: the native checks the lent length");
        let _ = lend.take_error();
        let c = lend.run_prepared(&mut writes, [0, 7], None);
        assert!(!c.is_ok(), "{engine:?}");
        let t = trap_of(*lend.take_error().unwrap());
        assert!(
            matches!(&t.kind, TrapKind::Native(m) if m.contains("the lent byte[] is read-only")),
            "{engine:?}: {t}"
        );
        drop(lend);
        assert_eq!(msg, message(300), "the lent bytes unwritten");
    }
}

/// A method that keeps the lent handle in a static (the verifier refuses
/// it where the parameter is declared lent: here it is not, so this is
/// the runtime alone): after the lend the kept handle reads as an empty
/// array on both engines (`arraylength` 0, every index out of bounds, a
/// write too, at the same bytecode), and a later lend is what it reads.
#[test]
fn a_handle_kept_past_the_lend_reads_as_an_empty_array() {
    let msg = message(16);
    let mut traps = Vec::new();
    for engine in engines() {
        let Some(mut a) = load("Lending", engine) else {
            return;
        };
        // SAFETY: `keep` stores the array in a static and writes nothing.
        let mut keep = unsafe { a.prepare_lending_unverified::<2>("keep", 0) }.unwrap();
        {
            // SAFETY: as above.
            let mut lend = unsafe { a.lend(msg.as_ptr(), msg.len()) }.unwrap();
            assert_eq!(lend.run_prepared(&mut keep, [0, 0], None).value(), Some(16));
        }
        assert_eq!(
            a.invoke("keptLength", &[]).unwrap().value,
            Some(0),
            "{engine:?}"
        );
        for (method, args) in [
            ("keptAt", vec![0]),
            ("keptAt", vec![15]),
            ("keptStore", vec![3, 1]),
        ] {
            let e = a.invoke(method, &args).unwrap_err();
            let InvokeError::Trap(t) = e else {
                panic!("{engine:?}: {e}")
            };
            assert_eq!(
                t.kind,
                TrapKind::ArrayIndexOutOfBounds {
                    index: args[0],
                    length: 0
                },
                "{engine:?}: {method}{args:?}"
            );
            traps.push((method, t.bci));
        }
        // A collection with the handle among the roots (the static) keeps
        // the heap whole.
        let mut s = a.prepare_lending::<2>("sum", 0).unwrap();
        let other = [5u8, 6];
        // SAFETY: as above.
        let mut lend = unsafe { a.lend(other.as_ptr(), other.len()) }.unwrap();
        assert_eq!(
            lend.run_prepared(&mut s, [0, 2], None).value(),
            Some(5 * 31 + 6)
        );
        drop(lend);
        assert_eq!(msg, message(16));
    }
    if engines().len() == 2 {
        let (i, j) = traps.split_at(traps.len() / 2);
        assert_eq!(i, j, "the interpreter's traps, then the JIT's");
    }
}

/// One lend at a time: a second lend while one is active (here one leaked)
/// is refused, and the first is what the applet reads.
#[test]
fn a_second_lend_while_one_is_active_is_refused() {
    static FIRST: [u8; 3] = [1, 2, 3];
    static SECOND: [u8; 5] = [9; 5];
    for engine in engines() {
        let Some(mut a) = load("Lending", engine) else {
            return;
        };
        // SAFETY: `FIRST` is static: readable for as long as the leaked
        // lend lasts (the applet's life).
        let lend = unsafe { a.lend(FIRST.as_ptr(), FIRST.len()) }.unwrap();
        core::mem::forget(lend);
        // SAFETY: refused (and `SECOND` is static anyway).
        let e = match unsafe { a.lend(SECOND.as_ptr(), SECOND.len()) } {
            Err(e) => e,
            Ok(_) => panic!("{engine:?}: a second lend"),
        };
        assert_eq!(e, LendError::AlreadyLent);
        // SAFETY: as above.
        let e = match unsafe { a.lend_slice(&SECOND) } {
            Err(e) => e,
            Ok(_) => panic!("{engine:?}: a second lend of a slice"),
        };
        assert_eq!(e, LendError::AlreadyLent);
        assert_eq!(a.heap().bytes_read(jive::LENT), Some(&[1i8, 2, 3][..]));
    }
}

/// What may be prepared for a lend: a `byte[]` parameter, counted among
/// the declared ones, with the arity the host says.
#[test]
fn only_a_byte_array_parameter_is_lent() {
    let Some(a) = load("Lending", Engine::Interpreter) else {
        return;
    };
    let not_lent = |name: &str, param| match a.prepare_lending::<2>(name, param) {
        Err(InvokeError::NotLent { method, param: p }) => (method, p),
        r => panic!("{name} {param}: {r:?}"),
    };
    assert_eq!(not_lent("sum", 1), ("sum([BI)I".to_string(), 1));
    assert_eq!(not_lent("plain", 0), ("plain(II)I".to_string(), 0));
    assert_eq!(not_lent("sum", 2).1, 2);
    assert!(matches!(
        a.prepare_lending::<2>("doRx", 0),
        Err(InvokeError::NotLent { .. })
    ));
    assert!(matches!(
        a.prepare_lending::<3>("sum", 0),
        Err(InvokeError::ArgumentCount { .. })
    ));
    assert!(matches!(
        a.prepare_lending::<2>("nothing", 0),
        Err(InvokeError::NoSuchMethod(_))
    ));
    // The ordinary ways still refuse an array parameter.
    assert!(matches!(
        a.prepare::<2>("sum"),
        Err(InvokeError::NotIntArguments(_))
    ));
}

/// An `iaload` of the lent handle, which no class that passes the type
/// check makes (its parameter is a `[B`): here `Lending.at`'s `baload`
/// replaced by an `iaload` after the check, run on the interpreter alone
/// (the JIT trusts the type check, as for every array: its `iaload` of a
/// `byte[]` would read 4 bytes an element). During the lend the trap says
/// what happened, a typed trap at the op's bytecode, no panic; after it the
/// kept handle is an empty array, as on the JIT: the index is out of
/// bounds of length 0.
#[test]
fn an_int_access_of_the_lent_array_traps_saying_it_is_a_byte_array() {
    use jive::decode::Op;
    use jive::heap::Heap;
    use jive::interpreter::{Machine, RunLimits, State};
    let Some(bytes) = common::class_bytes("default", "Lending") else {
        return;
    };
    let mut prog = jive::check(&bytes, &Limits::default()).unwrap();
    let (at, _) = prog.info.method("at").unwrap();
    let f = prog.funcs[at].as_mut().unwrap();
    let mut code = f.code.to_vec();
    let mut replaced = 0;
    for op in &mut code {
        *op = match *op {
            Op::BALoad => Op::IALoad,
            Op::BALoadLL(a, i) => Op::IALoadLL(a, i),
            _ => continue,
        };
        replaced += 1;
    }
    assert_eq!(replaced, 1, "{:?}", f.code);
    f.code = code.into();
    let mut heap = Heap::new(1 << 20);
    let mut statics = [0; 8];
    let limits = RunLimits {
        fuel: u64::MAX,
        max_depth: 64,
    };
    let msg = message(16);
    let mut run = |heap: &mut Heap| {
        let mut st = State {
            heap,
            statics: &mut statics,
            natives: &[],
            host: None,
        };
        Machine::default()
            .run(&prog, &mut st, at as u16, &[jive::LENT, 3], limits)
            .unwrap_err()
    };
    // SAFETY: `msg` outlives the lend, ended below; nothing writes it.
    unsafe { heap.lend(msg.as_ptr(), msg.len()) }.unwrap();
    let during = run(&mut heap);
    heap.end_lend();
    let after = run(&mut heap);
    assert_eq!(
        during.kind,
        TrapKind::Native(
            "internal error (unverified program?): iaload of the lent array, which is a byte[]"
                .into()
        ),
        "{during}"
    );
    assert_eq!(
        after.kind,
        TrapKind::ArrayIndexOutOfBounds {
            index: 3,
            length: 0
        }
    );
    assert_eq!(
        (during.method.as_str(), during.bci),
        ("at([BI)I", after.bci)
    );
}

/// A host area the inline copy writes (`AreaWords`): memory reached only
/// through raw pointers, freed when the last `Arc` goes.
struct Area {
    ptr: *mut u8,
    len: usize,
}

impl Area {
    fn new(len: usize) -> std::sync::Arc<Area> {
        let ptr = Box::into_raw(vec![0u8; len].into_boxed_slice()).cast::<u8>();
        std::sync::Arc::new(Area { ptr, len })
    }

    /// A copy of the area's bytes, and zeros in their place.
    fn take(&self) -> Vec<u8> {
        // SAFETY: `ptr` holds `len` bytes (`new`), reached by no Rust
        // reference (no invocation runs: the caller holds the applet).
        unsafe {
            let v = core::slice::from_raw_parts(self.ptr, self.len).to_vec();
            core::ptr::write_bytes(self.ptr, 0, self.len);
            v
        }
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: made by `Box::into_raw` of `len` bytes in `new`, once.
        drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

// SAFETY: the area is plain bytes, reached only through its raw pointer.
unsafe impl Send for Area {}
// SAFETY: as above.
unsafe impl Sync for Area {}

// SAFETY: `ptr` is fixed and valid for reads and writes of `len` bytes
// while the `Area` lives; nothing makes a Rust reference to them while an
// invocation runs (`take` runs between invocations).
unsafe impl AreaBytes for Area {
    fn bytes(&self) -> *mut u8 {
        self.ptr
    }
    fn size(&self) -> u32 {
        self.len as u32
    }
}

/// The host of `LendingInline`'s `copyIn`: the words its inline form
/// reads, the area they lend, and how often the native ran out of line.
struct CopyHost {
    words: HostWords,
    area: std::sync::Arc<Area>,
    out_of_line: u32,
}

impl CopyHost {
    /// A host lending `area`, with a work bound no test reaches.
    fn new(area: &std::sync::Arc<Area>) -> CopyHost {
        CopyHost {
            words: HostWords {
                bound: 1 << 20,
                area: jive::AreaWords::new(area.clone()).unwrap(),
                ..HostWords::default()
            },
            area: area.clone(),
            out_of_line: 0,
        }
    }
}

/// `LendingInline` loaded with `viaInline`'s `byte[]` (parameter 0)
/// declared lent, on `engine`; `None` where its class file is missing.
fn lending_inline(engine: Engine) -> Option<Applet> {
    let bytes = common::class_bytes("default", "LendingInline")?;
    let lent = LentParam {
        method: "viaInline",
        descriptor: "([BII)I",
        param: 0,
    };
    let mut a =
        Applet::load_lending(&bytes, &copy_natives(), Limits::default(), &[lent], None).unwrap();
    a.set_engine(engine).unwrap();
    Some(a)
}

/// `copyIn`'s fast form, which declines (so that out of line the closure
/// runs), and the lender of its words.
struct CopyIn;

impl FastNative for CopyIn {
    type Host = CopyHost;
    fn call(_: &mut CopyHost, _: Arrays<'_>, _: &[i32]) -> Option<Result<i32, NativeError>> {
        None
    }
    fn words(host: &mut CopyHost) -> Option<&mut HostWords> {
        Some(&mut host.words)
    }
}

/// `copyIn(array, aoff, off, len)`: the array's bytes `[aoff, aoff + len)`
/// into the area at `off`, read with `bytes_read` out of line, and inline
/// on the JIT (`InlineForm::CopyIn`); its array marked read-only.
fn copy_natives() -> Natives {
    const D: &str = "([BIII)V";
    let mut n = Natives::new().with("copyIn", D, |cx, a| {
        let (host, arrays) = cx.split::<CopyHost>()?;
        host.out_of_line += 1;
        host.words.work += 1;
        let b = arrays.bytes_read(a[0])?;
        let at = |x: i32| usize::try_from(x).ok();
        let (src, off) = at(a[1])
            .zip(at(a[3]))
            .and_then(|(o, n)| b.get(o..o.checked_add(n)?))
            .zip(at(a[2]))
            .filter(|(src, off)| off + src.len() <= host.area.len)
            .ok_or_else(|| NativeError("copyIn: out of bounds".into()))?;
        // SAFETY: `[off, off + src.len())` lies in the area (checked), which
        // no Rust reference reaches during the invocation; `src` is the
        // heap's or the lent bytes, not the area.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr().cast(), host.area.ptr.add(off), src.len())
        };
        Ok(0)
    });
    n.set_fast::<CopyIn>("copyIn", D).unwrap();
    n.set_inline("copyIn", D, InlineForm::CopyIn).unwrap();
    n.set_read_only("copyIn", D, &[0]).unwrap();
    n.set_words::<CopyIn>().unwrap();
    n
}

/// A lent array passed to a native the JIT emits inline (`CopyIn`, unet's
/// `doLtoHDMA`): the bytes it copies are the lent ones, from each lend's
/// own message, on the JIT (inline: the native never runs out of line,
/// with the form's loop and with its `memcpy` past `COPY_INLINE_MAX`) as
/// on the interpreter (the closure, through `bytes_read`); a copy past the
/// lent length goes out of line and is refused, on both.
#[test]
fn an_inline_native_given_the_lent_array_reads_the_lent_bytes() {
    let msgs = [message(300), message(300).iter().map(|b| !b).collect()];
    let mut calls = Vec::new();
    for engine in engines() {
        let Some(mut a) = lending_inline(engine) else {
            return;
        };
        let mut via = a.prepare_lending_lent::<CopyIn, 3>("viaInline", 0).unwrap();
        let area = Area::new(1024);
        let mut host = CopyHost::new(&area);
        for (k, (aoff, len)) in [(0, 300), (5, 100), (17, 16), (0, 0), (299, 1)]
            .into_iter()
            .enumerate()
        {
            let msg = &msgs[k % 2];
            // SAFETY: `msg` outlives the lend, which ends with the
            // statement; nothing writes it.
            let c = unsafe { a.lend(msg.as_ptr(), msg.len()) }
                .unwrap()
                .run_prepared_lent(&mut via, [0, aoff as i32, len as i32], &mut host);
            assert_eq!(c.value(), Some(300), "{engine:?}");
            let mut expected = vec![0; area.len];
            expected[8..8 + len].copy_from_slice(&msg[aoff..aoff + len]);
            assert!(area.take() == expected, "{engine:?}: {aoff}, {len}");
        }
        let inline = host.out_of_line;
        // Past the lent length: out of line on both, refused there.
        // SAFETY: as above, until `drop(lend)`.
        let mut lend = unsafe { a.lend(msgs[0].as_ptr(), msgs[0].len()) }.unwrap();
        let c = lend.run_prepared_lent(&mut via, [0, 290, 11], &mut host);
        assert!(!c.is_ok(), "{engine:?}");
        let t = trap_of(*lend.take_error().unwrap());
        assert!(
            matches!(&t.kind, TrapKind::Native(m) if m.contains("copyIn: out of bounds")),
            "{engine:?}: {t}"
        );
        drop(lend);
        assert!(area.take().iter().all(|&b| b == 0), "{engine:?}");
        calls.push((engine, inline, host.out_of_line, host.words.work));
    }
    let interp = [(Engine::Interpreter, 5, 6, 6)];
    let jit = [(Engine::Interpreter, 5, 6, 6), (Engine::Jit, 0, 1, 6)];
    assert!(calls == interp || calls == jit, "{calls:?}");
}

/// A handle prepared with its lent parameter a constant
/// (`prepare_lending_lent_at`) makes the same checks as one prepared with
/// the index at run time: parameter `P` must be a `byte[]` declared lent,
/// else it is refused; prepared for the declared one, it runs as the
/// other handle does.
#[test]
fn a_lent_parameter_fixed_at_compile_time_is_checked_as_one_given_at_run_time() {
    for engine in engines() {
        let Some(mut a) = lending_inline(engine) else {
            return;
        };
        // Parameters 1 and 2 are `int`s: refused as the index form refuses them.
        for r in [
            a.prepare_lending_lent_at::<CopyIn, 3, 1>("viaInline")
                .map(|_| ()),
            a.prepare_lending_lent_at::<CopyIn, 3, 2>("viaInline")
                .map(|_| ()),
        ] {
            assert!(
                matches!(r, Err(InvokeError::NotLent { .. })),
                "{engine:?}: {r:?}"
            );
        }
        assert!(matches!(
            a.prepare_lending_lent::<CopyIn, 3>("viaInline", 1),
            Err(InvokeError::NotLent { .. })
        ));
        // Parameter 0, the declared one: both forms copy the same bytes.
        let mut at = a
            .prepare_lending_lent_at::<CopyIn, 3, 0>("viaInline")
            .unwrap();
        let mut by_index = a.prepare_lending_lent::<CopyIn, 3>("viaInline", 0).unwrap();
        assert_eq!(at.param(), 0);
        let msg = message(64);
        let area = Area::new(256);
        let mut host = CopyHost::new(&area);
        let mut seen = Vec::new();
        for k in 0..2 {
            // SAFETY: `msg` outlives the lend, which ends with the
            // statement; nothing writes it.
            let mut lend = unsafe { a.lend(msg.as_ptr(), msg.len()) }.unwrap();
            let c = if k == 0 {
                lend.run_prepared_lent(&mut at, [0, 3, 40], &mut host)
            } else {
                lend.run_prepared_lent(&mut by_index, [0, 3, 40], &mut host)
            };
            drop(lend);
            assert_eq!(c.value(), Some(64), "{engine:?}");
            seen.push(area.take());
        }
        assert_eq!(seen[0], seen[1], "{engine:?}");
        assert_eq!(&seen[0][8..48], &msg[3..43], "{engine:?}");
    }
}
