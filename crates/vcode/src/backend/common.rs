//! What the native backends share, so that a target's file holds only
//! its encodings and its convention's tables: the argument layout of a
//! register-argument convention ([`layout`]), the frame's save slots
//! ([`slots`]), parallel moves, the return-type check, the agreement of
//! every target's register roles with the shared allocator, and the
//! debug form of a generated function.

use crate::abi::ArgLoc;
use crate::error::ErrorKind;
use crate::sig::Signature;
use crate::ty::Ty;

/// The frame slots every native target uses, from the frame pointer
/// down: the save slots of integer and float registers, the call-site
/// slots of persistent float registers, then the locals. Each target's
/// `regfile` re-exports them.
pub mod slots {
    /// A one-bit mask for register `n`.
    pub const fn bit(n: u8) -> u16 {
        1 << n
    }

    /// Frame offset (from the frame pointer) of the slot where the
    /// prologue saves integer register `n` when it is callee-saved and
    /// used.
    pub const fn gpr_save_slot(n: u8) -> i32 {
        -8 * (n as i32 + 1)
    }
    /// Frame offset of the 16-byte slot where the prologue saves float
    /// register `n` when a [`RegConfig`](crate::RegConfig) makes it callee-saved.
    pub const fn xmm_save_slot(n: u8) -> i32 {
        -128 - 16 * (n as i32 + 1)
    }
    /// Frame offset of the slot where a call site keeps persistent float
    /// register `n` (the conventions have no callee-saved float registers
    /// vcode uses, so the caller saves them around the call).
    pub const fn xmm_call_slot(n: u8) -> i32 {
        -384 - 8 * (n as i32 + 1)
    }
    /// Bytes below the frame pointer taken by the save slots above;
    /// locals start here.
    pub const SAVE_AREA: i32 = 512;
}

/// The placement of arguments of types `tys` under a convention that
/// passes integers in `int_args` and floats in `float_args`, each file
/// independently and in order, and the rest in 8-byte stack slots in
/// order (System V x86-64 and AAPCS64 alike).
#[inline]
pub(crate) fn layout<'a>(
    int_args: &'static [u8],
    float_args: &'static [u8],
    tys: &'a [Ty],
) -> impl Iterator<Item = ArgLoc> + 'a {
    let (mut ni, mut nf, mut ns) = (0, 0, 0);
    tys.iter().map(move |t| {
        if t.is_float() {
            if nf < float_args.len() {
                nf += 1;
                return ArgLoc::Reg(float_args[nf - 1]);
            }
        } else if ni < int_args.len() {
            ni += 1;
            return ArgLoc::Reg(int_args[ni - 1]);
        }
        ns += 1;
        ArgLoc::Stack(ns - 1)
    })
}

/// Orders `dst <- src` register moves so that none overwrites a source
/// another still reads, breaking cycles through the scratch register
/// `tmp`; `mov(dst, src)` writes one move.
pub(crate) fn parallel_move(moves: &mut Vec<(u8, u8)>, tmp: u8, mut mov: impl FnMut(u8, u8)) {
    moves.retain(|&(d, s)| d != s);
    while !moves.is_empty() {
        // A move whose destination no other pending move reads.
        if let Some(i) = (0..moves.len()).find(|&i| !moves.iter().any(|&(_, s)| s == moves[i].0)) {
            let (d, s) = moves.swap_remove(i);
            mov(d, s);
        } else {
            // Only cycles remain: park one source in the scratch register.
            let (_, s) = moves[0];
            mov(tmp, s);
            for mv in moves.iter_mut() {
                if mv.1 == s {
                    mv.1 = tmp;
                }
            }
        }
    }
}

/// Records `ty` as the function's return type at its first `ret`, and
/// refuses a later `ret` of another type.
#[inline(always)]
pub(crate) fn note_ret(ret_ty: &mut Option<Ty>, ty: Ty) -> Result<(), ErrorKind> {
    match *ret_ty {
        None => *ret_ty = Some(ty),
        Some(t) if t != ty => {
            return Err(ErrorKind::TypeMismatch {
                expected: t,
                found: ty,
            });
        }
        _ => {}
    }
    Ok(())
}

/// The debug form of a generated function, the same on every target.
pub(crate) fn fmt_code(
    f: &mut std::fmt::Formatter<'_>,
    title: &str,
    name: Option<&str>,
    addr: usize,
    len: usize,
    sig: &Signature,
    ret: Ty,
) -> std::fmt::Result {
    f.debug_struct(title)
        .field("name", &name)
        .field("addr", &format_args!("{addr:#x}"))
        .field("len", &len)
        .field("sig", sig)
        .field("ret", &ret)
        .finish()
}

// The register allocator, the fixed names and `lambda` are shared by
// every target: each target's register numbers must play the same roles.
const _: () = {
    use crate::aarch64::regfile as a;
    use crate::x86_64::regfile as x;
    assert!(a::RESERVED_GPR == x::RESERVED_GPR);
    assert!(a::RESERVED_XMM == x::RESERVED_XMM);
    assert!(a::CALLEE_SAVED_GPR == x::CALLEE_SAVED_GPR);
    assert!(a::NUM_T == x::NUM_T && a::NUM_S == x::NUM_S && a::NUM_FT == x::NUM_FT);
    let mut k = 0;
    while k < x::TEMP_ORDER.len() {
        assert!(a::TEMP_ORDER[k] == x::TEMP_ORDER[k]);
        k += 1;
    }
    k = 0;
    while k < x::NUM_T {
        assert!(a::FIXED_T[k] == x::FIXED_T[k]);
        k += 1;
    }
    k = 0;
    while k < x::NUM_S {
        assert!(a::FIXED_S[k] == x::FIXED_S[k]);
        k += 1;
    }
    k = 0;
    while k < x::PERSIST_ORDER.len() {
        assert!(a::PERSIST_ORDER[k] == x::PERSIST_ORDER[k]);
        k += 1;
    }
};
