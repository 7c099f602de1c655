//! The checked interface: what the front end ([`crate::parse`]) produces
//! and every back end (Rust and C generators, dynamic stubs, the CLI's
//! listing) reads. It is the contract between the stages: a value of
//! [`Idl`] has passed every static check, and each operation carries its
//! message [`Layout`] (IDL4 §3.2, direct stack transfer), so that no back
//! end decides a byte offset on its own; [`plan`] derives from it, per
//! operation, the copies and checks every stub makes.

use std::fmt;

pub mod plan;

/// A place in an IDL source: 1-based line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column (in characters), from 1.
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A primitive type: an integer of 8 to 64 bits, `boolean` or `char`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prim {
    /// `int8_t`.
    I8,
    /// `octet`, `uint8_t`, `unsigned char`.
    U8,
    /// `short`, `int16_t`.
    I16,
    /// `unsigned short`, `uint16_t`.
    U16,
    /// `int`, `long` (CORBA: 32 bits), `int32_t`.
    I32,
    /// `unsigned int`, `unsigned long`, `uint32_t`.
    U32,
    /// `long long`, `hyper`, `int64_t`.
    I64,
    /// `unsigned long long`, `uint64_t`.
    U64,
    /// `boolean`: one byte on the wire, 0 or 1; any other byte a client
    /// sends is a bad message. Only as a scalar parameter or return value.
    Bool,
    /// `char`: one byte.
    Char,
}

impl Prim {
    /// The most elements a `size_is` length of this type can count, if
    /// fewer than a descriptor's `u32` holds: every stub (Rust, C, dynamic)
    /// refuses a sequence longer than that, the client before sending and
    /// the server with `BadValue`.
    pub fn count_max(self) -> Option<u32> {
        match self {
            Prim::I8 => Some(i8::MAX as u32),
            Prim::U8 | Prim::Char => Some(u8::MAX as u32),
            Prim::I16 => Some(i16::MAX as u32),
            Prim::U16 => Some(u16::MAX as u32),
            Prim::I32 => Some(i32::MAX as u32),
            Prim::Bool => Some(1),
            Prim::U32 | Prim::I64 | Prim::U64 => None,
        }
    }

    /// Size in bytes, which is also the alignment.
    pub fn size(self) -> u32 {
        match self {
            Prim::I8 | Prim::U8 | Prim::Bool | Prim::Char => 1,
            Prim::I16 | Prim::U16 => 2,
            Prim::I32 | Prim::U32 => 4,
            Prim::I64 | Prim::U64 => 8,
        }
    }

    /// Whether values are signed.
    pub fn signed(self) -> bool {
        matches!(self, Prim::I8 | Prim::I16 | Prim::I32 | Prim::I64)
    }

    /// The Rust type that represents it.
    pub fn rust(self) -> &'static str {
        match self {
            Prim::I8 => "i8",
            Prim::U8 | Prim::Char => "u8",
            Prim::I16 => "i16",
            Prim::U16 => "u16",
            Prim::I32 => "i32",
            Prim::U32 => "u32",
            Prim::I64 => "i64",
            Prim::U64 => "u64",
            Prim::Bool => "bool",
        }
    }

    /// The C type that represents it (`<stdint.h>`, `<stdbool.h>`).
    pub fn c(self) -> &'static str {
        match self {
            Prim::I8 => "int8_t",
            Prim::U8 => "uint8_t",
            Prim::Char => "char",
            Prim::I16 => "int16_t",
            Prim::U16 => "uint16_t",
            Prim::I32 => "int32_t",
            Prim::U32 => "uint32_t",
            Prim::I64 => "int64_t",
            Prim::U64 => "uint64_t",
            Prim::Bool => "bool",
        }
    }
}

/// Index of a struct in [`Idl::structs`].
pub type StructId = usize;

/// A type as a parameter, field or element uses it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A primitive.
    Prim(Prim),
    /// A struct, by value.
    Struct(StructId),
    /// A fixed array `T name[N]`, by value.
    Array(Box<Type>, u32),
    /// `string`: bytes of UTF-8 text, indirect (§3.3). Rust: `&str`,
    /// C: `const char *` with its length.
    String,
    /// `sequence<T>` or `T *` with `size_is`: elements of a plain-data
    /// type, indirect (§3.3). Rust: `&[T]`, C: a pointer and a count.
    Sequence(Box<Type>),
}

