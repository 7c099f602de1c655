//! Typed values for the safe API: what a scripting host or a generic proxy
//! holds, checked against an operation's parameter types, and their C
//! layout (the bytes of a struct or array in a record, of a sequence's
//! elements in the string area).

use super::plan::{field_offsets, size_align};
use crate::model::{Prim, StructDef, Type};

/// A value of an IDL type.
///
/// Scalars are one variant per primitive; `string` is [`Value::Str`];
/// sequences and fixed arrays are [`Value::Seq`] (an array's length must
/// be its declared one); structs are [`Value::Struct`] with the fields in
/// declaration order. For an `out` parameter any value of the right type
/// or [`Value::Void`] may be passed: it is replaced by the result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// No value: the result of a `void` operation, or a placeholder for
    /// an `out` parameter.
    Void,
    /// `boolean`.
    Bool(bool),
    /// `char`.
    Char(u8),
    /// `int8_t`.
    I8(i8),
    /// `octet`, `uint8_t`.
    U8(u8),
    /// `short`.
    I16(i16),
    /// `unsigned short`.
    U16(u16),
    /// `int`, `long`.
    I32(i32),
    /// `unsigned int`, `unsigned long`.
    U32(u32),
    /// `long long`, `hyper`.
    I64(i64),
    /// `unsigned long long`.
    U64(u64),
    /// `string`.
    Str(String),
    /// `sequence<T>`, `[size_is(n)] T *`, or a fixed array `T x[N]`.
    Seq(Seq),
    /// A struct: its fields in declaration order.
    Struct(Vec<Value>),
}

/// The elements of a sequence or array: a typed vector for primitive
/// elements (`char` elements as `U8`), [`Seq::Values`] for structs and
/// nested arrays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seq {
    /// `int8_t` elements.
    I8(Vec<i8>),
    /// `octet`, `uint8_t` or `char` elements.
    U8(Vec<u8>),
    /// `short` elements.
    I16(Vec<i16>),
    /// `unsigned short` elements.
    U16(Vec<u16>),
    /// `int` elements.
    I32(Vec<i32>),
    /// `unsigned int` elements.
    U32(Vec<u32>),
    /// `long long` elements.
    I64(Vec<i64>),
    /// `unsigned long long` elements.
    U64(Vec<u64>),
    /// Struct or array elements, each a [`Value`].
    Values(Vec<Value>),
}

macro_rules! each_prim_seq {
    ($s:expr, $v:ident => $e:expr, $vals:ident => $f:expr) => {
        match $s {
            Seq::I8($v) => $e,
            Seq::U8($v) => $e,
            Seq::I16($v) => $e,
            Seq::U16($v) => $e,
            Seq::I32($v) => $e,
            Seq::U32($v) => $e,
            Seq::I64($v) => $e,
            Seq::U64($v) => $e,
            Seq::Values($vals) => $f,
        }
    };
}

impl Seq {
    /// Number of elements.
    pub fn len(&self) -> usize {
        each_prim_seq!(self, v => v.len(), v => v.len())
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements' bytes in place, for a typed vector.
    pub(crate) fn raw(&self) -> Option<(*const u8, usize)> {
        each_prim_seq!(self, v => Some((v.as_ptr().cast::<u8>(), v.len())), _v => None)
    }

    fn name(&self) -> String {
        let e = match self {
            Seq::I8(_) => "int8",
            Seq::U8(_) => "uint8",
            Seq::I16(_) => "int16",
            Seq::U16(_) => "uint16",
            Seq::I32(_) => "int32",
            Seq::U32(_) => "uint32",
            Seq::I64(_) => "int64",
            Seq::U64(_) => "uint64",
            Seq::Values(_) => "value",
        };
        format!("sequence of {} {e}", self.len())
    }
}

impl Value {
    /// A short description of the value's type, for errors.
    pub fn type_name(&self) -> String {
        match self {
            Value::Void => "void".into(),
            Value::Bool(_) => "boolean".into(),
            Value::Char(_) => "char".into(),
            Value::I8(_) => "int8".into(),
            Value::U8(_) => "uint8".into(),
            Value::I16(_) => "int16".into(),
            Value::U16(_) => "uint16".into(),
            Value::I32(_) => "int32".into(),
            Value::U32(_) => "uint32".into(),
            Value::I64(_) => "int64".into(),
            Value::U64(_) => "uint64".into(),
            Value::Str(_) => "string".into(),
            Value::Seq(s) => s.name(),
            Value::Struct(f) => format!("struct of {} fields", f.len()),
        }
    }

