//! Verification by type checking (JVMS §4.10.1) for the JIVE subset, with the
//! structural constraints of JVMS §4.9.2.
//!
//! Each method is checked in one linear pass over its instructions, exactly as
//! the JVMS type checker does: the `StackMapTable` gives the frame (types of
//! locals and operand stack) at every branch target and after every
//! unconditional transfer; between frames the checker computes the frame of
//! each instruction from the previous one. It enforces:
//!
//! - branch and switch targets fall on instruction starts inside the code, and
//!   control never falls off the end of the code;
//! - the operand stack stays within `max_stack`, never underflows, and locals
//!   stay within `max_locals`;
//! - every local read is of a local set with the right type;
//! - every instruction finds the types it needs on the stack, and at every
//!   merge point the incoming frame is assignable to the recorded one;
//! - field and method references resolve to members of the applet (or to
//!   `java/lang/Object.<init>`), with matching descriptors and static-ness;
//! - return instructions match the method's return type;
//! - constructors initialize `this` (call `Object.<init>`) before returning
//!   or using it.
//!
//! The verification types are those of §4.10.1.2 restricted to the subset:
//! `top`, `int`, `null`, `uninitializedThis`, the applet class, the arrays
//! `[Z [B [S [I`, and `java/lang/Object` (which `javac` writes in frames where
//! two different array types merge). Class files older than version 50 carry
//! no `StackMapTable` and are rejected; jive has no type-inference verifier.

use crate::bytecode::{self, Insn, Operand, op};
use crate::classfile::{ClassFile, Constant, FrameKind, VerificationType};
use crate::error::VerifyError;
use crate::subset::{ClassInfo, FieldType, MethodInfo, Prim};

/// A verification type of the subset (JVMS §4.10.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VType {
    /// Unusable (unset local).
    Top,
    /// `int` (also boolean, byte and short values).
    Int,
    /// The `null` reference.
    Null,
    /// `this` in a constructor before `Object.<init>`.
    UninitThis,
    /// An initialized instance of the applet class.
    This,
    /// `java/lang/Object`: any reference; nothing can be done with it but move it.
    Object,
    /// A one-dimensional array.
    Array(Prim),
}

impl VType {
    fn is_reference(self) -> bool {
        !matches!(self, VType::Top | VType::Int)
    }
    fn from_field(t: FieldType) -> VType {
        match t {
            FieldType::Prim(_) => VType::Int,
            FieldType::Array(p) => VType::Array(p),
        }
    }
}

impl core::fmt::Display for VType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            VType::Top => f.write_str("an unset value (top)"),
            VType::Int => f.write_str("int"),
            VType::Null => f.write_str("null"),
            VType::UninitThis => f.write_str("uninitialized this"),
            VType::This => f.write_str("the applet object"),
            VType::Object => f.write_str("java/lang/Object"),
            VType::Array(p) => write!(f, "[{}", p.descriptor()),
        }
    }
}

/// `isAssignable(from, to)` of JVMS §4.10.1.2, for the subset's types.
pub fn is_assignable(from: VType, to: VType) -> bool {
    from == to
        || to == VType::Top
        || matches!(
            (from, to),
            (VType::Null, VType::This | VType::Object | VType::Array(_))
                | (VType::This | VType::Array(_), VType::Object)
        )
}

/// A frame: the types of the locals and of the operand stack.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Frame {
    locals: Vec<VType>,
    stack: Vec<VType>,
    /// `flagThisUninit`.
    this_uninit: bool,
}

fn frame_assignable(from: &Frame, to: &Frame) -> bool {
    from.stack.len() == to.stack.len()
        && from
            .locals
            .iter()
            .zip(&to.locals)
            .all(|(&a, &b)| is_assignable(a, b))
        && from
            .stack
            .iter()
            .zip(&to.stack)
            .all(|(&a, &b)| is_assignable(a, b))
        && (!from.this_uninit || to.this_uninit)
}

