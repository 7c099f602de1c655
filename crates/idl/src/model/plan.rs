//! One plan per operation: what every stub of a call does, in which order.
//!
//! The Rust generator ([`crate::gen_rust`]), the C generator
//! ([`crate::gen_c`]) and the dynamic stubs ([`crate::dynamic`]) all read
//! an operation's [`OpPlan`] instead of working out its layout, its checks
//! and its copies on their own, so that the three cannot drift apart (a
//! `size_is(short)` count that one stub bounds and another does not).
//!
//! An [`OpPlan`] holds:
//! - the **values** ([`ValuePlan`]): the parameters in declaration order,
//!   then the return value; each with its representation ([`Repr`]: bytes
//!   of a plain value, a checked boolean byte, a string or sequence
//!   descriptor) and its field of the record ([`Layout`]);
//! - the **copies**: the values the client stores into the request
//!   ([`OpPlan::request`]), those it loads from the reply
//!   ([`OpPlan::reply`]), and those the server writes into the string area
//!   ([`OpPlan::writers`], whose index is the part of the area each gets),
//!   all in record order;
//! - the **checks** ([`Check`]), each with the side that makes it and what
//!   a failure gives: the client's before sending
//!   ([`OpPlan::client_checks`]), the server's on a request in the order it
//!   makes them, so that the first failing check names the status
//!   ([`OpPlan::server_checks`]), and the client's on the reply
//!   ([`OpPlan::reply_checks`]).
//!
//! ```
//! use idl::model::plan::{Check, plan};
//! let idl = idl::parse("interface f { long f([in] short k, [in, out, size_is(k)] long *v); };")?;
//! let p = plan(&idl.structs, &idl.interfaces[0].ops[0]).unwrap();
//! // A `short` counts at most 32,767 `long`s: the client refuses more
//! // before sending, the server answers `BadValue`.
//! assert_eq!(p.client_checks, [Check::Count { value: 1, max: 32_767 }]);
//! assert!(p.server_checks.contains(&Check::Count { value: 1, max: 32_767 }));
//! # Ok::<(), idl::CompileError>(())
//! ```

use super::{Dir, Field, Layout, Op, Prim, Slot, StructDef, Type};
use crate::rt::Status;

/// How one value is represented in the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repr {
    /// An integer or `char`: its bytes, any bit pattern valid.
    Prim(Prim),
    /// A `boolean`: one byte, 0 or 1; the receiver checks it.
    Bool,
    /// A struct or fixed array: its bytes in C layout, any bit pattern
    /// valid (fields are plain data).
    Agg {
        /// Bytes.
        size: u32,
        /// Alignment.
        align: u32,
    },
    /// A `string`: a [`Desc`](crate::rt::Desc); the receiver checks the
    /// descriptor and that the bytes are UTF-8.
    Str,
    /// A sequence: a [`Desc`](crate::rt::Desc); the receiver checks the
    /// descriptor (in the string area, aligned, within the limit).
    Seq {
        /// Bytes of one element.
        esize: u32,
        /// Alignment of one element.
        ealign: u32,
    },
}

impl Repr {
    /// The representation of a value of type `ty`.
    pub fn of(structs: &[StructDef], ty: &Type) -> Repr {
        match ty {
            Type::Prim(Prim::Bool) => Repr::Bool,
            Type::Prim(p) => Repr::Prim(*p),
            Type::String => Repr::Str,
            Type::Sequence(e) => {
                let (esize, ealign) = size_align(structs, e);
                Repr::Seq { esize, ealign }
            }
            Type::Struct(_) | Type::Array(..) => {
                let (size, align) = size_align(structs, ty);
                Repr::Agg { size, align }
            }
        }
    }

    /// Whether it is a descriptor (a string or a sequence).
    pub fn indirect(self) -> bool {
        matches!(self, Repr::Str | Repr::Seq { .. })
    }
}

