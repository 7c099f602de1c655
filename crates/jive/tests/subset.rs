//! The JIVE subset, as a specification: each class under `applets/src/subset`
//! uses one feature outside it, and is rejected at load with the method, the
//! bytecode index (for instruction-level problems) and the reason.

mod common;

use common::{RELEASES, class_bytes};
use jive::{Limits, LoadError, SubsetError};

fn rejection(release: &str, class: &str) -> Option<SubsetError> {
    let bytes = class_bytes(release, class)?;
    match jive::check(&bytes, &Limits::default()) {
        Err(LoadError::Subset(e)) => Some(e),
        other => panic!("{release} {class}: expected a subset error, got {other:?}"),
    }
}

/// (class, method or None for class-level, has a bci, words in the reason)
const CASES: &[(&str, Option<&str>, bool, &str)] = &[
    ("UsesLong", Some("twice(J)J"), false, "uses long"),
    (
        "UsesDouble",
        Some("half(I)I"),
        true,
        "i2d: long, float and double are not in the JIVE subset",
    ),
    (
        "UsesFloatField",
        None,
        false,
        "field f: descriptor F uses float",
    ),
    (
        "UsesChar",
        Some("low(I)I"),
        true,
        "i2c: char is not in the JIVE subset",
    ),
    ("UsesString", Some("len()I"), true, "ldc of a string"),
    ("Overloads", Some("f(II)I"), false, "overloads f(I)I"),
    ("MultiDim", Some("f()I"), true, "multi-dimensional arrays"),
    ("ObjectArray", Some("f()I"), true, "arrays of references"),
    (
        "OtherClass",
        Some("f(I)I"),
        true,
        "call to java/lang/Math.abs(I)I: other classes",
    ),
    (
        "Iface",
        None,
        false,
        "implements interface java/lang/Runnable",
    ),
    (
        "Subclass",
        None,
        false,
        "must extend java/lang/Object directly, not java/lang/Thread",
    ),
    ("Synchronized", Some("f(I)I"), false, "synchronized methods"),
    (
        "Lambda",
        Some("f()I"),
        true,
        "invokedynamic is not in the JIVE subset",
    ),
    ("TryCatch", Some("f(I)I"), true, "exception handlers"),
    ("NewObject", Some("f()I"), true, "creating objects"),
    ("Throws", Some("f(I)I"), true, "athrow: throwing exceptions"),
    (
        "InstanceNative",
        Some("f(I)I"),
        false,
        "native methods must be static",
    ),
    ("LongConst", Some("f(I)I"), true, "long, float and double"),
];

#[test]
fn every_feature_outside_the_subset_is_rejected_with_its_location() {
    for r in RELEASES {
        for &(class, method, has_bci, reason) in CASES {
            let Some(e) = rejection(r, class) else { return };
            assert_eq!(e.method.as_deref(), method, "{r} {class}: {e}");
            assert_eq!(e.bci.is_some(), has_bci, "{r} {class}: {e}");
            assert!(
                e.reason.contains(reason),
                "{r} {class}: {e:?} should mention {reason:?}"
            );
        }
    }
}

#[test]
fn the_message_names_method_bci_and_reason() {
    let Some(e) = rejection("default", "UsesChar") else {
        return;
    };
    assert_eq!(
        e.to_string(),
        "not in the JIVE subset: low(I)I at bci 1: i2c: char is not in the JIVE subset"
    );
}

#[test]
fn every_applet_of_the_test_suite_is_inside_the_subset() {
    for r in RELEASES {
        for class in ["Arith", "Bench", "Counter", "RawUnet", "Traps", "Victim"] {
            let Some(bytes) = class_bytes(r, class) else {
                return;
            };
            if let Err(e) = jive::check(&bytes, &Limits::default()) {
                panic!("{r} {class}: {e}");
            }
        }
    }
}
