//! Debugging aids (the paper's §6.2 names the lack of them VCODE's worst
//! drawback): disassembly of generated code with `iced-x86`, an opt-in
//! perf map so that `perf report` names generated functions, and a check
//! of the W^X rule against the process's own mappings.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter, Mnemonic, OpKind, Register};

/// Disassembles `code`, which runs at `ip`, one instruction a line, with
/// `marks` (byte offset, title) shown as headings.
///
/// A jump table (the `lea r11, [rip + 4]; jmp qword ptr [r11 + r*8]` that
/// `jump_table` emits, the table right after the `jmp`) is listed as data:
/// one `.quad` a line with the entry's target as an offset in `code`,
/// while the words are addresses in `code` and no heading falls inside
/// one. Decoded as instructions, its addresses read as anything,
/// depending on where the code was placed.
pub fn disassemble(code: &[u8], ip: u64, marks: &[(usize, &str)]) -> String {
    let mut out = String::new();
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut fmt = IntelFormatter::new();
    fmt.options_mut().set_first_operand_char_index(8);
    let mut text = String::new();
    let mut marks = marks.iter().peekable();
    // Where the last `lea r11, [rip + disp]` pointed.
    let mut r11_at = None;
    while dec.can_decode() {
        let off = (dec.ip() - ip) as usize;
        while let Some(&&(at, title)) = marks.peek() {
            if at > off {
                break;
            }
            out.push_str(&format!("  ; {title}\n"));
            marks.next();
        }
        let insn = dec.decode();
        text.clear();
        fmt.format(&insn, &mut text);
        out.push_str(&format!(
            "  {off:5x}  {:<22} {text}\n",
            hex(&code[off..off + insn.len()])
        ));
        let table = r11_at == Some(insn.next_ip()) && is_table_jump(&insn);
        r11_at = lea_r11(&insn);
        if table {
            let next_mark = marks.peek().map_or(usize::MAX, |m| m.0);
            let mut at = off + insn.len();
            while let Some(w) = code.get(at..at + 8).filter(|_| at + 8 <= next_mark) {
                let target = w.iter().rev().fold(0u64, |v, &b| v << 8 | u64::from(b));
                let Some(to) = target.checked_sub(ip).filter(|&t| t < code.len() as u64) else {
                    break;
                };
                out.push_str(&format!("  {at:5x}  {:<22} .quad   {to:x}\n", hex(w)));
                at += 8;
            }
            // Past the table: the code after it (nothing if it ends the
            // code; `set_position` refuses only a position past the end).
            if at >= code.len() || dec.set_position(at).is_err() {
                break;
            }
            dec.set_ip(ip + at as u64);
        }
    }
    out
}

/// `bytes` as hex digits.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where `insn` points R11 if it is `lea r11, [rip + disp]`.
fn lea_r11(insn: &iced_x86::Instruction) -> Option<u64> {
    (insn.mnemonic() == Mnemonic::Lea
        && insn.op0_register() == Register::R11
        && insn.memory_base() == Register::RIP)
        .then(|| insn.ip_rel_memory_address())
}

/// Whether `insn` is a jump through a table at R11: `jmp qword ptr [r11 +
/// r*8]`.
fn is_table_jump(insn: &iced_x86::Instruction) -> bool {
    insn.mnemonic() == Mnemonic::Jmp
        && insn.op0_kind() == OpKind::Memory
        && insn.memory_base() == Register::R11
        && insn.memory_index() != Register::None
        && insn.memory_index_scale() == 8
        && insn.memory_displacement64() == 0
}

static PERF_MAP: AtomicBool = AtomicBool::new(false);
static PERF_FILE: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// Turns on the perf map: from now on every function that `end` links is
/// appended to `/tmp/perf-<pid>.map` as `addr size name`, the format
/// `perf report` reads for JIT code.
pub fn enable_perf_map() -> std::io::Result<()> {
    let path = format!("/tmp/perf-{}.map", std::process::id());
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    *PERF_FILE.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    PERF_MAP.store(true, Ordering::Release);
    Ok(())
}

/// Called by a native backend's `end` for each linked function: `len`
/// bytes at `addr`.
#[inline]
pub(crate) fn register(addr: usize, len: usize, name: Option<&str>) {
    if PERF_MAP.load(Ordering::Acquire) {
        write_perf_map(addr, len, name);
    }
}

#[cold]
fn write_perf_map(addr: usize, len: usize, name: Option<&str>) {
    if let Some(f) = PERF_FILE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        let name = name.unwrap_or("vcode_anon");
        // A failed write only loses a profiler symbol.
        let _ = writeln!(f, "{addr:x} {len:x} {name}");
    }
}

/// Every mapping of this process that is writable and executable at once,
/// as lines of `/proc/self/maps` (Linux): empty while the W^X rule holds.
pub fn wx_mappings() -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_to_string("/proc/self/maps")?
        .lines()
        .filter(|l| {
            let perms = l.split_whitespace().nth(1).unwrap_or("");
            perms.contains('w') && perms.contains('x')
        })
        .map(String::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use crate::{Func, I, Leaf};

    #[test]
    fn disassembly_lists_the_generated_instructions_by_part() {
        let mut f = Func::new();
        let x = f.lambda("%i", Leaf::Yes).unwrap().get::<I>(0).unwrap();
        f.add(x, x, 0x1234);
        f.ret(x);
        let text = f.end().unwrap().disassemble();
        assert!(text.contains("; body"), "{text}");
        assert!(text.contains("add     edi,1234h"), "{text}");
        assert!(text.contains("ret"), "{text}");
    }

    #[test]
    fn perf_map_names_generated_functions() {
        super::enable_perf_map().unwrap();
        let mut f = Func::new();
        f.lambda("", Leaf::Yes).unwrap();
        f.name("vcode_perf_map_probe");
        f.retv();
        let code = f.end().unwrap();
        let map = std::fs::read_to_string(format!("/tmp/perf-{}.map", std::process::id())).unwrap();
        let line = format!("{:x} {:x} vcode_perf_map_probe", code.addr(), code.len());
        assert!(
            map.lines().any(|l| l == line),
            "{line:?} not in the perf map"
        );
    }
}
