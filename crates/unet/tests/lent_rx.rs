//! unet's natives table against the lent-array analysis (`jive::lent`):
//! `LentRx` (`applets/unet/LentRx.java`) receives its message lent
//! (`doRx(byte[] msg, int length, int channel)`) and passes it only to the
//! natives unet marks read-only (`unet::natives::READS_ONLY`):
//! `dmaRxdPayload`, `doLtoHDMA`, and `txPush` (whose tail form the table
//! binds too). Passing it to `doHtoLDMA`, which writes its array, is refused
//! at load with the method, the call's bci and the parameter.
#![cfg(not(loom))]

#[path = "common/mock.rs"]
mod mock;

use jive::{Applet, LentParam, Limits, LoadError};
use mock::Mock;
use unet::natives::bind;

const LENT_RX: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/unet-applets/LentRx.class"));

fn lent(method: &'static str) -> LentParam {
    LentParam {
        method,
        descriptor: "([BII)I",
        param: 0,
    }
}

#[test]
fn a_lent_message_reaches_the_natives_that_only_read_it() {
    let natives = bind::<Mock>();
    let a = Applet::load_lending(
        LENT_RX,
        &natives,
        Limits::default(),
        &[lent("doRx"), lent("echo")],
        None,
    )
    .unwrap();
    let p = a.program();
    for m in ["doRx", "echo"] {
        let (idx, _) = p.info.method(m).unwrap();
        assert_eq!(p.lent_params(idx), &[0], "{m}");
    }
    // doRx passes it to dmaRxdPayload and doLtoHDMA, echo to txPush.
    let calls: Vec<(String, u16)> = p
        .lent_methods()
        .iter()
        .flat_map(|l| &l.native_args)
        .map(|c| (p.info.methods[usize::from(c.native)].name.clone(), c.param))
        .collect();
    assert_eq!(
        calls,
        [
            ("dmaRxdPayload".to_string(), 0),
            ("doLtoHDMA".to_string(), 0),
            ("txPush".to_string(), 0)
        ]
    );
}

#[test]
fn a_lent_message_never_reaches_do_h_to_l_dma() {
    let natives = bind::<Mock>();
    let e = match Applet::load_lending(
        LENT_RX,
        &natives,
        Limits::default(),
        &[lent("overwrite")],
        None,
    ) {
        Err(LoadError::Verify(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(e.method, "overwrite([BII)I");
    assert_eq!(e.bci, Some(4), "{e}");
    assert!(
        e.reason
            .contains("native doHtoLDMA([BIII)V's parameter 0, which writes it"),
        "{e}"
    );
    // Not lent, the same method is an ordinary one.
    Applet::load(LENT_RX, &natives, Limits::default()).unwrap();
}
