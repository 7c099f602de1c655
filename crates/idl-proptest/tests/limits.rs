//! The limits hold, with typed errors, and leave the channel usable: a
//! string or sequence beyond the per-string limit, strings that do not fit
//! the string area, more strings than a message may carry, an out string
//! the server cannot fit, and (from a client that skips its stub's checks)
//! a descriptor beyond the limit. After each refused call the next call on
//! the same channel works. The interface is `idl/limits.idl`.

use idl::rt::shm::{ClientEnd, Config};
use idl::rt::{CallError, OutStr, Status};
use idl_proptest::fixed::limits;

/// The server of `limits.idl`: reports lengths, answers strings of the
/// length asked for.
struct Lengths;

impl limits::Server for Lengths {
    fn put(&mut self, s: &str) -> u32 {
        s.len() as u32
    }

    fn put_two(&mut self, a: &str, b: &str) -> u32 {
        (a.len() + b.len()) as u32
    }

    fn put_words(&mut self, words: &[u32]) -> u32 {
        words.len() as u32
    }

    fn get(&mut self, len: u32, s: &mut OutStr<'_>) {
        for _ in 0..len {
            if s.push('g').is_err() {
                return;
            }
        }
    }

    fn echo(&mut self, x: i32) -> i32 {
        x
    }
}

/// A channel of `config` with a [`Lengths`] server in a thread; runs
/// `client` and then hangs up.
fn with_channel(config: Config, client: impl FnOnce(&mut ClientEnd)) {
    let (mut c, mut s) = idl::rt::shm::pair(&config).expect("a shared-memory channel");
    let server = std::thread::spawn(move || limits::serve(&mut Lengths, &mut s));
    client(&mut c);
    drop(c);
    server
        .join()
        .expect("the server thread does not panic")
        .expect("the server loop ends cleanly");
}

fn config(max_strings: u32, max_string_bytes: u32, area: usize) -> Config {
    let mut c = Config {
        area,
        ..Config::default()
    };
    c.limits.max_strings = max_strings;
    c.limits.max_string_bytes = max_string_bytes;
    c
}

/// The channel still works: a call without strings and one with.
fn still_usable(c: &mut ClientEnd) {
    assert_eq!(limits::echo(c, -7).expect("echo after a refused call"), -7);
    assert_eq!(limits::put(c, "ok").expect("put after a refused call"), 2);
}

#[test]
fn a_string_beyond_the_per_string_limit_is_refused() {
    with_channel(config(31, 4096, 64 << 10), |c| {
        let at_limit = "s".repeat(4096);
        assert_eq!(
            limits::put(c, &at_limit).expect("a string at the limit"),
            4096
        );
        let over = "s".repeat(4097);
        match limits::put(c, &over) {
            Err(CallError::StringTooLong {
                len: 4097,
                max: 4096,
            }) => {}
            other => panic!("a string of 4097 bytes over a limit of 4096: {other:?}"),
        }
        still_usable(c);
        // A multi-byte character that ends past the limit.
        let straddling = format!("{}é", "s".repeat(4095));
        assert!(matches!(
            limits::put(c, &straddling),
            Err(CallError::StringTooLong { .. })
        ));
        still_usable(c);
    });
}

#[test]
fn a_sequence_beyond_the_per_string_limit_is_refused() {
    with_channel(config(31, 4096, 64 << 10), |c| {
        assert_eq!(
            limits::put_words(c, &[7; 1024]).expect("1024 words: 4096 bytes"),
            1024
        );
        match limits::put_words(c, &[7; 1025]) {
            Err(CallError::StringTooLong {
                len: 4100,
                max: 4096,
            }) => {}
            other => panic!("1025 words (4100 bytes) over a limit of 4096 bytes: {other:?}"),
        }
        still_usable(c);
    });
}

#[test]
fn strings_beyond_the_area_are_refused() {
    // Each string is within the per-string limit; together they are not
    // within the area.
    with_channel(config(31, 48 << 10, 64 << 10), |c| {
        let area = c.area_len();
        assert_eq!(
            area,
            64 << 10,
            "the area is the configured size (a whole number of pages)"
        );
        let half = "a".repeat(20 << 10);
        assert_eq!(
            limits::put_two(c, &half, &half).expect("40 KiB in a 64 KiB area"),
            40 << 10
        );
        let big = "b".repeat(40 << 10);
        match limits::put_two(c, &big, &big) {
            Err(CallError::AreaFull { len, at, size }) => {
                assert_eq!((len, at, size), (40 << 10, 40 << 10, area));
            }
            other => panic!("80 KiB of strings in a 64 KiB area: {other:?}"),
        }
        still_usable(c);
        assert_eq!(
            limits::put_two(c, &big, "").expect("the area is empty again"),
            40 << 10
        );
    });
}

#[test]
fn more_strings_than_a_message_may_carry_are_refused() {
    with_channel(config(1, 4096, 64 << 10), |c| {
        match limits::put_two(c, "a", "b") {
            Err(CallError::TooManyStrings { max: 1 }) => {}
            other => panic!("two strings over a limit of one: {other:?}"),
        }
        still_usable(c);
    });
}

#[test]
fn an_out_string_the_server_cannot_fit_is_an_overflow() {
    with_channel(config(31, 4096, 64 << 10), |c| {
        let mut s = String::new();
        limits::get(c, 4096, &mut s).expect("an out string at the limit");
        assert_eq!(s, "g".repeat(4096));
        match limits::get(c, 4097, &mut s) {
            Err(e) => assert_eq!(e.status(), Some(Status::Overflow), "{e}"),
            Ok(()) => panic!("an out string of 4097 bytes over a limit of 4096 came back"),
        }
        still_usable(c);
        limits::get(c, 3, &mut s).expect("a short out string after an overflow");
        assert_eq!(s, "ggg");
    });
}

#[test]
fn the_server_refuses_a_descriptor_beyond_the_limit() {
    // A client that skips its stub's checks: the record of `put` is the
    // string's descriptor (offset, length) and the reply's u32.
    with_channel(config(31, 4096, 64 << 10), |c| {
        let mut record = [0u8; 8];
        record[4..].copy_from_slice(&4097u32.to_ne_bytes());
        match c.call_raw(limits::PUT, &record) {
            Err(e) => assert_eq!(e.status(), Some(Status::BadString), "{e}"),
            Ok(_) => panic!("the server took a descriptor of 4097 bytes over a limit of 4096"),
        }
        still_usable(c);
    });
}
