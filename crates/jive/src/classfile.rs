//! Class file reader (JVMS §4.1–§4.7, Java SE 17).
//!
//! [`ClassFile::parse`] reads any class file that `javac` 8–17 emits: every
//! constant-pool tag of §4.4 (including `Dynamic`, `Module` and `Package`),
//! the `Code`, `StackMapTable`, `Exceptions`, `LineNumberTable`,
//! `LocalVariableTable`, `SourceFile` and `BootstrapMethods` attributes
//! (§4.7), and skips every other attribute by its declared length. It checks
//! the cross-references of the constant pool (§4.4: a `Class` names a `Utf8`,
//! a `Fieldref` a `Class` and a `NameAndType`, ...), so later phases can look
//! entries up without re-checking.
//!
//! Malformed input yields a [`ClassFormatError`] with the byte offset where
//! reading failed; the reader never panics and never allocates more than the
//! input could justify.

use crate::error::ClassFormatError;

type Result<T> = core::result::Result<T, ClassFormatError>;

/// `ACC_STATIC` (fields and methods).
pub const ACC_STATIC: u16 = 0x0008;
/// `ACC_FINAL`.
pub const ACC_FINAL: u16 = 0x0010;
/// `ACC_SYNCHRONIZED` (methods).
pub const ACC_SYNCHRONIZED: u16 = 0x0020;
/// `ACC_NATIVE` (methods).
pub const ACC_NATIVE: u16 = 0x0100;
/// `ACC_INTERFACE` (classes).
pub const ACC_INTERFACE: u16 = 0x0200;
/// `ACC_ABSTRACT` (classes and methods).
pub const ACC_ABSTRACT: u16 = 0x0400;
/// `ACC_MODULE` (classes).
pub const ACC_MODULE: u16 = 0x8000;

/// One constant-pool entry (JVMS §4.4).
#[derive(Debug, Clone, PartialEq)]
pub enum Constant {
    /// Index 0, and the unusable slot after a `Long` or `Double`.
    Unusable,
    /// `CONSTANT_Utf8`, decoded from modified UTF-8.
    Utf8(String),
    /// `CONSTANT_Integer`.
    Integer(i32),
    /// `CONSTANT_Float` (raw bits).
    Float(u32),
    /// `CONSTANT_Long`.
    Long(i64),
    /// `CONSTANT_Double` (raw bits).
    Double(u64),
    /// `CONSTANT_Class`: index of the name.
    Class(u16),
    /// `CONSTANT_String`: index of the value.
    String(u16),
    /// `CONSTANT_Fieldref`: class index, name-and-type index.
    Fieldref(u16, u16),
    /// `CONSTANT_Methodref`: class index, name-and-type index.
    Methodref(u16, u16),
    /// `CONSTANT_InterfaceMethodref`: class index, name-and-type index.
    InterfaceMethodref(u16, u16),
    /// `CONSTANT_NameAndType`: name index, descriptor index.
    NameAndType(u16, u16),
    /// `CONSTANT_MethodHandle`: reference kind, reference index.
    MethodHandle(u8, u16),
    /// `CONSTANT_MethodType`: descriptor index.
    MethodType(u16),
    /// `CONSTANT_Dynamic`: bootstrap method index, name-and-type index.
    Dynamic(u16, u16),
    /// `CONSTANT_InvokeDynamic`: bootstrap method index, name-and-type index.
    InvokeDynamic(u16, u16),
    /// `CONSTANT_Module`: name index.
    Module(u16),
    /// `CONSTANT_Package`: name index.
    Package(u16),
}

/// A verification type in a `StackMapTable` frame (JVMS §4.7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerificationType {
    /// `Top_variable_info`.
    Top,
    /// `Integer_variable_info`.
    Integer,
    /// `Float_variable_info`.
    Float,
    /// `Long_variable_info`.
    Long,
    /// `Double_variable_info`.
    Double,
    /// `Null_variable_info`.
    Null,
    /// `UninitializedThis_variable_info`.
    UninitializedThis,
    /// `Object_variable_info`: constant-pool index of a `Class`.
    Object(u16),
    /// `Uninitialized_variable_info`: bci of the `new`.
    Uninitialized(u16),
}

