//! Lent parameters: a `byte[]` the host lends to one invocation, and the
//! static proof, made at load beside the type check ([`crate::verifier`]),
//! that the method it is lent to only reads it.
//!
//! This is the verifier's half, at load. Not to be confused with
//! [`crate::lend`] (one letter apart), the runtime's half: the lend itself,
//! its guard and the prepared methods it runs ([`crate::Applet::lend`]).
//!
//! A host declares with [`LentParam`] which `byte[]` parameters of which
//! methods are lent ([`crate::check_lending`], [`crate::Applet::load_lending`]):
//! the array it passes there is not the applet's. It may be another
//! endpoint's shared memory, valid only during the invocation, which the
//! applet must never write nor keep. The type check cannot say so: the
//! stack maps say `[B` for the local, and at a merge a lent array and one of
//! the applet's own have the same type. So a second analysis follows the
//! lent array itself.
//!
//! # The analysis
//!
//! A forward data flow over the method's control-flow graph with one bit per
//! local and per operand-stack slot: "may hold a lent array". At entry the
//! bit is set on the lent parameters' locals; moves carry it (`aload`,
//! `astore`, `dup*`, `swap`); a merge ORs the incoming bits; the analysis
//! iterates to a fixed point. A bit only ever goes from clear to set, so each
//! instruction is visited at most once more than the method has slots; the
//! work is bounded by that product, checked, and a method that would exceed
//! it is refused with a [`crate::VerifyError`], never looped on.
//!
//! A value whose bit is set may only be
//!
//! - read: `baload`, `arraylength`;
//! - compared: `ifnull`, `ifnonnull`, `if_acmpeq`, `if_acmpne`;
//! - dropped: `pop`, `pop2`;
//! - moved: `aload`, `astore`, `dup*`, `swap` (the copy keeps the bit);
//! - passed to a native whose parameter the host's table marks read-only
//!   ([`crate::Natives::set_read_only`]): the analysis records the call
//!   ([`NativeArg`]), and binding ([`crate::Applet::instantiate`] and the
//!   loads) refuses the class unless the bound table marks that parameter
//!   read-only (and its tail form's, where the table binds one). A native
//!   that takes a lent array returns a possibly lent array, if it returns one.
//!
//! Every other use is a [`crate::VerifyError`] naming the method, the
//! bytecode index and what was done with the array ("is stored in static
//! field S", "is written by bastore", "is passed to method helper([BI)V",
//! "is returned", "is passed to native doHtoLDMA([BIII)V's parameter 0,
//! which writes it"). The subset has no exception handlers, `athrow`,
//! monitors or reference arrays (`aastore`), so no other way reaches a
//! reference. A method not declared lent gets no analysis and pays nothing.

use crate::bytecode::{self, Insn, Operand, op};
use crate::classfile::ClassFile;
use crate::error::VerifyError;
use crate::subset::{ClassInfo, FieldType, MethodInfo, Prim};

/// A `byte[]` parameter the host lends to one invocation of a method.
///
/// `param` counts the descriptor's declared parameters from 0 (not local
/// slots: an instance method's `this` is not counted). The descriptor must
/// declare parameter `param` as `[B`, or loading fails with
/// [`crate::LoadError::LentParam`]. A declared method the class does not
/// have (no method of that name with that descriptor) is no error: the
/// host checks what it needs ([`crate::Program::lent_params`]).
///
/// ```
/// use jive::LentParam;
/// const DO_RX: LentParam = LentParam { method: "doRx", descriptor: "([BII)I", param: 0 };
/// # let _ = DO_RX;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LentParam {
    /// The method's name.
    pub method: &'static str,
    /// The method's descriptor.
    pub descriptor: &'static str,
    /// The parameter, counted from 0 as in the descriptor.
    pub param: u16,
}

