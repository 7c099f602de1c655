//! Trap sites: what each out-of-line check stub records and reports.

use super::*;

/// What a trap site reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SiteKind {
    /// A bounds check: `trap = [handle, index, length]`; handle 0 is `null`.
    Array,
    /// `null` dereferenced.
    Null,
    /// Division by zero.
    DivZero,
    /// `newarray` of `trap[0]` elements.
    NegSize,
    /// Out of fuel.
    Fuel,
    /// Call depth or frame stack.
    Depth,
    /// A runtime call's pending trap.
    Runtime,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Site {
    pub(super) kind: SiteKind,
    pub(super) method: u16,
    pub(super) bci: u32,
}

/// A value a trap stub records: a register's, or a constant.
#[derive(Debug, Clone, Copy)]
pub(super) enum Rec {
    Reg(u8),
    Const(i32),
}

pub(super) struct Stub {
    pub(super) label: Label,
    pub(super) site: u32,
    pub(super) recs: [Option<Rec>; 3],
}
