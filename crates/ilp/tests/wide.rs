//! The vector loops (zmm with AVX-512F and BW, else ymm with AVX2;
//! VPCLMULQDQ for the CRC) of the lists that have them: `[Copy, Crc32]`,
//! `[Crc32, Copy]`, `[Crc32]` (folding four registers, 256 or 128 bytes,
//! per iteration) and lists of copies, checksums and byte swaps (the same
//! per iteration, the checksum in 64-bit lanes), against
//! `ilp::reference` and `crc32fast`: every length 0..=1024 at every source
//! and every destination alignment 0..63, the whole 64 x 64 grid at lengths
//! around the minimum (256 bytes for zmm, 128 for ymm), random longer
//! buffers, random initial states, streams resumed across split buffers,
//! non-temporal stores at 64-byte aligned and unaligned destinations,
//! all-zero and all-ones data over several of the checksum loop's 64 KiB
//! chunks, and guard bytes. Each test runs at every width this CPU has
//! (`widths`): on an AVX-512 CPU the zmm loops, then the ymm loops
//! (`Vectors::Ymm`), then the xmm and 64-bit ones (`Vectors::Xmm`), so
//! one machine tests every path it can run.

use ilp::table4::random_bytes as data;
use ilp::{Pipeline, State, Step, Stores, Vectors, reference};

fn lists() -> [Vec<Step>; 10] {
    use Step::*;
    [
        vec![Copy, Crc32],
        vec![Crc32, Copy],
        vec![Crc32],
        vec![Copy, Checksum],
        vec![Checksum, Copy],
        vec![Checksum],
        vec![Copy, Checksum, Bswap32],
        vec![Bswap16, Checksum, Copy, Bswap32],
        vec![Bswap32, Copy],
        vec![Copy],
    ]
}

fn avx512() -> bool {
    std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
}

/// Each list at each vector width this CPU runs: the widest, ymm when that
/// is narrower than the widest, and the loops without ymm or zmm.
fn widths(lists: impl IntoIterator<Item = Vec<Step>>) -> Vec<(Vec<Step>, Vectors)> {
    let mut ws = vec![Vectors::Widest];
    if avx512() {
        ws.push(Vectors::Ymm);
    }
    if std::is_x86_feature_detected!("avx2") {
        ws.push(Vectors::Xmm);
    }
    let lists: Vec<Vec<Step>> = lists.into_iter().collect();
    ws.iter()
        .flat_map(|&w| lists.iter().map(move |l| (l.clone(), w)))
        .collect()
}

/// Runs `p` over `src` at source alignment `sa` (mod 64) into a
/// destination at alignment `da` with `stores`, from `state`, against the
/// reference (and, for a CRC, `crc32fast` continuing `state.crc`), with
/// guard bytes around both buffers.
fn check(p: &Pipeline, src: &[u8], sa: usize, da: usize, state: State, stores: Stores) {
    let steps = p.steps();
    let copy = steps.contains(&Step::Copy);
    let n = src.len();
    let dn = if copy { n } else { 0 };
    // Alignment relative to a 64-byte boundary: over-allocate and offset.
    let mut sbuf = vec![0xa5u8; n + 160];
    let s0 = sbuf.as_ptr().align_offset(64) + sa;
    sbuf[s0..s0 + n].copy_from_slice(src);
    let mut dbuf = vec![0x5au8; n + 160];
    let d0 = dbuf.as_ptr().align_offset(64) + da;
    let mut want_dst = vec![0u8; dn];
    let (mut st_want, mut st_got) = (state, state);
    let want = reference::run(steps, src, &mut want_dst, &mut st_want).unwrap();
    let got = p
        .run_with(
            &sbuf[s0..s0 + n],
            &mut dbuf[d0..d0 + dn],
            &mut st_got,
            stores,
        )
        .unwrap();
    let v = p.vectors();
    let what = format!("{steps:?} {v:?} len {n} align {sa}/{da} {stores:?} from {state:?}");
    assert_eq!((got, st_got), (want, st_want), "{what}");
    if steps.contains(&Step::Crc32) {
        let mut h = crc32fast::Hasher::new_with_initial_len(state.crc, state.offset);
        h.update(src);
        assert_eq!(st_got.crc, h.finalize(), "{what}: against crc32fast");
    }
    assert!(dbuf[d0..d0 + dn] == want_dst[..], "{what}: dst differs");
    assert!(
        dbuf[..d0]
            .iter()
            .chain(&dbuf[d0 + dn..])
            .all(|&b| b == 0x5a),
        "{what}: wrote outside dst"
    );
    assert!(
        sbuf[..s0].iter().chain(&sbuf[s0 + n..]).all(|&b| b == 0xa5),
        "{what}: touched outside src"
    );
}

