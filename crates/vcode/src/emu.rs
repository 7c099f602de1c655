//! Running the aarch64 backend's code on this host, under emulation
//! (feature `emu`: the Unicorn emulator, built from source).
//!
//! The emulated machine sees this process's memory at the same addresses:
//! a page the generated code touches (its own code and constants, a
//! buffer passed as a pointer argument, another generated function it
//! calls) is mapped into the emulator, at its host address, the first time
//! the code touches it, and unmapped when the call returns. So a `p`
//! argument is an ordinary host pointer, and calls between generated
//! functions work, as do calls to helper stubs generated for aarch64. What
//! cannot work is a call to host (x86-64) code, such as a Rust function:
//! the emulator would execute its bytes as A64 instructions (it usually
//! stops at an invalid instruction, reported as an error).
//!
//! The stack (1 MiB) and the return sentinel live above the host's user
//! address space (2^47), where no host page can be.
//!
//! Each thread has its own emulator instance, created on first use.

use std::cell::RefCell;

use unicorn_engine::{Arch, HookType, MemType, Mode, Prot, RegisterARM64, Unicorn};

use crate::ty::{Ty, Value};

/// Why an emulated call did not return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmuError(pub &'static str);

impl std::fmt::Display for EmuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for EmuError {}

/// Base and size of the emulated stack.
const STACK_BASE: u64 = 0xfff0_0000_0000;
const STACK_SIZE: u64 = 1 << 20;
/// The return address given to generated code: emulation stops there.
const SENTINEL: u64 = 0xfff1_0000_0000;
const PAGE: u64 = 4096;
/// Most A64 instructions one call may run before it is stopped as a loop
/// that does not end (counted a block at a time, as each block starts). A
/// count, not a time: Unicorn's time limit polls a thread every 2 µs beside
/// the emulation, and a loaded machine could run a correct call past any
/// limit in seconds. vcode's tests run at most about a million per call
/// (aarch64_far's loops over a megabyte of code); a run-away loop reaches
/// this one in a few seconds.
const RUN_LIMIT: u64 = 1 << 30;

/// Per-instance state: host pages mapped during the current call, and the
/// instruction counts (exact when asked for, and by block for the limit).
#[derive(Default)]
struct State {
    mapped: Vec<u64>,
    count: u64,
    /// Instructions of the blocks the current call has started (see
    /// [`RUN_LIMIT`]).
    run: u64,
    /// The address of the last access that could not be mapped.
    bad: u64,
}

