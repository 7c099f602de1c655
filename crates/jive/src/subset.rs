//! The JIVE subset check (U-Net/SLE paper §3.1; the rules are in `docs/jive.md`).
//!
//! JIVE runs one applet class whose values are `byte`, `short`, `int` and
//! `boolean` and one-dimensional arrays of them. [`check`] enforces this at
//! load, before verification, and names the method, the bytecode index and
//! the reason of each rejection:
//!
//! - the class: not an interface, abstract class or module; superclass
//!   `java/lang/Object`; no superinterfaces;
//! - fields and method descriptors: only the subset's types (and `V`);
//! - methods: no overloading (one method per name), not `synchronized`, not
//!   abstract; `native` only if also `static`; no exception handlers;
//! - instructions: none that touch `long`, `float`, `double` or `char`,
//!   objects of other classes, strings, monitors, exceptions or subroutines
//!   (`jsr`/`ret`), no `invokeinterface` or `invokedynamic`; `ldc` only of
//!   `int` constants; field and method instructions only on the applet class,
//!   except `invokespecial java/lang/Object.<init>()V`.
//!
//! The result is a [`ClassInfo`] summary of the applet's members that the
//! verifier and the decoder use.

use crate::bytecode::{self, Insn, Operand, op};
use crate::classfile::{self, ClassFile, Constant};
use crate::error::SubsetError;

/// A primitive type of the subset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prim {
    /// `boolean` (`Z`).
    Boolean,
    /// `byte` (`B`).
    Byte,
    /// `short` (`S`).
    Short,
    /// `int` (`I`).
    Int,
}

impl Prim {
    /// The descriptor character.
    pub fn descriptor(self) -> char {
        match self {
            Prim::Boolean => 'Z',
            Prim::Byte => 'B',
            Prim::Short => 'S',
            Prim::Int => 'I',
        }
    }
    /// Size in bytes of an array element.
    pub fn size(self) -> u64 {
        match self {
            Prim::Boolean | Prim::Byte => 1,
            Prim::Short => 2,
            Prim::Int => 4,
        }
    }
}

/// A field, parameter or return type of the subset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// A primitive value (an `int` on the operand stack).
    Prim(Prim),
    /// A one-dimensional array of a primitive.
    Array(Prim),
}

impl FieldType {
    /// True for array types.
    pub fn is_ref(self) -> bool {
        matches!(self, FieldType::Array(_))
    }
}

/// A method descriptor of the subset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodSig {
    /// Parameter types.
    pub params: Vec<FieldType>,
    /// Return type, `None` for `void`.
    pub ret: Option<FieldType>,
}

/// Why a descriptor is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DescriptorError {
    /// Not a descriptor at all (JVMS §4.3).
    Malformed,
    /// A valid descriptor that uses a type outside the subset.
    NotInSubset(String),
}

fn parse_field_type(s: &[u8], i: &mut usize) -> Result<FieldType, DescriptorError> {
    let c = *s.get(*i).ok_or(DescriptorError::Malformed)?;
    *i += 1;
    let prim = |c: u8| -> Result<Prim, DescriptorError> {
        Ok(match c {
            b'Z' => Prim::Boolean,
            b'B' => Prim::Byte,
            b'S' => Prim::Short,
            b'I' => Prim::Int,
            b'J' => return Err(DescriptorError::NotInSubset("long".into())),
            b'F' => return Err(DescriptorError::NotInSubset("float".into())),
            b'D' => return Err(DescriptorError::NotInSubset("double".into())),
            b'C' => return Err(DescriptorError::NotInSubset("char".into())),
            _ => return Err(DescriptorError::Malformed),
        })
    };
    match c {
        b'L' => {
            let end = s[*i..]
                .iter()
                .position(|&b| b == b';')
                .ok_or(DescriptorError::Malformed)?;
            let name = String::from_utf8_lossy(&s[*i..*i + end]).into_owned();
            if name.is_empty() {
                return Err(DescriptorError::Malformed);
            }
            *i += end + 1;
            Err(DescriptorError::NotInSubset(format!("object type {name}")))
        }
        b'[' => match s.get(*i) {
            Some(b'[') => {
                // Consume the rest so a malformed inner type is still reported as such.
                let mut j = *i;
                while s.get(j) == Some(&b'[') {
                    j += 1;
                }
                *i = j;
                parse_field_type(s, i).map(|_| ()).or_else(|e| match e {
                    DescriptorError::Malformed => Err(e),
                    DescriptorError::NotInSubset(_) => Ok(()),
                })?;
                Err(DescriptorError::NotInSubset(
                    "multi-dimensional array".into(),
                ))
            }
            Some(&b'L') => {
                parse_field_type(s, i).or_else(|e| match e {
                    DescriptorError::Malformed => Err(e),
                    DescriptorError::NotInSubset(_) => Ok(FieldType::Prim(Prim::Int)),
                })?;
                Err(DescriptorError::NotInSubset("array of objects".into()))
            }
            Some(&c) => {
                *i += 1;
                prim(c).map(FieldType::Array).map_err(|e| match e {
                    DescriptorError::NotInSubset(t) => {
                        DescriptorError::NotInSubset(format!("{t} array"))
                    }
                    m => m,
                })
            }
            None => Err(DescriptorError::Malformed),
        },
        c => prim(c).map(FieldType::Prim),
    }
}

