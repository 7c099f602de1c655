//! The JIT: verified, decoded methods compiled to native code through vcode
//! in one pass, kept in the shared code cache.
//!
//! U-Net/SLE's JIVE had no compiler and blamed its interpreter for slow
//! calls and field access (§3.3); vcode exists so that a verified applet
//! becomes native code in microseconds. The compiler reads the decoded form
//! ([`crate::decode`]), in which verification has already fixed the
//! operand-stack depth and the type of every slot at every instruction, so
//! every local and stack slot has a static home: one of a few registers, or
//! its slot in a memory frame that mirrors the interpreter's. There is no
//! run-time operand stack.
//!
//! # Shape of the code
//!
//! One vcode function per applet holds all of its methods. The function's
//! entry takes the invocation context (`Ctx`, kept in the applet's
//! `Compiled`: the frame stack's bounds are written once, and an
//! invocation writes only the words that can differ) and a method index and
//! dispatches through a jump table; methods call each other with `jal` to
//! their labels (a direct `call`), and the trap exits, shared by every
//! method, return from the whole function at once (vcode's epilogue
//! restores the stack pointer from the frame pointer). Putting the methods
//! in one function is what makes calls direct and recursion free of
//! linking; an applet is loaded, replaced and retired as a whole, so one
//! unit of code per applet loses nothing.
//!
//! Registers (vcode `getreg`): the frame pointer `FP` and the fuel counter
//! `FUEL` in callee-saved registers, four scratch registers (`X`, `Y`,
//! `Z`, and `W`, which may hold the value of one stack slot whose home is
//! memory), and as homes for the most used slots of each method (locals and
//! stack positions, weighted by loop nesting) as many more as the busiest
//! method can use, caller-saved first, so that the entry saves only the
//! callee-saved registers some method uses. Other slots live at
//! `FP + 4 × slot`. A call saves the caller's register homes in its frame,
//! writes the arguments where the interpreter would have them (the start of
//! the callee's frame), and advances `FP`; the callee loads its
//! register-homed arguments. A runtime call (a native, `newarray`) saves
//! only the caller-saved homes, and a method that makes one gives its most
//! used slots the callee-saved homes first.
//!
//! While compiling, the operand stack is a list of `Val`s: a constant, a
//! reference to a slot's home (a local's, or its own), or the `W` register.
//! `iload` and `iconst` emit nothing; an operation reads its operands where
//! they are and writes its result into the home of its stack position. At
//! branch targets every entry is in its own home.
//!
//! # Checks and traps
//!
//! Every check is a compare and a branch to an out-of-line stub that
//! records the values the trap reports and jumps to the one exit, which
//! returns a site number. The site table maps it back to the trap kind,
//! method and bytecode index, so the host sees exactly the interpreter's
//! [`Trap`]. Array handles index a directory kept by the heap
//! ([`crate::heap`]), whose entry for `null` has length 0: the bounds check
//! (`index <u length`) also catches `null`, and the exit tells the two
//! apart.
//!
//! Fuel is charged where the interpreter charges it (taken back edges that
//! decoding marks, calls, switches): `FUEL -= 1` and a branch on its
//! borrow, one fused operation (vcode's `Countdown`). A counted loop (an
//! innermost loop such as `for (i = a; i < n; i++)` or `i < 100` that
//! leaves only through its test) is compiled twice: on entry, if the fuel left covers its trip
//! count, the count is charged at once and a copy without charges runs;
//! otherwise the loop charges each back edge and runs out where the
//! interpreter does. A straight loop (one block with its exits, no call,
//! not counted: quicksort's `while (a[i] < pivot) i++;`) runs four passes
//! in a row in its metered code, charged together at the group's first
//! back edge and given back on an exit, or pass by pass once less than four
//! units are left there. Every entry is the group's (a jump to the loop's
//! head, or a rotated copy of its test entering the group's first pass). Calls check the depth
//! (a counter in the native frame) and, unless the callee's frame provably
//! fits in the caller's, the frame stack's end, exactly as the interpreter
//! does.
//!
//! # The code cache
//!
//! The code lives in one process-wide `codecache::CodeCache` under a hash
//! of everything it depends on, so applets loaded from one class share it;
//! the last applet of a key to go retires it. Each thread that runs JIT
//! code registers once (thread-local) and enters a scope per invocation;
//! [`park`] flags an idle thread out. `docs/jive.md` ("The JIT") has the
//! whole design and the safety argument.
//!
//! # Modules
//!
//! `analysis` reads a program before code is emitted (loops, depths, the
//! slots worth a register); `compiler` turns it into code, with the natives
//! it inlines in `inline`; `sites` describes the trap sites
//! its checks report; `runtime` is the invocation context and the runtime
//! calls generated code makes (the `unsafe` of reaching Rust from a context
//! pointer); `exec` keeps compiled applets in the code cache and enters
//! their code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use vcode::ext::{Countdown, Exit, Indexed, MemAdd, MinTest, Move16, StoreRelease};
use vcode::{Arg, Callee, Class, Func, I, L, Label, Leaf, Local, Operand, P, Reg, Ty, UL};

use crate::decode::{Op, Program, Switch, successors};
pub use crate::error::JitError;
use crate::error::{Trap, TrapKind};
use crate::heap::{DIR_BYTES_SHIFT, DIR_DATA, DIR_LEN, DIR_MASK, Heap};
use crate::interpreter::{Outcome, RunLimits, STACK_SLOTS, State};
use crate::natives::{
    COPY_INLINE_MAX, Context, FastNative, HostWords, InlineForm, NativeError, NativeFn, RING_BYTES,
    RING_SLOT,
};
use crate::subset::Prim;

/// Whether vcode has a native backend for this CPU, so that the JIT can run.
pub fn available() -> bool {
    cfg!(target_arch = "x86_64")
}

/// The deepest call chain the JIT runs: each level takes 16 bytes of the
/// native stack (the return address and its alignment), so 16,384 levels
/// take 256 KiB. Applets allowed deeper recursion run on the interpreter.
pub const MAX_CALL_DEPTH: u32 = 16_384;

mod analysis;
mod compiler;
mod exec;
mod inline;
mod runtime;
mod sites;

use analysis::*;
pub use compiler::compile_standalone;
use compiler::*;
use exec::*;
pub use exec::{
    Compiled, REBUILD_TIME_PER_SECOND, Runner, cache_stats, compile, evict_oldest, park,
    set_rebuild_budget,
};
pub(crate) use exec::{Held, NotReturned};
use runtime::*;
pub(crate) use runtime::{FAST_INT, FAST_OTHER, FAST_VOID, WordsFn, fast_entry, words_entry};
pub(crate) use runtime::{HostArg, HostKind, LENT, Lent};
use sites::*;
