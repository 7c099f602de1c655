//! Raw bytecode decoding (JVMS §4.9.1 static constraints, chapter 6 formats).
//!
//! [`instructions`] splits a `code` array into instructions with their
//! operands, resolving `wide` and the padding of `tableswitch` and
//! `lookupswitch`. It rejects what the static constraints of §4.9.1 forbid at
//! this level: unknown or reserved opcodes, instructions that run past the end
//! of the code, `wide` before an instruction it cannot modify, and malformed
//! switch tables. It does not check branch targets; the verifier does.
//!
//! The same listing feeds the subset check, the verifier, the decoder and the
//! `javap`-like disassembly of `fastpath applet dump`.

use crate::classfile::{ClassFile, Constant};

/// Opcode numbers used by name elsewhere in the crate (JVMS chapter 7).
#[allow(missing_docs)]
pub mod op {
    pub const NOP: u8 = 0;
    pub const ACONST_NULL: u8 = 1;
    pub const ICONST_M1: u8 = 2;
    pub const ICONST_5: u8 = 8;
    pub const BIPUSH: u8 = 16;
    pub const SIPUSH: u8 = 17;
    pub const LDC: u8 = 18;
    pub const LDC_W: u8 = 19;
    pub const LDC2_W: u8 = 20;
    pub const ILOAD: u8 = 21;
    pub const ALOAD: u8 = 25;
    pub const ILOAD_0: u8 = 26;
    pub const ALOAD_0: u8 = 42;
    pub const ALOAD_3: u8 = 45;
    pub const IALOAD: u8 = 46;
    pub const BALOAD: u8 = 51;
    pub const CALOAD: u8 = 52;
    pub const SALOAD: u8 = 53;
    pub const ISTORE: u8 = 54;
    pub const ASTORE: u8 = 58;
    pub const ISTORE_0: u8 = 59;
    pub const ASTORE_0: u8 = 75;
    pub const ASTORE_3: u8 = 78;
    pub const IASTORE: u8 = 79;
    pub const BASTORE: u8 = 84;
    pub const SASTORE: u8 = 86;
    pub const POP: u8 = 87;
    pub const POP2: u8 = 88;
    pub const DUP: u8 = 89;
    pub const DUP_X1: u8 = 90;
    pub const DUP_X2: u8 = 91;
    pub const DUP2: u8 = 92;
    pub const DUP2_X1: u8 = 93;
    pub const DUP2_X2: u8 = 94;
    pub const SWAP: u8 = 95;
    pub const IADD: u8 = 96;
    pub const ISUB: u8 = 100;
    pub const IMUL: u8 = 104;
    pub const IDIV: u8 = 108;
    pub const IREM: u8 = 112;
    pub const INEG: u8 = 116;
    pub const ISHL: u8 = 120;
    pub const ISHR: u8 = 122;
    pub const IUSHR: u8 = 124;
    pub const IAND: u8 = 126;
    pub const IOR: u8 = 128;
    pub const IXOR: u8 = 130;
    pub const IINC: u8 = 132;
    pub const I2B: u8 = 145;
    pub const I2C: u8 = 146;
    pub const I2S: u8 = 147;
    pub const IFEQ: u8 = 153;
    pub const IFLE: u8 = 158;
    pub const IF_ICMPEQ: u8 = 159;
    pub const IF_ICMPLE: u8 = 164;
    pub const IF_ACMPEQ: u8 = 165;
    pub const IF_ACMPNE: u8 = 166;
    pub const GOTO: u8 = 167;
    pub const JSR: u8 = 168;
    pub const RET: u8 = 169;
    pub const TABLESWITCH: u8 = 170;
    pub const LOOKUPSWITCH: u8 = 171;
    pub const IRETURN: u8 = 172;
    pub const ARETURN: u8 = 176;
    pub const RETURN: u8 = 177;
    pub const GETSTATIC: u8 = 178;
    pub const PUTSTATIC: u8 = 179;
    pub const GETFIELD: u8 = 180;
    pub const PUTFIELD: u8 = 181;
    pub const INVOKEVIRTUAL: u8 = 182;
    pub const INVOKESPECIAL: u8 = 183;
    pub const INVOKESTATIC: u8 = 184;
    pub const INVOKEINTERFACE: u8 = 185;
    pub const INVOKEDYNAMIC: u8 = 186;
    pub const NEW: u8 = 187;
    pub const NEWARRAY: u8 = 188;
    pub const ANEWARRAY: u8 = 189;
    pub const ARRAYLENGTH: u8 = 190;
    pub const ATHROW: u8 = 191;
    pub const CHECKCAST: u8 = 192;
    pub const INSTANCEOF: u8 = 193;
    pub const MONITORENTER: u8 = 194;
    pub const MONITOREXIT: u8 = 195;
    pub const WIDE: u8 = 196;
    pub const MULTIANEWARRAY: u8 = 197;
    pub const IFNULL: u8 = 198;
    pub const IFNONNULL: u8 = 199;
    pub const GOTO_W: u8 = 200;
    pub const JSR_W: u8 = 201;
}