/// Parses a field descriptor (JVMS §4.3.2) into a subset type.
pub fn parse_field_descriptor(d: &str) -> Result<FieldType, DescriptorError> {
    let mut i = 0;
    let t = parse_field_type(d.as_bytes(), &mut i)?;
    if i != d.len() {
        return Err(DescriptorError::Malformed);
    }
    Ok(t)
}

/// Parses a method descriptor (JVMS §4.3.3) into a subset signature.
pub fn parse_method_descriptor(d: &str) -> Result<MethodSig, DescriptorError> {
    let s = d.as_bytes();
    if s.first() != Some(&b'(') {
        return Err(DescriptorError::Malformed);
    }
    let mut i = 1;
    let mut params = Vec::new();
    let mut first_bad = None;
    loop {
        match s.get(i) {
            Some(b')') => {
                i += 1;
                break;
            }
            Some(_) => match parse_field_type(s, &mut i) {
                Ok(t) => params.push(t),
                Err(DescriptorError::Malformed) => return Err(DescriptorError::Malformed),
                Err(e) => {
                    first_bad.get_or_insert(e);
                }
            },
            None => return Err(DescriptorError::Malformed),
        }
    }
    let ret = if s.get(i) == Some(&b'V') {
        i += 1;
        None
    } else {
        match parse_field_type(s, &mut i) {
            Ok(t) => Some(t),
            Err(DescriptorError::Malformed) => return Err(DescriptorError::Malformed),
            Err(e) => {
                first_bad.get_or_insert(e);
                None
            }
        }
    };
    if i != s.len() {
        return Err(DescriptorError::Malformed);
    }
    match first_bad {
        Some(e) => Err(e),
        None => Ok(MethodSig { params, ret }),
    }
}

/// A field of the applet class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldInfo {
    /// Name.
    pub name: String,
    /// Type.
    pub ty: FieldType,
    /// `static`?
    pub is_static: bool,
    /// Slot among the static fields, or among the instance fields.
    pub slot: u16,
}

/// A method of the applet class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodInfo {
    /// Name.
    pub name: String,
    /// Descriptor as written.
    pub descriptor: String,
    /// Parsed descriptor.
    pub sig: MethodSig,
    /// `static`?
    pub is_static: bool,
    /// `native`?
    pub is_native: bool,
    /// Index in [`ClassFile::methods`].
    pub index: usize,
}

impl MethodInfo {
    /// `name(descriptor)`.
    pub fn id(&self) -> String {
        format!("{}{}", self.name, self.descriptor)
    }
    /// Number of argument slots including `this`.
    pub fn arg_slots(&self) -> usize {
        self.sig.params.len() + usize::from(!self.is_static)
    }
}

/// The applet's members, as accepted by the subset check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassInfo {
    /// The class's internal name.
    pub name: String,
    /// Fields in declaration order.
    pub fields: Vec<FieldInfo>,
    /// Methods in declaration order (same order as the class file).
    pub methods: Vec<MethodInfo>,
    /// Number of static fields.
    pub static_count: u16,
    /// Number of instance fields.
    pub instance_count: u16,
}