    /// The value as a slot: the integer extended to 64 bits by its
    /// signedness. `None` for what is not a scalar.
    pub(crate) fn bits(&self) -> Option<u64> {
        Some(match *self {
            Value::Bool(b) => u64::from(b),
            Value::Char(c) | Value::U8(c) => u64::from(c),
            Value::I8(v) => v as i64 as u64,
            Value::I16(v) => v as i64 as u64,
            Value::U16(v) => u64::from(v),
            Value::I32(v) => v as i64 as u64,
            Value::U32(v) => u64::from(v),
            Value::I64(v) => v as u64,
            Value::U64(v) => v,
            _ => return None,
        })
    }

    /// The scalar of type `p` a slot holds.
    pub(crate) fn from_bits(p: Prim, b: u64) -> Value {
        match p {
            Prim::Bool => Value::Bool(b != 0),
            Prim::Char => Value::Char(b as u8),
            Prim::I8 => Value::I8(b as i8),
            Prim::U8 => Value::U8(b as u8),
            Prim::I16 => Value::I16(b as i16),
            Prim::U16 => Value::U16(b as u16),
            Prim::I32 => Value::I32(b as i32),
            Prim::U32 => Value::U32(b as u32),
            Prim::I64 => Value::I64(b as i64),
            Prim::U64 => Value::U64(b),
        }
    }
}

/// The IDL name of a type, for errors.
pub fn type_name(structs: &[StructDef], ty: &Type) -> String {
    match ty {
        Type::Prim(p) => prim_name(*p).into(),
        Type::Struct(id) => match structs.get(*id) {
            Some(s) => format!("struct {}", s.name),
            None => "struct ?".into(),
        },
        Type::Array(t, n) => format!("{}[{n}]", type_name(structs, t)),
        Type::String => "string".into(),
        Type::Sequence(t) => format!("sequence<{}>", type_name(structs, t)),
    }
}

fn prim_name(p: Prim) -> &'static str {
    match p {
        Prim::Bool => "boolean",
        Prim::Char => "char",
        Prim::I8 => "int8",
        Prim::U8 => "uint8",
        Prim::I16 => "int16",
        Prim::U16 => "uint16",
        Prim::I32 => "int32",
        Prim::U32 => "uint32",
        Prim::I64 => "int64",
        Prim::U64 => "uint64",
    }
}

/// Whether `v` is a value of scalar type `p`.
#[inline]
pub(crate) fn prim_matches(p: Prim, v: &Value) -> bool {
    matches!(
        (p, v),
        (Prim::Bool, Value::Bool(_))
            | (Prim::Char, Value::Char(_))
            | (Prim::I8, Value::I8(_))
            | (Prim::U8, Value::U8(_))
            | (Prim::I16, Value::I16(_))
            | (Prim::U16, Value::U16(_))
            | (Prim::I32, Value::I32(_))
            | (Prim::U32, Value::U32(_))
            | (Prim::I64, Value::I64(_))
            | (Prim::U64, Value::U64(_))
    )
}

/// Whether a typed vector holds elements of type `p`.
fn seq_prim_matches(p: Prim, s: &Seq) -> bool {
    matches!(
        (p, s),
        (Prim::Char | Prim::U8, Seq::U8(_))
            | (Prim::I8, Seq::I8(_))
            | (Prim::I16, Seq::I16(_))
            | (Prim::U16, Seq::U16(_))
            | (Prim::I32, Seq::I32(_))
            | (Prim::U32, Seq::U32(_))
            | (Prim::I64, Seq::I64(_))
            | (Prim::U64, Seq::U64(_))
    )
}

/// Whether `s` holds elements of type `elem`.
fn elems_match(structs: &[StructDef], elem: &Type, s: &Seq) -> bool {
    match (elem, s) {
        (Type::Prim(p), s) => seq_prim_matches(*p, s),
        (e, Seq::Values(vs)) => vs.iter().all(|v| matches(structs, e, v)),
        _ => false,
    }
}

/// Whether `v` is a value of `ty`.
pub fn matches(structs: &[StructDef], ty: &Type, v: &Value) -> bool {
    match (ty, v) {
        (Type::Prim(p), v) => prim_matches(*p, v),
        (Type::String, Value::Str(_)) => true,
        (Type::Sequence(e), Value::Seq(s)) => elems_match(structs, e, s),
        (Type::Array(e, n), Value::Seq(s)) => s.len() == *n as usize && elems_match(structs, e, s),
        (Type::Struct(id), Value::Struct(fs)) => structs.get(*id).is_some_and(|sd| {
            sd.fields.len() == fs.len()
                && sd
                    .fields
                    .iter()
                    .zip(fs)
                    .all(|((_, t), v)| matches(structs, t, v))
        }),
        _ => false,
    }
}