/// A state at some point of a stream (any offset parity, any sums).
fn state(k: u64) -> State {
    State {
        offset: k % 5,
        sum: (k.wrapping_mul(0x9e37) >> 3) as u16,
        crc: k.wrapping_mul(0x9e37_79b9) as u32,
    }
}

#[test]
fn every_length_to_1024_at_every_alignment() {
    let src = data(1024, 77);
    for (steps, v) in widths(lists()) {
        let p = Pipeline::with_vectors(&steps, v).unwrap();
        for n in 0..=1024 {
            // Every source alignment and every destination alignment, each
            // paired with a varying other one.
            for a in 0..64 {
                let b = (a * 37 + n) % 64;
                check(&p, &src[..n], a, b, state(n as u64), Stores::Auto);
                check(&p, &src[..n], b, a, state(a as u64), Stores::Auto);
            }
        }
    }
}

#[test]
fn the_whole_alignment_grid_around_the_minimum() {
    let src = data(1400, 78);
    for (steps, v) in widths(lists()) {
        let p = Pipeline::with_vectors(&steps, v).unwrap();
        for n in [
            127, 128, 129, 191, 255, 256, 257, 320, 511, 512, 575, 1279, 1343,
        ] {
            for sa in 0..64 {
                for da in 0..64 {
                    check(&p, &src[..n], sa, da, state((sa * da) as u64), Stores::Auto);
                }
            }
        }
    }
}

#[test]
fn random_longer_buffers() {
    let mut x = 0x1234_5678u64;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let src = data(200_000, 79);
    for (steps, v) in widths(lists()) {
        let p = Pipeline::with_vectors(&steps, v).unwrap();
        for _ in 0..60 {
            let n = 1025 + next(199_000) as usize;
            let (sa, da) = (next(64) as usize, next(64) as usize);
            check(&p, &src[..n], sa, da, state(next(1 << 40)), Stores::Auto);
        }
    }
}

#[test]
fn all_zero_and_all_ones_data() {
    // The lane sums must stay exact (all ones: every add carries) and a
    // sum of zeros must stay zero.
    for byte in [0x00, 0xff] {
        let src = vec![byte; 300_000];
        for (steps, v) in widths(lists()) {
            let p = Pipeline::with_vectors(&steps, v).unwrap();
            // Up to several 64 KiB chunks of the checksum loop.
            for n in [256, 4096, 65_536, 65_792, 70_000, 300_000] {
                check(&p, &src[..n], 0, 0, State::new(), Stores::Auto);
                check(&p, &src[..n], 3, 17, state(9), Stores::Auto);
            }
        }
    }
}

#[test]
fn non_temporal_stores_at_aligned_and_unaligned_destinations() {
    let src = data(70_000, 80);
    for (steps, v) in widths(lists()) {
        if !steps.contains(&Step::Copy) {
            continue;
        }
        let p = Pipeline::with_vectors(&steps, v).unwrap();
        for n in [0, 255, 256, 300, 1024, 4096, 4099, 70_000] {
            for da in [0, 1, 8, 16, 32, 48, 63] {
                for sa in [0, 5] {
                    check(&p, &src[..n], sa, da, state(n as u64), Stores::NonTemporal);
                    check(&p, &src[..n], sa, da, state(3), Stores::Cached);
                }
            }
        }
    }
}