struct Ctx<'a> {
    cf: &'a ClassFile,
    info: &'a ClassInfo,
    method: &'a MethodInfo,
    id: String,
    max_stack: usize,
    max_locals: usize,
}

type R<T> = Result<T, String>;

impl Ctx<'_> {
    fn vtype(&self, v: VerificationType) -> R<VType> {
        Ok(match v {
            VerificationType::Top => VType::Top,
            VerificationType::Integer => VType::Int,
            VerificationType::Null => VType::Null,
            VerificationType::UninitializedThis => VType::UninitThis,
            VerificationType::Float | VerificationType::Long | VerificationType::Double => {
                return Err(
                    "StackMapTable frame holds a long, float or double, which is not in the subset"
                        .into(),
                );
            }
            VerificationType::Uninitialized(o) => {
                return Err(format!(
                    "StackMapTable frame holds an object made by `new` at bci {o}, which is not in the subset"
                ));
            }
            VerificationType::Object(i) => {
                let name = self.cf.class_name(i)?;
                match name {
                    "[Z" => VType::Array(Prim::Boolean),
                    "[B" => VType::Array(Prim::Byte),
                    "[S" => VType::Array(Prim::Short),
                    "[I" => VType::Array(Prim::Int),
                    "java/lang/Object" => VType::Object,
                    n if n == self.info.name => VType::This,
                    n => {
                        return Err(format!(
                            "StackMapTable frame names class {n}, which is not in the subset"
                        ));
                    }
                }
            }
        })
    }

    fn expand(&self, declared: &[VType], stack: Vec<VType>) -> R<Frame> {
        if declared.len() > self.max_locals {
            return Err(format!(
                "StackMapTable frame has {} locals, max_locals is {}",
                declared.len(),
                self.max_locals
            ));
        }
        if stack.len() > self.max_stack {
            return Err(format!(
                "StackMapTable frame has {} stack items, max_stack is {}",
                stack.len(),
                self.max_stack
            ));
        }
        let mut locals = declared.to_vec();
        locals.resize(self.max_locals, VType::Top);
        let this_uninit = locals.contains(&VType::UninitThis);
        Ok(Frame {
            locals,
            stack,
            this_uninit,
        })
    }
}

/// Verifies every method of a class that passed the subset check.
pub fn verify(cf: &ClassFile, info: &ClassInfo) -> Result<(), VerifyError> {
    verify_with(cf, info, &crate::subset::method_instructions(cf))
}

/// [`verify`], given the instructions of each method of `cf` (in
/// [`ClassFile::methods`] order) as [`crate::subset::method_instructions`]
/// computes them; an empty list for a method with code means it did not decode.
pub fn verify_with(
    cf: &ClassFile,
    info: &ClassInfo,
    insns: &[Vec<Insn>],
) -> Result<(), VerifyError> {
    if cf.major_version < 50 {
        return Err(VerifyError {
            method: info.name.clone(),
            bci: None,
            reason: format!(
                "class file version {}.{} predates StackMapTable (version 50); jive verifies by type checking only, \
                 so recompile with javac --release 8 or later",
                cf.major_version, cf.minor_version
            ),
        });
    }
    for m in &info.methods {
        if m.is_native {
            continue;
        }
        verify_method(
            cf,
            info,
            m,
            insns.get(m.index).map(Vec::as_slice).unwrap_or_default(),
        )?;
    }
    Ok(())
}

