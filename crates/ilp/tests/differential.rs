//! Differential tests: the generated loop against the reference steps
//! applied one after another, for random step lists, lengths from 0 to
//! 65,536 and every source and destination alignment 0..64 (so the 512-bit
//! loops, from 256 bytes on, at every alignment to a vector); plus the
//! hand-fused baselines, vcode's reference backend, the error cases and the
//! cache.

use ilp::table4::random_bytes as data;
use ilp::{Error, MAX_STEPS, Outputs, Pipeline, State, Step, reference};
use proptest::prelude::*;

/// Runs `steps` over `src` placed at alignment `sa` into a destination at
/// alignment `da`, both natively and by the reference, from `state`, and
/// checks the destinations, outputs and states agree.
fn check(steps: &[Step], src: &[u8], sa: usize, da: usize, state: State) -> Result<(), String> {
    let p = Pipeline::new(steps).map_err(|e| e.to_string())?;
    let copy = steps.contains(&Step::Copy);
    let n = src.len();
    // Buffers with guard bytes around, to catch writes out of bounds.
    let mut sbuf = vec![0xa5u8; n + 16 + sa];
    sbuf[sa..sa + n].copy_from_slice(src);
    let mut dbuf = vec![0x5au8; n + 16 + da];
    let dn = if copy { n } else { 0 };
    let mut want_dst = vec![0u8; dn];
    let (mut st_want, mut st_got) = (state, state);
    let want =
        reference::run(steps, src, &mut want_dst, &mut st_want).map_err(|e| e.to_string())?;
    let got = p
        .run(&sbuf[sa..sa + n], &mut dbuf[da..da + dn], &mut st_got)
        .map_err(|e| e.to_string())?;
    if got != want || st_got != st_want {
        return Err(format!(
            "{steps:?} len {n} align {sa}/{da}: outputs {got:?} want {want:?}, state {st_got:?} want {st_want:?}"
        ));
    }
    if dbuf[da..da + dn] != want_dst[..] {
        let at = (0..dn).find(|&i| dbuf[da + i] != want_dst[i]).unwrap();
        return Err(format!(
            "{steps:?} len {n} align {sa}/{da}: dst differs at byte {at}"
        ));
    }
    if dbuf[..da]
        .iter()
        .chain(&dbuf[da + dn..])
        .any(|&b| b != 0x5a)
    {
        return Err(format!(
            "{steps:?} len {n} align {sa}/{da}: wrote outside dst"
        ));
    }
    if sbuf[..sa].iter().chain(&sbuf[sa + n..]).any(|&b| b != 0xa5) || sbuf[sa..sa + n] != *src {
        return Err(format!("{steps:?} len {n}: touched the source"));
    }
    Ok(())
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Copy),
        Just(Step::Checksum),
        Just(Step::Bswap16),
        Just(Step::Bswap32),
        Just(Step::Crc32),
        prop::collection::vec(any::<u8>(), 1..=70).prop_map(Step::Xor),
    ]
}

/// A valid step list: random steps with the repeated unique ones dropped.
fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(step(), 1..8).prop_map(|v| {
        let mut out: Vec<Step> = Vec::new();
        for s in v {
            let unique = !matches!(s, Step::Bswap16 | Step::Bswap32);
            let seen = out
                .iter()
                .any(|p| std::mem::discriminant(p) == std::mem::discriminant(&s));
            if !(unique && seen) {
                out.push(s);
            }
        }
        out
    })
}

fn len() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..300,
        2 => 300usize..5000,
        1 => 5000usize..=65_536,
        1 => prop::sample::select(vec![0usize, 1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 4096, 65_535, 65_536]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn generated_equals_reference(
        steps in steps(),
        len in len(),
        sa in 0usize..64,
        da in 0usize..64,
        seed in any::<u64>(),
        offset in 0u64..1000,
        sum in any::<u16>(),
        crc in any::<u32>(),
    ) {
        let src = data(len, seed);
        let state = State { offset, sum, crc };
        check(&steps, &src, sa, da, state).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_stream_in_pieces_equals_the_stream_at_once(
        steps in steps(),
        len in 0usize..3000,
        cuts in prop::collection::vec(0usize..3000, 0..4),
        seed in any::<u64>(),
    ) {
        let src = data(len, seed);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(len)).collect();
        cuts.sort();
        let p = Pipeline::new(&steps).unwrap();
        let copy = steps.contains(&Step::Copy);
        // All at once, by the reference.
        let mut whole_dst = vec![0u8; if copy { len } else { 0 }];
        let mut whole = State::new();
        let want = reference::run(&steps, &src, &mut whole_dst, &mut whole).unwrap();
        // In pieces, natively.
        let mut st = State::new();
        let mut got = Outputs::default();
        let mut dst = Vec::new();
        let mut at = 0;
        for &c in cuts.iter().chain([len].iter()) {
            let piece = &src[at..c];
            let mut d = vec![0u8; if copy { piece.len() } else { 0 }];
            got = p.run(piece, &mut d, &mut st).unwrap();
            dst.extend_from_slice(&d);
            at = c;
        }
        // Observers and the xor phase continue across pieces (byte swaps
        // restart at each buffer, so compare the stream only without them).
        let swaps = steps.iter().any(|s| matches!(s, Step::Bswap16 | Step::Bswap32));
        if !swaps {
            prop_assert_eq!(got, want);
            prop_assert_eq!(st, whole);
            prop_assert_eq!(dst, whole_dst);
        }
        prop_assert_eq!(st.offset, len as u64);
    }
}