/// One `StackMapTable` frame (JVMS §4.7.4), as written in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackMapFrame {
    /// Byte offset of the frame in the class file (for error messages).
    pub file_offset: usize,
    /// The frame type byte (0–255).
    pub frame_type: u8,
    /// `offset_delta` (implicit for `same` and `same_locals_1_stack_item`).
    pub offset_delta: u16,
    /// What the frame does to the locals of the previous frame.
    pub kind: FrameKind,
}

/// The shape of a [`StackMapFrame`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameKind {
    /// `same_frame` / `same_frame_extended`: same locals, empty stack.
    Same,
    /// `same_locals_1_stack_item_frame[_extended]`.
    SameLocals1(VerificationType),
    /// `chop_frame`: drop the last `k` locals, empty stack.
    Chop(u8),
    /// `append_frame`: add locals, empty stack.
    Append(Vec<VerificationType>),
    /// `full_frame`.
    Full {
        /// The locals.
        locals: Vec<VerificationType>,
        /// The operand stack.
        stack: Vec<VerificationType>,
    },
}

/// One exception-table entry of a `Code` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExceptionHandler {
    /// Start bci (inclusive).
    pub start_pc: u16,
    /// End bci (exclusive).
    pub end_pc: u16,
    /// Handler bci.
    pub handler_pc: u16,
    /// Class index of the caught type, or 0 for any.
    pub catch_type: u16,
}

/// A `LocalVariableTable` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalVariable {
    /// Start bci.
    pub start_pc: u16,
    /// Length in bytes of code.
    pub length: u16,
    /// Name.
    pub name: String,
    /// Field descriptor.
    pub descriptor: String,
    /// Local variable index.
    pub index: u16,
}

/// The `Code` attribute of a method (JVMS §4.7.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    /// `max_stack`.
    pub max_stack: u16,
    /// `max_locals`.
    pub max_locals: u16,
    /// The bytecode.
    pub code: Vec<u8>,
    /// Byte offset of `code[0]` in the class file.
    pub code_offset: usize,
    /// The exception table.
    pub exception_table: Vec<ExceptionHandler>,
    /// The `StackMapTable`, if present.
    pub stack_map: Option<Vec<StackMapFrame>>,
    /// Byte offset of the `StackMapTable` attribute, if present.
    pub stack_map_offset: Option<usize>,
    /// `LineNumberTable` entries: (start bci, line).
    pub line_numbers: Vec<(u16, u16)>,
    /// `LocalVariableTable` entries.
    pub local_variables: Vec<LocalVariable>,
}

/// A field (JVMS §4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Access flags.
    pub access: u16,
    /// Name.
    pub name: String,
    /// Field descriptor.
    pub descriptor: String,
    /// Byte offset of the `field_info` in the file.
    pub offset: usize,
}

/// A method (JVMS §4.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Method {
    /// Access flags.
    pub access: u16,
    /// Name.
    pub name: String,
    /// Method descriptor.
    pub descriptor: String,
    /// The `Code` attribute (absent for native and abstract methods).
    pub code: Option<Code>,
    /// Class indices of the `Exceptions` attribute.
    pub exceptions: Vec<u16>,
    /// Byte offset of the `method_info` in the file.
    pub offset: usize,
}

impl Method {
    /// `name(descriptor)`-style identification used in errors: `doTx(III)I`.
    pub fn id(&self) -> String {
        format!("{}{}", self.name, self.descriptor)
    }
}

/// An entry of the `BootstrapMethods` attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapMethod {
    /// `MethodHandle` index.
    pub method_ref: u16,
    /// Static argument indices.
    pub arguments: Vec<u16>,
}

/// A parsed class file.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassFile {
    /// Minor version.
    pub minor_version: u16,
    /// Major version (50 = Java 6, 52 = Java 8, 61 = Java 17).
    pub major_version: u16,
    /// The constant pool, indexed as in the file (entry 0 is `Unusable`).
    pub constant_pool: Vec<Constant>,
    /// Access flags.
    pub access: u16,
    /// This class's internal name (`RawUnet`, `pkg/Name`).
    pub this_class: String,
    /// The superclass's internal name (`None` only for `java/lang/Object`).
    pub super_class: Option<String>,
    /// Names of the direct superinterfaces.
    pub interfaces: Vec<String>,
    /// Fields.
    pub fields: Vec<Field>,
    /// Methods.
    pub methods: Vec<Method>,
    /// `SourceFile`, if present.
    pub source_file: Option<String>,
    /// `BootstrapMethods`, if present.
    pub bootstrap_methods: Vec<BootstrapMethod>,
}