#[test]
fn the_head_that_aligns_dst_at_every_destination_alignment() {
    // `run` first takes the (64 - dst % 64) % 64 bytes up to a 64-byte
    // boundary on their own (a whole number of swap units), so the
    // 512-bit loops store aligned; lengths around that head plus the
    // loops' 256-byte minimum, both store kinds, states of both offset
    // parities, and lists whose swap unit forbids some heads (a CRC list
    // with ordinary stores takes it from 16 KiB on when the 512-bit CRC
    // loop's masked head cannot: heads of 1 to 3 bytes).
    let src = data(18_000, 83);
    let mut all = lists().to_vec();
    all.push(vec![Step::Bswap16, Step::Copy]);
    all.push(vec![Step::Copy, Step::Bswap16, Step::Checksum]);
    for (steps, v) in widths(all) {
        let p = Pipeline::with_vectors(&steps, v).unwrap();
        for da in 0..64 {
            let head = (64 - da) % 64;
            let lens = [255, 256, 257, 263, 319, 320, 575, 1024, 16_383, 16_640];
            for n in lens.map(|m| head + m) {
                for sa in [0, 1, da, 63 - da] {
                    for stores in [Stores::NonTemporal, Stores::Cached] {
                        let k = (n + sa) as u64;
                        check(&p, &src[..n], sa, da, state(k), stores);
                    }
                }
            }
        }
    }
}