fn verify_method(
    cf: &ClassFile,
    info: &ClassInfo,
    m: &MethodInfo,
    insns: &[Insn],
) -> Result<(), VerifyError> {
    let id = m.id();
    let fail = |bci: Option<u32>, reason: String| VerifyError {
        method: id.clone(),
        bci,
        reason,
    };
    let Some(code) = cf.methods.get(m.index).and_then(|cm| cm.code.as_ref()) else {
        return Err(fail(None, "method has no code".into()));
    };
    let owned;
    let insns = if insns.is_empty() {
        // Not decoded yet, or undecodable: decode here to report why.
        owned = bytecode::instructions(&code.code).map_err(|e| fail(Some(e.bci), e.reason))?;
        &owned[..]
    } else {
        insns
    };
    let ctx = Ctx {
        cf,
        info,
        method: m,
        id: id.clone(),
        max_stack: usize::from(code.max_stack),
        max_locals: usize::from(code.max_locals),
    };
    let _ = &ctx.id;

    // Instruction starts, by bci.
    let mut starts = vec![false; code.code.len()];
    for i in insns {
        starts[i.bci as usize] = true;
    }

    // The initial frame (JVMS §4.10.1.6 methodInitialStackFrame).
    let mut declared: Vec<VType> = Vec::new();
    if !m.is_static {
        declared.push(if m.name == "<init>" {
            VType::UninitThis
        } else {
            VType::This
        });
    }
    declared.extend(m.sig.params.iter().map(|&t| VType::from_field(t)));
    if declared.len() > ctx.max_locals {
        return Err(fail(
            None,
            format!(
                "the arguments need {} locals, max_locals is {}",
                declared.len(),
                ctx.max_locals
            ),
        ));
    }
    let initial = ctx
        .expand(&declared, Vec::new())
        .map_err(|r| fail(None, r))?;

    // The recorded frames, by bci.
    // Recorded frames in increasing bci order (the delta encoding guarantees it).
    let mut frames: Vec<(u32, Frame)> =
        Vec::with_capacity(code.stack_map.as_ref().map_or(0, Vec::len));
    if let Some(map) = &code.stack_map {
        let mut bci: i64 = -1;
        for f in map {
            bci += i64::from(f.offset_delta) + 1;
            let here = Some(bci.clamp(0, i64::from(u32::MAX)) as u32);
            let e = |r: String| {
                fail(
                    here,
                    format!("bad StackMapTable frame (type {}): {r}", f.frame_type),
                )
            };
            if bci >= code.code.len() as i64 {
                return Err(e(format!(
                    "frame at bci {bci} is beyond the end of the code ({} bytes)",
                    code.code.len()
                )));
            }
            if !starts[bci as usize] {
                return Err(e(format!(
                    "frame at bci {bci} is not at an instruction start"
                )));
            }
            let stack = match &f.kind {
                FrameKind::Same => Vec::new(),
                FrameKind::SameLocals1(t) => vec![ctx.vtype(*t).map_err(e)?],
                FrameKind::Chop(k) => {
                    let k = usize::from(*k);
                    if k > declared.len() {
                        return Err(e(format!("chops {k} locals of {}", declared.len())));
                    }
                    declared.truncate(declared.len() - k);
                    Vec::new()
                }
                FrameKind::Append(ts) => {
                    for t in ts {
                        declared.push(ctx.vtype(*t).map_err(e)?);
                    }
                    Vec::new()
                }
                FrameKind::Full { locals, stack } => {
                    declared = locals
                        .iter()
                        .map(|&t| ctx.vtype(t))
                        .collect::<R<_>>()
                        .map_err(e)?;
                    stack
                        .iter()
                        .map(|&t| ctx.vtype(t))
                        .collect::<R<_>>()
                        .map_err(e)?
                }
            };
            let frame = ctx.expand(&declared, stack).map_err(e)?;
            frames.push((bci as u32, frame));
        }
    }

    let frame_at = |bci: u32| {
        frames
            .binary_search_by_key(&bci, |f| f.0)
            .ok()
            .map(|i| &frames[i].1)
    };
    let mut cur: Option<Frame> = Some(initial);
    for insn in insns {
        if let Some(recorded) = frame_at(insn.bci) {
            if let Some(c) = &cur
                && !frame_assignable(c, recorded)
            {
                return Err(fail(
                    Some(insn.bci),
                    format!(
                        "falls through into a StackMapTable frame it does not match: {} vs {}",
                        show(c),
                        show(recorded)
                    ),
                ));
            }
            cur = Some(recorded.clone());
        }
        let Some(mut f) = cur.take() else {
            return Err(fail(
                Some(insn.bci),
                "no StackMapTable frame after an unconditional branch".into(),
            ));
        };
        let mut targets: Vec<i64> = Vec::new();
        let falls = step(&ctx, insn, &mut f, &mut targets).map_err(|r| fail(Some(insn.bci), r))?;
        for &t in &targets {
            if t < 0 || t >= code.code.len() as i64 {
                return Err(fail(
                    Some(insn.bci),
                    format!(
                        "branch target {t} is outside the code (0..{})",
                        code.code.len()
                    ),
                ));
            }
            if !starts[t as usize] {
                return Err(fail(
                    Some(insn.bci),
                    format!("branch target {t} is in the middle of an instruction"),
                ));
            }
            let Some(recorded) = frame_at(t as u32) else {
                return Err(fail(
                    Some(insn.bci),
                    format!("branch target {t} has no StackMapTable frame"),
                ));
            };
            if !frame_assignable(&f, recorded) {
                return Err(fail(
                    Some(insn.bci),
                    format!(
                        "the frame at the branch to {t} does not match its StackMapTable frame: {} vs {}",
                        show(&f),
                        show(recorded)
                    ),
                ));
            }
        }
        if falls {
            cur = Some(f);
        }
    }
    if cur.is_some() {
        let last = insns.last().map(|i| i.bci);
        return Err(fail(
            last,
            "execution can fall off the end of the code".into(),
        ));
    }
    Ok(())
}