/// A bounds-checked big-endian cursor over the class file bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err<T>(&self, what: impl Into<String>) -> Result<T> {
        Err(ClassFormatError {
            offset: self.pos,
            what: what.into(),
        })
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.bytes.len() => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => self.err(format!(
                "truncated: {what} needs {n} bytes, {} left",
                self.bytes.len() - self.pos
            )),
        }
    }
    fn u1(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    fn u2(&mut self, what: &str) -> Result<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u4(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Decodes JVMS "modified UTF-8" (§4.4.7): no NUL bytes, no 4-byte forms,
/// supplementary characters as surrogate pairs.
fn decode_modified_utf8(b: &[u8]) -> core::result::Result<String, &'static str> {
    // Fast path: plain ASCII (no NUL), which is all javac writes for applets.
    if b.iter().all(|&x| (1..0x80).contains(&x)) {
        return String::from_utf8(b.to_vec()).map_err(|_| "invalid ASCII");
    }
    let mut units: Vec<u16> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let x = b[i];
        if x == 0 || x >= 0xf0 {
            return Err("invalid byte in modified UTF-8");
        }
        if x < 0x80 {
            units.push(u16::from(x));
            i += 1;
        } else if x & 0xe0 == 0xc0 {
            let y = *b.get(i + 1).ok_or("truncated modified UTF-8 sequence")?;
            if y & 0xc0 != 0x80 {
                return Err("invalid continuation byte in modified UTF-8");
            }
            units.push((u16::from(x & 0x1f) << 6) | u16::from(y & 0x3f));
            i += 2;
        } else if x & 0xf0 == 0xe0 {
            let (y, z) = match (b.get(i + 1), b.get(i + 2)) {
                (Some(&y), Some(&z)) => (y, z),
                _ => return Err("truncated modified UTF-8 sequence"),
            };
            if y & 0xc0 != 0x80 || z & 0xc0 != 0x80 {
                return Err("invalid continuation byte in modified UTF-8");
            }
            units.push(
                (u16::from(x & 0x0f) << 12) | (u16::from(y & 0x3f) << 6) | u16::from(z & 0x3f),
            );
            i += 3;
        } else {
            return Err("invalid byte in modified UTF-8");
        }
    }
    // Unpaired surrogates are legal in class files; keep them as U+FFFD.
    Ok(char::decode_utf16(units)
        .map(|r| r.unwrap_or('\u{fffd}'))
        .collect())
}