/// Mnemonics of opcodes 0..=201 (JVMS chapter 7).
pub const MNEMONICS: [&str; 202] = [
    "nop",
    "aconst_null",
    "iconst_m1",
    "iconst_0",
    "iconst_1",
    "iconst_2",
    "iconst_3",
    "iconst_4",
    "iconst_5",
    "lconst_0",
    "lconst_1",
    "fconst_0",
    "fconst_1",
    "fconst_2",
    "dconst_0",
    "dconst_1",
    "bipush",
    "sipush",
    "ldc",
    "ldc_w",
    "ldc2_w",
    "iload",
    "lload",
    "fload",
    "dload",
    "aload",
    "iload_0",
    "iload_1",
    "iload_2",
    "iload_3",
    "lload_0",
    "lload_1",
    "lload_2",
    "lload_3",
    "fload_0",
    "fload_1",
    "fload_2",
    "fload_3",
    "dload_0",
    "dload_1",
    "dload_2",
    "dload_3",
    "aload_0",
    "aload_1",
    "aload_2",
    "aload_3",
    "iaload",
    "laload",
    "faload",
    "daload",
    "aaload",
    "baload",
    "caload",
    "saload",
    "istore",
    "lstore",
    "fstore",
    "dstore",
    "astore",
    "istore_0",
    "istore_1",
    "istore_2",
    "istore_3",
    "lstore_0",
    "lstore_1",
    "lstore_2",
    "lstore_3",
    "fstore_0",
    "fstore_1",
    "fstore_2",
    "fstore_3",
    "dstore_0",
    "dstore_1",
    "dstore_2",
    "dstore_3",
    "astore_0",
    "astore_1",
    "astore_2",
    "astore_3",
    "iastore",
    "lastore",
    "fastore",
    "dastore",
    "aastore",
    "bastore",
    "castore",
    "sastore",
    "pop",
    "pop2",
    "dup",
    "dup_x1",
    "dup_x2",
    "dup2",
    "dup2_x1",
    "dup2_x2",
    "swap",
    "iadd",
    "ladd",
    "fadd",
    "dadd",
    "isub",
    "lsub",
    "fsub",
    "dsub",
    "imul",
    "lmul",
    "fmul",
    "dmul",
    "idiv",
    "ldiv",
    "fdiv",
    "ddiv",
    "irem",
    "lrem",
    "frem",
    "drem",
    "ineg",
    "lneg",
    "fneg",
    "dneg",
    "ishl",
    "lshl",
    "ishr",
    "lshr",
    "iushr",
    "lushr",
    "iand",
    "land",
    "ior",
    "lor",
    "ixor",
    "lxor",
    "iinc",
    "i2l",
    "i2f",
    "i2d",
    "l2i",
    "l2f",
    "l2d",
    "f2i",
    "f2l",
    "f2d",
    "d2i",
    "d2l",
    "d2f",
    "i2b",
    "i2c",
    "i2s",
    "lcmp",
    "fcmpl",
    "fcmpg",
    "dcmpl",
    "dcmpg",
    "ifeq",
    "ifne",
    "iflt",
    "ifge",
    "ifgt",
    "ifle",
    "if_icmpeq",
    "if_icmpne",
    "if_icmplt",
    "if_icmpge",
    "if_icmpgt",
    "if_icmple",
    "if_acmpeq",
    "if_acmpne",
    "goto",
    "jsr",
    "ret",
    "tableswitch",
    "lookupswitch",
    "ireturn",
    "lreturn",
    "freturn",
    "dreturn",
    "areturn",
    "return",
    "getstatic",
    "putstatic",
    "getfield",
    "putfield",
    "invokevirtual",
    "invokespecial",
    "invokestatic",
    "invokeinterface",
    "invokedynamic",
    "new",
    "newarray",
    "anewarray",
    "arraylength",
    "athrow",
    "checkcast",
    "instanceof",
    "monitorenter",
    "monitorexit",
    "wide",
    "multianewarray",
    "ifnull",
    "ifnonnull",
    "goto_w",
    "jsr_w",
];

