//! The crate's error type.
//!
//! Every error about a filter's text carries the 1-based column (counted
//! in characters) of the token it is about, so that a caller can point at
//! it. Errors of the libpcap oracle ([`crate::pcap`]) carry libpcap's own
//! message.

use thiserror::Error;

/// Everything that can go wrong in this crate.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A character that starts no token of the filter language.
    #[error("column {column}: unexpected character {found:?}")]
    UnexpectedChar {
        /// The character's column.
        column: usize,
        /// The character.
        found: char,
    },
    /// A token where the grammar does not allow it.
    #[error("column {column}: syntax error: expected {expected}, found {found}")]
    Syntax {
        /// The offending token's column (one past the end for end of input).
        column: usize,
        /// What the grammar allows there.
        expected: String,
        /// What was there instead.
        found: String,
    },
    /// A number that is malformed or does not fit in 32 bits.
    #[error("column {column}: bad number {text:?}: {reason}")]
    BadNumber {
        /// The number's column.
        column: usize,
        /// The number as written.
        text: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A malformed IPv4 address or network.
    #[error("column {column}: bad address {text:?}: {reason}")]
    BadAddress {
        /// The address's column.
        column: usize,
        /// The address as written.
        text: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A name where a number or address is needed: host, network, port and
    /// protocol names are not resolved.
    #[error(
        "column {column}: {name:?} is not a known keyword; host, port and network names are not resolved (write a number or a dotted quad)"
    )]
    NameNotResolved {
        /// The name's column.
        column: usize,
        /// The name.
        name: String,
    },
    /// An IP protocol name (after `ip proto`, `ip6 proto`, `proto`) the
    /// protocols database (`/etc/protocols`) does not know; libpcap's
    /// "unknown ip proto".
    #[error("column {column}: unknown ip proto \"{name}\" (not in /etc/protocols)")]
    UnknownProtocol {
        /// The name's column.
        column: usize,
        /// The name.
        name: String,
    },
    /// A port name the services database (`/etc/services`) does not know.
    #[error("column {column}: unknown port \"{name}\" (not in /etc/services)")]
    UnknownPort {
        /// The name's column.
        column: usize,
        /// The name.
        name: String,
    },
    /// A port name of one transport under another's qualifier
    /// (`udp port smtp` where smtp is TCP only), as libpcap refuses it.
    #[error("column {column}: port \"{name}\" is {proto} only")]
    PortProtocol {
        /// The name's column.
        column: usize,
        /// The name.
        name: String,
        /// The only transport the name has.
        proto: &'static str,
    },
    /// A value (number or address) with no qualifier before it to say what
    /// it is, and none to inherit from an earlier primitive.
    #[error("column {column}: {text:?} needs a qualifier such as host, net, port or proto")]
    MissingQualifier {
        /// The value's column.
        column: usize,
        /// The value as written.
        text: String,
    },
    /// A qualifier combination that pcap-filter(7) does not allow, such as
    /// `tcp host` or `ip port`, or a value of the wrong kind for it.
    #[error("column {column}: {message}")]
    BadQualifier {
        /// The column of the offending qualifier or value.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// `ip broadcast`, which needs the capture's netmask (libpcap's
    /// `gen_broadcast` compares the destination's host part with all ones
    /// and all zeros under it). dpf is given no netmask, like
    /// `pcap_compile` with `PCAP_NETMASK_UNKNOWN`, and refuses it as
    /// libpcap then does.
    #[error(
        "column {column}: netmask not known, so 'ip broadcast' not supported \
         (dpf is given no netmask; write the address, e.g. \"ip dst host 10.1.255.255\")"
    )]
    NetmaskUnknown {
        /// The column of `ip`.
        column: usize,
    },
    /// A pcap-filter(7) feature that this subset deliberately leaves out.
    #[error("column {column}: {feature} is not supported by dpf's pcap-filter subset")]
    Unsupported {
        /// The feature's column.
        column: usize,
        /// The feature.
        feature: String,
    },
    /// Arithmetic libpcap refuses: a division or modulus by a constant
    /// zero, a shift by a constant above 31.
    #[error("column {column}: {reason}")]
    Arithmetic {
        /// The column of the operator, or of the comparison.
        column: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A filter longer than the parser's length limit
    /// ([`crate::syntax::Limits::max_len`], 64 KiB by default).
    #[error("the filter is {length} bytes long; the limit is {limit} bytes")]
    TooLong {
        /// The filter's length in bytes.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// Parentheses and negations (`not`, `!`) nested deeper than the
    /// parser's nesting limit ([`crate::syntax::Limits::max_nesting`], 64
    /// by default).
    #[error("column {column}: parentheses and negations nested more than {limit} deep")]
    TooDeep {
        /// The column of the first `(`, `not` or `!` past the limit.
        column: usize,
        /// The limit.
        limit: usize,
    },
    /// More primitives than the parser's limit
    /// ([`crate::syntax::Limits::max_primitives`], 4,096 by default).
    #[error("column {column}: more than {limit} primitives in one filter")]
    TooManyPrimitives {
        /// The column of the first primitive past the limit.
        column: usize,
        /// The limit.
        limit: usize,
    },
    /// A filter whose optimization would take more than
    /// [`crate::lower::MAX_OPTIMIZER_WORK`] steps: long `or`/`and` chains
    /// of primitives that each test several fields (`port`, `net`), whose
    /// pull-ups are quadratic in the chain's length.
    #[error(
        "the filter needs more than {limit} steps of libpcap's optimizer; \
         split its longest or-chain into several filters"
    )]
    TooComplex {
        /// The budget, in steps.
        limit: u64,
    },
    /// libpcap could not be loaded (the oracle is unavailable).
    #[error("libpcap could not be loaded: {0}")]
    LibpcapUnavailable(String),
    /// libpcap's `pcap_open_offline` refused a capture file.
    #[error("pcap_open_offline: {0}")]
    LibpcapOpen(String),
    /// libpcap's `pcap_compile` rejected a filter.
    #[error("pcap_compile: {0}")]
    LibpcapCompile(String),
    /// No installed filter has this id (it was never installed, or was
    /// removed already).
    #[error("no installed filter has id {id}")]
    UnknownFilter {
        /// The id.
        id: u64,
    },
    /// vcode could not generate the classifier (for instance, a table so
    /// large that its code exceeds vcode's code-size limit).
    #[error("generating the classifier: {0}")]
    Codegen(#[from] vcode::Error),
    /// A filter of a batch (`Table::install_many`) was rejected; `index`
    /// counts from 0 in the batch's order.
    #[error("filter {index} of the batch: {error}")]
    InBatch {
        /// The filter's position in the batch.
        index: usize,
        /// Why it was rejected.
        error: Box<Error>,
    },
    /// The code cache could not take the classifier (out of cache memory,
    /// say).
    #[error("publishing the classifier: {0}")]
    Publish(String),
}

impl Error {
    /// The 1-based column of the filter text the error is about, if it is
    /// about the text.
    pub fn column(&self) -> Option<usize> {
        match self {
            Error::UnexpectedChar { column, .. }
            | Error::Syntax { column, .. }
            | Error::BadNumber { column, .. }
            | Error::BadAddress { column, .. }
            | Error::NameNotResolved { column, .. }
            | Error::UnknownPort { column, .. }
            | Error::UnknownProtocol { column, .. }
            | Error::PortProtocol { column, .. }
            | Error::MissingQualifier { column, .. }
            | Error::BadQualifier { column, .. }
            | Error::Unsupported { column, .. }
            | Error::NetmaskUnknown { column }
            | Error::Arithmetic { column, .. }
            | Error::TooDeep { column, .. }
            | Error::TooManyPrimitives { column, .. } => Some(*column),
            Error::InBatch { error, .. } => error.column(),
            _ => None,
        }
    }
}