impl ClassFile {
    /// Parses a class file.
    ///
    /// ```
    /// // The smallest input is rejected with an offset, not a panic.
    /// let err = jive::classfile::ClassFile::parse(&[0xca, 0xfe]).unwrap_err();
    /// assert_eq!(err.offset, 0);
    /// ```
    pub fn parse(bytes: &[u8]) -> Result<ClassFile> {
        let mut r = Reader { bytes, pos: 0 };
        let magic = r.u4("magic")?;
        if magic != 0xcafe_babe {
            return Err(ClassFormatError {
                offset: 0,
                what: format!("bad magic 0x{magic:08x}, expected 0xcafebabe"),
            });
        }
        let minor_version = r.u2("minor_version")?;
        let major_version = r.u2("major_version")?;
        if !(45..=69).contains(&major_version) {
            return Err(ClassFormatError {
                offset: 6,
                what: format!("unsupported class file major version {major_version}"),
            });
        }
        let (constant_pool, cp_offsets) = Self::parse_pool(&mut r)?;
        let mut cf = ClassFile {
            minor_version,
            major_version,
            constant_pool,
            access: 0,
            this_class: String::new(),
            super_class: None,
            interfaces: Vec::new(),
            fields: Vec::new(),
            methods: Vec::new(),
            source_file: None,
            bootstrap_methods: Vec::new(),
        };
        cf.check_pool(&cp_offsets)?;

        cf.access = r.u2("access_flags")?;
        let at = r.pos;
        let this = r.u2("this_class")?;
        cf.this_class = cf
            .class_name(this)
            .map_err(|what| ClassFormatError { offset: at, what })?
            .to_owned();
        let at = r.pos;
        let sup = r.u2("super_class")?;
        cf.super_class = if sup == 0 {
            None
        } else {
            Some(
                cf.class_name(sup)
                    .map_err(|what| ClassFormatError { offset: at, what })?
                    .to_owned(),
            )
        };
        let n = r.u2("interfaces_count")?;
        for _ in 0..n {
            let at = r.pos;
            let i = r.u2("interface")?;
            let name = cf
                .class_name(i)
                .map_err(|what| ClassFormatError { offset: at, what })?
                .to_owned();
            cf.interfaces.push(name);
        }

        let n = r.u2("fields_count")?;
        for _ in 0..n {
            let offset = r.pos;
            let access = r.u2("field access_flags")?;
            let name = cf.utf8_at(&mut r, "field name")?;
            let descriptor = cf.utf8_at(&mut r, "field descriptor")?;
            let nattr = r.u2("field attributes_count")?;
            for _ in 0..nattr {
                let (_, len) = cf.attribute_header(&mut r)?;
                r.take(len, "field attribute")?;
            }
            cf.fields.push(Field {
                access,
                name,
                descriptor,
                offset,
            });
        }

        let n = r.u2("methods_count")?;
        for _ in 0..n {
            let m = cf.parse_method(&mut r)?;
            cf.methods.push(m);
        }

        let nattr = r.u2("class attributes_count")?;
        for _ in 0..nattr {
            let (name, len) = cf.attribute_header(&mut r)?;
            let start = r.pos;
            let body = r.take(len, "class attribute")?;
            let mut a = Reader {
                bytes: &bytes[..start + body.len()],
                pos: start,
            };
            match name {
                "SourceFile" => {
                    if len != 2 {
                        return a.err("SourceFile attribute length must be 2");
                    }
                    cf.source_file = Some(cf.utf8_at(&mut a, "SourceFile")?);
                }
                "BootstrapMethods" => {
                    let k = a.u2("num_bootstrap_methods")?;
                    for _ in 0..k {
                        let at = a.pos;
                        let method_ref = a.u2("bootstrap_method_ref")?;
                        if !matches!(
                            cf.constant_pool.get(usize::from(method_ref)),
                            Some(Constant::MethodHandle(..))
                        ) {
                            return Err(ClassFormatError {
                                offset: at,
                                what: format!(
                                    "bootstrap method #{method_ref} is not a MethodHandle"
                                ),
                            });
                        }
                        let m = a.u2("num_bootstrap_arguments")?;
                        let mut arguments = Vec::with_capacity(usize::from(m).min(len));
                        for _ in 0..m {
                            let at = a.pos;
                            let i = a.u2("bootstrap argument")?;
                            if !cf.is_loadable(i) {
                                return Err(ClassFormatError {
                                    offset: at,
                                    what: format!(
                                        "bootstrap argument #{i} is not a loadable constant"
                                    ),
                                });
                            }
                            arguments.push(i);
                        }
                        cf.bootstrap_methods.push(BootstrapMethod {
                            method_ref,
                            arguments,
                        });
                    }
                    if a.pos != a.bytes.len() {
                        return a
                            .err("BootstrapMethods attribute length does not match its contents");
                    }
                }
                _ => {}
            }
        }
        if r.pos != bytes.len() {
            return r.err(format!(
                "{} extra bytes after the class file",
                bytes.len() - r.pos
            ));
        }
        Ok(cf)
    }