/// The mnemonic of an opcode, or `"<reserved>"`.
pub fn mnemonic(opcode: u8) -> &'static str {
    MNEMONICS
        .get(usize::from(opcode))
        .copied()
        .unwrap_or("<reserved>")
}

/// The operands of one instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operand {
    /// No operands.
    None,
    /// A local variable index (`iload`, `astore`, ..., also implicit `_n` forms).
    Local(u16),
    /// `iinc` (and `wide iinc`).
    Iinc {
        /// Local index.
        index: u16,
        /// Signed increment.
        delta: i16,
    },
    /// An immediate (`bipush`, `sipush`), sign-extended.
    Int(i32),
    /// A constant-pool index (`ldc`, field and method instructions, `new`, ...).
    Cp(u16),
    /// `invokeinterface` index and count.
    InvokeInterface(u16, u8),
    /// `multianewarray` index and dimensions.
    MultiANewArray(u16, u8),
    /// A branch target as an absolute bci (may be out of range; the verifier checks).
    Branch(i64),
    /// `tableswitch`: absolute targets.
    Table {
        /// Default target.
        default: i64,
        /// Lowest key.
        low: i32,
        /// Targets for keys `low..=high`.
        targets: Vec<i64>,
    },
    /// `lookupswitch`: absolute targets.
    Lookup {
        /// Default target.
        default: i64,
        /// `(key, target)` pairs in file order.
        pairs: Vec<(i32, i64)>,
    },
    /// `newarray` element type code (4 = boolean ... 11 = long).
    ArrayType(u8),
}

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insn {
    /// Bytecode index of the opcode (of `wide` for a widened instruction).
    pub bci: u32,
    /// Length in bytes, including any `wide` prefix and padding.
    pub len: u32,
    /// The opcode (for a widened instruction, the modified opcode).
    pub opcode: u8,
    /// True if preceded by `wide`.
    pub wide: bool,
    /// Its operands.
    pub operand: Operand,
}

/// An error while splitting code into instructions: the bci and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Where.
    pub bci: u32,
    /// Why.
    pub reason: String,
}

/// Splits `code` into instructions.
///
/// ```
/// use jive::bytecode::{instructions, Operand};
/// // iload_0; iconst_1; iadd; ireturn
/// let insns = instructions(&[0x1a, 0x04, 0x60, 0xac]).unwrap();
/// assert_eq!(insns.len(), 4);
/// assert_eq!(insns[0].operand, Operand::Local(0));
/// ```
pub fn instructions(code: &[u8]) -> Result<Vec<Insn>, DecodeError> {
    let mut out = Vec::new();
    let mut pc = 0usize;
    while pc < code.len() {
        let insn = one(code, pc)?;
        pc += insn.len as usize;
        out.push(insn);
    }
    Ok(out)
}

