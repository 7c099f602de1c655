//! Port names, resolved as libpcap 1.10 resolves them
//! (`pcap_nametoport` in `nametoaddr.c`): through the system's services
//! database, `/etc/services`, looked up for TCP and for UDP.
//!
//! A name found for TCP means TCP only, unless UDP has the same port for
//! it, when it means every transport (`port domain` is TCP, UDP and SCTP
//! port 53; `port smtp`, with `smtp 25/tcp` alone, is TCP port 25). The
//! first entry of the file naming the service (as its name or an alias)
//! for a protocol wins, as with `getservbyname`. The file is read once per
//! process; a missing file resolves no name.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::syntax::Proto;

/// The services database file.
pub const SERVICES: &str = "/etc/services";

/// (TCP port, UDP port) of every name of the database.
type Db = HashMap<String, (Option<u16>, Option<u16>)>;

fn db() -> &'static Db {
    static DB: OnceLock<Db> = OnceLock::new();
    DB.get_or_init(|| parse(&std::fs::read_to_string(SERVICES).unwrap_or_default()))
}

/// The names of a services file: `name port/protocol [alias...] [# comment]`.
pub fn parse(text: &str) -> Db {
    let mut db = Db::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let (Some(name), Some(spec)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Some((port, proto)) = spec.split_once('/') else {
            continue;
        };
        let Ok(port) = port.parse::<u16>() else {
            continue;
        };
        for n in std::iter::once(name).chain(fields) {
            let e = db.entry(n.to_string()).or_default();
            match proto {
                "tcp" if e.0.is_none() => e.0 = Some(port),
                "udp" if e.1.is_none() => e.1 = Some(port),
                _ => {}
            }
        }
    }
    db
}

/// A port name's number and the transport it is restricted to (`None`:
/// every transport), or `None` if the database does not know it.
pub fn resolve(name: &str) -> Option<(u16, Option<Proto>)> {
    resolve_in(db(), name)
}

/// [`resolve`] against a given database.
pub fn resolve_in(db: &Db, name: &str) -> Option<(u16, Option<Proto>)> {
    match db.get(name).copied()? {
        (Some(t), Some(u)) if t == u => Some((t, None)),
        (Some(t), _) => Some((t, Some(Proto::Tcp))),
        (None, Some(u)) => Some((u, Some(Proto::Udp))),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "smtp 25/tcp mail\n\
        domain 53/tcp # DNS\n\
        domain 53/udp\n\
        bootps 67/udp\n\
        odd 10/tcp\n\
        odd 11/udp\n\
        odd 12/tcp\n";

    #[test]
    fn tcp_only_udp_only_and_both() {
        let db = parse(FILE);
        assert_eq!(resolve_in(&db, "smtp"), Some((25, Some(Proto::Tcp))));
        assert_eq!(resolve_in(&db, "mail"), Some((25, Some(Proto::Tcp))));
        assert_eq!(resolve_in(&db, "domain"), Some((53, None)));
        assert_eq!(resolve_in(&db, "bootps"), Some((67, Some(Proto::Udp))));
        assert_eq!(resolve_in(&db, "DNS"), None);
        assert_eq!(resolve_in(&db, "nope"), None);
    }

    #[test]
    fn different_ports_mean_tcp_and_the_first_entry_wins() {
        assert_eq!(
            resolve_in(&parse(FILE), "odd"),
            Some((10, Some(Proto::Tcp)))
        );
    }
}