fn show(f: &Frame) -> String {
    let l: Vec<String> = f.locals.iter().map(|t| t.to_string()).collect();
    let s: Vec<String> = f.stack.iter().map(|t| t.to_string()).collect();
    format!("locals [{}] stack [{}]", l.join(", "), s.join(", "))
}

impl Frame {
    fn pop(&mut self) -> R<VType> {
        self.stack
            .pop()
            .ok_or_else(|| "operand stack underflow".to_string())
    }
    fn pop_as(&mut self, want: VType, what: &str) -> R<VType> {
        let t = self.pop()?;
        if !is_assignable(t, want) {
            return Err(format!("{what} expects {want} on the stack, found {t}"));
        }
        Ok(t)
    }
    fn pop_ref(&mut self, what: &str) -> R<VType> {
        let t = self.pop()?;
        if !t.is_reference() {
            return Err(format!(
                "{what} expects a reference on the stack, found {t}"
            ));
        }
        Ok(t)
    }
    fn push(&mut self, t: VType, max: usize) -> R<()> {
        if self.stack.len() >= max {
            return Err(format!("operand stack overflow: max_stack is {max}"));
        }
        self.stack.push(t);
        Ok(())
    }
    fn local(&self, i: u16) -> R<VType> {
        self.locals.get(usize::from(i)).copied().ok_or_else(|| {
            format!(
                "local variable {i} is out of range (max_locals is {})",
                self.locals.len()
            )
        })
    }
    fn set_local(&mut self, i: u16, t: VType) -> R<()> {
        let n = self.locals.len();
        let slot = self
            .locals
            .get_mut(usize::from(i))
            .ok_or_else(|| format!("local variable {i} is out of range (max_locals is {n})"))?;
        *slot = t;
        Ok(())
    }
}