/// One value of an operation: a parameter or the return value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuePlan {
    /// Which value: `Slot::Param(i)` is `op.params[i]`.
    pub slot: Slot,
    /// Its name (`"return"` for the return value).
    pub name: String,
    /// Its direction (the return value is `Out`).
    pub dir: Dir,
    /// Its IDL type.
    pub ty: Type,
    /// Its representation in the record.
    pub repr: Repr,
    /// Its field in the record; `None` for a `size_is` length, whose
    /// value is its sequence descriptor's count.
    pub field: Option<Field>,
    /// For a sequence declared with `size_is(n)`: the index of `n` in
    /// [`OpPlan::values`].
    pub size_is: Option<usize>,
    /// For a `size_is` length: the index of its sequence.
    pub length_of: Option<usize>,
    /// For a sequence declared with `size_is(n)`: the most elements `n`'s
    /// type counts, where no stub may rely on the bytes bounding it
    /// ([`Op::count_check`]); `None` when no check is needed.
    pub count_max: Option<u32>,
}

impl ValuePlan {
    /// Its byte offset in the record (`None` for a `size_is` length).
    pub fn offset(&self) -> Option<u32> {
        self.field.as_ref().map(|f| f.offset)
    }
}

/// One check of a call: on the value `values[value]` of the [`OpPlan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// A sequence's element count is at most `max`, what its `size_is`
    /// length's type counts. The client refuses a longer one before
    /// sending ([`CallError::CountTooLarge`](crate::rt::CallError), C:
    /// the length's type cannot hold it), the server answers
    /// [`Status::BadValue`], the client refuses such a reply as malformed.
    Count {
        /// The sequence.
        value: usize,
        /// The most elements.
        max: u32,
    },
    /// A string's descriptor lies in the string area within the
    /// per-string limit ([`Status::BadString`]) and its bytes are UTF-8
    /// ([`Status::BadValue`]).
    Str {
        /// The string.
        value: usize,
    },
    /// A sequence's descriptor lies in the string area, aligned to its
    /// elements, within the per-string limit ([`Status::BadString`]).
    Seq {
        /// The sequence.
        value: usize,
    },
    /// A boolean's byte is 0 or 1 ([`Status::BadValue`]).
    Bool {
        /// The boolean.
        value: usize,
    },
}

impl Check {
    /// The value it checks (an index in [`OpPlan::values`]).
    pub fn value(self) -> usize {
        match self {
            Check::Count { value, .. }
            | Check::Str { value }
            | Check::Seq { value }
            | Check::Bool { value } => value,
        }
    }

    /// What a server answers a request that fails it (for
    /// [`Check::Str`], a descriptor outside the area; bytes that are not
    /// UTF-8 give [`Status::BadValue`]).
    pub fn status(self) -> Status {
        match self {
            Check::Count { .. } | Check::Bool { .. } => Status::BadValue,
            Check::Str { .. } | Check::Seq { .. } => Status::BadString,
        }
    }
}

/// One operation's plan: its values, copies and checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpPlan {
    /// The parameters in declaration order, then the return value.
    pub values: Vec<ValuePlan>,
    /// Whether the last value is the return value.
    pub has_ret: bool,
    /// The values that have a field, in record order.
    pub record: Vec<usize>,
    /// The values the client copies into the request (in and inout), in
    /// record order.
    pub request: Vec<usize>,
    /// The values the client copies from the reply (inout, out, return),
    /// in record order.
    pub reply: Vec<usize>,
    /// The values the server writes into the string area (out strings and
    /// sequences, inout strings' new values), in record order: the `k`-th
    /// gets part `k` of `writers.len()` of the area.
    pub writers: Vec<usize>,
    /// What the client checks before sending, in order.
    pub client_checks: Vec<Check>,
    /// What the server checks on a request (after its length), in order:
    /// each in or inout descriptor in record order with its count, then
    /// each in or inout boolean in record order. The first that fails
    /// names the status.
    pub server_checks: Vec<Check>,
    /// What the client checks on the reply, in record order.
    pub reply_checks: Vec<Check>,
}

impl OpPlan {
    /// The value of `slot`.
    pub fn value(&self, slot: Slot) -> Option<&ValuePlan> {
        match slot {
            Slot::Param(i) => self.values.get(i),
            Slot::Ret if self.has_ret => self.values.last(),
            Slot::Ret => None,
        }
    }