/// Writes `v` (checked to be a value of `ty`) in C layout at the start of
/// `out` (which holds at least the type's size).
pub fn encode(structs: &[StructDef], ty: &Type, v: &Value, out: &mut [u8]) {
    match (ty, v) {
        (Type::Prim(p), v) => {
            let n = p.size() as usize;
            if let (Some(b), Some(dst)) = (v.bits(), out.get_mut(..n)) {
                dst.copy_from_slice(&b.to_le_bytes()[..n]);
            }
        }
        (Type::Struct(id), Value::Struct(fs)) => {
            if let Some(sd) = structs.get(*id) {
                for ((off, (_, t)), v) in field_offsets(structs, sd)
                    .into_iter()
                    .zip(&sd.fields)
                    .zip(fs)
                {
                    if let Some(o) = out.get_mut(off as usize..) {
                        encode(structs, t, v, o);
                    }
                }
            }
        }
        (Type::Array(e, _) | Type::Sequence(e), Value::Seq(s)) => encode_seq(structs, e, s, out),
        _ => {}
    }
}

/// Writes the elements of `s` (of type `elem`) in C layout into `out`.
pub fn encode_seq(structs: &[StructDef], elem: &Type, s: &Seq, out: &mut [u8]) {
    let esize = size_align(structs, elem).0 as usize;
    match s {
        Seq::Values(vs) => {
            for (v, o) in vs.iter().zip(out.chunks_mut(esize.max(1))) {
                encode(structs, elem, v, o);
            }
        }
        _ => {
            if let Some((p, n)) = s.raw() {
                let bytes = n * esize;
                // SAFETY: a typed vector's buffer holds `n` elements of
                // `esize` bytes (the element type was checked to match).
                let src = unsafe { std::slice::from_raw_parts(p, bytes) };
                if let Some(dst) = out.get_mut(..bytes) {
                    dst.copy_from_slice(src);
                }
            }
        }
    }
}

/// Reads a value of `ty` from its C layout at the start of `b`.
pub fn decode(structs: &[StructDef], ty: &Type, b: &[u8]) -> Value {
    match ty {
        Type::Prim(p) => {
            let n = p.size() as usize;
            let mut w = [0u8; 8];
            if let Some(src) = b.get(..n) {
                w[..n].copy_from_slice(src);
            }
            let raw = u64::from_le_bytes(w);
            let ext = match p {
                Prim::I8 => raw as i8 as i64 as u64,
                Prim::I16 => raw as i16 as i64 as u64,
                Prim::I32 => raw as i32 as i64 as u64,
                _ => raw,
            };
            Value::from_bits(*p, ext)
        }
        Type::Struct(id) => Value::Struct(match structs.get(*id) {
            Some(sd) => field_offsets(structs, sd)
                .into_iter()
                .zip(&sd.fields)
                .map(|(off, (_, t))| decode(structs, t, b.get(off as usize..).unwrap_or(&[])))
                .collect(),
            None => Vec::new(),
        }),
        Type::Array(e, n) => decode_seq(structs, e, b, *n as usize, None),
        Type::String => Value::Str(String::from_utf8_lossy(b).into_owned()),
        Type::Sequence(e) => {
            let esize = size_align(structs, e).0.max(1) as usize;
            decode_seq(structs, e, b, b.len() / esize, None)
        }
    }
}

macro_rules! typed_from {
    ($reuse:expr, $variant:ident, $t:ty, $b:expr, $n:expr) => {{
        let mut v = match $reuse {
            Some(Value::Seq(Seq::$variant(v))) => v,
            _ => Vec::new(),
        };
        v.clear();
        v.extend(
            $b.chunks_exact(size_of::<$t>())
                .take($n)
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or_default())),
        );
        Value::Seq(Seq::$variant(v))
    }};
}

/// Reads `n` elements of type `elem` from `b` into a [`Value::Seq`],
/// reusing the vector of `reuse` when it has the right type.
pub fn decode_seq(
    structs: &[StructDef],
    elem: &Type,
    b: &[u8],
    n: usize,
    reuse: Option<Value>,
) -> Value {
    match elem {
        Type::Prim(Prim::I8) => typed_from!(reuse, I8, i8, b, n),
        Type::Prim(Prim::U8 | Prim::Char | Prim::Bool) => typed_from!(reuse, U8, u8, b, n),
        Type::Prim(Prim::I16) => typed_from!(reuse, I16, i16, b, n),
        Type::Prim(Prim::U16) => typed_from!(reuse, U16, u16, b, n),
        Type::Prim(Prim::I32) => typed_from!(reuse, I32, i32, b, n),
        Type::Prim(Prim::U32) => typed_from!(reuse, U32, u32, b, n),
        Type::Prim(Prim::I64) => typed_from!(reuse, I64, i64, b, n),
        Type::Prim(Prim::U64) => typed_from!(reuse, U64, u64, b, n),
        _ => {
            let esize = size_align(structs, elem).0.max(1) as usize;
            Value::Seq(Seq::Values(
                b.chunks(esize)
                    .take(n)
                    .map(|c| decode(structs, elem, c))
                    .collect(),
            ))
        }
    }
}