/// Applies one instruction to the frame. Returns whether control can fall
/// through to the next instruction; pushes branch targets into `targets`.
fn step(ctx: &Ctx<'_>, insn: &Insn, f: &mut Frame, targets: &mut Vec<i64>) -> R<bool> {
    let o = insn.opcode;
    let name = bytecode::mnemonic(o);
    let ms = ctx.max_stack;
    let int = VType::Int;
    match (o, &insn.operand) {
        (op::NOP, _) => {}
        (op::ACONST_NULL, _) => f.push(VType::Null, ms)?,
        (op::ICONST_M1..=op::ICONST_5, _) | (op::BIPUSH | op::SIPUSH, _) => f.push(int, ms)?,
        (op::LDC | op::LDC_W, &Operand::Cp(i)) => match ctx.cf.constant(i) {
            Some(Constant::Integer(_)) => f.push(int, ms)?,
            _ => return Err(format!("{name} #{i} is not an int constant")),
        },
        (op::ILOAD | op::ILOAD_0..=29, &Operand::Local(i)) => {
            let t = f.local(i)?;
            if t != int {
                return Err(format!("{name} reads local {i}, which holds {t}, not int"));
            }
            f.push(int, ms)?;
        }
        (op::ALOAD | op::ALOAD_0..=op::ALOAD_3, &Operand::Local(i)) => {
            let t = f.local(i)?;
            if !t.is_reference() {
                return Err(format!(
                    "{name} reads local {i}, which holds {t}, not a reference"
                ));
            }
            f.push(t, ms)?;
        }
        (op::ISTORE | op::ISTORE_0..=62, &Operand::Local(i)) => {
            f.pop_as(int, name)?;
            f.set_local(i, int)?;
        }
        (op::ASTORE | op::ASTORE_0..=op::ASTORE_3, &Operand::Local(i)) => {
            let t = f.pop_ref(name)?;
            f.set_local(i, t)?;
        }
        (op::IALOAD | op::BALOAD | op::SALOAD, _) => {
            f.pop_as(int, name)?;
            array_operand(f, o, name)?;
            f.push(int, ms)?;
        }
        (op::IASTORE | op::BASTORE | op::SASTORE, _) => {
            f.pop_as(int, name)?;
            f.pop_as(int, name)?;
            array_operand(f, o, name)?;
        }
        (op::POP, _) => {
            f.pop()?;
        }
        (op::POP2, _) => {
            f.pop()?;
            f.pop()?;
        }
        (op::DUP, _) => {
            let a = f.pop()?;
            f.push(a, ms)?;
            f.push(a, ms)?;
        }
        (op::DUP_X1, _) => {
            let a = f.pop()?;
            let b = f.pop()?;
            for t in [a, b, a] {
                f.push(t, ms)?;
            }
        }
        (op::DUP_X2, _) => {
            let a = f.pop()?;
            let b = f.pop()?;
            let c = f.pop()?;
            for t in [a, c, b, a] {
                f.push(t, ms)?;
            }
        }
        (op::DUP2, _) => {
            let a = f.pop()?;
            let b = f.pop()?;
            for t in [b, a, b, a] {
                f.push(t, ms)?;
            }
        }
        (op::DUP2_X1, _) => {
            let a = f.pop()?;
            let b = f.pop()?;
            let c = f.pop()?;
            for t in [b, a, c, b, a] {
                f.push(t, ms)?;
            }
        }
        (op::DUP2_X2, _) => {
            let a = f.pop()?;
            let b = f.pop()?;
            let c = f.pop()?;
            let d = f.pop()?;
            for t in [b, a, d, c, b, a] {
                f.push(t, ms)?;
            }
        }
        (op::SWAP, _) => {
            let a = f.pop()?;
            let b = f.pop()?;
            f.push(a, ms)?;
            f.push(b, ms)?;
        }
        (op::INEG | op::I2B | op::I2S, _) => {
            f.pop_as(int, name)?;
            f.push(int, ms)?;
        }
        (op::IADD..=op::IXOR, _) => {
            f.pop_as(int, name)?;
            f.pop_as(int, name)?;
            f.push(int, ms)?;
        }
        (op::IINC, &Operand::Iinc { index, .. }) => {
            let t = f.local(index)?;
            if t != int {
                return Err(format!("iinc of local {index}, which holds {t}, not int"));
            }
        }
        (op::IFEQ..=op::IFLE, &Operand::Branch(t)) => {
            f.pop_as(int, name)?;
            targets.push(t);
        }
        (op::IF_ICMPEQ..=op::IF_ICMPLE, &Operand::Branch(t)) => {
            f.pop_as(int, name)?;
            f.pop_as(int, name)?;
            targets.push(t);
        }
        (op::IF_ACMPEQ | op::IF_ACMPNE, &Operand::Branch(t)) => {
            f.pop_ref(name)?;
            f.pop_ref(name)?;
            targets.push(t);
        }
        (op::IFNULL | op::IFNONNULL, &Operand::Branch(t)) => {
            f.pop_ref(name)?;
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
            f.pop_as(int, name)?;
            targets.push(*default);
            targets.extend(ts.iter().copied());
            return Ok(false);
        }
        (op::LOOKUPSWITCH, Operand::Lookup { default, pairs }) => {
            f.pop_as(int, name)?;
            targets.push(*default);
            targets.extend(pairs.iter().map(|p| p.1));
            return Ok(false);
        }
        (op::IRETURN | op::ARETURN, _) => {
            let want = match ctx.method.sig.ret {
                None => return Err(format!("{name} in a method that returns void")),
                Some(t) => VType::from_field(t),
            };
            if (o == op::IRETURN) != (want == int) {
                return Err(format!(
                    "{name} in a method that returns {}",
                    ret_name(ctx.method)
                ));
            }
            f.pop_as(want, name)?;
            return Ok(false);
        }
        (op::RETURN, _) => {
            if ctx.method.sig.ret.is_some() {
                return Err(format!(
                    "return without a value in a method that returns {}",
                    ret_name(ctx.method)
                ));
            }
            if ctx.method.name == "<init>" && f.this_uninit {
                return Err("the constructor returns before `this` is initialized (no call to Object.<init>)".into());
            }
            return Ok(false);
        }
        (op::GETSTATIC..=op::PUTFIELD, &Operand::Cp(i)) => {
            let (_, fname, desc) = ctx
                .cf
                .member_ref(i)
                .ok_or_else(|| format!("{name} #{i} is not a field reference"))?;
            let fi = ctx
                .info
                .field_named(fname)
                .ok_or_else(|| format!("{name} of unknown field {fname}"))?;
            let ty = crate::subset::parse_field_descriptor(desc)
                .map_err(|_| format!("{name} {fname}: descriptor {desc} is not a subset type"))?;
            if ty != fi.ty {
                return Err(format!(
                    "{name} {fname}:{desc}, but the field is declared with type {}",
                    field_desc(fi.ty)
                ));
            }
            let want_static = o == op::GETSTATIC || o == op::PUTSTATIC;
            if fi.is_static != want_static {
                return Err(format!(
                    "{name} of {} field {fname}",
                    if fi.is_static { "static" } else { "instance" }
                ));
            }
            let vt = VType::from_field(ty);
            match o {
                op::GETSTATIC => f.push(vt, ms)?,
                op::PUTSTATIC => {
                    f.pop_as(vt, name)?;
                }
                op::GETFIELD => {
                    f.pop_as(VType::This, name)?;
                    f.push(vt, ms)?;
                }
                _ => {
                    f.pop_as(vt, name)?;
                    let r = f.pop()?;
                    if !(is_assignable(r, VType::This) || r == VType::UninitThis) {
                        return Err(format!(
                            "putfield expects the applet object on the stack, found {r}"
                        ));
                    }
                }
            }
        }
        (op::INVOKEVIRTUAL..=op::INVOKESTATIC, &Operand::Cp(i)) => {
            let (class, mname, desc) = ctx
                .cf
                .member_ref(i)
                .ok_or_else(|| format!("{name} #{i} is not a method reference"))?;
            if class != ctx.info.name {
                // The subset check admits only Object.<init>()V here.
                let r = f.pop()?;
                if r != VType::UninitThis {
                    return Err(format!(
                        "{class}.{mname}{desc} must be called on uninitialized this, found {r}"
                    ));
                }
                for t in f.locals.iter_mut().chain(f.stack.iter_mut()) {
                    if *t == VType::UninitThis {
                        *t = VType::This;
                    }
                }
                f.this_uninit = false;
                return Ok(true);
            }
            let (_, callee) = ctx
                .info
                .method(mname)
                .ok_or_else(|| format!("call to unknown method {mname}{desc}"))?;
            if callee.descriptor != desc {
                return Err(format!(
                    "call to {mname}{desc}, but the method is declared as {}",
                    callee.id()
                ));
            }
            if mname == "<init>" || mname == "<clinit>" {
                return Err(format!(
                    "{name} of {mname}: initializers are called only by the host"
                ));
            }
            if callee.is_static != (o == op::INVOKESTATIC) {
                return Err(format!(
                    "{name} of {} method {}",
                    if callee.is_static {
                        "static"
                    } else {
                        "instance"
                    },
                    callee.id()
                ));
            }
            for (k, &p) in callee.sig.params.iter().enumerate().rev() {
                let t = f.pop()?;
                let want = VType::from_field(p);
                if !is_assignable(t, want) {
                    return Err(format!(
                        "argument {k} of {} must be {want}, found {t}",
                        callee.id()
                    ));
                }
            }
            if !callee.is_static {
                f.pop_as(VType::This, name)?;
            }
            if let Some(r) = callee.sig.ret {
                f.push(VType::from_field(r), ms)?;
            }
        }
        (op::NEWARRAY, &Operand::ArrayType(t)) => {
            let p = match t {
                4 => Prim::Boolean,
                8 => Prim::Byte,
                9 => Prim::Short,
                10 => Prim::Int,
                _ => return Err(format!("newarray of element type {t} is not in the subset")),
            };
            f.pop_as(int, name)?;
            f.push(VType::Array(p), ms)?;
        }
        (op::ARRAYLENGTH, _) => {
            let t = f.pop()?;
            if !matches!(t, VType::Array(_) | VType::Null) {
                return Err(format!(
                    "arraylength expects an array on the stack, found {t}"
                ));
            }
            f.push(int, ms)?;
        }
        _ => return Err(format!("{name} is not in the JIVE subset")),
    }
    Ok(true)
}

