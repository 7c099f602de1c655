//! eBPF instructions and an assembler with labels.
//!
//! An [`Insn`] is the kernel's `struct bpf_insn`: an opcode byte, the
//! destination and source registers in one byte, a signed 16-bit offset and
//! a signed 32-bit immediate. [`Asm`] appends instructions through one
//! method per form (ALU, jumps, loads, stores, helper calls, the 64-bit
//! immediate load of a map's fd) and resolves jumps to [`Label`]s when
//! [`Asm::finish`] is called, so code generators never count instructions.
//!
//! ```
//! use ebpf::insn::{Asm, Reg, Cond, Src};
//! let mut a = Asm::new();
//! let pass = a.new_label();
//! a.ldx(ebpf::insn::Width::W, Reg::R2, Reg::R1, 4); // r2 = ctx->data_end
//! a.jmp(Cond::Eq, Reg::R2, Src::Imm(0), pass);
//! a.mov64(Reg::R0, Src::Imm(1)); // XDP_DROP
//! a.exit();
//! a.bind(pass).unwrap();
//! a.mov64(Reg::R0, Src::Imm(2)); // XDP_PASS
//! a.exit();
//! let prog = a.finish().unwrap();
//! assert_eq!(prog.len(), 6);
//! ```

use thiserror::Error;

/// One eBPF instruction, laid out as the kernel's `struct bpf_insn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Insn {
    /// The opcode: class, size or operation, and source bits.
    pub code: u8,
    /// The destination register in the low nibble, the source in the high.
    pub regs: u8,
    /// The signed offset (of a memory access or a jump).
    pub off: i16,
    /// The signed immediate.
    pub imm: i32,
}

impl Insn {
    /// An instruction from its fields.
    pub const fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (dst as u8) | ((src as u8) << 4),
            off,
            imm,
        }
    }

    /// The destination register number.
    pub fn dst(&self) -> u8 {
        self.regs & 0x0f
    }

    /// The source register number.
    pub fn src(&self) -> u8 {
        self.regs >> 4
    }
}

/// The opcode constants of `linux/bpf_common.h` and `linux/bpf.h`.
pub mod op {
    /// Class: 64-bit immediate and legacy packet loads.
    pub const LD: u8 = 0x00;
    /// Class: load from memory into a register.
    pub const LDX: u8 = 0x01;
    /// Class: store an immediate.
    pub const ST: u8 = 0x02;
    /// Class: store a register.
    pub const STX: u8 = 0x03;
    /// Class: 32-bit arithmetic.
    pub const ALU: u8 = 0x04;
    /// Class: 64-bit jumps.
    pub const JMP: u8 = 0x05;
    /// Class: 32-bit jumps.
    pub const JMP32: u8 = 0x06;
    /// Class: 64-bit arithmetic.
    pub const ALU64: u8 = 0x07;
    /// Mode: immediate.
    pub const IMM: u8 = 0x00;
    /// Mode: absolute packet load (socket filters).
    pub const ABS: u8 = 0x20;
    /// Mode: indirect packet load (socket filters).
    pub const IND: u8 = 0x40;
    /// Mode: memory.
    pub const MEM: u8 = 0x60;
    /// Source: the immediate.
    pub const K: u8 = 0x00;
    /// Source: the source register.
    pub const X: u8 = 0x08;
    /// Byte swap to big-endian (with [`ALU`] and the `END` operation).
    pub const TO_BE: u8 = 0x08;
    /// Operation: byte swap.
    pub const END: u8 = 0xd0;
    /// Jump operation: call a helper.
    pub const CALL: u8 = 0x80;
    /// Jump operation: return `r0`.
    pub const EXIT: u8 = 0x90;
    /// Jump operation: unconditional.
    pub const JA: u8 = 0x00;
    /// The source register value of a 64-bit immediate that is a map fd.
    pub const PSEUDO_MAP_FD: u8 = 1;
}

/// A register: `R0` holds return values, `R1`–`R5` arguments (clobbered
/// by calls), `R6`–`R9` are preserved across calls, `R10` the read-only
/// frame pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

/// The width of a memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    /// One byte.
    B,
    /// Two bytes.
    H,
    /// Four bytes.
    W,
    /// Eight bytes.
    DW,
}

impl Width {
    fn bits(self) -> u8 {
        match self {
            Width::W => 0x00,
            Width::H => 0x08,
            Width::B => 0x10,
            Width::DW => 0x18,
        }
    }
}