/// Every length 0..=200, and lengths around the 512-bit loops' 256-byte
/// minimum and their 256-byte step, at every source and destination
/// alignment (0..8 for the short ones, 0..64 for the others), for the
/// Table 4 pipelines and a pipeline with every step.
#[test]
fn sweep_lengths_and_alignments() {
    let lists = [
        vec![Step::Copy, Step::Checksum],
        vec![Step::Copy, Step::Checksum, Step::Bswap32],
        vec![Step::Copy, Step::Crc32],
        vec![
            Step::Bswap16,
            Step::Checksum,
            Step::Xor(b"key!5".to_vec()),
            Step::Copy,
            Step::Crc32,
            Step::Bswap32,
        ],
    ];
    let lens = (0..=200).chain([255, 256, 257, 319, 511, 512, 575, 769]);
    for steps in &lists {
        for len in lens.clone() {
            let src = data(len, len as u64 + 1);
            let align = if len > 200 { 64 } else { 8 };
            for sa in 0..align {
                for da in 0..align {
                    check(steps, &src, sa, da, State::new()).unwrap();
                }
            }
        }
    }
}

/// Long buffers, up to 65,536 bytes, at a few alignments, for each single
/// step and the full list.
#[test]
fn long_buffers() {
    let singles = [
        Step::Copy,
        Step::Checksum,
        Step::Bswap16,
        Step::Bswap32,
        Step::Crc32,
        Step::Xor((1..=64).collect()),
    ];
    for len in [4095, 4096, 4097, 65_535, 65_536] {
        let src = data(len, 99);
        for s in &singles {
            // A transform alone needs a copy to show its effect.
            let steps = vec![s.clone(), Step::Copy];
            let steps = if *s == Step::Copy {
                vec![Step::Copy]
            } else {
                steps
            };
            for (sa, da) in [(0, 0), (1, 7), (3, 2), (7, 5)] {
                check(&steps, &src, sa, da, State::new()).unwrap();
            }
        }
    }
}

/// Every xor key length, at every phase the stream can be in.
#[test]
fn xor_key_lengths_and_phases() {
    let src = data(300, 5);
    for k in [
        1usize, 2, 3, 5, 7, 8, 9, 13, 31, 63, 64, 65, 100, 127, 128, 200, 256,
    ] {
        let key: Vec<u8> = (0..k).map(|i| (i * 7 + 1) as u8).collect();
        for offset in [0, 1, (k as u64) - 1, 12_345] {
            let st = State {
                offset,
                ..State::new()
            };
            check(
                &[Step::Xor(key.clone()), Step::Copy, Step::Checksum],
                &src,
                1,
                2,
                st,
            )
            .unwrap();
        }
    }
}

/// The same client code on vcode's reference backend gives the same bytes
/// (lists whose loop fits the registers the portable definitions leave).
#[test]
fn reference_backend_agrees() {
    let lists = [
        vec![Step::Copy, Step::Checksum],
        vec![Step::Copy, Step::Checksum, Step::Bswap32],
        vec![Step::Copy, Step::Crc32],
        vec![Step::Bswap32, Step::Crc32, Step::Copy],
        vec![
            Step::Bswap16,
            Step::Checksum,
            Step::Xor(b"abc".to_vec()),
            Step::Copy,
            Step::Bswap32,
        ],
        vec![Step::Xor(b"k".to_vec()), Step::Checksum],
        vec![Step::Crc32],
    ];
    for steps in &lists {
        let p = Pipeline::new(steps).unwrap();
        let copy = steps.contains(&Step::Copy);
        for len in [0usize, 1, 5, 8, 13, 64, 71, 200, 333] {
            let src = data(len, 3);
            let dn = if copy { len } else { 0 };
            let (mut a, mut b) = (vec![0u8; dn], vec![0u8; dn]);
            let st = State {
                offset: 3,
                sum: 9,
                crc: 77,
            };
            let (mut sa, mut sb) = (st, st);
            let oa = p.run(&src, &mut a, &mut sa).unwrap();
            let ob = p.run_on_reference_backend(&src, &mut b, &mut sb).unwrap();
            assert_eq!((oa, sa, &a), (ob, sb, &b), "{steps:?} len {len}");
        }
    }
    // A list too big for those registers is a typed error, not a panic.
    let all = [
        Step::Bswap16,
        Step::Checksum,
        Step::Xor(b"abc".to_vec()),
        Step::Copy,
        Step::Crc32,
    ];
    let p = Pipeline::new(&all).unwrap();
    let mut d = [0u8; 4];
    assert!(matches!(
        p.run_on_reference_backend(&[1, 2, 3, 4], &mut d, &mut State::new()),
        Err(Error::Codegen(_) | Error::OutOfRegisters)
    ));
}

