//! The round trip of an application whose engine runs in another process
//! (`fastpath engine`, [`unet::daemon`]), whose messages go by transmit
//! descriptors: two endpoints of one [`unet::client::Client`], driven by
//! this thread (pinned to CPU 0), and the engine's one service thread,
//! which takes each descriptor from the sender's transmit queue and
//! delivers the message into the receiver's receive queue
//! (`Engine::deliver_direct`). Each direction crosses the cores twice: the
//! descriptor to the engine's core, the receive slot (and, past 56 bytes,
//! the buffer) back to this one. The engine and its socket are in this
//! process, so that one command measures them; the client's side is what
//! a separate process runs, through the same mapped segments.
//!
//! ```sh
//! cargo build --release -p unet --example daemon_rtt
//! target/release/examples/daemon_rtt 200 0,56,57,1024   # 200 batches of 50
//! ```
//!
//! Each figure is the median of the batches' means, after 500 round trips
//! (`WARMUP=n` for another count), as in `loop_rtt`.
use unet::Config;
use unet::client::Client;
use unet::transport::LoopNet;

#[path = "common/mod.rs"]
mod common;
use common::{Idle, batches, batches_and_sizes, recv_into, send_all};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, sizes) = batches_and_sizes(200, "0,56,57,1024");
    let net = LoopNet::new();
    let engine = unet::Engine::new(Box::new(net.attach("10.0.0.1:7000".parse()?)?));
    engine.start(1)?;
    let path = std::env::temp_dir().join(format!("unet-daemon-rtt-{}.sock", std::process::id()));
    let server = unet::daemon::serve(engine.clone(), &path)?;
    let client = Client::connect(&path)?;
    let old = unet::affinity::pin(0);
    let mut a = client.create_endpoint(Config::default(), None)?;
    let mut b = client.create_endpoint(Config::default(), None)?;
    let ab = a.open_channel(client.local(), b.id())?;
    let ba = b.open_channel(client.local(), a.id())?;
    let mut buf = Vec::with_capacity(65536);
    for &size in &sizes {
        let msg = vec![0x5au8; size];
        let rtt = batches(n, || {
            send_all(&mut a, ab, &msg, Idle::Backoff);
            recv_into(&mut b, &mut buf, Idle::Backoff, None);
            send_all(&mut b, ba, &buf, Idle::Backoff);
            recv_into(&mut a, &mut buf, Idle::Backoff, None);
            assert_eq!(buf.len(), size);
        });
        println!("{size:5} B  through the engine's thread {rtt:.3} us");
    }
    if let Some(old) = old {
        unet::affinity::restore(&old);
    }
    drop((a, b, client));
    server.shutdown();
    engine.stop();
    Ok(())
}
