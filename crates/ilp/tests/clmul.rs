//! The carry-less-multiply folding CRC of the generated loop (lists whose
//! CRC sees the source unchanged: `[Copy, Crc32]`, `[Crc32, Copy]`,
//! `[Crc32]`) against the reference steps and `crc32fast`: every length
//! 0..=400 at all 64 alignment pairs, lengths around the two-block minimum
//! and the non-temporal threshold, streams in pieces of odd lengths, guard
//! bytes, and the reference backend (which takes the table path).

use ilp::table4::random_bytes as data;
use ilp::{NT_MIN_LEN, Pipeline, State, Step, reference};

fn lists() -> [Vec<Step>; 3] {
    [
        vec![Step::Copy, Step::Crc32],
        vec![Step::Crc32, Step::Copy],
        vec![Step::Crc32],
    ]
}

fn check(steps: &[Step], src: &[u8], sa: usize, da: usize, state: State) {
    let p = Pipeline::new(steps).unwrap();
    let copy = steps.contains(&Step::Copy);
    let n = src.len();
    let dn = if copy { n } else { 0 };
    let mut sbuf = vec![0xa5u8; n + 16 + sa];
    sbuf[sa..sa + n].copy_from_slice(src);
    let mut dbuf = vec![0x5au8; n + 16 + da];
    let mut want_dst = vec![0u8; dn];
    let (mut st_want, mut st_got) = (state, state);
    let want = reference::run(steps, src, &mut want_dst, &mut st_want).unwrap();
    let got = p
        .run(&sbuf[sa..sa + n], &mut dbuf[da..da + dn], &mut st_got)
        .unwrap();
    let what = format!("{steps:?} len {n} align {sa}/{da}");
    assert_eq!((got, st_got), (want, st_want), "{what}");
    assert!(dbuf[da..da + dn] == want_dst[..], "{what}: dst differs");
    assert!(
        dbuf[..da]
            .iter()
            .chain(&dbuf[da + dn..])
            .all(|&b| b == 0x5a),
        "{what}: wrote outside dst"
    );
}

#[test]
fn every_length_to_400_and_alignment() {
    for steps in lists() {
        for n in 0..=400 {
            let src = data(n, n as u64 + 3);
            for sa in 0..8 {
                for da in 0..8 {
                    let st = State {
                        crc: (n * 77 + sa) as u32,
                        ..State::new()
                    };
                    check(&steps, &src, sa, da, st);
                }
            }
        }
    }
}

#[test]
fn around_the_minimum_and_the_threshold() {
    let src = data(NT_MIN_LEN + 200, 11);
    let mut lens = vec![127, 128, 129, 191, 192, 193, 4095, 4096, 4097, 65536 + 5];
    for d in [0, 1, 63, 64, 65] {
        lens.push(NT_MIN_LEN - d);
        lens.push(NT_MIN_LEN + d);
    }
    for steps in lists() {
        for &n in &lens {
            for (sa, da) in [(0, 0), (1, 6), (7, 3)] {
                check(&steps, &src[..n], sa, da, State::new());
            }
            assert_eq!(
                Pipeline::new(&steps)
                    .unwrap()
                    .run(
                        &src[..n],
                        &mut vec![0; if steps.len() == 2 { n } else { 0 }],
                        &mut State::new()
                    )
                    .unwrap()
                    .crc32,
                Some(crc32fast::hash(&src[..n])),
                "{steps:?} len {n}"
            );
        }
    }
}

#[test]
fn a_stream_in_odd_pieces() {
    let src = data(20_000, 5);
    for steps in lists() {
        let p = Pipeline::new(&steps).unwrap();
        let copy = steps.len() == 2;
        let mut out = vec![0u8; if copy { src.len() } else { 0 }];
        let mut st = State::new();
        let cuts = [0, 1, 130, 333, 5000, 5127, 19_999, 20_000];
        for w in cuts.windows(2) {
            let d = if copy {
                &mut out[w[0]..w[1]]
            } else {
                &mut [][..]
            };
            p.run(&src[w[0]..w[1]], d, &mut st).unwrap();
        }
        assert_eq!(st.crc, crc32fast::hash(&src), "{steps:?}");
        if copy {
            assert!(out == src, "{steps:?}: dst differs");
        }
    }
}

#[test]
fn the_reference_backend_takes_the_table_path() {
    let src = data(1000, 9);
    for steps in lists() {
        let p = Pipeline::new(&steps).unwrap();
        let mut out = vec![0u8; if steps.len() == 2 { src.len() } else { 0 }];
        let mut st = State::new();
        p.run_on_reference_backend(&src, &mut out, &mut st).unwrap();
        assert_eq!(st.crc, crc32fast::hash(&src), "{steps:?}");
    }
}

#[test]
fn the_loop_folds_when_the_cpu_can() {
    let has = std::is_x86_feature_detected!("pclmulqdq");
    for steps in lists() {
        let text = Pipeline::new(&steps).unwrap().disassemble();
        assert_eq!(text.contains("pclmul"), has, "{steps:?}\n{text}");
    }
    // A transform before the CRC keeps the table path.
    let text = Pipeline::new(&[Step::Bswap32, Step::Crc32, Step::Copy])
        .unwrap()
        .disassemble();
    assert!(!text.contains("pclmul"), "{text}");
}

#[test]
fn non_temporal_folding_at_aligned_and_unaligned_destinations() {
    use ilp::Stores;
    let src = data(70_000, 13);
    let p = Pipeline::new(&[Step::Copy, Step::Crc32]).unwrap();
    let mut dbuf = vec![0x5au8; 70_000 + 64];
    let base = dbuf.as_ptr().align_offset(16);
    for n in [0, 127, 128, 129, 200, 4096, 4099, 70_000] {
        for extra in [0, 1, 8, 16] {
            let at = base + extra;
            dbuf.fill(0x5a);
            let mut st = State::new();
            let out = p
                .run_with(
                    &src[..n],
                    &mut dbuf[at..at + n],
                    &mut st,
                    Stores::NonTemporal,
                )
                .unwrap();
            assert_eq!(
                out.crc32,
                Some(crc32fast::hash(&src[..n])),
                "len {n} +{extra}"
            );
            assert!(
                dbuf[at..at + n] == src[..n],
                "len {n} +{extra}: dst differs"
            );
            assert!(
                dbuf[..at].iter().chain(&dbuf[at + n..]).all(|&b| b == 0x5a),
                "len {n} +{extra}: wrote outside dst"
            );
        }
    }
}