thread_local! {
    static LAST_STOP: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Where the last emulated call on this thread stopped with an error: the
/// program counter and the address it could not access (for diagnostics).
pub fn last_stop() -> (u64, u64) {
    LAST_STOP.with(|c| c.get())
}

struct Emu {
    uc: Unicorn<'static, State>,
}

thread_local! {
    static EMU: RefCell<Option<Emu>> = const { RefCell::new(None) };
}

/// True if the host page at `page` is mapped in this process.
fn host_mapped(page: u64) -> bool {
    // SAFETY: msync only inspects the mapping; ENOMEM means unmapped.
    unsafe { libc::msync(page as *mut libc::c_void, PAGE as usize, libc::MS_ASYNC) == 0 }
}

impl Emu {
    fn new() -> Result<Emu, EmuError> {
        let err = |_| EmuError("emulation: cannot create an aarch64 emulator");
        let mut uc = Unicorn::new_with_data(Arch::ARM64, Mode::LITTLE_ENDIAN, State::default())
            .map_err(err)?;
        uc.mem_map(STACK_BASE, STACK_SIZE, Prot::READ | Prot::WRITE)
            .map_err(err)?;
        uc.mem_map(SENTINEL, PAGE, Prot::ALL).map_err(err)?;
        // Floating point and SIMD enabled at EL0/EL1.
        uc.reg_write(RegisterARM64::CPACR_EL1, 3 << 20)
            .map_err(err)?;
        uc.add_mem_hook(
            HookType::MEM_UNMAPPED,
            1,
            0,
            |uc: &mut Unicorn<'_, State>, _t: MemType, addr: u64, size: usize, _v: i64| {
                let first = addr & !(PAGE - 1);
                let last = (addr + size.max(1) as u64 - 1) & !(PAGE - 1);
                let mut page = first;
                while page <= last {
                    // An access across a page boundary: the first page may
                    // be mapped already.
                    if uc.get_data().mapped.contains(&page) {
                        page += PAGE;
                        continue;
                    }
                    if page >= 1 << 47 || !host_mapped(page) {
                        uc.get_data_mut().bad = addr;
                        return false;
                    }
                    // SAFETY: the host page exists (checked above) and stays
                    // mapped while the generated code runs: it is code or
                    // data the caller of `call` vouched for.
                    let ok =
                        unsafe { uc.mem_map_ptr(page, PAGE, Prot::ALL, page as *mut libc::c_void) };
                    if ok.is_err() {
                        return false;
                    }
                    uc.get_data_mut().mapped.push(page);
                    page += PAGE;
                }
                true
            },
        )
        .map_err(err)?;
        uc.add_block_hook(1, 0, |uc: &mut Unicorn<'_, State>, _a: u64, size: u32| {
            let n = uc.get_data().run + u64::from(size / 4).max(1);
            uc.get_data_mut().run = n;
            if n > RUN_LIMIT {
                let _ = uc.emu_stop();
            }
        })
        .map_err(err)?;
        Ok(Emu { uc })
    }

    fn run(
        &mut self,
        addr: usize,
        args: &[Value],
        ret: Ty,
        count: bool,
    ) -> Result<(Value, u64), EmuError> {
        let uc = &mut self.uc;
        let setup = |_| EmuError("emulation: cannot set up the call");
        let _ = uc.ctl_flush_tb();
        let (mut ni, mut nf) = (0u8, 0u8);
        let mut stack: Vec<u64> = Vec::new();
        for a in args {
            if a.ty().is_float() {
                if nf < 8 {
                    uc.reg_write(RegisterARM64::D0 as i32 + nf as i32, a.bits())
                        .map_err(setup)?;
                    nf += 1;
                    continue;
                }
            } else if ni < 8 {
                uc.reg_write(RegisterARM64::X0 as i32 + ni as i32, a.bits())
                    .map_err(setup)?;
                ni += 1;
                continue;
            }
            stack.push(a.bits());
        }
        let area = (8 * stack.len() as u64 + 15) & !15;
        let sp = STACK_BASE + STACK_SIZE - 64 - area;
        for (i, w) in stack.iter().enumerate() {
            uc.mem_write(sp + 8 * i as u64, &w.to_le_bytes())
                .map_err(setup)?;
        }
        uc.reg_write(RegisterARM64::SP, sp).map_err(setup)?;
        uc.reg_write(RegisterARM64::X30, SENTINEL).map_err(setup)?;
        uc.reg_write(RegisterARM64::X29, 0).map_err(setup)?;
        uc.get_data_mut().count = 0;
        uc.get_data_mut().run = 0;
        let hook = if count {
            Some(
                uc.add_code_hook(1, 0, |uc: &mut Unicorn<'_, State>, _a: u64, _s: u32| {
                    uc.get_data_mut().count += 1;
                })
                .map_err(setup)?,
            )
        } else {
            None
        };
        let r = uc.emu_start(addr as u64, SENTINEL, 0, 0);
        if let Some(h) = hook {
            let _ = uc.remove_hook(h);
        }
        let pc = uc.pc_read().unwrap_or(0);
        let pages = std::mem::take(&mut uc.get_data_mut().mapped);
        for p in pages {
            let _ = uc.mem_unmap(p, PAGE);
        }
        if let Err(e) = r {
            let bad = uc.get_data().bad;
            LAST_STOP.with(|c| c.set((pc, bad)));
            use unicorn_engine::uc_error as E;
            return Err(EmuError(match e {
                E::READ_UNMAPPED | E::WRITE_UNMAPPED => "emulation: access to unmapped memory",
                E::FETCH_UNMAPPED => "emulation: jump to unmapped memory",
                E::INSN_INVALID => "emulation: invalid instruction",
                E::EXCEPTION => "emulation: exception (e.g. an invalid instruction)",
                E::READ_UNALIGNED | E::WRITE_UNALIGNED | E::FETCH_UNALIGNED => {
                    "emulation: unaligned access"
                }
                _ => "emulation: stopped with an error",
            }));
        }
        if pc != SENTINEL {
            return Err(EmuError(if uc.get_data().run > RUN_LIMIT {
                "emulation: instruction limit exceeded (a loop that does not end?)"
            } else {
                "emulation: stopped before returning"
            }));
        }
        let bits = match ret {
            Ty::V => 0,
            Ty::F => uc.reg_read(RegisterARM64::D0).map_err(setup)? & 0xffff_ffff,
            Ty::D => uc.reg_read(RegisterARM64::D0).map_err(setup)?,
            Ty::I | Ty::U => uc.reg_read(RegisterARM64::X0).map_err(setup)? & 0xffff_ffff,
            _ => uc.reg_read(RegisterARM64::X0).map_err(setup)?,
        };
        Ok((Value::from_bits(ret, bits), uc.get_data().count))
    }
}

fn with_emu<R>(f: impl FnOnce(&mut Emu) -> Result<R, EmuError>) -> Result<R, EmuError> {
    EMU.with(|e| {
        let mut e = e
            .try_borrow_mut()
            .map_err(|_| EmuError("emulation: a call from inside an emulated call"))?;
        if e.is_none() {
            *e = Some(Emu::new()?);
        }
        match e.as_mut() {
            Some(emu) => f(emu),
            None => Err(EmuError("emulation: no emulator")),
        }
    })
}

/// Calls the A64 code at `addr` (an address in this process) with `args`
/// (AAPCS64), returning its result of type `ret`.
///
/// # Safety
/// The code runs over this process's memory: its loads and stores must be
/// sound, as for native code.
pub unsafe fn call(addr: usize, args: &[Value], ret: Ty) -> Result<Value, EmuError> {
    with_emu(|e| e.run(addr, args, ret, false)).map(|(v, _)| v)
}

/// [`call`], also counting the A64 instructions executed.
///
/// # Safety
/// As for [`call`].
pub unsafe fn call_counted(addr: usize, args: &[Value], ret: Ty) -> Result<(Value, u64), EmuError> {
    with_emu(|e| e.run(addr, args, ret, true))
}
