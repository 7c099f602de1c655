//! The non-temporal blocks loop (`Stores::NonTemporal`, and `Stores::Auto`
//! from `NT_MIN_LEN` bytes on) against the reference steps: every length
//! 0..=300 at all 64 alignment pairs, lengths around the 64-byte block and
//! around the `Auto` threshold, streams in pieces, with guard bytes around
//! both buffers.

use ilp::table4::random_bytes as data;
use ilp::{NT_MIN_LEN, Pipeline, State, Step, Stores, reference};

fn lists() -> Vec<Vec<Step>> {
    vec![
        vec![Step::Copy],
        vec![Step::Copy, Step::Checksum],
        vec![Step::Copy, Step::Checksum, Step::Bswap32],
        vec![Step::Copy, Step::Crc32],
        vec![
            Step::Xor(b"abc".to_vec()),
            Step::Bswap16,
            Step::Copy,
            Step::Checksum,
        ],
    ]
}

/// Runs `steps` with `stores` over `src` at alignments `sa`/`da` from
/// `state` and compares with the reference, guard bytes included.
fn check(steps: &[Step], stores: Stores, src: &[u8], sa: usize, da: usize, state: State) {
    let p = Pipeline::new(steps).unwrap();
    let n = src.len();
    let mut sbuf = vec![0xa5u8; n + 16 + sa];
    sbuf[sa..sa + n].copy_from_slice(src);
    let mut dbuf = vec![0x5au8; n + 16 + da];
    let mut want_dst = vec![0u8; n];
    let (mut st_want, mut st_got) = (state, state);
    let want = reference::run(steps, src, &mut want_dst, &mut st_want).unwrap();
    let got = p
        .run_with(
            &sbuf[sa..sa + n],
            &mut dbuf[da..da + n],
            &mut st_got,
            stores,
        )
        .unwrap();
    let what = format!("{steps:?} {stores:?} len {n} align {sa}/{da}");
    assert_eq!((got, st_got), (want, st_want), "{what}");
    assert!(dbuf[da..da + n] == want_dst[..], "{what}: dst differs");
    assert!(
        dbuf[..da].iter().chain(&dbuf[da + n..]).all(|&b| b == 0x5a),
        "{what}: wrote outside dst"
    );
}

#[test]
fn non_temporal_every_short_length_and_alignment() {
    for steps in lists() {
        for n in 0..=300 {
            let src = data(n, n as u64 + 1);
            for sa in 0..8 {
                for da in 0..8 {
                    let st = State {
                        offset: (sa * 3 + da) as u64,
                        ..State::new()
                    };
                    check(&steps, Stores::NonTemporal, &src, sa, da, st);
                }
            }
        }
    }
}

#[test]
fn around_the_block_and_the_threshold() {
    let mut lens: Vec<usize> = (0..4)
        .flat_map(|k| [64 * k + 63, 64 * k + 64, 64 * k + 65])
        .collect();
    for d in [0, 1, 7, 8, 63, 64, 65] {
        lens.push(NT_MIN_LEN - d);
        lens.push(NT_MIN_LEN + d);
    }
    let src = data(NT_MIN_LEN + 100, 9);
    for steps in lists() {
        for &n in &lens {
            for stores in [Stores::Auto, Stores::Cached, Stores::NonTemporal] {
                for (sa, da) in [(0, 0), (3, 5), (7, 1)] {
                    check(&steps, stores, &src[..n], sa, da, State::new());
                }
            }
        }
    }
}

#[test]
fn a_stream_in_pieces_mixing_store_kinds() {
    let src = data(3 * NT_MIN_LEN / 2 + 77, 5);
    for steps in lists() {
        let p = Pipeline::new(&steps).unwrap();
        let (mut want_st, mut want) = (State::new(), vec![0u8; src.len()]);
        let want_out = reference::run(&steps, &src, &mut want, &mut want_st).unwrap();
        let (mut st, mut out) = (State::new(), vec![0u8; src.len()]);
        // Pieces of even length keep the byte swaps on the same units.
        let cuts = [0, 1000, NT_MIN_LEN + 1000, src.len()];
        let kinds = [Stores::NonTemporal, Stores::Auto, Stores::Cached];
        let mut got = None;
        for (w, stores) in cuts.windows(2).zip(kinds) {
            got = Some(
                p.run_with(&src[w[0]..w[1]], &mut out[w[0]..w[1]], &mut st, stores)
                    .unwrap(),
            );
        }
        assert_eq!((got.unwrap(), st), (want_out, want_st), "{steps:?}");
        assert!(out == want, "{steps:?}: dst differs");
    }
}

#[test]
fn the_copy_loops_have_both_store_kinds() {
    for steps in lists() {
        let text = Pipeline::new(&steps).unwrap().disassemble();
        assert!(
            text.contains("movnti") && text.contains("sfence"),
            "{steps:?}\n{text}"
        );
    }
    let scan = Pipeline::new(&[Step::Checksum]).unwrap().disassemble();
    assert!(!scan.contains("movnti"), "{scan}");
}