fn one(code: &[u8], pc: usize) -> Result<Insn, DecodeError> {
    let bci = pc as u32;
    let err = |reason: String| DecodeError { bci, reason };
    let opcode = code[pc];
    let byte = |i: usize| -> Result<u8, DecodeError> {
        code.get(pc + i).copied().ok_or_else(|| {
            err(format!(
                "{} runs past the end of the code",
                mnemonic(opcode)
            ))
        })
    };
    let u2 =
        |i: usize| -> Result<u16, DecodeError> { Ok(u16::from_be_bytes([byte(i)?, byte(i + 1)?])) };
    let s4 = |at: usize| -> Result<i32, DecodeError> {
        match code.get(at..at + 4) {
            Some(b) => Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            None => Err(err(format!(
                "{} runs past the end of the code",
                mnemonic(opcode)
            ))),
        }
    };
    let rel = |off: i32| i64::from(bci) + i64::from(off);
    let (len, operand): (usize, Operand) = match opcode {
        0..=15 | 46..=53 | 79..=95 | 96..=131 | 133..=152 | 172..=177 | 190 | 191 | 194 | 195 => {
            (1, Operand::None)
        }
        16 => (2, Operand::Int(i32::from(byte(1)? as i8))),
        17 => (3, Operand::Int(i32::from(u2(1)? as i16))),
        18 => (2, Operand::Cp(u16::from(byte(1)?))),
        19 | 20 | 178..=184 | 187 | 189 | 192 | 193 => (3, Operand::Cp(u2(1)?)),
        21..=25 | 54..=58 | 169 => (2, Operand::Local(u16::from(byte(1)?))),
        26..=45 => (1, Operand::Local(u16::from((opcode - 26) % 4))),
        59..=78 => (1, Operand::Local(u16::from((opcode - 59) % 4))),
        132 => (
            3,
            Operand::Iinc {
                index: u16::from(byte(1)?),
                delta: i16::from(byte(2)? as i8),
            },
        ),
        153..=168 | 198 | 199 => (3, Operand::Branch(rel(i32::from(u2(1)? as i16)))),
        200 | 201 => (5, Operand::Branch(rel(s4(pc + 1)?))),
        185 => {
            let (i, n, z) = (u2(1)?, byte(3)?, byte(4)?);
            if n == 0 || z != 0 {
                return Err(err(
                    "invokeinterface count must be nonzero and its fourth byte zero".into(),
                ));
            }
            (5, Operand::InvokeInterface(i, n))
        }
        186 => {
            let i = u2(1)?;
            if byte(3)? != 0 || byte(4)? != 0 {
                return Err(err("invokedynamic bytes 3 and 4 must be zero".into()));
            }
            (5, Operand::Cp(i))
        }
        188 => (2, Operand::ArrayType(byte(1)?)),
        197 => {
            let (i, d) = (u2(1)?, byte(3)?);
            if d == 0 {
                return Err(err("multianewarray dimensions must be at least 1".into()));
            }
            (4, Operand::MultiANewArray(i, d))
        }
        170 => {
            let base = (pc + 4) & !3;
            let default = rel(s4(base)?);
            let low = s4(base + 4)?;
            let high = s4(base + 8)?;
            if low > high {
                return Err(err(format!("tableswitch low {low} > high {high}")));
            }
            let n = (i64::from(high) - i64::from(low) + 1) as usize;
            if n > code.len() {
                return Err(err("tableswitch runs past the end of the code".into()));
            }
            let mut targets = Vec::with_capacity(n);
            for k in 0..n {
                targets.push(rel(s4(base + 12 + 4 * k)?));
            }
            (
                base + 12 + 4 * n - pc,
                Operand::Table {
                    default,
                    low,
                    targets,
                },
            )
        }
        171 => {
            let base = (pc + 4) & !3;
            let default = rel(s4(base)?);
            let npairs = s4(base + 4)?;
            if npairs < 0 || npairs as usize > code.len() {
                return Err(err(format!("lookupswitch npairs {npairs} is invalid")));
            }
            let mut pairs: Vec<(i32, i64)> = Vec::with_capacity(npairs as usize);
            for k in 0..npairs as usize {
                let key = s4(base + 8 + 8 * k)?;
                if let Some(&(prev, _)) = pairs.last()
                    && key <= prev
                {
                    return Err(err(
                        "lookupswitch keys are not sorted in increasing order".into()
                    ));
                }
                pairs.push((key, rel(s4(base + 12 + 8 * k)?)));
            }
            (
                base + 8 + 8 * npairs as usize - pc,
                Operand::Lookup { default, pairs },
            )
        }
        196 => {
            let m = byte(1)?;
            let (len, operand) = match m {
                21..=25 | 54..=58 | 169 => (4, Operand::Local(u2(2)?)),
                132 => (
                    6,
                    Operand::Iinc {
                        index: u2(2)?,
                        delta: u2(4)? as i16,
                    },
                ),
                _ => return Err(err(format!("wide cannot modify {}", mnemonic(m)))),
            };
            if pc + len > code.len() {
                return Err(err("wide instruction runs past the end of the code".into()));
            }
            return Ok(Insn {
                bci,
                len: len as u32,
                opcode: m,
                wide: true,
                operand,
            });
        }
        _ => return Err(err(format!("reserved or unknown opcode 0x{opcode:02x}"))),
    };
    if pc + len > code.len() {
        return Err(err(format!(
            "{} runs past the end of the code",
            mnemonic(opcode)
        )));
    }
    Ok(Insn {
        bci,
        len: len as u32,
        opcode,
        wide: false,
        operand,
    })
}

