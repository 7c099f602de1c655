//! What the generated code needs to know about an operation: for every
//! value the caller passes (the parameters less the `size_is` lengths, then
//! the return value), its kind, its slot in the caller's slot array, its
//! field in the record, and the argument it becomes in a handler call.
//!
//! All of it comes from the operation's [`crate::model::plan::OpPlan`],
//! which the Rust and C generators follow too: this module only numbers
//! the caller's slots and spells the representations as the code
//! generator wants them.

use crate::model::plan::{Repr, plan as model_plan};
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
    /// type can count, where the stubs must check it (the plan's
    /// [`Check::Count`](crate::model::plan::Check::Count)).
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

pub use crate::model::plan::{field_offsets, size_align};

/// The dynamic stubs' spelling of the model's [`Repr`]: a boolean is a
/// primitive whose slot the generated code checks and normalises.
fn kind(r: Repr) -> Kind {
    match r {
        Repr::Prim(p) => Kind::Prim(p),
        Repr::Bool => Kind::Prim(Prim::Bool),
        Repr::Agg { size, align } => Kind::Agg { size, align },
        Repr::Str => Kind::Ind {
            esize: 1,
            ealign: 1,
            string: true,
        },
        Repr::Seq { esize, ealign } => Kind::Ind {
            esize,
            ealign,
            string: false,
        },
    }
}

/// Lays out `op` for the dynamic stubs, from the operation's plan
/// ([`crate::model::plan`]): the same fields, record order and count
/// bounds as the generated Rust and C stubs. `None` if the model's layout
/// lacks a field for a value (a model that did not pass the front end's
/// checks).
pub fn plan(structs: &[StructDef], op: &Op) -> Option<OpPlan> {
    let model = model_plan(structs, op)?;
    let mut values = Vec::new();
    // The model's value index -> ours (size_is lengths have none).
    let mut ours = vec![usize::MAX; model.values.len()];
    let mut slot = 0;
    for (k, v) in model.values.iter().enumerate() {
        if v.length_of.is_some() {
            continue;
        }
        let kind = kind(v.repr);
        ours[k] = values.len();
        values.push(ValuePlan {
            name: v.name.clone(),
            param: match v.slot {
                Slot::Param(i) => Some(i),
                Slot::Ret => None,
            },
            dir: v.dir,
            ty: v.ty.clone(),
            kind,
            slot,
            offset: v.offset()?,
            count_max: v.count_max,
        });
        slot += kind.slots();
    }
    let rec_order = model.record.iter().map(|&k| ours[k]).collect();
    let aggregates = values.iter().any(|v| match &v.ty {
        Type::Struct(_) | Type::Array(..) => true,
        Type::Sequence(e) => !matches!(**e, Type::Prim(_)),
        _ => false,
    });
    Some(OpPlan {
        op: op.clone(),
        values,
        has_ret: model.has_ret,
        slots: slot,
        rec_order,
        aggregates,
    })
}