/// An arithmetic operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Alu {
    Add,
    Sub,
    Mul,
    /// Unsigned division; the kernel defines `x / 0 = 0`.
    Div,
    Or,
    And,
    Lsh,
    Rsh,
    /// Unsigned remainder; the kernel defines `x % 0 = x`.
    Mod,
    Xor,
    Mov,
    Arsh,
}

impl Alu {
    fn bits(self) -> u8 {
        match self {
            Alu::Add => 0x00,
            Alu::Sub => 0x10,
            Alu::Mul => 0x20,
            Alu::Div => 0x30,
            Alu::Or => 0x40,
            Alu::And => 0x50,
            Alu::Lsh => 0x60,
            Alu::Rsh => 0x70,
            Alu::Mod => 0x90,
            Alu::Xor => 0xa0,
            Alu::Mov => 0xb0,
            Alu::Arsh => 0xc0,
        }
    }
}

/// A jump condition (unsigned unless named signed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Cond {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    /// `dst & src != 0`.
    Set,
    SignedGt,
    SignedGe,
    SignedLt,
    SignedLe,
}

impl Cond {
    fn bits(self) -> u8 {
        match self {
            Cond::Eq => 0x10,
            Cond::Gt => 0x20,
            Cond::Ge => 0x30,
            Cond::Set => 0x40,
            Cond::Ne => 0x50,
            Cond::SignedGt => 0x60,
            Cond::SignedGe => 0x70,
            Cond::Lt => 0xa0,
            Cond::Le => 0xb0,
            Cond::SignedLt => 0xc0,
            Cond::SignedLe => 0xd0,
        }
    }
}

/// The second operand of an arithmetic operation or a jump.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    /// A register.
    Reg(Reg),
    /// A sign-extended 32-bit immediate.
    Imm(i32),
}

/// A kernel helper function, by its number in `linux/bpf.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Helper(pub i32);

impl Helper {
    /// `void *bpf_map_lookup_elem(map, key)`.
    pub const MAP_LOOKUP_ELEM: Helper = Helper(1);
    /// `long bpf_redirect_map(map, key, flags)`: `XDP_REDIRECT` when the
    /// map has an entry at `key`, else the low two bits of `flags`.
    pub const REDIRECT_MAP: Helper = Helper(51);
}

/// A jump target, made by [`Asm::new_label`] and placed by [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Label(u32);

impl Label {
    /// The label's number: labels of one [`Asm`] are numbered 0, 1, ...
    /// in the order [`Asm::new_label`] made them.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Why [`Asm::bind`] or [`Asm::finish`] failed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum AsmError {
    /// A label was bound a second time.
    #[error("label {label} bound twice (first at instruction {first}, again at {again})")]
    BoundTwice {
        /// The label's number.
        label: u32,
        /// Where it was first bound.
        first: usize,
        /// Where it was bound again.
        again: usize,
    },
    /// A jump names a label that was never bound.
    #[error("the jump at instruction {at} goes to label {label}, which was never bound")]
    Unbound {
        /// The jump's index.
        at: usize,
        /// The label's number.
        label: u32,
    },
    /// A jump's distance does not fit the 16-bit offset.
    #[error("the jump at instruction {at} to instruction {target} does not fit a 32-bit offset")]
    TooFar {
        /// The jump's index.
        at: usize,
        /// The target's index.
        target: usize,
    },
    /// The program has no instructions or more than the kernel's limit.
    #[error("a program of {len} instructions is outside the kernel's 1..=1000000")]
    Length {
        /// Its length.
        len: usize,
    },
}

/// An assembler: instructions appended in order, jumps to labels resolved
/// by [`Asm::finish`].
#[derive(Debug, Default, Clone)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
}

/// The kernel's limit on a program's instruction count (for a privileged
/// loader).
pub const MAX_INSNS: usize = 1_000_000;

impl Asm {
    /// An empty program.
    pub fn new() -> Asm {
        Asm::default()
    }