/// Formats one instruction `javap`-style, resolving constant-pool operands.
pub fn format_insn(cf: &ClassFile, insn: &Insn) -> String {
    let name = mnemonic(insn.opcode);
    let wide = if insn.wide { "wide " } else { "" };
    let cp = |i: u16| -> String {
        if let Some((c, n, d)) = cf.member_ref(i) {
            return format!("#{i} // {c}.{n}:{d}");
        }
        match cf.constant(i) {
            Some(Constant::Integer(v)) => format!("#{i} // int {v}"),
            Some(Constant::Class(_)) => {
                format!("#{i} // class {}", cf.class_name(i).unwrap_or("?"))
            }
            Some(c) => format!("#{i} // {c:?}"),
            None => format!("#{i} // <invalid>"),
        }
    };
    let ops = match &insn.operand {
        Operand::None => String::new(),
        Operand::Local(n)
            if (26..=45).contains(&insn.opcode) || (59..=78).contains(&insn.opcode) =>
        {
            let _ = n;
            String::new()
        }
        Operand::Local(n) => format!(" {n}"),
        Operand::Iinc { index, delta } => format!(" {index}, {delta}"),
        Operand::Int(v) => format!(" {v}"),
        Operand::Cp(i) => format!(" {}", cp(*i)),
        Operand::InvokeInterface(i, n) => format!(" {}, {n}", cp(*i)),
        Operand::MultiANewArray(i, d) => format!(" {}, {d}", cp(*i)),
        Operand::Branch(t) => format!(" {t}"),
        Operand::ArrayType(t) => format!(
            " {}",
            match t {
                4 => "boolean",
                5 => "char",
                6 => "float",
                7 => "double",
                8 => "byte",
                9 => "short",
                10 => "int",
                11 => "long",
                _ => "<invalid>",
            }
        ),
        Operand::Table {
            default,
            low,
            targets,
        } => {
            let mut s = format!(
                " {{ // {low} to {}",
                i64::from(*low) + targets.len() as i64 - 1
            );
            for (k, t) in targets.iter().enumerate() {
                s.push_str(&format!(
                    "\n        {:>11}: {t}",
                    i64::from(*low) + k as i64
                ));
            }
            s.push_str(&format!("\n            default: {default}\n      }}"));
            s
        }
        Operand::Lookup { default, pairs } => {
            let mut s = format!(" {{ // {}", pairs.len());
            for (k, t) in pairs {
                s.push_str(&format!("\n        {k:>11}: {t}"));
            }
            s.push_str(&format!("\n            default: {default}\n      }}"));
            s
        }
    };
    format!("{wide}{name}{ops}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tableswitch_padding_depends_on_the_bci() {
        // iload_0; tableswitch (pad 2) default=+19 low=0 high=0 target=+19; ... filler
        let mut code = vec![0x1a, 0xaa, 0, 0];
        code.extend(19i32.to_be_bytes());
        code.extend(0i32.to_be_bytes());
        code.extend(0i32.to_be_bytes());
        code.extend(19i32.to_be_bytes());
        code.push(0xb1); // return at bci 20
        let insns = instructions(&code).unwrap();
        assert_eq!(insns[1].len, 19);
        assert_eq!(
            insns[1].operand,
            Operand::Table {
                default: 20,
                low: 0,
                targets: vec![20]
            }
        );
        assert_eq!(insns[2].bci, 20);
    }

    #[test]
    fn wide_iinc_has_a_16_bit_index_and_delta() {
        let insns = instructions(&[0xc4, 0x84, 0x01, 0x00, 0xff, 0xfe]).unwrap();
        assert_eq!(
            insns[0].operand,
            Operand::Iinc {
                index: 256,
                delta: -2
            }
        );
        assert!(insns[0].wide);
    }

    #[test]
    fn truncated_and_reserved_instructions_are_errors() {
        assert_eq!(instructions(&[0x11, 0x00]).unwrap_err().bci, 0);
        assert!(
            instructions(&[0xca])
                .unwrap_err()
                .reason
                .contains("reserved")
        );
        assert!(
            instructions(&[0xc4, 0x60])
                .unwrap_err()
                .reason
                .contains("wide cannot modify iadd")
        );
    }
}