impl ClassInfo {
    /// Finds a field by name and descriptor.
    pub fn field(&self, name: &str, ty: FieldType) -> Option<&FieldInfo> {
        self.fields.iter().find(|f| f.name == name && f.ty == ty)
    }
    /// Finds a field by name only.
    pub fn field_named(&self, name: &str) -> Option<&FieldInfo> {
        self.fields.iter().find(|f| f.name == name)
    }
    /// Finds a method by name (names are unique in the subset).
    pub fn method(&self, name: &str) -> Option<(usize, &MethodInfo)> {
        self.methods
            .iter()
            .enumerate()
            .find(|(_, m)| m.name == name)
    }
}

fn class_err(reason: impl Into<String>) -> SubsetError {
    SubsetError {
        method: None,
        bci: None,
        reason: reason.into(),
    }
}

fn describe(e: DescriptorError, what: &str) -> String {
    match e {
        DescriptorError::Malformed => format!("{what} is malformed"),
        DescriptorError::NotInSubset(t) => format!("{what} uses {t}, which JIVE does not support"),
    }
}

/// Why an opcode is outside the subset, or `None` if it is allowed.
pub fn opcode_reason(opcode: u8) -> Option<&'static str> {
    Some(match opcode {
        9..=15
        | 20
        | 22..=24
        | 30..=41
        | 47..=49
        | 55..=57
        | 63..=74
        | 80..=82
        | 97..=99
        | 101..=103
        | 105..=107
        | 109..=111
        | 113..=115
        | 117..=119
        | 121
        | 123
        | 125
        | 127
        | 129
        | 131
        | 133..=144
        | 148..=152
        | 173..=175 => "long, float and double are not in the JIVE subset",
        op::CALOAD | 85 | op::I2C => "char is not in the JIVE subset",
        50 | 83 | op::ANEWARRAY => "arrays of references are not in the JIVE subset",
        op::MULTIANEWARRAY => "multi-dimensional arrays are not in the JIVE subset",
        op::NEW => {
            "creating objects is not in the JIVE subset (the host creates the one applet instance)"
        }
        op::CHECKCAST | op::INSTANCEOF => {
            "casts and instanceof are not in the JIVE subset (there is one class)"
        }
        op::ATHROW => "throwing exceptions is not in the JIVE subset",
        op::MONITORENTER | op::MONITOREXIT => "monitors are not in the JIVE subset",
        op::JSR | op::RET | op::JSR_W => "subroutines (jsr/ret) are not in the JIVE subset",
        op::INVOKEINTERFACE => "interfaces are not in the JIVE subset",
        op::INVOKEDYNAMIC => {
            "invokedynamic is not in the JIVE subset (no lambdas or string concatenation)"
        }
        _ => return None,
    })
}

/// Splits every method's code into instructions (an empty list for methods
/// without code, or whose code does not decode: the verifier reports those).
pub fn method_instructions(cf: &ClassFile) -> Vec<Vec<Insn>> {
    cf.methods
        .iter()
        .map(|m| {
            m.code
                .as_ref()
                .and_then(|c| bytecode::instructions(&c.code).ok())
                .unwrap_or_default()
        })
        .collect()
}

/// Checks a parsed class against the JIVE subset and summarizes its members.
pub fn check(cf: &ClassFile) -> Result<ClassInfo, SubsetError> {
    check_with(cf, &method_instructions(cf))
}

