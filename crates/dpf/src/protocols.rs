//! IP protocol names, resolved as libpcap 1.10 resolves them
//! (`pcap_nametoproto` in `nametoaddr.c`, which calls `getprotobyname`):
//! through the system's protocols database, `/etc/protocols`.
//!
//! Each line is `name number [alias...] [# comment]`; a name or an alias
//! is matched exactly (case included: `IGMP` is an alias in the usual
//! file), and the first line naming it wins, as with `getprotobyname`.
//! The file is read once per process; a missing file resolves no name.
//! The names are those after `ip proto`, `ip6 proto` and `proto`
//! (`ip proto gre`, `proto \ospf`).

use std::collections::HashMap;
use std::sync::OnceLock;

/// The protocols database file.
pub const PROTOCOLS: &str = "/etc/protocols";

/// The protocol number of every name and alias of the database.
pub type Db = HashMap<String, u8>;

fn db() -> &'static Db {
    static DB: OnceLock<Db> = OnceLock::new();
    DB.get_or_init(|| parse(&std::fs::read_to_string(PROTOCOLS).unwrap_or_default()))
}

/// The names of a protocols file. A line whose number is not one of
/// 0..=255 is skipped.
pub fn parse(text: &str) -> Db {
    let mut db = Db::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let (Some(name), Some(number)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Ok(number) = number.parse::<u8>() else {
            continue;
        };
        for n in std::iter::once(name).chain(fields) {
            db.entry(n.to_string()).or_insert(number);
        }
    }
    db
}

/// A protocol name's number, or `None` if the database does not know it.
pub fn resolve(name: &str) -> Option<u8> {
    resolve_in(db(), name)
}

/// [`resolve`] against a given database.
pub fn resolve_in(db: &Db, name: &str) -> Option<u8> {
    db.get(name).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "ip\t0\tIP\t\t# internet protocol\n\
        icmp 1 ICMP\n\
        gre 47 GRE # General Routing Encapsulation\n\
        ipv6-icmp 58 IPv6-ICMP\n\
        twice 99\n\
        other 98 twice\n\
        bad 256\n";

    #[test]
    fn names_and_aliases_resolve_exactly() {
        let db = parse(FILE);
        assert_eq!(resolve_in(&db, "gre"), Some(47));
        assert_eq!(resolve_in(&db, "GRE"), Some(47));
        assert_eq!(resolve_in(&db, "Gre"), None);
        assert_eq!(resolve_in(&db, "ipv6-icmp"), Some(58));
        assert_eq!(resolve_in(&db, "ip"), Some(0));
        assert_eq!(resolve_in(&db, "General"), None);
    }

    #[test]
    fn the_first_line_wins_and_out_of_range_numbers_are_skipped() {
        let db = parse(FILE);
        assert_eq!(resolve_in(&db, "twice"), Some(99));
        assert_eq!(resolve_in(&db, "bad"), None);
    }
}