    fn parse_pool(r: &mut Reader<'_>) -> Result<(Vec<Constant>, Vec<usize>)> {
        let count = r.u2("constant_pool_count")?;
        if count == 0 {
            return r.err("constant_pool_count must be at least 1");
        }
        let mut pool = Vec::with_capacity(usize::from(count));
        let mut offsets = Vec::with_capacity(usize::from(count));
        pool.push(Constant::Unusable);
        offsets.push(r.pos);
        while pool.len() < usize::from(count) {
            let at = r.pos;
            let tag = r.u1("constant tag")?;
            let c = match tag {
                1 => {
                    let len = r.u2("Utf8 length")?;
                    let body_at = r.pos;
                    let b = r.take(usize::from(len), "Utf8 bytes")?;
                    Constant::Utf8(decode_modified_utf8(b).map_err(|w| ClassFormatError {
                        offset: body_at,
                        what: w.to_owned(),
                    })?)
                }
                3 => Constant::Integer(r.u4("Integer")? as i32),
                4 => Constant::Float(r.u4("Float")?),
                5 => Constant::Long(
                    ((u64::from(r.u4("Long")?) << 32) | u64::from(r.u4("Long")?)) as i64,
                ),
                6 => Constant::Double(
                    (u64::from(r.u4("Double")?) << 32) | u64::from(r.u4("Double")?),
                ),
                7 => Constant::Class(r.u2("Class name_index")?),
                8 => Constant::String(r.u2("String string_index")?),
                9 => Constant::Fieldref(
                    r.u2("Fieldref class_index")?,
                    r.u2("Fieldref name_and_type_index")?,
                ),
                10 => Constant::Methodref(
                    r.u2("Methodref class_index")?,
                    r.u2("Methodref name_and_type_index")?,
                ),
                11 => Constant::InterfaceMethodref(
                    r.u2("InterfaceMethodref class_index")?,
                    r.u2("InterfaceMethodref name_and_type_index")?,
                ),
                12 => Constant::NameAndType(
                    r.u2("NameAndType name_index")?,
                    r.u2("NameAndType descriptor_index")?,
                ),
                15 => Constant::MethodHandle(
                    r.u1("MethodHandle reference_kind")?,
                    r.u2("MethodHandle reference_index")?,
                ),
                16 => Constant::MethodType(r.u2("MethodType descriptor_index")?),
                17 => Constant::Dynamic(
                    r.u2("Dynamic bootstrap_method_attr_index")?,
                    r.u2("Dynamic name_and_type_index")?,
                ),
                18 => Constant::InvokeDynamic(
                    r.u2("InvokeDynamic bootstrap_method_attr_index")?,
                    r.u2("InvokeDynamic name_and_type_index")?,
                ),
                19 => Constant::Module(r.u2("Module name_index")?),
                20 => Constant::Package(r.u2("Package name_index")?),
                _ => {
                    return Err(ClassFormatError {
                        offset: at,
                        what: format!("unknown constant pool tag {tag}"),
                    });
                }
            };
            let wide = matches!(c, Constant::Long(_) | Constant::Double(_));
            pool.push(c);
            offsets.push(at);
            if wide {
                if pool.len() >= usize::from(count) {
                    return Err(ClassFormatError {
                        offset: at,
                        what: "Long or Double in the last constant pool slot".into(),
                    });
                }
                pool.push(Constant::Unusable);
                offsets.push(at);
            }
        }
        Ok((pool, offsets))
    }

    /// Checks every cross-reference in the pool points at an entry of the right tag.
    fn check_pool(&self, offsets: &[usize]) -> Result<()> {
        for (i, c) in self.constant_pool.iter().enumerate() {
            let offset = offsets[i];
            let fail = |what: String| {
                Err(ClassFormatError {
                    offset,
                    what: format!("constant #{i}: {what}"),
                })
            };
            let ok = match *c {
                Constant::Class(n)
                | Constant::String(n)
                | Constant::MethodType(n)
                | Constant::Module(n)
                | Constant::Package(n) => self.utf8(n).is_ok(),
                Constant::Fieldref(c, nt)
                | Constant::Methodref(c, nt)
                | Constant::InterfaceMethodref(c, nt) => {
                    matches!(self.get(c), Some(Constant::Class(_)))
                        && matches!(self.get(nt), Some(Constant::NameAndType(..)))
                }
                Constant::NameAndType(n, d) => self.utf8(n).is_ok() && self.utf8(d).is_ok(),
                Constant::MethodHandle(kind, r) => {
                    (1..=9).contains(&kind)
                        && matches!(
                            self.get(r),
                            Some(
                                Constant::Fieldref(..)
                                    | Constant::Methodref(..)
                                    | Constant::InterfaceMethodref(..)
                            )
                        )
                }
                Constant::Dynamic(_, nt) | Constant::InvokeDynamic(_, nt) => {
                    matches!(self.get(nt), Some(Constant::NameAndType(..)))
                }
                _ => true,
            };
            if !ok {
                return fail(format!(
                    "{c:?} refers to a missing entry or one of the wrong kind"
                ));
            }
        }
        Ok(())
    }

