//! What the generated code needs to know about an operation: for every
//! value the caller passes (the parameters less the `size_is` lengths, then
//! the return value), its kind, its slot in the caller's slot array, its
//! field in the record, and the argument it becomes in a handler call.

use crate::model::{Dir, Op, Prim, Slot, StructDef, Type};

/// How one value is represented by the generated code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An integer, `char` or `boolean`: one slot holding the value
    /// (sign- or zero-extended to 64 bits), one field of its width.
    Prim(Prim),
    /// A struct or fixed array: one slot holding a pointer to its bytes in
    /// C layout; the field holds the bytes.
    Agg {
        /// Bytes.
        size: u32,
        /// Alignment.
        align: u32,
    },
    /// A string or sequence: two slots (pointer to the elements, element
    /// count); the field is a [`Desc`](crate::rt::Desc).
    Ind {
        /// Bytes of one element (1 for a string).
        esize: u32,
        /// Alignment of one element.
        ealign: u32,
        /// Whether it is a `string` (UTF-8 checked by the server).
        string: bool,
    },
}

impl Kind {
    /// Slots the value takes in the caller's slot array.
    pub fn slots(self) -> u32 {
        match self {
            Kind::Ind { .. } => 2,
            _ => 1,
        }
    }
}

/// One value of an operation, as the dynamic stubs see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuePlan {
    /// The parameter's name (`"return"` for the return value).
    pub name: String,
    /// Index in [`Op::params`]; `None` for the return value.
    pub param: Option<usize>,
    /// Direction (the return value is `Out`).
    pub dir: Dir,
    /// Its IDL type.
    pub ty: Type,
    /// Its representation.
    pub kind: Kind,
    /// Its first slot in the caller's slot array.
    pub slot: u32,
    /// Byte offset of its field in the record.
    pub offset: u32,
    /// For a sequence declared with `size_is(n)`: the most elements `n`'s
    /// type can count, where the stubs must check it ([`Op::count_check`]).
    pub count_max: Option<u32>,
}

/// One operation, laid out for the dynamic stubs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpPlan {
    /// The operation (name, key, layout).
    pub op: Op,
    /// The values the caller passes, in declaration order (size_is lengths
    /// left out), then the return value if it is not `void`.
    pub values: Vec<ValuePlan>,
    /// Whether the last value is the return value.
    pub has_ret: bool,
    /// Slots of the slot array.
    pub slots: u32,
    /// Indices into `values` in record order (by field offset).
    pub rec_order: Vec<usize>,
    /// Whether some value needs a C layout built by the safe API (a
    /// struct, an array, a sequence of structs or arrays).
    pub aggregates: bool,
}

impl OpPlan {
    /// The values passed by the caller (without the return value).
    pub fn params(&self) -> &[ValuePlan] {
        let n = self.values.len() - usize::from(self.has_ret);
        &self.values[..n]
    }

    /// The return value's plan, if the operation returns one.
    pub fn ret(&self) -> Option<&ValuePlan> {
        if self.has_ret {
            self.values.last()
        } else {
            None
        }
    }

    /// Values in record order.
    pub fn in_record_order(&self) -> impl Iterator<Item = &ValuePlan> {
        self.rec_order.iter().map(|&i| &self.values[i])
    }
}

/// Size and alignment of a type in C layout (indirect values: their
/// descriptor).
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

/// The representation of a value of type `ty`.
pub fn kind_of(structs: &[StructDef], ty: &Type) -> Kind {
    match ty {
        Type::Prim(p) => Kind::Prim(*p),
        Type::String => Kind::Ind {
            esize: 1,
            ealign: 1,
            string: true,
        },
        Type::Sequence(e) => {
            let (esize, ealign) = size_align(structs, e);
            Kind::Ind {
                esize,
                ealign,
                string: false,
            }
        }
        Type::Struct(_) | Type::Array(..) => {
            let (size, align) = size_align(structs, ty);
            Kind::Agg { size, align }
        }
    }
}

/// Lays out `op` for the dynamic stubs. `None` if the model's layout lacks
/// a field for a value (a model that did not pass the front end's checks).
pub fn plan(structs: &[StructDef], op: &Op) -> Option<OpPlan> {
    let mut values = Vec::new();
    let mut slot = 0;
    for (i, p) in op.params.iter().enumerate() {
        if p.length_of.is_some() {
            continue;
        }
        let kind = kind_of(structs, &p.ty);
        let offset = op.layout.field(Slot::Param(i))?.offset;
        values.push(ValuePlan {
            name: p.name.clone(),
            param: Some(i),
            dir: p.dir,
            ty: p.ty.clone(),
            kind,
            slot,
            offset,
            count_max: match (&p.ty, kind) {
                (Type::Sequence(_), Kind::Ind { esize, .. }) => op.count_check(i, esize),
                _ => None,
            },
        });
        slot += kind.slots();
    }
    let has_ret = op.ret.is_some();
    if let Some(t) = &op.ret {
        let kind = kind_of(structs, t);
        let offset = op.layout.field(Slot::Ret)?.offset;
        values.push(ValuePlan {
            name: "return".into(),
            param: None,
            dir: Dir::Out,
            ty: t.clone(),
            kind,
            slot,
            offset,
            count_max: None,
        });
        slot += kind.slots();
    }
    let mut rec_order: Vec<usize> = (0..values.len()).collect();
    rec_order.sort_by_key(|&i| values[i].offset);
    let aggregates = values.iter().any(|v| match &v.ty {
        Type::Struct(_) | Type::Array(..) => true,
        Type::Sequence(e) => !matches!(**e, Type::Prim(_)),
        _ => false,
    });
    Some(OpPlan {
        op: op.clone(),
        values,
        has_ret,
        slots: slot,
        rec_order,
        aggregates,
    })
}