#[test]
fn the_folding_tail_of_the_crc_loop_at_every_tail_length() {
    // After the 512-bit CRC loop's whole blocks, the 16-byte words of the
    // last len % 64 bytes fold into the reduced lanes (`clfold`) and only
    // len % 16 bytes take table steps. Every tail length 0..63 after a
    // plain first group (dst 64-byte aligned, or non-temporal stores) and
    // after the masked head (dst 16 and 61 past a line; the head moves the
    // tail to (len + o) % 64), several loop counts, every source alignment
    // of a few, nonzero incoming states, with and without a copy. (Below
    // 256 bytes the 128-bit path runs; `every_length_to_1024_at_every_alignment`
    // covers its tails.)
    let src = data(4096 + 64, 85);
    for (steps, v) in widths([
        vec![Step::Copy, Step::Crc32],
        vec![Step::Crc32, Step::Copy],
        vec![Step::Crc32],
    ]) {
        let p = Pipeline::with_vectors(&steps, v).unwrap();
        for base in [256, 320, 448, 1024, 4096] {
            for t in 0..64 {
                let n = base + t;
                for da in [0, 16, 61] {
                    for sa in [0, 1, 15, 16, 63] {
                        let k = (n * 7 + sa + da) as u64;
                        for stores in [Stores::Cached, Stores::NonTemporal] {
                            check(&p, &src[..n], sa, da, state(k), stores);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_masked_head_of_the_crc_loop_at_every_alignment() {
    // The 512-bit CRC loop with a copy and ordinary stores aligns dst
    // itself: a masked load of zeros(o) || src[0..h] from src - o and a
    // masked store at dst - o (o = dst % 64 in 4..=60, h = 64 - o), the
    // CRC register injected at byte o. Every destination alignment,
    // every length from h + 255 to h + 1024 (the head is taken where it
    // does not lengthen the table-CRC end much, e.g. len % 64 = 63 always),
    // the whole source grid at lengths that take it, longer buffers,
    // nonzero incoming states, both store kinds; `check` compares with the
    // reference and crc32fast and checks the guard bytes around dst.
    let src = data(70_100, 84);
    for (steps, v) in widths([vec![Step::Copy, Step::Crc32], vec![Step::Crc32, Step::Copy]]) {
        let p = Pipeline::with_vectors(&steps, v).unwrap();
        for da in 0..64 {
            let head = (64 - da) % 64;
            for n in head + 255..=head + 1024 {
                let sa = (da * 7 + n) % 64;
                let k = (n * 31 + da) as u64;
                check(&p, &src[..n], sa, da, state(k), Stores::Cached);
                check(&p, &src[..n], 63 - sa, da, state(k + 1), Stores::Auto);
            }
            for n in [383, 447, 1087, 4095, 4096, 4159, 8191, 16_447] {
                for sa in 0..64 {
                    let k = (n + sa * 64 + da) as u64;
                    check(&p, &src[..n], sa, da, state(k), Stores::Cached);
                }
            }
            for n in [16_384, 20_000 + da, 70_001] {
                for sa in [0, 1, 16, da, 63] {
                    for stores in [Stores::Cached, Stores::NonTemporal] {
                        check(&p, &src[..n], sa, da, state((n + sa) as u64), stores);
                    }
                }
            }
        }
    }
}

#[test]
fn streams_resumed_across_split_buffers() {
    let src = data(50_000, 81);
    let cuts: [&[usize]; 4] = [
        &[0, 1, 300, 333, 5000, 5127, 49_999, 50_000],
        &[0, 256, 512, 769, 20_000, 50_000],
        &[0, 4097, 4098, 10_000, 10_255, 50_000],
        &[0, 50_000],
    ];
    for (steps, v) in widths(lists()) {
        let p = Pipeline::with_vectors(&steps, v).unwrap();
        let copy = steps.contains(&Step::Copy);
        let swaps = steps
            .iter()
            .any(|s| matches!(s, Step::Bswap16 | Step::Bswap32));
        let dn = if copy { src.len() } else { 0 };
        let mut whole_dst = vec![0u8; dn];
        let mut whole_st = State::new();
        let whole = reference::run(&steps, &src, &mut whole_dst, &mut whole_st).unwrap();
        for c in cuts {
            // The same pieces natively and by the reference (byte swaps
            // restart at each buffer, so only lists without them equal
            // the stream at once).
            let (mut out, mut want_dst) = (vec![0u8; dn], vec![0u8; dn]);
            let (mut st, mut want_st) = (State::new(), State::new());
            let (mut got, mut want) = Default::default();
            for w in c.windows(2) {
                let piece = &src[w[0]..w[1]];
                let r = if copy { w[0]..w[1] } else { 0..0 };
                got = p.run(piece, &mut out[r.clone()], &mut st).unwrap();
                want = reference::run(&steps, piece, &mut want_dst[r], &mut want_st).unwrap();
            }
            assert_eq!((got, st), (want, want_st), "{steps:?} cut at {c:?}");
            assert!(out == want_dst, "{steps:?} cut at {c:?}: dst differs");
            if !swaps {
                assert_eq!((got, st), (whole, whole_st), "{steps:?} cut at {c:?}");
                assert!(out == whole_dst, "{steps:?} cut at {c:?}: dst differs");
            }
            if steps.contains(&Step::Crc32) {
                assert_eq!(st.crc, crc32fast::hash(&src), "{steps:?}");
            }
        }
    }
}

#[test]
fn the_wide_loops_are_generated_when_the_cpu_can() {
    // The widest registers the CPU has: zmm with AVX-512F and BW, else ymm
    // with AVX2; the CRC loop also needs VPCLMULQDQ.
    let avx512 =
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw");
    let avx2 = std::is_x86_feature_detected!("avx2");
    let (regs, other) = if avx512 {
        ("zmm", "ymm")
    } else {
        ("ymm", "zmm")
    };
    let vpclmul = (avx512 || avx2) && std::is_x86_feature_detected!("vpclmulqdq");
    for steps in lists() {
        let text = Pipeline::new(&steps).unwrap().disassemble();
        let want = if steps.contains(&Step::Crc32) {
            vpclmul
        } else {
            avx512 || avx2
        };
        assert_eq!(text.contains(regs), want, "{steps:?}\n{text}");
        // No instruction works at the other width. The one exception: the
        // zmm CRC loop reduces its lanes by extracting the upper 256 bits
        // into a ymm register (`vextracti64x4`).
        for line in text.lines().filter(|l| l.contains(other)) {
            assert!(
                avx512 && line.contains("vextracti64x4"),
                "{steps:?}: {other} in the {regs} code: {line}\n{text}"
            );
        }
        // Every vector path ends with vzeroupper before SSE code runs.
        assert_eq!(text.contains("vzeroupper"), want, "{steps:?}");
        // Only the zmm CRC loop has the byte-masked head.
        let masked = avx512 && want && steps.contains(&Step::Copy) && steps.contains(&Step::Crc32);
        assert_eq!(text.contains("vmovdqu8"), masked, "{steps:?}");
    }
    // A transform before the CRC, checksum and CRC together, or an xor
    // keep the 64-bit path.
    for steps in [
        vec![Step::Bswap32, Step::Crc32, Step::Copy],
        vec![Step::Copy, Step::Checksum, Step::Crc32],
        vec![Step::Xor(vec![1, 2, 3]), Step::Checksum, Step::Copy],
    ] {
        let text = Pipeline::new(&steps).unwrap().disassemble();
        assert!(
            !text.contains("zmm") && !text.contains("ymm"),
            "{steps:?}\n{text}"
        );
    }
}

#[test]
fn narrower_vectors_are_generated_when_asked() {
    // `Vectors::Ymm`: ymm loops where the widest would have any vector
    // loop (every AVX-512 CPU has AVX2), never zmm; `Vectors::Xmm`: neither.
    // Each width its own cached code, and the same results (the tests
    // above run every width).
    let avx2 = std::is_x86_feature_detected!("avx2");
    let vpclmul = avx2 && std::is_x86_feature_detected!("vpclmulqdq");
    for steps in lists() {
        let want = if steps.contains(&Step::Crc32) {
            vpclmul
        } else {
            avx2
        };
        let ymm = Pipeline::with_vectors(&steps, Vectors::Ymm).unwrap();
        let text = ymm.disassemble();
        assert_eq!(text.contains("ymm"), want, "{steps:?}\n{text}");
        assert!(!text.contains("zmm"), "{steps:?}\n{text}");
        assert_eq!(text.contains("vzeroupper"), want, "{steps:?}");
        assert_eq!(ymm.vectors(), Vectors::Ymm);
        let xmm = Pipeline::with_vectors(&steps, Vectors::Xmm).unwrap();
        let text = xmm.disassemble();
        assert!(
            !text.contains("ymm") && !text.contains("zmm") && !text.contains("vzeroupper"),
            "{steps:?}\n{text}"
        );
        let widest = Pipeline::new(&steps).unwrap();
        assert!(!xmm.shares_code_with(&widest) || !want, "{steps:?}");
        assert!(!ymm.shares_code_with(&widest) || !avx512(), "{steps:?}");
        assert!(
            ymm.shares_code_with(&Pipeline::with_vectors(&steps, Vectors::Ymm).unwrap()),
            "{steps:?}: the cache"
        );
    }
}

#[test]
fn the_reference_backend_takes_the_portable_path() {
    let src = data(3000, 82);
    for steps in lists() {
        let p = Pipeline::new(&steps).unwrap();
        let copy = steps.contains(&Step::Copy);
        let mut out = vec![0u8; if copy { src.len() } else { 0 }];
        let mut st = State::new();
        let got = p.run_on_reference_backend(&src, &mut out, &mut st).unwrap();
        let mut want_dst = vec![0u8; out.len()];
        let mut want_st = State::new();
        let want = reference::run(&steps, &src, &mut want_dst, &mut want_st).unwrap();
        assert_eq!((got, st, out), (want, want_st, want_dst), "{steps:?}");
    }
}