    fn get(&self, i: u16) -> Option<&Constant> {
        self.constant_pool.get(usize::from(i))
    }

    fn is_loadable(&self, i: u16) -> bool {
        matches!(
            self.get(i),
            Some(
                Constant::Integer(_)
                    | Constant::Float(_)
                    | Constant::Long(_)
                    | Constant::Double(_)
                    | Constant::Class(_)
                    | Constant::String(_)
                    | Constant::MethodHandle(..)
                    | Constant::MethodType(_)
                    | Constant::Dynamic(..)
            )
        )
    }

    /// The string of `Utf8` entry `i`.
    pub fn utf8(&self, i: u16) -> core::result::Result<&str, String> {
        match self.get(i) {
            Some(Constant::Utf8(s)) => Ok(s),
            _ => Err(format!("constant #{i} is not a Utf8 entry")),
        }
    }

    /// The name of `Class` entry `i`.
    pub fn class_name(&self, i: u16) -> core::result::Result<&str, String> {
        match self.get(i) {
            Some(&Constant::Class(n)) => self.utf8(n),
            _ => Err(format!("constant #{i} is not a Class entry")),
        }
    }

    /// Resolves a `Fieldref`, `Methodref` or `InterfaceMethodref` to
    /// `(class, name, descriptor)`.
    pub fn member_ref(&self, i: u16) -> Option<(&str, &str, &str)> {
        let (c, nt) = match *self.get(i)? {
            Constant::Fieldref(c, nt)
            | Constant::Methodref(c, nt)
            | Constant::InterfaceMethodref(c, nt) => (c, nt),
            _ => return None,
        };
        let (n, d) = self.name_and_type(nt)?;
        Some((self.class_name(c).ok()?, n, d))
    }

    /// Resolves a `NameAndType` entry.
    pub fn name_and_type(&self, i: u16) -> Option<(&str, &str)> {
        match *self.get(i)? {
            Constant::NameAndType(n, d) => Some((self.utf8(n).ok()?, self.utf8(d).ok()?)),
            _ => None,
        }
    }

    /// Constant `i`, if it exists.
    pub fn constant(&self, i: u16) -> Option<&Constant> {
        self.get(i)
    }

    fn utf8_at(&self, r: &mut Reader<'_>, what: &str) -> Result<String> {
        let at = r.pos;
        let i = r.u2(what)?;
        self.utf8(i)
            .map(str::to_owned)
            .map_err(|w| ClassFormatError {
                offset: at,
                what: format!("{what}: {w}"),
            })
    }

    fn attribute_header(&self, r: &mut Reader<'_>) -> Result<(&str, usize)> {
        let at = r.pos;
        let i = r.u2("attribute_name_index")?;
        let name = self.utf8(i).map_err(|w| ClassFormatError {
            offset: at,
            what: format!("attribute_name_index: {w}"),
        })?;
        let len = r.u4("attribute_length")? as usize;
        if len > r.bytes.len() - r.pos {
            return r.err(format!(
                "attribute {name} claims {len} bytes, only {} left",
                r.bytes.len() - r.pos
            ));
        }
        Ok((name, len))
    }

    fn parse_method(&self, r: &mut Reader<'_>) -> Result<Method> {
        let offset = r.pos;
        let access = r.u2("method access_flags")?;
        let name = self.utf8_at(r, "method name")?;
        let descriptor = self.utf8_at(r, "method descriptor")?;
        let mut m = Method {
            access,
            name,
            descriptor,
            code: None,
            exceptions: Vec::new(),
            offset,
        };
        let nattr = r.u2("method attributes_count")?;
        for _ in 0..nattr {
            let at = r.pos;
            let (name, len) = self.attribute_header(r)?;
            let start = r.pos;
            r.take(len, "method attribute")?;
            let mut a = Reader {
                bytes: &r.bytes[..start + len],
                pos: start,
            };
            match name {
                "Code" => {
                    if m.code.is_some() {
                        return Err(ClassFormatError {
                            offset: at,
                            what: format!("method {} has two Code attributes", m.id()),
                        });
                    }
                    m.code = Some(self.parse_code(&mut a)?);
                }
                "Exceptions" => {
                    let n = a.u2("number_of_exceptions")?;
                    for _ in 0..n {
                        let at = a.pos;
                        let i = a.u2("exception_index")?;
                        self.class_name(i)
                            .map_err(|what| ClassFormatError { offset: at, what })?;
                        m.exceptions.push(i);
                    }
                }
                _ => continue,
            }
            if a.pos != a.bytes.len() {
                return a.err(format!(
                    "attribute {name} length does not match its contents"
                ));
            }
        }
        Ok(m)
    }

