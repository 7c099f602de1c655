//! What the native backends share, so that a target's file holds only
//! its encodings and its convention's tables (with the argument layout,
//! `ConvTables::layout` in `abi.rs`, and the frame's save slots,
//! `slots.rs`): parallel moves, the return-type check, the agreement of
//! every target's register roles with the shared allocator, and the
//! debug form of a generated function.

use crate::error::ErrorKind;
use crate::sig::Signature;
use crate::ty::Ty;

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