/// [`check`], given the instructions of each method of `cf` (in
/// [`ClassFile::methods`] order), as [`method_instructions`] computes them.
pub fn check_with(cf: &ClassFile, insns: &[Vec<Insn>]) -> Result<ClassInfo, SubsetError> {
    if cf.access & classfile::ACC_MODULE != 0 {
        return Err(class_err("module-info classes are not applets"));
    }
    if cf.access & classfile::ACC_INTERFACE != 0 {
        return Err(class_err("interfaces are not in the JIVE subset"));
    }
    if cf.access & classfile::ACC_ABSTRACT != 0 {
        return Err(class_err("an applet class must not be abstract"));
    }
    if cf.super_class.as_deref() != Some("java/lang/Object") {
        return Err(class_err(format!(
            "the applet class must extend java/lang/Object directly, not {}",
            cf.super_class.as_deref().unwrap_or("nothing")
        )));
    }
    if let Some(i) = cf.interfaces.first() {
        return Err(class_err(format!(
            "the applet class implements interface {i}; interfaces are not in the JIVE subset"
        )));
    }

    let mut fields = Vec::new();
    let (mut ns, mut ni) = (0u16, 0u16);
    for f in &cf.fields {
        let ty = parse_field_descriptor(&f.descriptor).map_err(|e| {
            class_err(format!(
                "field {}: {}",
                f.name,
                describe(e, &format!("descriptor {}", f.descriptor))
            ))
        })?;
        if fields.iter().any(|g: &FieldInfo| g.name == f.name) {
            return Err(class_err(format!("two fields named {}", f.name)));
        }
        let is_static = f.access & classfile::ACC_STATIC != 0;
        let slot = if is_static { &mut ns } else { &mut ni };
        fields.push(FieldInfo {
            name: f.name.clone(),
            ty,
            is_static,
            slot: *slot,
        });
        *slot += 1;
    }

    let mut methods: Vec<MethodInfo> = Vec::new();
    for (index, m) in cf.methods.iter().enumerate() {
        let id = m.id();
        let merr = |bci: Option<u32>, reason: String| SubsetError {
            method: Some(id.clone()),
            bci,
            reason,
        };
        let sig = parse_method_descriptor(&m.descriptor)
            .map_err(|e| merr(None, describe(e, "the descriptor")))?;
        if let Some(prev) = methods.iter().find(|p| p.name == m.name) {
            return Err(merr(
                None,
                format!(
                    "overloads {}; method overloading is not in the JIVE subset",
                    prev.id()
                ),
            ));
        }
        let is_static = m.access & classfile::ACC_STATIC != 0;
        let is_native = m.access & classfile::ACC_NATIVE != 0;
        if m.access & classfile::ACC_SYNCHRONIZED != 0 {
            return Err(merr(
                None,
                "synchronized methods (monitors) are not in the JIVE subset".into(),
            ));
        }
        if m.access & classfile::ACC_ABSTRACT != 0 {
            return Err(merr(
                None,
                "abstract methods are not in the JIVE subset".into(),
            ));
        }
        if is_native && !is_static {
            return Err(merr(None, "native methods must be static".into()));
        }
        if m.name == "<init>" && (is_static || sig.ret.is_some()) {
            return Err(merr(
                None,
                "a constructor must be an instance method returning void".into(),
            ));
        }
        if m.name == "<clinit>" && (!is_static || !sig.params.is_empty() || sig.ret.is_some()) {
            return Err(merr(
                None,
                "<clinit> must be static, take no arguments and return void".into(),
            ));
        }
        match (&m.code, is_native) {
            (Some(_), true) => {
                return Err(merr(
                    None,
                    "a native method must not have a Code attribute".into(),
                ));
            }
            (None, false) => return Err(merr(None, "a method without a Code attribute".into())),
            _ => {}
        }
        if let Some(code) = &m.code {
            if let Some(h) = code.exception_table.first() {
                return Err(merr(
                    Some(u32::from(h.handler_pc)),
                    "exception handlers (try/catch/finally) are not in the JIVE subset".into(),
                ));
            }
            // Code that does not even split into instructions is the verifier's to reject.
            for insn in insns.get(index).map(Vec::as_slice).unwrap_or_default() {
                check_insn(cf, insn).map_err(|reason| merr(Some(insn.bci), reason))?;
            }
        }
        methods.push(MethodInfo {
            name: m.name.clone(),
            descriptor: m.descriptor.clone(),
            sig,
            is_static,
            is_native,
            index,
        });
    }
    Ok(ClassInfo {
        name: cf.this_class.clone(),
        fields,
        methods,
        static_count: ns,
        instance_count: ni,
    })
}