    /// The number of instruction slots emitted so far (a 64-bit immediate
    /// load takes two).
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Whether nothing has been emitted.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// A fresh, unbound label.
    pub fn new_label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() as u32 - 1)
    }

    /// Places `label` at the next instruction.
    pub fn bind(&mut self, label: Label) -> Result<(), AsmError> {
        let here = self.insns.len();
        let slot = &mut self.labels[label.0 as usize];
        if let Some(first) = *slot {
            return Err(AsmError::BoundTwice {
                label: label.0,
                first,
                again: here,
            });
        }
        *slot = Some(here);
        Ok(())
    }

    /// Appends a raw instruction.
    pub fn raw(&mut self, insn: Insn) {
        self.insns.push(insn);
    }

    fn alu_class(&mut self, class: u8, op: Alu, dst: Reg, src: Src) {
        let insn = match src {
            Src::Reg(r) => Insn::new(class | op.bits() | op::X, dst, r, 0, 0),
            Src::Imm(k) => Insn::new(class | op.bits() | op::K, dst, Reg::R0, 0, k),
        };
        self.insns.push(insn);
    }

    /// `dst = dst op src` on 64 bits.
    pub fn alu64(&mut self, op: Alu, dst: Reg, src: Src) {
        self.alu_class(op::ALU64, op, dst, src);
    }

    /// `dst = (u32)dst op (u32)src`, the upper half of `dst` zeroed.
    pub fn alu32(&mut self, op: Alu, dst: Reg, src: Src) {
        self.alu_class(op::ALU, op, dst, src);
    }

    /// `dst = src` on 64 bits (an immediate is sign-extended).
    pub fn mov64(&mut self, dst: Reg, src: Src) {
        self.alu64(Alu::Mov, dst, src);
    }

    /// `dst = (u32)src`, the upper half zeroed.
    pub fn mov32(&mut self, dst: Reg, src: Src) {
        self.alu32(Alu::Mov, dst, src);
    }

    /// `dst = -dst` on 64 bits.
    pub fn neg64(&mut self, dst: Reg) {
        self.insns
            .push(Insn::new(op::ALU64 | 0x80, dst, Reg::R0, 0, 0));
    }

    /// `dst = -(u32)dst`, the upper half zeroed.
    pub fn neg32(&mut self, dst: Reg) {
        self.insns
            .push(Insn::new(op::ALU | 0x80, dst, Reg::R0, 0, 0));
    }

    /// Converts the low `bits` (16, 32 or 64) of `dst` from host order to
    /// big-endian (a swap on little-endian hosts), zeroing the rest: the
    /// value of a big-endian field loaded with [`Asm::ldx`].
    pub fn be(&mut self, dst: Reg, bits: i32) {
        self.insns.push(Insn::new(
            op::ALU | op::END | op::TO_BE,
            dst,
            Reg::R0,
            0,
            bits,
        ));
    }

    /// `dst = *(width *)(src + off)`, zero-extended.
    pub fn ldx(&mut self, width: Width, dst: Reg, src: Reg, off: i16) {
        self.insns.push(Insn::new(
            op::LDX | op::MEM | width.bits(),
            dst,
            src,
            off,
            0,
        ));
    }

    /// `*(width *)(dst + off) = src`.
    pub fn stx(&mut self, width: Width, dst: Reg, off: i16, src: Reg) {
        self.insns.push(Insn::new(
            op::STX | op::MEM | width.bits(),
            dst,
            src,
            off,
            0,
        ));
    }

    /// `*(width *)(dst + off) = imm`.
    pub fn st(&mut self, width: Width, dst: Reg, off: i16, imm: i32) {
        self.insns.push(Insn::new(
            op::ST | op::MEM | width.bits(),
            dst,
            Reg::R0,
            off,
            imm,
        ));
    }

    /// `r0 = ntoh(*(width *)(skb->data + imm))`, the legacy packet load of
    /// socket filters (the program returns 0 when it is out of bounds).
    pub fn ld_abs(&mut self, width: Width, imm: i32) {
        self.insns.push(Insn::new(
            op::LD | op::ABS | width.bits(),
            Reg::R0,
            Reg::R0,
            0,
            imm,
        ));
    }

    /// `r0 = ntoh(*(width *)(skb->data + src + imm))`, the legacy indexed
    /// packet load of socket filters.
    pub fn ld_ind(&mut self, width: Width, src: Reg, imm: i32) {
        self.insns.push(Insn::new(
            op::LD | op::IND | width.bits(),
            Reg::R0,
            src,
            0,
            imm,
        ));
    }

    /// `dst = imm` for a full 64-bit immediate (two instruction slots).
    pub fn ld_imm64(&mut self, dst: Reg, imm: u64) {
        self.insns.push(Insn::new(
            op::LD | op::IMM | Width::DW.bits(),
            dst,
            Reg::R0,
            0,
            imm as u32 as i32,
        ));
        self.insns
            .push(Insn::new(0, Reg::R0, Reg::R0, 0, (imm >> 32) as u32 as i32));
    }

    /// `dst = &map` for the map whose fd is `fd` (two instruction slots;
    /// the kernel replaces the fd with the map's address at load time).
    pub fn ld_map_fd(&mut self, dst: Reg, fd: i32) {
        self.insns.push(Insn {
            code: op::LD | op::IMM | Width::DW.bits(),
            regs: (dst as u8) | (op::PSEUDO_MAP_FD << 4),
            off: 0,
            imm: fd,
        });
        self.insns.push(Insn::new(0, Reg::R0, Reg::R0, 0, 0));
    }

    /// If `dst cond src` (64-bit compare), jump to `target`.
    pub fn jmp(&mut self, cond: Cond, dst: Reg, src: Src, target: Label) {
        self.jmp_class(op::JMP, cond, dst, src, target);
    }

    /// If `(u32)dst cond (u32)src`, jump to `target`.
    pub fn jmp32(&mut self, cond: Cond, dst: Reg, src: Src, target: Label) {
        self.jmp_class(op::JMP32, cond, dst, src, target);
    }

    fn jmp_class(&mut self, class: u8, cond: Cond, dst: Reg, src: Src, target: Label) {
        self.fixups.push((self.insns.len(), target));
        let insn = match src {
            Src::Reg(r) => Insn::new(class | cond.bits() | op::X, dst, r, 0, 0),
            Src::Imm(k) => Insn::new(class | cond.bits() | op::K, dst, Reg::R0, 0, k),
        };
        self.insns.push(insn);
    }

    /// Jump to `target` unconditionally.
    pub fn ja(&mut self, target: Label) {
        self.fixups.push((self.insns.len(), target));
        self.insns
            .push(Insn::new(op::JMP | op::JA, Reg::R0, Reg::R0, 0, 0));
    }

    /// Calls a kernel helper: arguments in `r1`–`r5`, the result in `r0`,
    /// `r1`–`r5` clobbered.
    pub fn call(&mut self, helper: Helper) {
        self.insns
            .push(Insn::new(op::JMP | op::CALL, Reg::R0, Reg::R0, 0, helper.0));
    }

    /// Returns `r0`.
    pub fn exit(&mut self) {
        self.insns
            .push(Insn::new(op::JMP | op::EXIT, Reg::R0, Reg::R0, 0, 0));
    }

    /// `r0 = value; exit`.
    pub fn ret(&mut self, value: i32) {
        self.mov64(Reg::R0, Src::Imm(value));
        self.exit();
    }

    /// Resolves every jump and returns the program.
    ///
    /// A jump whose distance does not fit the 16-bit offset is relaxed:
    /// an unconditional one becomes the 32-bit `gotol` (`JMP32 | JA` with
    /// the offset in the immediate, Linux 6.4 and later), a conditional
    /// one `if cond goto +1; goto +1; gotol target` (two more slots). Only
    /// jumps made through labels are relocated: a jump appended with
    /// [`Asm::raw`] must not cross a relaxed one.
    pub fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
        let mut targets = Vec::with_capacity(self.fixups.len());
        for &(at, label) in &self.fixups {
            let target =
                self.labels[label.0 as usize].ok_or(AsmError::Unbound { at, label: label.0 })?;
            let conditional = self.insns[at].code & 0xf0 != op::JA;
            targets.push((at, target, conditional));
        }
        // long[k]: fixup k takes the three-slot form. Growing one jump only
        // lengthens others, so marking until nothing changes terminates.
        let mut long = vec![false; targets.len()];
        let mut extra = vec![0usize; self.insns.len() + 1];
        loop {
            let mut grown = vec![0usize; self.insns.len() + 1];
            for (k, &(at, _, _)) in targets.iter().enumerate() {
                if long[k] {
                    grown[at + 1] += 2;
                }
            }
            let mut acc = 0;
            for (e, g) in extra.iter_mut().zip(&grown) {
                acc += g;
                *e = acc;
            }
            let pos = |i: usize| i + extra[i];
            let mut changed = false;
            for (k, &(at, target, conditional)) in targets.iter().enumerate() {
                let off = pos(target) as i64 - pos(at) as i64 - 1;
                if conditional && !long[k] && i16::try_from(off).is_err() {
                    long[k] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let pos = |i: usize| i + extra[i];
        let end = pos(self.insns.len());
        if end == 0 || end > MAX_INSNS {
            return Err(AsmError::Length { len: end });
        }
        let mut relaxed: Vec<Option<(usize, bool)>> = vec![None; self.insns.len()];
        for (k, &(at, target, _)) in targets.iter().enumerate() {
            relaxed[at] = Some((target, long[k]));
        }
        let mut out = Vec::with_capacity(end);
        for (i, insn) in self.insns.iter_mut().enumerate() {
            let Some((target, long)) = relaxed[i] else {
                out.push(*insn);
                continue;
            };
            let here = pos(i);
            let far = |from: usize| -> Result<i32, AsmError> {
                i32::try_from(pos(target) as i64 - from as i64 - 1)
                    .map_err(|_| AsmError::TooFar { at: i, target })
            };
            if long {
                insn.off = 1;
                out.push(*insn);
                out.push(Insn::new(op::JMP | op::JA, Reg::R0, Reg::R0, 1, 0));
                out.push(Insn::new(
                    op::JMP32 | op::JA,
                    Reg::R0,
                    Reg::R0,
                    0,
                    far(here + 2)?,
                ));
            } else {
                let off = far(here)?;
                match i16::try_from(off) {
                    Ok(o) => {
                        insn.off = o;
                        out.push(*insn);
                    }
                    // Only an unconditional jump is left long here.
                    Err(_) => out.push(Insn::new(op::JMP32 | op::JA, Reg::R0, Reg::R0, 0, off)),
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_the_kernel_headers() {
        let mut a = Asm::new();
        a.mov64(Reg::R0, Src::Imm(2)); // BPF_MOV64_IMM(BPF_REG_0, 2)
        a.ldx(Width::W, Reg::R2, Reg::R1, 16); // BPF_LDX_MEM(BPF_W, 2, 1, 16)
        a.alu32(Alu::And, Reg::R3, Src::Reg(Reg::R4));
        a.be(Reg::R5, 16);
        a.call(Helper::REDIRECT_MAP);
        a.exit();
        let p = a.finish().unwrap();
        assert_eq!((p[0].code, p[0].regs, p[0].imm), (0xb7, 0x00, 2));
        assert_eq!((p[1].code, p[1].regs, p[1].off), (0x61, 0x12, 16));
        assert_eq!((p[2].code, p[2].regs), (0x5c, 0x43));
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xdc, 0x05, 16));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(p[5].code, 0x95);
    }

    #[test]
    fn jumps_resolve_forward_and_backward_and_skip_wide_immediates() {
        let mut a = Asm::new();
        let top = a.new_label();
        let end = a.new_label();
        a.bind(top).unwrap();
        a.jmp(Cond::Eq, Reg::R1, Src::Imm(0), end); // 0
        a.ld_map_fd(Reg::R1, 7); // 1, 2
        a.ja(top); // 3
        a.bind(end).unwrap();
        a.exit(); // 4
        let p = a.finish().unwrap();
        assert_eq!(p[0].off, 3);
        assert_eq!((p[1].code, p[1].src(), p[1].imm), (0x18, 1, 7));
        assert_eq!(p[3].off, -4);
    }

    #[test]
    fn label_mistakes_are_typed_errors() {
        let mut a = Asm::new();
        let l = a.new_label();
        a.ja(l);
        assert_eq!(
            a.clone().finish(),
            Err(AsmError::Unbound { at: 0, label: 0 })
        );
        a.bind(l).unwrap();
        a.exit();
        assert_eq!(
            a.bind(l),
            Err(AsmError::BoundTwice {
                label: 0,
                first: 1,
                again: 2
            })
        );
        assert_eq!(Asm::new().finish(), Err(AsmError::Length { len: 0 }));
    }

    #[test]
    fn jumps_past_the_offset_range_are_relaxed() {
        let mut a = Asm::new();
        let far = a.new_label();
        a.ja(far); // 0
        a.jmp(Cond::Set, Reg::R1, Src::Imm(4), far); // 1, relaxed to 1, 2, 3
        for _ in 0..40_000 {
            a.mov64(Reg::R0, Src::Imm(0));
        }
        a.bind(far).unwrap();
        a.exit();
        let p = a.finish().unwrap();
        assert_eq!(p.len(), 40_000 + 5);
        // gotol: JMP32 | JA with the offset in the immediate.
        assert_eq!((p[0].code, p[0].off, p[0].imm), (0x06, 0, 40_003));
        assert_eq!((p[1].code, p[1].off), (0x45, 1));
        assert_eq!((p[2].code, p[2].off), (0x05, 1));
        assert_eq!((p[3].code, p[3].imm), (0x06, 40_000));
        assert_eq!(p[40_004].code, 0x95);
    }
}