    fn parse_code(&self, r: &mut Reader<'_>) -> Result<Code> {
        let max_stack = r.u2("max_stack")?;
        let max_locals = r.u2("max_locals")?;
        let len_at = r.pos;
        let code_length = r.u4("code_length")? as usize;
        if code_length == 0 || code_length >= 65536 {
            return Err(ClassFormatError {
                offset: len_at,
                what: format!("code_length {code_length} is not in 1..65536"),
            });
        }
        let code_offset = r.pos;
        let code = r.take(code_length, "code")?.to_vec();
        let n = r.u2("exception_table_length")?;
        let mut exception_table = Vec::new();
        for _ in 0..n {
            let at = r.pos;
            let h = ExceptionHandler {
                start_pc: r.u2("start_pc")?,
                end_pc: r.u2("end_pc")?,
                handler_pc: r.u2("handler_pc")?,
                catch_type: r.u2("catch_type")?,
            };
            if h.catch_type != 0 {
                self.class_name(h.catch_type)
                    .map_err(|what| ClassFormatError { offset: at, what })?;
            }
            exception_table.push(h);
        }
        let mut c = Code {
            max_stack,
            max_locals,
            code,
            code_offset,
            exception_table,
            stack_map: None,
            stack_map_offset: None,
            line_numbers: Vec::new(),
            local_variables: Vec::new(),
        };
        let nattr = r.u2("Code attributes_count")?;
        for _ in 0..nattr {
            let at = r.pos;
            let (name, len) = self.attribute_header(r)?;
            let start = r.pos;
            r.take(len, "Code attribute")?;
            let mut a = Reader {
                bytes: &r.bytes[..start + len],
                pos: start,
            };
            match name {
                "StackMapTable" => {
                    if c.stack_map.is_some() {
                        return Err(ClassFormatError {
                            offset: at,
                            what: "two StackMapTable attributes".into(),
                        });
                    }
                    c.stack_map = Some(self.parse_stack_map(&mut a)?);
                    c.stack_map_offset = Some(at);
                }
                "LineNumberTable" => {
                    let n = a.u2("line_number_table_length")?;
                    for _ in 0..n {
                        c.line_numbers
                            .push((a.u2("start_pc")?, a.u2("line_number")?));
                    }
                }
                "LocalVariableTable" => {
                    let n = a.u2("local_variable_table_length")?;
                    for _ in 0..n {
                        let start_pc = a.u2("start_pc")?;
                        let length = a.u2("length")?;
                        let name = self.utf8_at(&mut a, "local variable name")?;
                        let descriptor = self.utf8_at(&mut a, "local variable descriptor")?;
                        let index = a.u2("index")?;
                        c.local_variables.push(LocalVariable {
                            start_pc,
                            length,
                            name,
                            descriptor,
                            index,
                        });
                    }
                }
                _ => continue,
            }
            if a.pos != a.bytes.len() {
                return a.err(format!(
                    "attribute {name} length does not match its contents"
                ));
            }
        }
        Ok(c)
    }