fn check_insn(cf: &ClassFile, insn: &Insn) -> Result<(), String> {
    let o = insn.opcode;
    if let Some(r) = opcode_reason(o) {
        return Err(format!("{}: {r}", bytecode::mnemonic(o)));
    }
    match (o, &insn.operand) {
        (op::LDC | op::LDC_W, &Operand::Cp(i)) => match cf.constant(i) {
            Some(Constant::Integer(_)) => Ok(()),
            Some(Constant::String(_)) => {
                Err("ldc of a string: strings are not in the JIVE subset".into())
            }
            Some(Constant::Float(_)) => {
                Err("ldc of a float: float is not in the JIVE subset".into())
            }
            Some(Constant::Class(_)) => {
                Err("ldc of a class literal: other classes are not in the JIVE subset".into())
            }
            Some(Constant::Unusable) => Err(format!(
                "ldc of constant #{i}, an unusable slot (index 0, or the one after a long or double)"
            )),
            Some(c) => Err(format!("ldc of {c:?} is not in the JIVE subset")),
            None => Err(format!("ldc of constant #{i}, which does not exist")),
        },
        (op::NEWARRAY, &Operand::ArrayType(t)) => match t {
            4 | 8 | 9 | 10 => Ok(()),
            5 => Err("newarray char: char is not in the JIVE subset".into()),
            6 | 7 | 11 => Err("newarray of long, float or double: not in the JIVE subset".into()),
            _ => Err(format!("newarray with invalid element type {t}")),
        },
        (op::GETSTATIC..=op::PUTFIELD, &Operand::Cp(i)) => match cf.constant(i) {
            Some(Constant::Fieldref(..)) => {
                let (class, name, _) = cf.member_ref(i).ok_or("unresolvable field reference")?;
                if class != cf.this_class {
                    Err(format!(
                        "access to field {class}.{name}: other classes are not in the JIVE subset"
                    ))
                } else {
                    Ok(())
                }
            }
            _ => Err(format!(
                "{} operand #{i} is not a Fieldref",
                bytecode::mnemonic(o)
            )),
        },
        (op::INVOKEVIRTUAL..=op::INVOKESTATIC, &Operand::Cp(i)) => {
            let (class, name, desc) = match cf.constant(i) {
                Some(Constant::Methodref(..)) => {
                    cf.member_ref(i).ok_or("unresolvable method reference")?
                }
                Some(Constant::InterfaceMethodref(..)) => {
                    return Err("interface methods are not in the JIVE subset".into());
                }
                _ => {
                    return Err(format!(
                        "{} operand #{i} is not a Methodref",
                        bytecode::mnemonic(o)
                    ));
                }
            };
            let object_init = o == op::INVOKESPECIAL
                && class == "java/lang/Object"
                && name == "<init>"
                && desc == "()V";
            if class == cf.this_class || object_init {
                Ok(())
            } else {
                Err(format!(
                    "call to {class}.{name}{desc}: other classes are not in the JIVE subset"
                ))
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_of_the_subset() {
        assert_eq!(
            parse_field_descriptor("[B"),
            Ok(FieldType::Array(Prim::Byte))
        );
        assert_eq!(
            parse_field_descriptor("Z"),
            Ok(FieldType::Prim(Prim::Boolean))
        );
        let sig = parse_method_descriptor("(I[SZ)[I").unwrap();
        assert_eq!(
            sig.params,
            vec![
                FieldType::Prim(Prim::Int),
                FieldType::Array(Prim::Short),
                FieldType::Prim(Prim::Boolean)
            ]
        );
        assert_eq!(sig.ret, Some(FieldType::Array(Prim::Int)));
        assert_eq!(parse_method_descriptor("()V").unwrap().ret, None);
    }

    #[test]
    fn descriptors_outside_the_subset_say_which_type() {
        assert_eq!(
            parse_field_descriptor("J"),
            Err(DescriptorError::NotInSubset("long".into()))
        );
        assert_eq!(
            parse_field_descriptor("[[I"),
            Err(DescriptorError::NotInSubset(
                "multi-dimensional array".into()
            ))
        );
        assert_eq!(
            parse_method_descriptor("(Ljava/lang/String;)V"),
            Err(DescriptorError::NotInSubset(
                "object type java/lang/String".into()
            ))
        );
        assert_eq!(
            parse_field_descriptor("[C"),
            Err(DescriptorError::NotInSubset("char array".into()))
        );
    }

    #[test]
    fn malformed_descriptors_are_not_confused_with_unsupported_ones() {
        for d in ["", "Q", "[", "L;", "Ljava/lang/String", "II"] {
            assert_eq!(
                parse_field_descriptor(d),
                Err(DescriptorError::Malformed),
                "{d:?}"
            );
        }
        for d in ["", "I", "(", "(I", "()", "()VV", "(V)V"] {
            assert_eq!(
                parse_method_descriptor(d),
                Err(DescriptorError::Malformed),
                "{d:?}"
            );
        }
    }
}
