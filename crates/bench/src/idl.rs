//! The idl suite: IDL4's Tables 3 and 4 (Haeberlen et al., *Stub-Code
//! Performance is Becoming Important*, 2000) replicated for fastpath's
//! generated stubs and the serialization peers they are compared with:
//!
//! * [`prost_peer`], [`capnp_peer`], [`flat_peer`]: stubs of the same shape
//!   over protobuf (prost), Cap'n Proto (capnp) and FlatBuffers, from the
//!   schemas in `crates/bench/peers/idl/` (generated in `build.rs`);
//! * [`hand`]: a hand-written minimal stub;
//! * [`fastpath_family`]: fastpath's generated stubs (`idl::gen_rust`);
//! * [`c_family`]: fastpath's generated C stubs (`idl::gen_c`), compiled
//!   by `build.rs` (instruction counts only).
//!
//! [`count`] counts instructions with callgrind (Table 4); [`timing`]
//! times round trips between two processes over `idl::rt::shm` and IOzone's
//! reread (Table 3). `fastpath bench idl` runs both and prints the tables
//! with ratios (or `--json`); `cargo bench -p fastpath-bench --bench idl`
//! is the criterion version.

pub mod c_family;
pub mod capnp_peer;
pub mod count;
pub mod fastpath_family;
pub mod flat_peer;
pub mod hand;
pub mod prost_peer;
pub mod schema;
pub mod server;
pub mod shm;
pub mod timing;
pub mod wire;

/// IDL4's Table 4: (client » server, client « server, total) per call.
pub const IDL4: [(&str, [i64; 3]); 3] = [
    ("pfs_open", [65, 37, 102]),
    ("pfs_write", [73, 38, 111]),
    ("pfs_get_direntries", [79, 42, 121]),
];

/// If this process is one of the suite's children (the callgrind-counted
/// run or a server), does that child's work and exits.
pub fn child_dispatch() {
    if std::env::var_os(count::COUNT_ENV).is_some() {
        count::child_main();
        std::process::exit(0);
    }
    if let Some(code) = shm::child_main() {
        std::process::exit(code);
    }
}

#[cfg(test)]
mod tests {
    use super::server::check;
    use super::wire::Loopback;
    use super::*;

    #[test]
    fn every_peer_over_the_loopback() {
        check(&mut hand::Client {
            wire: Loopback::new(hand::Server::default(), 8192),
        })
        .unwrap();
        check(&mut prost_peer::Client {
            wire: Loopback::new(prost_peer::Server::default(), 8192),
        })
        .unwrap();
        check(&mut capnp_peer::Client {
            wire: Loopback::new(capnp_peer::Server::default(), 8192),
        })
        .unwrap();
        check(&mut flat_peer::Client::new(Loopback::new(
            flat_peer::Server::default(),
            8192,
        )))
        .unwrap();
    }

    #[test]
    fn every_subject_makes_every_call() {
        for mut s in count::subjects() {
            for op in 0..count::OPS.len() {
                s.op(op);
            }
        }
    }

    #[test]
    fn parses_combined_dumps() {
        let t = "version: 1\ncreator: x\npart: 1\ndesc: Trigger: --dump-before=idlb_method\nevents: Ir\nfn=a\n1 5\ntotals: 42\npart: 2\ndesc: Trigger: --dump-after=idlb_method\nevents: Ir\ntotals: 7\n";
        let p = count::parse_parts(t);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].1, 42);
        assert!(p[1].0.contains("dump-after=idlb_method"));
    }
}