    /// The return value's index in [`OpPlan::values`], if any.
    pub fn ret(&self) -> Option<usize> {
        self.has_ret.then(|| self.values.len() - 1)
    }

    /// The bound of the [`Check::Count`] on `value` among `checks` (one of
    /// the three lists), if there is one.
    pub fn count(checks: &[Check], value: usize) -> Option<u32> {
        checks.iter().find_map(|c| match *c {
            Check::Count { value: v, max } if v == value => Some(max),
            _ => None,
        })
    }

    /// Values in record order.
    pub fn in_record_order(&self) -> impl Iterator<Item = &ValuePlan> {
        self.record.iter().map(|&i| &self.values[i])
    }
}

/// Size and alignment of a type in C layout (a string or sequence: its
/// descriptor's).
pub fn size_align(structs: &[StructDef], ty: &Type) -> (u32, u32) {
    match ty {
        Type::Prim(p) => (p.size(), p.size()),
        Type::Struct(id) => structs.get(*id).map_or((0, 1), |s| (s.size, s.align)),
        Type::Array(t, n) => {
            let (s, a) = size_align(structs, t);
            (s.saturating_mul(*n), a)
        }
        Type::String | Type::Sequence(_) => (8, 4),
    }
}

/// The offsets of a struct's fields in C layout (natural alignment, in
/// declaration order).
pub fn field_offsets(structs: &[StructDef], s: &StructDef) -> Vec<u32> {
    let mut off = 0u32;
    s.fields
        .iter()
        .map(|(_, t)| {
            let (size, align) = size_align(structs, t);
            off = off.next_multiple_of(align.max(1));
            let at = off;
            off += size;
            at
        })
        .collect()
}

