//! Published test vectors for the checksum and the CRC, and agreement with
//! `crc32fast`, through the generated loops and the reference steps.

use ilp::{Pipeline, State, Step, reference};

/// RFC 1071 §3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
const RFC1071: [u8; 8] = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];

#[test]
fn rfc1071_example() {
    assert_eq!(reference::internet_checksum(&RFC1071), !0xddf2);
    let p = Pipeline::new(&[Step::Checksum]).unwrap();
    let mut st = State::new();
    let out = p.scan(&RFC1071, &mut st).unwrap();
    assert_eq!(st.sum, 0xddf2);
    assert_eq!(out.checksum, Some(0x220d));
}

#[test]
fn rfc1071_example_in_pieces_of_every_split() {
    // A stream resumed at an odd offset continues the half-filled word.
    let p = Pipeline::new(&[Step::Checksum]).unwrap();
    for cut in 0..=RFC1071.len() {
        let mut st = State::new();
        p.scan(&RFC1071[..cut], &mut st).unwrap();
        let out = p.scan(&RFC1071[cut..], &mut st).unwrap();
        assert_eq!(out.checksum, Some(0x220d), "cut at {cut}");
        assert_eq!(st.offset, 8);
    }
}

#[test]
fn checksum_of_a_real_ipv4_header_is_zero_when_verified() {
    // An IPv4 header with its checksum field (0xb861) filled in: summing it
    // again gives 0xffff, so its checksum is 0.
    let h: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];
    let p = Pipeline::new(&[Step::Checksum]).unwrap();
    assert_eq!(p.scan(&h, &mut State::new()).unwrap().checksum, Some(0));
    assert_eq!(reference::internet_checksum(&h), 0);
}

#[test]
fn crc32_check_value() {
    // The CRC-32 catalogue's check value for "123456789".
    assert_eq!(reference::crc32(0, b"123456789"), 0xcbf4_3926);
    let p = Pipeline::new(&[Step::Crc32]).unwrap();
    let out = p.scan(b"123456789", &mut State::new()).unwrap();
    assert_eq!(out.crc32, Some(0xcbf4_3926));
    let p = Pipeline::new(&[Step::Copy, Step::Crc32]).unwrap();
    let mut dst = [0u8; 9];
    let out = p.run(b"123456789", &mut dst, &mut State::new()).unwrap();
    assert_eq!(out.crc32, Some(0xcbf4_3926));
    assert_eq!(&dst, b"123456789");
    assert_eq!(
        ilp::handfused::copy_crc32(b"123456789", &mut dst, 0),
        0xcbf4_3926
    );
}

#[test]
fn crc32_of_empty_and_zeros() {
    let p = Pipeline::new(&[Step::Crc32]).unwrap();
    assert_eq!(p.scan(&[], &mut State::new()).unwrap().crc32, Some(0));
    let z = [0u8; 32];
    assert_eq!(
        p.scan(&z, &mut State::new()).unwrap().crc32,
        Some(crc32fast::hash(&z))
    );
}

#[test]
fn crc32_agrees_with_crc32fast() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let p = Pipeline::new(&[Step::Crc32]).unwrap();
    for len in (0..300).chain([1000, 4096, 4099, 65_536, 65_543]) {
        let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let want = crc32fast::hash(&data);
        assert_eq!(reference::crc32(0, &data), want, "reference, len {len}");
        assert_eq!(
            p.scan(&data, &mut State::new()).unwrap().crc32,
            Some(want),
            "ilp, len {len}"
        );
        // Resumed at an arbitrary cut.
        let cut = len / 3;
        let mut st = State::new();
        p.scan(&data[..cut], &mut st).unwrap();
        assert_eq!(p.scan(&data[cut..], &mut st).unwrap().crc32, Some(want));
    }
}
