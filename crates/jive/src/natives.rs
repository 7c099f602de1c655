//! Host binding of `static native` methods (U-Net/SLE §2: the applet reaches
//! the network interface only through native methods, which enforce
//! protection).
//!
//! The host registers each native by name and descriptor in a [`Natives`]
//! table before loading; an applet that declares a native the table lacks is
//! rejected at load ([`crate::LoadError::UnknownNative`]). At run time the
//! interpreter calls the closure with the arguments (ints, and arrays as heap
//! handles) and a [`Context`] through which the native reads and writes the
//! applet's arrays, every access bounds-checked. A native that fails returns a
//! [`NativeError`], which ends the invocation with a trap.

use core::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use thiserror::Error;

use crate::heap::{Heap, Object};
use crate::subset::Prim;

/// An error a native method reports; it becomes [`crate::TrapKind::Native`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct NativeError(pub String);

/// The signature of a native binding: the invocation context and the
/// arguments (one `i32` per parameter; arrays are handles). The return value
/// is ignored for `void` natives.
pub type NativeFn = Arc<dyn Fn(&mut Context<'_>, &[i32]) -> Result<i32, NativeError> + Send + Sync>;

/// A table of native bindings, keyed by name and descriptor.
#[derive(Clone, Default)]
pub struct Natives {
    map: HashMap<(String, String), NativeFn>,
}

impl core::fmt::Debug for Natives {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut keys: Vec<String> = self.map.keys().map(|(n, d)| format!("{n}{d}")).collect();
        keys.sort();
        f.debug_struct("Natives").field("bound", &keys).finish()
    }
}

impl Natives {
    /// An empty table.
    pub fn new() -> Natives {
        Natives::default()
    }

    /// The natives of the paper's Figure 2 applet (`RawUnet`) bound to
    /// stubs that move no data: `newAlignedArray` allocates, the free
    /// buffer is 4096 bytes at offset 0, and the DMA and queue calls return
    /// at once. For benchmarks and tools that run applets without an
    /// endpoint.
    pub fn figure2_stubs() -> Natives {
        Natives::new()
            .with("newAlignedArray", "(I)[B", |cx, a| {
                cx.new_array(Prim::Byte, a[0])
            })
            .with("getFreeBufferLength", "()I", |_, _| Ok(4096))
            .with("getFreeBuffer", "()I", |_, _| Ok(0))
            .with("doHtoLDMA", "([BIII)V", |_, _| Ok(0))
            .with("doLtoHDMA", "([BIII)V", |_, _| Ok(0))
            .with("txPush", "([BIII)V", |_, _| Ok(0))
            .with("dmaRxd", "([III)V", |_, _| Ok(0))
            .with("dmaRxdPayload", "([BII)V", |_, _| Ok(0))
    }

    /// Binds `name` with `descriptor` (e.g. `"txPush"`, `"([BIII)V"`) to `f`,
    /// replacing any earlier binding.
    pub fn register<F>(&mut self, name: &str, descriptor: &str, f: F) -> &mut Natives
    where
        F: Fn(&mut Context<'_>, &[i32]) -> Result<i32, NativeError> + Send + Sync + 'static,
    {
        self.map
            .insert((name.to_owned(), descriptor.to_owned()), Arc::new(f));
        self
    }

    /// Builder form of [`Natives::register`].
    pub fn with<F>(mut self, name: &str, descriptor: &str, f: F) -> Natives
    where
        F: Fn(&mut Context<'_>, &[i32]) -> Result<i32, NativeError> + Send + Sync + 'static,
    {
        self.register(name, descriptor, f);
        self
    }

    /// The binding for `name` and `descriptor`, if any.
    pub fn get(&self, name: &str, descriptor: &str) -> Option<&NativeFn> {
        self.map.get(&(name.to_owned(), descriptor.to_owned()))
    }
}

/// What a native method sees of the applet while it runs: its arrays, and
/// the host value the invocation was given ([`crate::Applet::call`]).
pub struct Context<'a> {
    pub(crate) heap: &'a mut Heap,
    pub(crate) host: Option<&'a mut dyn Any>,
}

impl<'a> Context<'a> {
    /// The host value of this invocation, if it is a `T`: the state a
    /// native acts on for its host (U-Net/SLE: the endpoint), passed per
    /// invocation so that one bound table serves every applet instance.
    pub fn host<T: Any>(&mut self) -> Result<&mut T, NativeError> {
        self.host
            .as_deref_mut()
            .and_then(|h| h.downcast_mut::<T>())
            .ok_or_else(|| NativeError(host_missing::<T>()))
    }

