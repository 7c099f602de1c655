//! The targets the shared test suites (`common/regression.rs`,
//! `common/differential.rs`) run on. A suite is written once; each test
//! binary instantiates it for one target by naming that target's
//! [`Target`] `crate::Arch` and declaring the suite's module
//! (`regression.rs` and `differential.rs`: [`X86_64`];
//! `aarch64_regression.rs` and `aarch64_differential.rs`: [`Aarch64`]).
//!
//! A target is its backend, the reference backend parameterized by its
//! calling convention, and the few things about its machine code a test
//! needs: a listing for failure messages, a check that the code decodes,
//! how a `nop` looks, and how to run the code (the runner: natively on
//! x86-64, under the Unicorn emulator for aarch64).

use vcode::reference::RefCode;
use vcode::{Backend, Invoke, InvokeError, Value};

/// One target's backend and machine code, as the shared suites see them.
pub trait Target {
    /// The backend under test.
    type Native: Backend<Code = Self::Code>;
    /// Its generated functions.
    type Code: Invoke;
    /// The reference backend with this target's calling convention (so
    /// both backends agree on which registers hold arguments and survive
    /// calls, and on register names in messages).
    type Reference: Backend<Code = RefCode>;

    /// The entry address of `code`.
    fn addr(code: &Self::Code) -> usize;
    /// The machine code bytes of `code` (without constants).
    fn bytes(code: &Self::Code) -> &[u8];
    /// A disassembly of `code`, for failure messages.
    fn listing(code: &Self::Code) -> String;
    /// Fails (with a listing) if `code` holds an invalid instruction.
    fn check_decodes(code: &Self::Code) -> Result<(), String>;
    /// How many `nop` instructions `code` holds.
    fn nops(code: &Self::Code) -> usize;

    /// Runs `code` on `args`: the runner of the suites.
    ///
    /// # Safety
    /// As [`Invoke::invoke`]: the caller vouches for what the code does.
    unsafe fn run(code: &Self::Code, args: &[Value]) -> Result<Value, InvokeError> {
        // SAFETY: forwarded from the caller.
        unsafe { code.invoke(args) }
    }
    /// Where a failed [`run`](Target::run) stopped, as far as the target
    /// knows (the emulator does; a native run that failed has crashed).
    fn stop_context(_code: &Self::Code) -> String {
        String::new()
    }

    /// The reference backend's name of the first temporary `getreg` gives.
    const FIRST_TEMP: &'static str;
    /// Its name of the backend's scratch register (host number `rax`).
    const SCRATCH: &'static str;
    /// Its name of the first callee-saved register, `Reg::s(0)`.
    const FIRST_SAVED: &'static str;
}

/// The native x86-64 backend, run directly.
pub struct X86_64;

impl Target for X86_64 {
    type Native = vcode::X64;
    type Code = vcode::Code;
    type Reference = vcode::Reference;

    fn addr(code: &vcode::Code) -> usize {
        code.addr()
    }

    fn bytes(code: &vcode::Code) -> &[u8] {
        code.bytes()
    }

    fn listing(code: &vcode::Code) -> String {
        code.disassemble()
    }

    /// Decodes every byte with iced-x86.
    fn check_decodes(code: &vcode::Code) -> Result<(), String> {
        let mut dec = iced_x86::Decoder::with_ip(
            64,
            code.bytes(),
            code.addr() as u64,
            iced_x86::DecoderOptions::NONE,
        );
        while dec.can_decode() {
            let insn = dec.decode();
            if insn.is_invalid() {
                return Err(format!(
                    "invalid instruction at {:#x}:\n{}",
                    insn.ip(),
                    code.disassemble()
                ));
            }
        }
        Ok(())
    }

    /// One-byte `nop`s (0x90).
    fn nops(code: &vcode::Code) -> usize {
        code.bytes().iter().filter(|&&b| b == 0x90).count()
    }

    const FIRST_TEMP: &'static str = "r10";
    const SCRATCH: &'static str = "rax";
    const FIRST_SAVED: &'static str = "rbx";
}

/// The aarch64 backend, run under emulation (`vcode::emu`, feature `emu`).
/// Emulated code can call only generated code, never a host (x86-64)
/// function such as a Rust one: the suites take their callees from each
/// target's test binary, which builds A64 ones for this target.
#[cfg(feature = "emu")]
pub struct Aarch64;

#[cfg(feature = "emu")]
impl Target for Aarch64 {
    type Native = vcode::aarch64::A64;
    type Code = vcode::aarch64::Code;
    type Reference = vcode::reference::Reference<vcode::aarch64::Aapcs64>;

    fn addr(code: &Self::Code) -> usize {
        code.addr()
    }

    fn bytes(code: &Self::Code) -> &[u8] {
        code.bytes()
    }

    fn listing(code: &Self::Code) -> String {
        code.disassemble()
    }

    /// Whole A64 words, none of the prologue's or body's `udf #0` (the
    /// zero word a missed patch or a short write leaves).
    fn check_decodes(code: &Self::Code) -> Result<(), String> {
        if code.len() % 4 != 0 {
            return Err(format!("{} bytes: not whole words", code.len()));
        }
        let body_end = code.parts().1;
        match code.bytes()[..body_end]
            .chunks_exact(4)
            .position(|w| w == [0, 0, 0, 0])
        {
            Some(k) => Err(format!("udf at {:#x}\n{}", 4 * k, code.listing())),
            None => Ok(()),
        }
    }

    /// `nop` words (`d503201f`).
    fn nops(code: &Self::Code) -> usize {
        code.bytes()
            .chunks_exact(4)
            .filter(|w| *w == 0xd503_201fu32.to_le_bytes())
            .count()
    }

    fn stop_context(code: &Self::Code) -> String {
        let (pc, addr) = vcode::emu::last_stop();
        format!(
            "emulation stopped at pc {pc:#x} (code at {:#x}), access {addr:#x}\n{}",
            code.addr(),
            code.listing()
        )
    }

    const FIRST_TEMP: &'static str = "x6";
    const SCRATCH: &'static str = "x8";
    const FIRST_SAVED: &'static str = "x19";
}

/// Generates an A64 function of signature `sig` with `body` (which ends
/// it) and keeps it for the rest of the process: the address is a callee
/// for emulated code, which cannot call Rust functions.
#[cfg(feature = "emu")]
pub fn a64_kept(
    sig: &str,
    body: impl FnOnce(&mut vcode::Func<vcode::aarch64::A64>, vcode::Params),
) -> usize {
    let mut f = vcode::Func::<vcode::aarch64::A64>::with_backend();
    let p = f.lambda(sig, vcode::Leaf::Yes).expect("lambda");
    body(&mut f, p);
    let code: &'static vcode::aarch64::Code = Box::leak(Box::new(f.end().expect("end")));
    code.addr()
}