    fn parse_stack_map(&self, r: &mut Reader<'_>) -> Result<Vec<StackMapFrame>> {
        let n = r.u2("number_of_entries")?;
        let mut frames = Vec::with_capacity(usize::from(n).min(r.bytes.len() - r.pos));
        for _ in 0..n {
            let file_offset = r.pos;
            let t = r.u1("frame_type")?;
            let (offset_delta, kind) = match t {
                0..=63 => (u16::from(t), FrameKind::Same),
                64..=127 => (u16::from(t - 64), FrameKind::SameLocals1(self.vtype(r)?)),
                128..=246 => {
                    return Err(ClassFormatError {
                        offset: file_offset,
                        what: format!("reserved stack map frame type {t}"),
                    });
                }
                247 => {
                    let d = r.u2("offset_delta")?;
                    (d, FrameKind::SameLocals1(self.vtype(r)?))
                }
                248..=250 => (r.u2("offset_delta")?, FrameKind::Chop(251 - t)),
                251 => (r.u2("offset_delta")?, FrameKind::Same),
                252..=254 => {
                    let d = r.u2("offset_delta")?;
                    let mut v = Vec::new();
                    for _ in 0..(t - 251) {
                        v.push(self.vtype(r)?);
                    }
                    (d, FrameKind::Append(v))
                }
                255 => {
                    let d = r.u2("offset_delta")?;
                    let nl = r.u2("number_of_locals")?;
                    let mut locals = Vec::new();
                    for _ in 0..nl {
                        locals.push(self.vtype(r)?);
                    }
                    let ns = r.u2("number_of_stack_items")?;
                    let mut stack = Vec::new();
                    for _ in 0..ns {
                        stack.push(self.vtype(r)?);
                    }
                    (d, FrameKind::Full { locals, stack })
                }
            };
            frames.push(StackMapFrame {
                file_offset,
                frame_type: t,
                offset_delta,
                kind,
            });
        }
        Ok(frames)
    }

    fn vtype(&self, r: &mut Reader<'_>) -> Result<VerificationType> {
        let at = r.pos;
        Ok(match r.u1("verification type tag")? {
            0 => VerificationType::Top,
            1 => VerificationType::Integer,
            2 => VerificationType::Float,
            3 => VerificationType::Double,
            4 => VerificationType::Long,
            5 => VerificationType::Null,
            6 => VerificationType::UninitializedThis,
            7 => {
                let at = r.pos;
                let i = r.u2("Object cpool_index")?;
                self.class_name(i)
                    .map_err(|what| ClassFormatError { offset: at, what })?;
                VerificationType::Object(i)
            }
            8 => VerificationType::Uninitialized(r.u2("Uninitialized offset")?),
            t => {
                return Err(ClassFormatError {
                    offset: at,
                    what: format!("unknown verification type tag {t}"),
                });
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-assembled minimal class: `class A extends java/lang/Object {}`.
    fn minimal() -> Vec<u8> {
        let mut b = vec![0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52, 0, 5];
        b.extend([1, 0, 1, b'A']); // #1 Utf8 "A"
        b.extend([7, 0, 1]); // #2 Class #1
        b.extend([1, 0, 16]);
        b.extend(b"java/lang/Object"); // #3
        b.extend([7, 0, 3]); // #4 Class #3
        b.extend([0, 0x21, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
        b
    }

    #[test]
    fn reads_a_minimal_class() {
        let cf = ClassFile::parse(&minimal()).unwrap();
        assert_eq!(cf.this_class, "A");
        assert_eq!(cf.super_class.as_deref(), Some("java/lang/Object"));
        assert_eq!(cf.major_version, 52);
    }

    #[test]
    fn every_truncation_is_an_error_with_an_offset_inside_the_input() {
        let b = minimal();
        for n in 0..b.len() {
            let e = ClassFile::parse(&b[..n]).unwrap_err();
            assert!(
                e.offset <= n,
                "offset {} beyond input of {n} bytes",
                e.offset
            );
        }
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut b = minimal();
        b.push(0);
        let e = ClassFile::parse(&b).unwrap_err();
        assert_eq!(e.offset, b.len() - 1);
    }

    #[test]
    fn a_class_entry_must_name_a_utf8() {
        let mut b = minimal();
        b[16] = 2; // #2 Class -> #2 (itself)
        let e = ClassFile::parse(&b).unwrap_err();
        assert!(e.what.contains("constant #2"), "{e}");
    }

    #[test]
    fn modified_utf8_decodes_nul_and_surrogates() {
        assert_eq!(decode_modified_utf8(&[0xc0, 0x80]).unwrap(), "\0");
        // U+1F600 as a surrogate pair in modified UTF-8.
        let s = decode_modified_utf8(&[0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]).unwrap();
        assert_eq!(s, "\u{1f600}");
        assert!(decode_modified_utf8(&[0]).is_err());
        assert!(decode_modified_utf8(&[0xf0, 0x9f, 0x98, 0x80]).is_err());
    }
}