    /// The host value and the applet's arrays at once, for natives that
    /// move data between the two.
    pub fn split<T: Any>(&mut self) -> Result<(&mut T, Arrays<'_>), NativeError> {
        let host = self
            .host
            .as_deref_mut()
            .and_then(|h| h.downcast_mut::<T>())
            .ok_or_else(|| NativeError(host_missing::<T>()))?;
        Ok((host, Arrays { heap: self.heap }))
    }

    fn arrays(&mut self) -> Arrays<'_> {
        Arrays { heap: self.heap }
    }

    /// The `byte[]` (or `boolean[]`) behind a handle.
    pub fn bytes(&mut self, handle: i32) -> Result<&mut [i8], NativeError> {
        self.arrays().into_bytes(handle)
    }

    /// The `short[]` behind a handle.
    pub fn shorts(&mut self, handle: i32) -> Result<&mut [i16], NativeError> {
        self.arrays().into_shorts(handle)
    }

    /// The `int[]` behind a handle.
    pub fn ints(&mut self, handle: i32) -> Result<&mut [i32], NativeError> {
        self.arrays().into_ints(handle)
    }

    /// Allocates a zeroed array in the applet's heap, within its budget.
    pub fn new_array(&mut self, elem: Prim, len: i32) -> Result<i32, NativeError> {
        self.arrays().new_array(elem, len)
    }
}

#[cold]
fn host_missing<T>() -> String {
    format!(
        "this native needs a host value of type {}, and the invocation has none",
        core::any::type_name::<T>()
    )
}

/// The applet's arrays, as a native reaches them beside the host value
/// ([`Context::split`]). Every access is checked: a null, dangling or
/// wrongly typed handle is an error.
pub struct Arrays<'a> {
    heap: &'a mut Heap,
}

impl<'a> Arrays<'a> {
    fn into_obj(self, handle: i32) -> Result<&'a mut Object, NativeError> {
        if handle == 0 {
            return Err(NativeError("null array argument".into()));
        }
        self.heap
            .get_mut(handle)
            .ok_or_else(|| NativeError(format!("invalid array handle {handle}")))
    }

    /// The `byte[]` (or `boolean[]`) behind a handle.
    pub fn bytes(&mut self, handle: i32) -> Result<&mut [i8], NativeError> {
        Arrays { heap: self.heap }.into_bytes(handle)
    }

    /// [`Arrays::bytes`], keeping the borrow of the arrays.
    pub fn into_bytes(self, handle: i32) -> Result<&'a mut [i8], NativeError> {
        match self.into_obj(handle)? {
            Object::Bytes(v) | Object::Booleans(v) => Ok(v),
            _ => Err(NativeError("expected a byte array".into())),
        }
    }

    /// The `short[]` behind a handle.
    pub fn shorts(&mut self, handle: i32) -> Result<&mut [i16], NativeError> {
        Arrays { heap: self.heap }.into_shorts(handle)
    }

    /// [`Arrays::shorts`], keeping the borrow of the arrays.
    pub fn into_shorts(self, handle: i32) -> Result<&'a mut [i16], NativeError> {
        match self.into_obj(handle)? {
            Object::Shorts(v) => Ok(v),
            _ => Err(NativeError("expected a short array".into())),
        }
    }

    /// The `int[]` behind a handle.
    pub fn ints(&mut self, handle: i32) -> Result<&mut [i32], NativeError> {
        Arrays { heap: self.heap }.into_ints(handle)
    }

    /// [`Arrays::ints`], keeping the borrow of the arrays.
    pub fn into_ints(self, handle: i32) -> Result<&'a mut [i32], NativeError> {
        match self.into_obj(handle)? {
            Object::Ints(v) => Ok(v),
            _ => Err(NativeError("expected an int array".into())),
        }
    }

    /// Allocates a zeroed array in the applet's heap, within its budget.
    pub fn new_array(&mut self, elem: Prim, len: i32) -> Result<i32, NativeError> {
        if len < 0 {
            return Err(NativeError(format!("negative array size {len}")));
        }
        self.heap.alloc_array(elem, len).map_err(|e| {
            NativeError(format!(
                "heap limit exceeded: {} more bytes requested, {} of {} in use",
                e.requested, e.in_use, e.limit
            ))
        })
    }
}