impl LentParam {
    /// Why this declaration is unusable, if it is: its descriptor does not
    /// parse, or has no parameter `param`, or that parameter is not `[B`.
    pub(crate) fn check(&self) -> Result<(), String> {
        let sig = crate::subset::parse_method_descriptor(self.descriptor)
            .map_err(|e| format!("the descriptor is not one of the subset ({e:?})"))?;
        match sig.params.get(usize::from(self.param)) {
            None => Err(format!(
                "the descriptor declares {} parameters",
                sig.params.len()
            )),
            Some(FieldType::Array(Prim::Byte)) => Ok(()),
            Some(&t) => Err(format!(
                "the parameter is {}, not [B: only a byte[] can be lent",
                match t {
                    FieldType::Prim(p) => p.descriptor().to_string(),
                    FieldType::Array(p) => format!("[{}", p.descriptor()),
                }
            )),
        }
    }
}

/// A call that passes a possibly lent array to a native: allowed only if
/// the bound table marks the parameter read-only, which binding checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NativeArg {
    /// The bytecode index of the call.
    pub bci: u32,
    /// The native, as an index into [`ClassInfo::methods`].
    pub native: u16,
    /// The parameter, counted from 0 as in the native's descriptor.
    pub param: u16,
}

/// What the analysis proved of one method declared lent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LentMethod {
    /// The method, as an index into [`ClassInfo::methods`].
    pub method: u16,
    /// Its lent parameters, counted from 0 as in its descriptor, ascending.
    pub params: Vec<u16>,
    /// The native calls that receive a possibly lent array, in bytecode order.
    pub native_args: Vec<NativeArg>,
}

/// Analyses every method of the class that `lent` declares (by name and
/// descriptor), after the type check has passed. The declarations
/// themselves are checked by the caller ([`LentParam::check`]).
pub(crate) fn analyse(
    cf: &ClassFile,
    info: &ClassInfo,
    insns: &[Vec<Insn>],
    lent: &[LentParam],
) -> Result<Vec<LentMethod>, VerifyError> {
    let mut out: Vec<LentMethod> = Vec::new();
    for (idx, m) in info.methods.iter().enumerate() {
        let mut params: Vec<u16> = lent
            .iter()
            .filter(|l| l.method == m.name && l.descriptor == m.descriptor)
            .map(|l| l.param)
            .collect();
        if params.is_empty() {
            continue;
        }
        params.sort_unstable();
        params.dedup();
        let method = u16::try_from(idx).map_err(|_| VerifyError {
            method: m.id(),
            bci: None,
            reason: "too many methods for a lent parameter".into(),
        })?;
        if m.is_native {
            return Err(VerifyError {
                method: m.id(),
                bci: None,
                reason: "a native method is declared with a lent parameter: only a method \
                         with code can be proved to only read it"
                    .into(),
            });
        }
        let code = insns.get(m.index).map(Vec::as_slice).unwrap_or_default();
        let native_args = method_flow(cf, info, m, code, &params)?;
        out.push(LentMethod {
            method,
            params,
            native_args,
        });
    }
    Ok(out)
}

/// The bits of one instruction's entry: "may hold a lent array", per local
/// and per operand-stack slot (bottom first).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bits {
    locals: Vec<bool>,
    stack: Vec<bool>,
}

impl Bits {
    /// ORs `from` into `self`; true if a bit was set.
    fn join(&mut self, from: &Bits) -> Result<bool, String> {
        if from.stack.len() != self.stack.len() {
            return Err(format!(
                "internal error: operand stacks of {} and {} slots merge",
                from.stack.len(),
                self.stack.len()
            ));
        }
        let mut changed = false;
        for (a, &b) in self
            .locals
            .iter_mut()
            .chain(self.stack.iter_mut())
            .zip(from.locals.iter().chain(&from.stack))
        {
            if b && !*a {
                *a = true;
                changed = true;
            }
        }
        Ok(changed)
    }
}

/// The most slot operations (steps times slots) the analysis of one
/// method may take: about 2^24, tens of milliseconds, far above what
/// `javac`'s methods need (a few thousand) and far below a load that a
/// hostile class could make take seconds.
const WORK: u64 = 1 << 24;