/// The hand-fused baselines compute what the pipelines compute.
#[test]
fn handfused_baselines_agree() {
    for len in [0usize, 1, 3, 7, 8, 31, 32, 33, 100, 4096, 4101] {
        let src = data(len, 11);
        let mut d1 = vec![0u8; len];
        let mut d2 = vec![0u8; len];
        let s = ilp::handfused::copy_checksum(&src, &mut d1);
        assert_eq!(s, reference::sum_le(&src));
        assert_eq!(d1, src);
        let s = ilp::handfused::copy_checksum_bswap32(&src, &mut d2);
        assert_eq!(s, reference::sum_le(&src));
        let mut want = src.clone();
        reference::bswap32(&mut want);
        assert_eq!(d2, want);
        let c = ilp::handfused::copy_crc32(&src, &mut d1, 0x1234);
        assert_eq!(c, reference::crc32(0x1234, &src));
    }
}

#[test]
fn typed_errors() {
    assert!(matches!(Pipeline::new(&[]), Err(Error::Empty)));
    assert!(matches!(
        Pipeline::new(&vec![Step::Bswap16; MAX_STEPS + 1]),
        Err(Error::TooManySteps { .. })
    ));
    assert!(matches!(
        Pipeline::new(&[Step::Crc32, Step::Copy, Step::Crc32]),
        Err(Error::Duplicate { index: 2, .. })
    ));
    assert!(matches!(
        Pipeline::new(&[Step::Xor(vec![1]), Step::Xor(vec![1, 2])]),
        Err(Error::Duplicate { index: 1, .. })
    ));
    assert!(matches!(
        Pipeline::new(&[Step::Xor(vec![])]),
        Err(Error::KeyLength { len: 0, .. })
    ));
    assert!(matches!(
        Pipeline::new(&[Step::Xor(vec![0; 257])]),
        Err(Error::KeyLength { len: 257, .. })
    ));
    let p = Pipeline::new(&[Step::Copy, Step::Checksum]).unwrap();
    let mut st = State::new();
    let src = [1u8; 10];
    for dlen in [0usize, 9, 11, 100] {
        let mut dst = vec![7u8; dlen];
        assert!(matches!(
            p.run(&src, &mut dst, &mut st),
            Err(Error::LengthMismatch { src: 10, .. })
        ));
        assert!(dst.iter().all(|&b| b == 7), "nothing written on error");
    }
    assert_eq!(st, State::new(), "state unchanged on error");
    let scan = Pipeline::new(&[Step::Checksum]).unwrap();
    assert!(matches!(
        scan.run(&src, &mut [0u8; 10], &mut st),
        Err(Error::UnexpectedDestination { dst: 10 })
    ));
    // Byte swaps may repeat: two are the identity.
    let twice = Pipeline::new(&[Step::Bswap32, Step::Bswap32, Step::Copy]).unwrap();
    let mut dst = [0u8; 10];
    twice.run(&src, &mut dst, &mut st).unwrap();
    assert_eq!(dst, src);
}

#[test]
fn pipelines_are_cached_by_step_kinds() {
    let a = Pipeline::new(&[Step::Copy, Step::Xor(vec![1, 2, 3]), Step::Checksum]).unwrap();
    let b = Pipeline::new(&[Step::Copy, Step::Xor(vec![9, 9, 9]), Step::Checksum]).unwrap();
    let c = Pipeline::new(&[Step::Copy, Step::Xor(vec![1, 2]), Step::Checksum]).unwrap();
    let d = Pipeline::new(&[Step::Checksum, Step::Copy, Step::Xor(vec![1, 2, 3])]).unwrap();
    assert!(a.shares_code_with(&b), "same kinds, other key bytes");
    assert!(!a.shares_code_with(&c), "another key length");
    assert!(!a.shares_code_with(&d), "another order");
    assert!(a.shares_code_with(&a.clone()));
    // Keys differ although the code is shared.
    let src = [0u8; 3];
    let (mut x, mut y) = ([0u8; 3], [0u8; 3]);
    a.run(&src, &mut x, &mut State::new()).unwrap();
    b.run(&src, &mut y, &mut State::new()).unwrap();
    assert_eq!((x, y), ([1, 2, 3], [9, 9, 9]));
}

#[test]
fn the_table4_loops_use_the_extensions() {
    let p = Pipeline::new(&[Step::Copy, Step::Checksum, Step::Bswap32]).unwrap();
    let asm = p.disassemble();
    assert!(asm.contains("adc"), "{asm}");
    assert!(asm.contains("bswap"), "{asm}");
    let p = Pipeline::new(&[Step::Copy, Step::Crc32]).unwrap();
    let asm = p.disassemble();
    assert!(asm.contains("movzx"), "{asm}");
}
