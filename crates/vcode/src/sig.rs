//! Function signatures: the parameter type strings of `v_lambda`
//! (`"%i%p%d"`), parsed once and stored inline.

use std::fmt;

use crate::error::ErrorKind;
use crate::ty::{MAX_PARAMS, Ty};

/// A parsed parameter type string such as `"%i%p%d"` (`v_lambda`), stored
/// inline so that beginning a function allocates nothing.
#[derive(Copy, Clone, PartialEq, Eq)]
pub struct Signature {
    len: u8,
    tys: [Ty; MAX_PARAMS],
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string())
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.params().iter().try_for_each(|t| write!(f, "%{t}"))
    }
}

impl Default for Signature {
    fn default() -> Self {
        Signature::EMPTY
    }
}

impl Signature {
    /// The signature without parameters (`""`).
    pub(crate) const EMPTY: Signature = Signature {
        len: 0,
        tys: [Ty::V; MAX_PARAMS],
    };

    /// The parameter types in order.
    #[inline]
    pub fn params(&self) -> &[Ty] {
        &self.tys[..self.len as usize]
    }

    /// A signature of the given types; `None` past [`MAX_PARAMS`] or for `v`.
    pub fn of(tys: &[Ty]) -> Option<Signature> {
        let mut s = Signature::default();
        for &t in tys {
            if t == Ty::V || s.len as usize == MAX_PARAMS {
                return None;
            }
            s.tys[s.len as usize] = t;
            s.len += 1;
        }
        Some(s)
    }

    /// Parses `"%i%p%d"`-style strings: each parameter is `%` followed by a
    /// type letter of Table 1 other than `v`. Narrow types (`c uc s us`)
    /// are passed widened to `i`/`u` as C does. At most [`MAX_PARAMS`].
    pub fn parse(s: &str) -> Result<Signature, ErrorKind> {
        let mut sig = Signature::default();
        let b = s.as_bytes();
        let bad = |at| ErrorKind::BadSignature {
            sig: s.to_string(),
            at,
        };
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'%' {
                return Err(bad(i));
            }
            let (ty, len) = match (b.get(i + 1), b.get(i + 2)) {
                (Some(b'u'), Some(b'c' | b's')) => (Ty::U, 2),
                (Some(b'u'), Some(b'l')) => (Ty::UL, 2),
                (Some(b'c' | b's' | b'i'), _) => (Ty::I, 1),
                (Some(b'u'), _) => (Ty::U, 1),
                (Some(b'l'), _) => (Ty::L, 1),
                (Some(b'p'), _) => (Ty::P, 1),
                (Some(b'f'), _) => (Ty::F, 1),
                (Some(b'd'), _) => (Ty::D, 1),
                _ => return Err(bad(i + 1)),
            };
            if sig.len as usize == MAX_PARAMS {
                return Err(ErrorKind::TooManyParams {
                    sig: s.to_string(),
                    count: s.matches('%').count(),
                    max: MAX_PARAMS,
                });
            }
            sig.tys[sig.len as usize] = ty;
            sig.len += 1;
            i += 1 + len;
        }
        Ok(sig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_parse_every_type_letter() {
        let s = Signature::parse("%c%uc%s%us%i%u%l%ul%p%f%d").unwrap();
        use Ty::*;
        assert_eq!(s.params(), &[I, U, I, U, I, U, L, UL, P, F, D]);
        assert_eq!(Signature::parse("").unwrap().params(), &[]);
        assert_eq!(
            Signature::parse("%i%x").unwrap_err(),
            ErrorKind::BadSignature {
                sig: "%i%x".into(),
                at: 3
            }
        );
        assert_eq!(
            Signature::parse("i").unwrap_err(),
            ErrorKind::BadSignature {
                sig: "i".into(),
                at: 0
            }
        );
        assert_eq!(Signature::parse("%d%ul").unwrap().to_string(), "%d%ul");
    }

    /// 32 parameters of any type parse; a 33rd is an error that says the
    /// limit, not a bad byte.
    #[test]
    fn at_most_32_parameters() {
        for t in ["%i", "%l", "%d", "%uc", "%p"] {
            assert_eq!(Signature::parse(&t.repeat(32)).unwrap().params().len(), 32);
            let e = Signature::parse(&t.repeat(33)).unwrap_err();
            assert_eq!(
                e,
                ErrorKind::TooManyParams {
                    sig: t.repeat(33),
                    count: 33,
                    max: 32
                }
            );
            assert!(
                e.to_string()
                    .ends_with("has 33 parameters, more than the 32 a function takes"),
                "{e}"
            );
        }
    }
}
