//! unet: user-level network endpoints with per-endpoint extension applets,
//! after U-Net/SLE (*U-Net/SLE: user-level network interface with safe Java
//! extension applets*, §2 and §5), demultiplexed by dpf and moving data
//! with ilp. This crate is the middle of fastpath's data path: it carries a
//! message from one application to another, through the applets their
//! owners downloaded, at the speed of shared memory, and over a real
//! network when the peer is elsewhere.
//!
//! | piece | module | follows |
//! |---|---|---|
//! | an endpoint's shared memory: buffer area, transmit, receive and free queues | [`layout`], [`shm`], [`ring`] | U-Net's Figure 1; §2 |
//! | the application's side: send, receive, give buffers back | [`endpoint`] | §2 |
//! | the engine (the network interface): demultiplexing by dpf, data moves by ilp, applets | [`engine`] | §2, §2.1 |
//! | the natives applets call, each checking every offset | [`natives`] | §2's list |
//! | the paper's evaluation applets, compiled from `applets/unet` | [`applets`] | §5, Figures 2, 5, 6 |
//! | Ethernet/IPv4/UDP frames with a unet header | [`frame`] | RFC 791, 768, 1071, 1624 |
//! | transports: in-process `loop`, kernel `udp`, `packet` (`AF_PACKET`), `xdp` (`AF_XDP`, past the kernel's stack) | [`transport`] | |
//! | the engine as a daemon for applications in other processes | [`daemon`], [`client`] | §2 (protection) |
//! | two hosts on one machine: network namespaces joined by a veth pair | [`netns`] | ip-netns(8), setns(2) |
//! | an application thread's wait between empty polls: spin (as long as spinning pays), then yield | [`wait`] | |
//! | the bare ring round trips are measured against (two threads, shared memory, no engine) | [`peer`] | |
//!
//! Entry points: [`Engine::new`] on a transport, [`Engine::create_endpoint`]
//! for an application in this process (the default: the application's
//! calls drive the engine), or [`daemon::serve`] and [`client::Client`] for
//! applications in other processes; then [`Endpoint::open_channel`],
//! [`Endpoint::send`] and [`Endpoint::recv`] (or [`Endpoint::recv_ref`],
//! which reads a message in place instead of copying its descriptor out).
//!
//! Trust: applets are untrusted bytecode (verified and metered by jive;
//! their natives check every offset against their own endpoint), and an
//! application's shared memory is untrusted too (the engine copies each
//! descriptor once and checks the copy; see [`shm`]). Neither can reach
//! another endpoint or the engine. `unsafe` code lives in [`affinity`]
//! (pinning a measurement's threads to CPUs), [`shm`] (the
//! mapping), the engine's endpoint table (`engine/ports.rs`, epoch-based
//! reclamation) and the transports that map kernel rings.
//!
//! Dependencies: `jive` (applets), `dpf` (the classifier), `ilp` (copy and
//! checksum loops), `codecache` (through dpf), `crossbeam-epoch` (the
//! engine's endpoint table, read per packet without a lock or a reference
//! count), `bytemuck` (an applet's
//! `byte[]`, `[i8]`, viewed as `[u8]` so that copies are one `memcpy`),
//! `libc` (memfd, mmap, sockets), `ebpf` (the workspace's bpf(2) layer: the
//! XDP program and socket map that feed the `xdp` transport), `thiserror`. Dev: `loom` (queue models), `proptest`, `rand`.
//!
//! ```
//! use unet::{Config, Engine};
//! let net = unet::transport::LoopNet::new();
//! let engine = Engine::new(Box::new(net.attach("10.0.0.1:7000".parse()?)?));
//! // Two endpoints with the standard U-Net applet of the paper.
//! let mut a = engine.create_endpoint(Config::default(), Some(unet::applets::STANDARD))?;
//! let mut b = engine.create_endpoint(Config::default(), Some(unet::applets::STANDARD))?;
//! let ab = a.open_channel(engine.local(), b.id())?;
//! b.open_channel(engine.local(), a.id())?;
//! a.send(ab, &[7u8; 5000])?; // two buffers at the receiver
//! let m = b.recv().expect("delivered");
//! assert_eq!((m.len(), m.buffers().count()), (5000, 2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(not(loom))]
pub mod affinity;
#[cfg(not(loom))]
pub mod applets;
pub mod biased;
#[cfg(not(loom))]
pub mod client;
#[cfg(not(loom))]
pub mod daemon;
#[cfg(not(loom))]
pub mod endpoint;
#[cfg(not(loom))]
pub mod engine;
pub mod error;
#[cfg(not(loom))]
pub mod frame;
/// The engine's cross-thread inbox alone, for its loom model
/// (`tests/loom_inbox.rs`): under `--cfg loom` the engine is not built.
#[cfg(loom)]
#[path = "engine/inbox.rs"]
pub mod inbox;
pub mod layout;
#[cfg(not(loom))]
pub mod natives;
#[cfg(not(loom))]
pub mod netns;
#[cfg(not(loom))]
pub mod peer;
pub mod ring;
#[cfg(not(loom))]
pub mod shm;
pub mod sync;
#[cfg(not(loom))]
pub mod transport;
#[cfg(not(loom))]
pub mod wait;

#[cfg(not(loom))]
pub use crate::endpoint::{Endpoint, GIVE_BACK, Message, MessageRef, SendError};
#[cfg(not(loom))]
pub use crate::engine::{
    Budgets, ChannelOptions, Engine, EngineCounts, EngineError, PortCounts, TrapPolicy,
};
pub use crate::error::ConfigError;
#[cfg(not(loom))]
pub use crate::frame::Addr;
pub use crate::layout::{Config, RxDesc, TxDesc, TxStatus};
