//! Every random interface the static generators accept has dynamic stubs
//! too: `idl::dynamic` loads it and generates its server, whatever the
//! number of arguments its handlers take (past the registers, they are
//! passed on the stack as the C convention's further arguments).

use idl_proptest::CASES;

extern "C" fn nothing() {}

#[test]
fn every_random_interface_has_a_dynamic_server() {
    let mut most = 0;
    for case in CASES {
        let text = std::fs::read_to_string(case.idl_path).expect("the build's IDL file");
        let idl = idl::parse(&text).expect("a random IDL the build compiled");
        let iface = &idl.interfaces[0];
        let dynamic = idl::dynamic::Interface::load(&text, &iface.name)
            .unwrap_or_else(|e| panic!("{}: the dynamic stubs do not load: {e}", case.name));
        let handlers: Vec<(&str, idl::dynamic::Handler)> = iface
            .ops
            .iter()
            .map(|op| {
                // SAFETY: never called (no request is served); generating
                // the dispatch does not call a handler.
                let h = unsafe {
                    idl::dynamic::Handler::new(nothing as *const () as usize, std::ptr::null_mut())
                };
                (op.name.as_str(), h)
            })
            .collect();
        // SAFETY: as above.
        if let Err(e) = unsafe { dynamic.server(&handlers) } {
            panic!("{}: no dynamic server: {e}", case.name);
        }
        most = most.max(dynamic.ops().iter().map(|p| p.slots).max().unwrap_or(0));
    }
    assert_eq!(CASES.len(), 40);
    // Some interface takes more than the nine values the dispatch passes
    // in registers, so the test covers the stack arguments.
    assert!(most > 9, "the largest operation takes only {most} slots");
}