impl Type {
    /// Whether the value travels indirectly: a [`Desc`](crate::rt::Desc)
    /// in the record, the bytes in the string area.
    pub fn is_indirect(&self) -> bool {
        matches!(self, Type::String | Type::Sequence(_))
    }
}

/// A struct declaration: `#[repr(C)]` in Rust, a plain C struct; its
/// fields are plain data (no `boolean`, nothing indirect), so every bit
/// pattern a client writes is a valid value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StructDef {
    /// The name as declared (scoped names are joined with `_`).
    pub name: String,
    /// Fields in declaration order.
    pub fields: Vec<(String, Type)>,
    /// Size in bytes, a multiple of `align` (C's rules).
    pub size: u32,
    /// Alignment in bytes.
    pub align: u32,
    /// Where it is declared.
    pub pos: Pos,
}

/// A parameter's direction (IDL4 §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    /// `[in]` / `in`: client to server.
    In,
    /// `[in, out]` / `inout`: to the server and back.
    InOut,
    /// `[out]` / `out`: server to client.
    Out,
}

/// One parameter as declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Its direction.
    pub dir: Dir,
    /// Its type (for `[size_is(n)] T *p`, `Sequence(T)`).
    pub ty: Type,
    /// For a sequence declared with `size_is(n)`: the index in
    /// [`Op::params`] of `n`. That parameter does not travel on its own:
    /// its value is the sequence descriptor's length, so generated Rust
    /// drops it from signatures (a slice knows its length) while C keeps
    /// it.
    pub size_is: Option<usize>,
    /// For an integer parameter that is some sequence's `size_is`: that
    /// sequence's index in [`Op::params`].
    pub length_of: Option<usize>,
    /// Where it is declared.
    pub pos: Pos,
}

/// Where one value sits in an operation's message record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The parameter `params[i]`.
    Param(usize),
    /// The return value (in the reply only).
    Ret,
}

/// One field of a message record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Whose value it holds.
    pub slot: Slot,
    /// Byte offset from the start of the record.
    pub offset: u32,
    /// Size in bytes (8 for a descriptor).
    pub size: u32,
    /// Alignment in bytes.
    pub align: u32,
    /// Whether it is a string descriptor ([`crate::rt::Desc`]: offset and
    /// element count in the string area) rather than the value itself.
    pub desc: bool,
}

/// An operation's message layout (IDL4 §3.2): one record that the request
/// fills and the reply reuses in place.
///
/// Rules (docs/idl.md, "The message layout"):
/// - parameters are sorted in, inout, out (declaration order within each
///   group), and the return value comes last; each field is at its natural
///   alignment, so the record is the `#[repr(C)]` struct of those fields;
/// - a `size_is` length parameter has no field of its own (its value is its
///   sequence descriptor's length);
/// - the request carries bytes `0..request_size` (the in and inout
///   fields); the reply carries `0..size` with the inout, out and return
///   fields written in place, the in fields left as they were;
/// - a record of at most [`crate::rt::INLINE`] bytes travels inline, in the
///   descriptor's cache line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The fields in record order.
    pub fields: Vec<Field>,
    /// Bytes of the request: the end of the last in or inout field.
    pub request_size: u32,
    /// Bytes of the whole record (request and reply), rounded up to
    /// `align`.
    pub size: u32,
    /// Alignment of the record (at least 4).
    pub align: u32,
    /// Number of indirect values in the request (in and inout strings and
    /// sequences).
    pub in_strings: u32,
    /// Number of indirect values in the reply (inout and out).
    pub out_strings: u32,
}

impl Layout {
    /// The field that holds `slot`, if it has one.
    pub fn field(&self, slot: Slot) -> Option<&Field> {
        self.fields.iter().find(|f| f.slot == slot)
    }

    /// Whether the record fits the descriptor's inline bytes.
    pub fn inline(&self) -> bool {
        self.size as usize <= crate::rt::INLINE
    }
}

/// An operation of an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// Its name.
    pub name: String,
    /// Its key: the index in the interface, what the server loop
    /// dispatches on.
    pub key: u16,
    /// The return type; `None` for `void`.
    pub ret: Option<Type>,
    /// Parameters in declaration order.
    pub params: Vec<Param>,
    /// The message layout.
    pub layout: Layout,
    /// Where it is declared.
    pub pos: Pos,
}