/// The fixed point over one method's code; the native calls it found.
fn method_flow(
    cf: &ClassFile,
    info: &ClassInfo,
    m: &MethodInfo,
    insns: &[Insn],
    params: &[u16],
) -> Result<Vec<NativeArg>, VerifyError> {
    let fail = |bci: Option<u32>, reason: String| VerifyError {
        method: m.id(),
        bci,
        reason,
    };
    let Some(code) = cf.methods.get(m.index).and_then(|c| c.code.as_ref()) else {
        return Err(fail(None, "method has no code".into()));
    };
    if insns.is_empty() {
        return Err(fail(
            None,
            "internal error: the method's code did not decode".into(),
        ));
    }
    let max_locals = usize::from(code.max_locals);
    let slots = max_locals + usize::from(code.max_stack);
    // Instruction index by bci.
    let mut at: Vec<u32> = vec![u32::MAX; code.code.len()];
    for (k, i) in insns.iter().enumerate() {
        if let Some(s) = at.get_mut(i.bci as usize) {
            *s = k as u32;
        }
    }
    let index_of = |bci: i64| -> Option<usize> {
        usize::try_from(bci)
            .ok()
            .and_then(|b| at.get(b))
            .filter(|&&k| k != u32::MAX)
            .map(|&k| k as usize)
    };
    let mut entry = Bits {
        locals: vec![false; max_locals],
        stack: Vec::new(),
    };
    for &p in params {
        let slot = usize::from(p) + usize::from(!m.is_static);
        match entry.locals.get_mut(slot) {
            Some(b) => *b = true,
            None => {
                return Err(fail(
                    None,
                    format!("lent parameter {p} is outside max_locals {max_locals}"),
                ));
            }
        }
    }
    let mut states: Vec<Option<Bits>> = vec![None; insns.len()];
    states[0] = Some(entry);
    let mut work: Vec<usize> = vec![0];
    let mut queued = vec![false; insns.len()];
    queued[0] = true;
    // Each instruction is queued when first reached and again only when a
    // bit of its entry goes from clear to set: at most `slots + 1` times.
    // Each step costs about `slots + 1` bit operations, so the work is
    // also capped at `WORK` of those: a hostile class whose taint crosses
    // one local per pass of a long loop (255 passes of 16 KiB of code)
    // would otherwise take seconds to load (review26).
    let per_step = slots as u64 + 1;
    let limit = (insns.len() as u64)
        .saturating_mul(per_step)
        .min(WORK / per_step);
    let mut steps: u64 = 0;
    let mut found: Vec<NativeArg> = Vec::new();
    let mut targets: Vec<i64> = Vec::new();
    let mut bits = Bits {
        locals: Vec::with_capacity(max_locals),
        stack: Vec::with_capacity(usize::from(code.max_stack)),
    };
    while let Some(k) = work.pop() {
        queued[k] = false;
        steps += 1;
        if steps > limit {
            return Err(fail(
                None,
                format!(
                    "the lent-array analysis exceeds its bound of {limit} steps \
                     ({} instructions, {} slots: at most {WORK} slot operations)",
                    insns.len(),
                    slots + 1
                ),
            ));
        }
        let insn = &insns[k];
        let Some(entry) = &states[k] else {
            continue;
        };
        // Into the scratch bits, whose buffers stay allocated.
        bits.locals.clone_from(&entry.locals);
        bits.stack.clone_from(&entry.stack);
        targets.clear();
        let falls = transfer(cf, info, insn, &mut bits, &mut targets, &mut found)
            .map_err(|r| fail(Some(insn.bci), r))?;
        if falls {
            targets.push(i64::from(insn.bci) + i64::from(insn.len));
        }
        for &t in &targets {
            let Some(s) = index_of(t) else {
                return Err(fail(
                    Some(insn.bci),
                    format!("internal error: control reaches bci {t}, not an instruction start"),
                ));
            };
            let changed = match &mut states[s] {
                Some(old) => old.join(&bits).map_err(|r| fail(Some(insns[s].bci), r))?,
                slot @ None => {
                    *slot = Some(bits.clone());
                    true
                }
            };
            if changed && !queued[s] {
                queued[s] = true;
                work.push(s);
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}

/// Pops an operand's bit.
fn pop(b: &mut Bits) -> Result<bool, String> {
    b.stack
        .pop()
        .ok_or_else(|| "internal error: operand stack underflow".to_string())
}

/// What a use of a possibly lent value does, for the error.
fn misuse(what: impl core::fmt::Display) -> String {
    format!("the lent byte[] {what}")
}

/// Applies one instruction to the bits; refuses a forbidden use of a
/// possibly lent value. Returns whether control falls through; pushes the
/// branch targets into `targets` and the native calls that take a
/// possibly lent array into `found`.
fn transfer(
    cf: &ClassFile,
    info: &ClassInfo,
    insn: &Insn,
    b: &mut Bits,
    targets: &mut Vec<i64>,
    found: &mut Vec<NativeArg>,
) -> Result<bool, String> {
    let o = insn.opcode;
    let name = bytecode::mnemonic(o);
    // A popped operand that must not be lent; `what` says what would be
    // done with it (made only for the error).
    let plain = |b: &mut Bits, what: &dyn Fn() -> String| -> Result<(), String> {
        if pop(b)? {
            return Err(misuse(what()));
        }
        Ok(())
    };
    let local = |b: &Bits, i: u16| -> Result<bool, String> {
        b.locals
            .get(usize::from(i))
            .copied()
            .ok_or_else(|| format!("internal error: local {i} is out of range"))
    };
    let used_by = || format!("is used by {name}");
    let used_by: &dyn Fn() -> String = &used_by;
    match (o, &insn.operand) {
        (op::NOP | op::IINC, _) => {}
        (op::ACONST_NULL | op::ICONST_M1..=op::ICONST_5 | op::BIPUSH | op::SIPUSH, _)
        | (op::LDC | op::LDC_W, _)
        | (op::ILOAD | op::ILOAD_0..=29, _)
        | (op::GETSTATIC, _) => b.stack.push(false),
        (op::ALOAD | op::ALOAD_0..=op::ALOAD_3, &Operand::Local(i)) => {
            let t = local(b, i)?;
            b.stack.push(t);
        }
        (op::ISTORE | op::ISTORE_0..=62, &Operand::Local(i))
        | (op::ASTORE | op::ASTORE_0..=op::ASTORE_3, &Operand::Local(i)) => {
            let t = pop(b)?;
            let n = b.locals.len();
            *b.locals
                .get_mut(usize::from(i))
                .ok_or_else(|| format!("internal error: local {i} is out of range ({n})"))? = t;
        }
        (op::BALOAD, _) => {
            plain(b, used_by)?; // the index
            pop(b)?; // the array: reading it is allowed
            b.stack.push(false);
        }
        (op::IALOAD | op::SALOAD, _) => {
            plain(b, used_by)?;
            plain(b, used_by)?;
            b.stack.push(false);
        }
        (op::IASTORE | op::BASTORE | op::SASTORE, _) => {
            plain(b, &|| format!("is stored as an element by {name}"))?;
            plain(b, used_by)?;
            plain(b, &|| format!("is written by {name}"))?;
        }
        (op::POP, _) => {
            pop(b)?;
        }
        (op::POP2, _) => {
            pop(b)?;
            pop(b)?;
        }
        (op::DUP..=op::SWAP, _) => {
            // The stack shuffles of JVMS §6.5, on one-slot values (the
            // subset has no long or double).
            let take = match o {
                op::DUP => 1,
                op::DUP_X1 | op::DUP2 | op::SWAP => 2,
                op::DUP_X2 | op::DUP2_X1 => 3,
                _ => 4, // DUP2_X2
            };
            let n = b.stack.len();
            if n < take {
                return Err("internal error: operand stack underflow".into());
            }
            let top: Vec<bool> = b.stack.split_off(n - take);
            // `top` is bottom-first: for dup_x1, [b, a] with a on top.
            let order: &[usize] = match o {
                op::DUP => &[0, 0],
                op::DUP_X1 => &[1, 0, 1],
                op::DUP_X2 => &[2, 0, 1, 2],
                op::DUP2 => &[0, 1, 0, 1],
                op::DUP2_X1 => &[1, 2, 0, 1, 2],
                op::DUP2_X2 => &[2, 3, 0, 1, 2, 3],
                _ => &[1, 0], // SWAP
            };
            b.stack.extend(order.iter().map(|&i| top[i]));
        }
        (op::INEG | op::I2B | op::I2S, _) => {
            plain(b, used_by)?;
            b.stack.push(false);
        }
        (op::IADD..=op::IXOR, _) => {
            plain(b, used_by)?;
            plain(b, used_by)?;
            b.stack.push(false);
        }
        (op::IFEQ..=op::IFLE, &Operand::Branch(t)) => {
            plain(b, used_by)?;
            targets.push(t);
        }
        (op::IF_ICMPEQ..=op::IF_ICMPLE, &Operand::Branch(t)) => {
            plain(b, used_by)?;
            plain(b, used_by)?;
            targets.push(t);
        }
        (op::IF_ACMPEQ | op::IF_ACMPNE, &Operand::Branch(t)) => {
            pop(b)?;
            pop(b)?;
            targets.push(t);
        }
        (op::IFNULL | op::IFNONNULL, &Operand::Branch(t)) => {
            pop(b)?;
            targets.push(t);
        }
        (op::GOTO | op::GOTO_W, &Operand::Branch(t)) => {
            targets.push(t);
            return Ok(false);
        }
        (
            op::TABLESWITCH,
            Operand::Table {
                default,
                targets: ts,
                ..
            },
        ) => {
            plain(b, used_by)?;
            targets.push(*default);
            targets.extend(ts.iter().copied());
            return Ok(false);
        }
        (op::LOOKUPSWITCH, Operand::Lookup { default, pairs }) => {
            plain(b, used_by)?;
            targets.push(*default);
            targets.extend(pairs.iter().map(|p| p.1));
            return Ok(false);
        }
        (op::IRETURN, _) => {
            plain(b, used_by)?;
            return Ok(false);
        }
        (op::ARETURN, _) => {
            plain(b, &|| "is returned".into())?;
            return Ok(false);
        }
        (op::RETURN, _) => return Ok(false),
        (op::PUTSTATIC | op::GETFIELD | op::PUTFIELD, &Operand::Cp(i)) => {
            let field = cf.member_ref(i).map_or("?", |r| r.1);
            match o {
                op::PUTSTATIC => plain(b, &|| format!("is stored in static field {field}"))?,
                op::GETFIELD => {
                    plain(b, &|| format!("is used as the object of getfield {field}"))?;
                    b.stack.push(false);
                }
                _ => {
                    plain(b, &|| format!("is stored in field {field}"))?;
                    plain(b, &|| format!("is used as the object of putfield {field}"))?;
                }
            }
        }
        (op::INVOKEVIRTUAL..=op::INVOKESTATIC, &Operand::Cp(i)) => {
            let (class, mname, desc) = cf
                .member_ref(i)
                .ok_or_else(|| format!("internal error: {name} #{i} is not a method reference"))?;
            let callee = if class == info.name {
                info.method(mname)
            } else {
                None
            };
            let Some((idx, callee)) = callee else {
                // `Object.<init>` on uninitialized `this`.
                plain(b, &|| format!("is passed to {class}.{mname}{desc}"))?;
                return Ok(true);
            };
            let mut any = false;
            for k in (0..callee.sig.params.len()).rev() {
                if !pop(b)? {
                    continue;
                }
                any = true;
                let param = u16::try_from(k).map_err(|_| "internal error: parameter index")?;
                if !callee.is_native {
                    return Err(misuse(format!(
                        "is passed to method {} (argument {k})",
                        callee.id()
                    )));
                }
                found.push(NativeArg {
                    bci: insn.bci,
                    native: u16::try_from(idx).map_err(|_| "internal error: method index")?,
                    param,
                });
            }
            if !callee.is_static {
                plain(b, &|| format!("is used as the receiver of {}", callee.id()))?;
            }
            match callee.sig.ret {
                // What a native given a lent array returns may be that array.
                Some(FieldType::Array(_)) => b.stack.push(any),
                Some(FieldType::Prim(_)) => b.stack.push(false),
                None => {}
            }
        }
        (op::NEWARRAY, _) => {
            plain(b, used_by)?;
            b.stack.push(false);
        }
        (op::ARRAYLENGTH, _) => {
            pop(b)?;
            b.stack.push(false);
        }
        _ => {
            return Err(format!(
                "internal error: {name} passed the type check but the lent-array analysis \
                 does not know it"
            ));
        }
    }
    Ok(true)
}