/// The plan of `op`. `None` if its layout lacks a field for a value, or a
/// `size_is` names no parameter (a model that did not pass the front
/// end's checks).
pub fn plan(structs: &[StructDef], op: &Op) -> Option<OpPlan> {
    let layout: &Layout = &op.layout;
    let mut values = Vec::with_capacity(op.params.len() + 1);
    for (i, p) in op.params.iter().enumerate() {
        let field = layout.field(Slot::Param(i)).cloned();
        if field.is_none() && p.length_of.is_none() {
            return None;
        }
        if p.size_is.is_some_and(|j| j >= op.params.len())
            || p.length_of.is_some_and(|j| j >= op.params.len())
        {
            return None;
        }
        let repr = Repr::of(structs, &p.ty);
        let count_max = match repr {
            Repr::Seq { esize, .. } => op.count_check(i, esize),
            _ => None,
        };
        values.push(ValuePlan {
            slot: Slot::Param(i),
            name: p.name.clone(),
            dir: p.dir,
            ty: p.ty.clone(),
            repr,
            field,
            size_is: p.size_is,
            length_of: p.length_of,
            count_max,
        });
    }
    let has_ret = op.ret.is_some();
    if let Some(t) = &op.ret {
        values.push(ValuePlan {
            slot: Slot::Ret,
            name: "return".into(),
            dir: Dir::Out,
            ty: t.clone(),
            repr: Repr::of(structs, t),
            field: Some(layout.field(Slot::Ret)?.clone()),
            size_is: None,
            length_of: None,
            count_max: None,
        });
    }
    let ret = has_ret.then(|| values.len() - 1);
    let record: Vec<usize> = layout
        .fields
        .iter()
        .map(|f| match f.slot {
            Slot::Param(i) => Some(i),
            Slot::Ret => ret,
        })
        .collect::<Option<_>>()?;
    let dir = |i: usize| values[i].dir;
    let request: Vec<usize> = record
        .iter()
        .copied()
        .filter(|&i| dir(i) != Dir::Out)
        .collect();
    let reply: Vec<usize> = record
        .iter()
        .copied()
        .filter(|&i| dir(i) != Dir::In)
        .collect();
    let writers = reply
        .iter()
        .copied()
        .filter(|&i| match values[i].repr {
            Repr::Str => true,
            Repr::Seq { .. } => dir(i) == Dir::Out,
            _ => false,
        })
        .collect();
    let count = |i: usize| {
        values[i]
            .count_max
            .map(|max| Check::Count { value: i, max })
    };
    let client_checks = request.iter().filter_map(|&i| count(i)).collect();
    let mut server_checks = Vec::new();
    for &i in &request {
        match values[i].repr {
            Repr::Str => server_checks.push(Check::Str { value: i }),
            Repr::Seq { .. } => {
                server_checks.push(Check::Seq { value: i });
                server_checks.extend(count(i));
            }
            _ => {}
        }
    }
    server_checks.extend(
        request
            .iter()
            .filter(|&&i| values[i].repr == Repr::Bool)
            .map(|&i| Check::Bool { value: i }),
    );
    let mut reply_checks = Vec::new();
    for &i in &reply {
        match values[i].repr {
            Repr::Bool => reply_checks.push(Check::Bool { value: i }),
            Repr::Str => reply_checks.push(Check::Str { value: i }),
            Repr::Seq { .. } => {
                reply_checks.push(Check::Seq { value: i });
                // An inout sequence comes back where the client put it,
                // with the count it sent.
                if dir(i) == Dir::Out {
                    reply_checks.extend(count(i));
                }
            }
            _ => {}
        }
    }
    Some(OpPlan {
        values,
        has_ret,
        record,
        request,
        reply,
        writers,
        client_checks,
        server_checks,
        reply_checks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(src: &str) -> OpPlan {
        let idl = crate::parse(src).unwrap();
        plan(&idl.structs, &idl.interfaces[0].ops[0]).unwrap()
    }

    /// Checks come in the order the server makes them: descriptors with
    /// their counts in record order, then booleans; the client bounds the
    /// counts it sends, and checks on the reply what it loads.
    #[test]
    fn checks_follow_the_record_order() {
        let p = plan_of(
            "interface c { boolean f([in] boolean b, [in] short k, [in, size_is(k)] long *v,
                [in] string s, [out] boolean *o, [out] string *t); };",
        );
        // Values: b, k, v, s, o, t, return. Record: b v s (in), o t (out), return.
        assert_eq!(p.record, [0, 2, 3, 4, 5, 6]);
        assert_eq!(p.request, [0, 2, 3]);
        assert_eq!(p.reply, [4, 5, 6]);
        assert_eq!(p.writers, [5]);
        assert_eq!(
            p.client_checks,
            [Check::Count {
                value: 2,
                max: 32_767
            }]
        );
        assert_eq!(
            p.server_checks,
            [
                Check::Seq { value: 2 },
                Check::Count {
                    value: 2,
                    max: 32_767
                },
                Check::Str { value: 3 },
                Check::Bool { value: 0 },
            ]
        );
        assert_eq!(
            p.reply_checks,
            [
                Check::Bool { value: 4 },
                Check::Str { value: 5 },
                Check::Bool { value: 6 }
            ]
        );
        assert_eq!(p.values[1].field, None);
        assert_eq!(p.values[2].size_is, Some(1));
        assert_eq!(p.values[1].length_of, Some(2));
    }

    /// An out sequence's count is checked on the reply where its length's
    /// type bounds it; an inout one comes back with the count it had.
    #[test]
    fn out_counts_are_checked_on_the_reply() {
        let p = plan_of(
            "interface c { void f([out] short *k, [out, size_is(k)] long *v,
                [in, out] short *j, [in, out, size_is(j)] long *w); };",
        );
        assert!(p.reply_checks.contains(&Check::Count {
            value: 1,
            max: 32_767
        }));
        assert!(
            !p.reply_checks
                .iter()
                .any(|c| matches!(c, Check::Count { value: 3, .. }))
        );
        assert_eq!(
            p.client_checks,
            [Check::Count {
                value: 3,
                max: 32_767
            }]
        );
        assert_eq!(Check::Count { value: 3, max: 1 }.status(), Status::BadValue);
        assert_eq!(Check::Seq { value: 3 }.status(), Status::BadString);
    }
}