impl Op {
    /// For `params[i]`, a sequence declared with `size_is(n)`: the most
    /// elements `n`'s type can count ([`Prim::count_max`]), if fewer than
    /// a `u32` holds.
    pub fn count_max(&self, i: usize) -> Option<u32> {
        let j = self.params.get(i)?.size_is?;
        match self.params.get(j)?.ty {
            Type::Prim(p) => p.count_max(),
            _ => None,
        }
    }

    /// [`Op::count_max`] where a stub must check it: `None` when the
    /// sequence's bytes, which a string area and the per-string limit
    /// keep within a `u32`, already bound its count to that many
    /// elements of `esize` bytes (an `int` count of `int` elements), so
    /// that the common case costs no instruction.
    pub fn count_check(&self, i: usize, esize: u32) -> Option<u32> {
        let max = self.count_max(i)?;
        (u64::from(max) < u64::from(u32::MAX) / u64::from(esize.max(1))).then_some(max)
    }
}

impl Type {
    /// Size in bytes of a value of this type (`None` for strings and
    /// sequences, which travel as descriptors).
    pub fn size(&self, structs: &[StructDef]) -> Option<u32> {
        match self {
            Type::Prim(p) => Some(p.size()),
            Type::Struct(id) => structs.get(*id).map(|s| s.size),
            Type::Array(e, n) => Some(e.size(structs)?.saturating_mul(*n)),
            Type::String | Type::Sequence(_) => None,
        }
    }
}

/// An interface: a set of operations served by one server loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Its name (scoped names joined with `_`).
    pub name: String,
    /// Its operations in declaration order; `ops[k].key == k`.
    pub ops: Vec<Op>,
    /// Where it is declared.
    pub pos: Pos,
}

/// A compiled IDL file: structs and interfaces, checked and laid out.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Idl {
    /// Every struct, in an order where a struct follows those it contains.
    pub structs: Vec<StructDef>,
    /// Every interface, in declaration order.
    pub interfaces: Vec<Interface>,
    /// Named integer constants (`const`), in declaration order.
    pub consts: Vec<(String, Prim, i128)>,
}

/// Configurable limits, checked by the front end (per operation) and by
/// the transports (per message). The defaults are L4's (IDL4 §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Indirect values in one message, each direction.
    pub max_strings: u32,
    /// Bytes of one string or sequence.
    pub max_string_bytes: u32,
    /// Bytes of one message record.
    pub max_record: u32,
}

/// One of the [`Limits`], as errors name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitName {
    /// [`Limits::max_strings`].
    MaxStrings,
    /// [`Limits::max_string_bytes`].
    MaxStringBytes,
    /// [`Limits::max_record`].
    MaxRecord,
}

impl LimitName {
    /// The field of [`Limits`] it is, e.g. `"max_record"`.
    pub fn field(self) -> &'static str {
        match self {
            LimitName::MaxStrings => "max_strings",
            LimitName::MaxStringBytes => "max_string_bytes",
            LimitName::MaxRecord => "max_record",
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_strings: 31,
            max_string_bytes: 2 << 20,
            max_record: 4096,
        }
    }
}

#[cfg(test)]
mod tests {
    /// A count is checked where its length's type bounds it below what the
    /// sequence's bytes (at most a `u32` of them) already do.
    #[test]
    fn counts_are_checked_where_the_bytes_do_not_bound_them() {
        let idl = crate::parse(
            "interface c {
                void a([in] short k, [in, size_is(k)] long *v);
                void b([in] long k, [in, size_is(k)] long *v);
                void c([in] long k, [in, size_is(k)] octet *v);
                void d([in] unsigned long k, [in, size_is(k)] octet *v);
            };",
        )
        .unwrap();
        let ops = &idl.interfaces[0].ops;
        let check = |op: usize, esize| ops[op].count_check(1, esize);
        assert_eq!(check(0, 4), Some(32_767));
        // 2^31 - 1 ints are more bytes than a u32 counts: no check needed.
        assert_eq!(ops[1].count_max(1), Some(i32::MAX as u32));
        assert_eq!(check(1, 4), None);
        assert_eq!(check(2, 1), Some(i32::MAX as u32));
        assert_eq!(check(3, 1), None);
        // Not a sequence with a length.
        assert_eq!(ops[0].count_max(0), None);
    }
}
