//! Resource limits (U-Net/SLE §3.3 names their absence as the prototype's
//! shortcoming; this module is jive's answer).
//!
//! Load-time limits bound what a class may declare: bytes of code per method,
//! number of methods, `max_stack` and `max_locals`. Run-time limits bound what
//! one invocation may do: fuel (one unit per taken backward branch, per switch
//! and per call, so straight-line code is never metered), the heap budget of
//! the applet, and the call depth. All are plain fields with documented
//! defaults; [`Limits::default`] suits packet-processing applets.

use crate::classfile::ClassFile;
use crate::error::LimitError;
use crate::subset::ClassInfo;

/// Configurable limits for one applet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum size of the class file in bytes. Default 1 MiB.
    pub max_class_bytes: usize,
    /// Maximum bytes of bytecode per method. Default 16 KiB.
    pub max_code_bytes: u32,
    /// Maximum number of methods (including natives and initializers). Default 256.
    pub max_methods: u16,
    /// Maximum `max_stack` of any method. Default 256.
    pub max_stack: u16,
    /// Maximum `max_locals` of any method. Default 256.
    pub max_locals: u16,
    /// Fuel per invocation: taken backward branches, switches and calls.
    /// The initializers (`<clinit>` and the constructor) share one
    /// invocation's. `None` turns metering off. Default 10,000,000.
    pub fuel: Option<u64>,
    /// Heap budget in bytes (array elements plus 16 bytes per object). Default 1 MiB.
    pub heap_bytes: u64,
    /// Maximum call depth, counting the invoked method as depth 1. Default 256.
    /// A call also traps with `CallDepthExceeded` if its frame would not fit
    /// in the frame stack ([`crate::interpreter::STACK_SLOTS`] slots).
    pub max_call_depth: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_class_bytes: 1 << 20,
            max_code_bytes: 16 * 1024,
            max_methods: 256,
            max_stack: 256,
            max_locals: 256,
            fuel: Some(10_000_000),
            heap_bytes: 1 << 20,
            max_call_depth: 256,
        }
    }
}

impl Limits {
    /// Limits with fuel metering off (for trusted benchmarks).
    pub fn unmetered() -> Self {
        Limits {
            fuel: None,
            ..Limits::default()
        }
    }

    /// Checks the load-time limits.
    pub fn check_class(&self, cf: &ClassFile, info: &ClassInfo) -> Result<(), LimitError> {
        if info.methods.len() > usize::from(self.max_methods) {
            return Err(LimitError {
                method: None,
                what: "method count",
                actual: info.methods.len() as u64,
                limit: u64::from(self.max_methods),
            });
        }
        for m in &info.methods {
            let Some(code) = cf.methods.get(m.index).and_then(|cm| cm.code.as_ref()) else {
                continue;
            };
            let checks = [
                (
                    "code size",
                    code.code.len() as u64,
                    u64::from(self.max_code_bytes),
                ),
                (
                    "max_stack",
                    u64::from(code.max_stack),
                    u64::from(self.max_stack),
                ),
                (
                    "max_locals",
                    u64::from(code.max_locals),
                    u64::from(self.max_locals),
                ),
            ];
            for (what, actual, limit) in checks {
                if actual > limit {
                    return Err(LimitError {
                        method: Some(m.id()),
                        what,
                        actual,
                        limit,
                    });
                }
            }
        }
        Ok(())
    }
}