fn array_operand(f: &mut Frame, o: u8, name: &str) -> R<()> {
    let t = f.pop()?;
    let ok = match t {
        VType::Null => true,
        VType::Array(p) => match o {
            op::IALOAD | op::IASTORE => p == Prim::Int,
            op::SALOAD | op::SASTORE => p == Prim::Short,
            _ => p == Prim::Byte || p == Prim::Boolean,
        },
        _ => false,
    };
    if !ok {
        let want = match o {
            op::IALOAD | op::IASTORE => "an int array",
            op::SALOAD | op::SASTORE => "a short array",
            _ => "a byte or boolean array",
        };
        return Err(format!("{name} expects {want}, found {t}"));
    }
    Ok(())
}

fn field_desc(t: FieldType) -> String {
    match t {
        FieldType::Prim(p) => p.descriptor().to_string(),
        FieldType::Array(p) => format!("[{}", p.descriptor()),
    }
}

fn ret_name(m: &MethodInfo) -> String {
    match m.sig.ret {
        None => "void".into(),
        Some(t) => field_desc(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignability_follows_the_jvms_hierarchy() {
        use VType::*;
        assert!(is_assignable(Null, Array(Prim::Int)));
        assert!(is_assignable(Array(Prim::Byte), Object));
        assert!(is_assignable(Int, Top));
        assert!(!is_assignable(Array(Prim::Byte), Array(Prim::Boolean)));
        assert!(!is_assignable(Int, Array(Prim::Int)));
        assert!(!is_assignable(UninitThis, This));
        assert!(!is_assignable(UninitThis, Object));
        assert!(!is_assignable(Object, Array(Prim::Int)));
    }
}
