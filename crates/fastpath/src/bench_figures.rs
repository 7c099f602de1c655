//! Figures a benchmark may print: a median over a stated number of samples,
//! or "n/a" with the reason it cannot be trusted.
//!
//! A benchmark collects samples (one timed stretch each) and turns them into
//! [`Figure`]s here. A figure that would be impossible is not a value:
//!
//! - fewer valid samples than the table's header claims
//!   ([`NotMeasured::TooFewSamples`]);
//! - a time at or below zero, or a difference that came out negative by more
//!   than its own spread ([`NotMeasured::Negative`]);
//! - a time below the timer's resolution or below the smallest cost a
//!   machine instruction can have ([`NotMeasured::BelowResolution`]);
//! - a difference no larger than the spread of the samples it came from
//!   ([`NotMeasured::WithinNoise`]);
//! - a ratio whose denominator is one of the above or whose spread is as
//!   large as its value ([`NotMeasured::Denominator`]).
//!
//! Each of these is printed as `n/a (reason)` and never judged PASS or MISS;
//! the benchmark remeasures such a figure a bounded number of times before it
//! gives up on it.
//!
//! ```text
//! samples ──median_figure──────────▶ Figure::Value { value, spread }
//!   │                                 or Figure::NotMeasured(reason)
//!   └─(with the null loop's samples)
//!      difference_figure ──▶ per-operation cost, null loop subtracted
//! Figure / Figure ──ratio──▶ Figure
//! ```

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};

/// The least cost per loop iteration or per operation taken as measured,
/// in ns: a twentieth of a cycle at 5 GHz. Below it, a compiler removed the
/// loop or the operation hides entirely in the loop's latency; neither is a
/// cost.
pub const MIN_NS_PER_OP: f64 = 0.01;

/// Why a figure is not printed as a value.
#[derive(Debug, Clone, PartialEq)]
pub enum NotMeasured {
    /// Fewer valid samples than the median is stated over.
    TooFewSamples { got: usize, want: usize },
    /// A time or difference below zero by more than its spread.
    Negative { value: f64 },
    /// Smaller than the finest time the measurement can tell apart.
    BelowResolution { value: f64, resolution: f64 },
    /// A difference no larger than the spread of its samples.
    WithinNoise { value: f64, spread: f64 },
    /// A ratio whose denominator is not a trustworthy figure.
    Denominator(String),
    /// A ratio whose numerator is not a trustworthy figure.
    Numerator(String),
    /// Not run at all (e.g. the JIT is unavailable), with the reason.
    Unavailable(String),
}

impl NotMeasured {
    /// Whether measuring again may give a value: every reason but
    /// [`NotMeasured::Unavailable`] and those of a ratio, which follow their
    /// operands.
    pub fn remeasurable(&self) -> bool {
        !matches!(
            self,
            NotMeasured::Unavailable(_) | NotMeasured::Denominator(_) | NotMeasured::Numerator(_)
        )
    }
}

impl fmt::Display for NotMeasured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotMeasured::TooFewSamples { got, want } => {
                write!(f, "{got} valid samples of the {want} the median needs")
            }
            NotMeasured::Negative { value } => {
                write!(f, "came out negative ({})", short(*value))
            }
            NotMeasured::BelowResolution { value, resolution } => write!(
                f,
                "{} is below {}, the finest figure this measurement resolves",
                short(*value),
                short(*resolution)
            ),
            NotMeasured::WithinNoise { value, spread } => write!(
                f,
                "{} is within the noise of the samples it came from (spread {})",
                short(*value),
                short(*spread)
            ),
            NotMeasured::Denominator(why) => write!(f, "denominator: {why}"),
            NotMeasured::Numerator(why) => write!(f, "numerator: {why}"),
            NotMeasured::Unavailable(why) => f.write_str(why),
        }
    }
}

/// A number in a reason: enough digits to be read at any scale.
fn short(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.2e}")
    }
}

/// A figure: a median with the spread of its samples, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    /// The median and half the interquartile range of its samples.
    Value { value: f64, spread: f64 },
    /// Not a trustworthy value.
    NotMeasured(NotMeasured),
}

impl Figure {
    /// The value, if there is one.
    pub fn value(&self) -> Option<f64> {
        match self {
            Figure::Value { value, .. } => Some(*value),
            Figure::NotMeasured(_) => None,
        }
    }

    /// The reason there is no value, if there is none.
    pub fn reason(&self) -> Option<&NotMeasured> {
        match self {
            Figure::Value { .. } => None,
            Figure::NotMeasured(r) => Some(r),
        }
    }

    /// The figure with its value (and spread) scaled by `k` (a unit change),
    /// and so are the numbers of a reason that gives them in the figure's
    /// unit (below the resolution, negative, within the noise), so that a
    /// table's reason speaks in its column's unit. (Until 2026-12-06 they
    /// kept the unit measured in: `fastpath bench codegen` said of a kernel
    /// in its µs column "89.00 is below 100", nanoseconds.)
    pub fn scaled(&self, k: f64) -> Figure {
        match self {
            Figure::Value { value, spread } => Figure::Value {
                value: value * k,
                spread: spread * k,
            },
            Figure::NotMeasured(r) => Figure::NotMeasured(match r {
                NotMeasured::Negative { value } => NotMeasured::Negative { value: value * k },
                NotMeasured::BelowResolution { value, resolution } => {
                    NotMeasured::BelowResolution {
                        value: value * k,
                        resolution: resolution * k,
                    }
                }
                NotMeasured::WithinNoise { value, spread } => NotMeasured::WithinNoise {
                    value: value * k,
                    spread: spread * k,
                },
                other => other.clone(),
            }),
        }
    }

    /// `format(value)`, or `n/a (reason)`.
    pub fn cell(&self, format: impl Fn(f64) -> String) -> String {
        match self {
            Figure::Value { value, .. } => format(*value),
            Figure::NotMeasured(r) => format!("n/a ({r})"),
        }
    }
}

/// In JSON: `{"value": v, "spread": s}`, or `{"value": null, "reason": "..."}`.
impl Serialize for Figure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        match self {
            Figure::Value { value, spread } => {
                m.serialize_entry("value", value)?;
                m.serialize_entry("spread", spread)?;
            }
            Figure::NotMeasured(r) => {
                m.serialize_entry("value", &None::<f64>)?;
                m.serialize_entry("reason", &r.to_string())?;
            }
        }
        m.end()
    }
}

/// The median and half the interquartile range of `v` (sorted here), or
/// `None` if it is empty.
fn median_spread(v: &mut [f64]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Some((at(0.5), (at(0.75) - at(0.25)) / 2.0))
}

/// The median of `samples` (times; non-finite ones are invalid) if there are
/// at least `want` valid ones and it is above `resolution`.
pub fn median_figure(samples: &[f64], want: usize, resolution: f64) -> Figure {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < want {
        return Figure::NotMeasured(NotMeasured::TooFewSamples { got: v.len(), want });
    }
    let Some((value, spread)) = median_spread(&mut v) else {
        return Figure::NotMeasured(NotMeasured::TooFewSamples { got: 0, want });
    };
    if value < 0.0 {
        Figure::NotMeasured(NotMeasured::Negative { value })
    } else if value <= resolution {
        Figure::NotMeasured(NotMeasured::BelowResolution { value, resolution })
    } else {
        Figure::Value { value, spread }
    }
}

/// The least of `samples` (times of the same work; non-finite ones are
/// invalid), for a table that reports the best of its rounds: the same
/// rules as [`median_figure`] (at least `want` valid samples, above zero and
/// above `resolution`), the spread being half the interquartile range.
pub fn best_figure(samples: &[f64], want: usize, resolution: f64) -> Figure {
    match median_figure(samples, want, f64::NEG_INFINITY) {
        Figure::Value { spread, .. } => {
            let value = samples
                .iter()
                .copied()
                .filter(|x| x.is_finite())
                .fold(f64::INFINITY, f64::min);
            if value < 0.0 {
                Figure::NotMeasured(NotMeasured::Negative { value })
            } else if value <= resolution {
                Figure::NotMeasured(NotMeasured::BelowResolution { value, resolution })
            } else {
                Figure::Value { value, spread }
            }
        }
        other => other,
    }
}

/// The cost that `op` adds to `null`, from samples taken in pairs (the
/// `i`th of each moments apart): the median of the paired differences,
/// divided by `per` (e.g. the loop's iteration count). A pair with a
/// non-finite member is invalid. The difference must exceed `resolution` (in
/// the divided unit; e.g. the least cost an operation can have) in size, be
/// positive and exceed its spread (else it is noise).
pub fn difference_figure(
    op: &[f64],
    null: &[f64],
    want: usize,
    per: f64,
    resolution: f64,
) -> Figure {
    let mut d: Vec<f64> = op
        .iter()
        .zip(null)
        .filter(|(a, b)| a.is_finite() && b.is_finite())
        .map(|(a, b)| (a - b) / per)
        .collect();
    if d.len() < want {
        return Figure::NotMeasured(NotMeasured::TooFewSamples { got: d.len(), want });
    }
    let Some((value, spread)) = median_spread(&mut d) else {
        return Figure::NotMeasured(NotMeasured::TooFewSamples { got: 0, want });
    };
    difference(value, spread, resolution)
}

/// A difference already taken (e.g. one minus a ratio), judged by the same
/// rules as [`difference_figure`]: it must exceed `resolution` in size, be
/// positive and exceed its `spread`.
pub fn difference(value: f64, spread: f64, resolution: f64) -> Figure {
    if value.abs() <= resolution {
        Figure::NotMeasured(NotMeasured::BelowResolution { value, resolution })
    } else if value < -spread {
        Figure::NotMeasured(NotMeasured::Negative { value })
    } else if value <= spread {
        Figure::NotMeasured(NotMeasured::WithinNoise { value, spread })
    } else {
        Figure::Value { value, spread }
    }
}

/// `a / b`, or why not: either is not a value, or `b`'s spread is as large
/// as `b` itself (a denominator that is noise).
pub fn ratio(a: &Figure, b: &Figure) -> Figure {
    match (a, b) {
        (_, Figure::NotMeasured(r)) => Figure::NotMeasured(NotMeasured::Denominator(r.to_string())),
        (Figure::NotMeasured(r), _) => Figure::NotMeasured(NotMeasured::Numerator(r.to_string())),
        (
            _,
            Figure::Value {
                value: bv,
                spread: bs,
            },
        ) if *bs >= *bv => Figure::NotMeasured(NotMeasured::Denominator(format!(
            "{} is noise (spread {})",
            short(*bv),
            short(*bs)
        ))),
        (
            Figure::Value {
                value: av,
                spread: as_,
            },
            Figure::Value {
                value: bv,
                spread: bs,
            },
        ) => {
            let r = av / bv;
            // First-order spread of a quotient.
            let spread = r * (as_ / av + bs / bv);
            Figure::Value { value: r, spread }
        }
    }
}

/// "1.23x" (or "123x" from 100x up).
pub fn times(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}x")
    } else {
        format!("{r:.2}x")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: f64 = 1.0;

    fn v(value: f64) -> Figure {
        Figure::Value { value, spread: 0.0 }
    }

    #[test]
    fn a_median_over_enough_sane_samples_is_a_value() {
        let f = median_figure(&[10.0, 12.0, 11.0, 50.0, 9.0], 5, R);
        assert_eq!(f.value(), Some(11.0));
    }

    #[test]
    fn a_median_over_fewer_samples_than_stated_is_not_a_value() {
        let f = median_figure(&[10.0, f64::NAN, 11.0, f64::INFINITY], 3, R);
        assert_eq!(
            f,
            Figure::NotMeasured(NotMeasured::TooFewSamples { got: 2, want: 3 })
        );
        assert_eq!(
            f.cell(|x| x.to_string()),
            "n/a (2 valid samples of the 3 the median needs)"
        );
    }

    #[test]
    fn a_negative_or_zero_time_is_not_a_value() {
        assert!(matches!(
            median_figure(&[-3.0, -2.0, -1.0], 3, R),
            Figure::NotMeasured(NotMeasured::Negative { .. })
        ));
        assert!(matches!(
            median_figure(&[0.0, 0.0, 0.0], 3, R),
            Figure::NotMeasured(NotMeasured::BelowResolution { .. })
        ));
        assert!(matches!(
            median_figure(&[0.5, 0.5, 0.5], 3, R),
            Figure::NotMeasured(NotMeasured::BelowResolution { .. })
        ));
    }

    #[test]
    fn a_difference_is_the_median_of_the_paired_differences() {
        // The null loop drifts from round to round; each op sample runs
        // beside its null sample, so the drift cancels.
        let null = [100.0, 200.0, 150.0, 120.0, 180.0];
        let op = [110.0, 210.0, 161.0, 130.0, 190.0];
        let f = difference_figure(&op, &null, 5, 10.0, 0.01);
        assert_eq!(f.value(), Some(1.0));
    }

    #[test]
    fn an_op_faster_than_the_null_loop_is_not_a_value() {
        // The figure of the report: an empty loop slower than a loaded one.
        let null = [19.4, 19.5, 19.3];
        let op = [9.4, 9.5, 9.3];
        assert!(matches!(
            difference_figure(&op, &null, 3, 1.0, 0.01),
            Figure::NotMeasured(NotMeasured::Negative { .. })
        ));
    }

    #[test]
    fn a_difference_within_the_spread_is_noise() {
        let null = [10.0, 10.0, 10.0, 10.0, 10.0];
        let op = [9.0, 11.5, 10.5, 12.0, 8.0];
        let f = difference_figure(&op, &null, 5, 1.0, 0.01);
        assert!(
            matches!(f, Figure::NotMeasured(NotMeasured::WithinNoise { .. })),
            "{f:?}"
        );
    }

    #[test]
    fn a_difference_below_the_resolution_is_not_a_value() {
        let null = [10.0, 10.0, 10.0];
        let op = [10.001, 10.001, 10.001];
        assert!(matches!(
            difference_figure(&op, &null, 3, 1.0, 0.01),
            Figure::NotMeasured(NotMeasured::BelowResolution { .. })
        ));
    }

    #[test]
    fn too_few_pairs_are_not_a_value() {
        let null = [10.0, f64::NAN, 10.0];
        let op = [12.0, 12.0];
        assert_eq!(
            difference_figure(&op, &null, 3, 1.0, 0.01),
            Figure::NotMeasured(NotMeasured::TooFewSamples { got: 1, want: 3 })
        );
    }

    #[test]
    fn a_ratio_needs_two_values_and_a_denominator_above_its_noise() {
        assert_eq!(ratio(&v(10.0), &v(4.0)).value(), Some(2.5));
        let noise = Figure::Value {
            value: 0.001,
            spread: 0.002,
        };
        assert!(matches!(
            ratio(&v(10.0), &noise),
            Figure::NotMeasured(NotMeasured::Denominator(_))
        ));
        let na = Figure::NotMeasured(NotMeasured::Negative { value: -1.0 });
        assert!(matches!(
            ratio(&v(10.0), &na),
            Figure::NotMeasured(NotMeasured::Denominator(_))
        ));
        assert!(matches!(
            ratio(&na, &v(10.0)),
            Figure::NotMeasured(NotMeasured::Numerator(_))
        ));
    }

    #[test]
    fn a_best_of_needs_as_many_samples_and_the_same_sanity_as_a_median() {
        assert_eq!(best_figure(&[12.0, 10.0, 11.0], 3, R).value(), Some(10.0));
        assert_eq!(
            best_figure(&[12.0, f64::NAN, 11.0], 3, R),
            Figure::NotMeasured(NotMeasured::TooFewSamples { got: 2, want: 3 })
        );
        assert!(matches!(
            best_figure(&[12.0, -1.0, 11.0], 3, R),
            Figure::NotMeasured(NotMeasured::Negative { .. })
        ));
        assert!(matches!(
            best_figure(&[12.0, 0.5, 11.0], 3, R),
            Figure::NotMeasured(NotMeasured::BelowResolution { .. })
        ));
    }

    #[test]
    fn a_figure_serializes_as_its_value_or_null_and_the_reason() {
        let f = Figure::Value {
            value: 2.5,
            spread: 0.5,
        };
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            serde_json::json!({ "value": 2.5, "spread": 0.5 })
        );
        let na = Figure::NotMeasured(NotMeasured::TooFewSamples { got: 1, want: 3 });
        assert_eq!(
            serde_json::to_value(&na).unwrap(),
            serde_json::json!({
                "value": null,
                "reason": "1 valid samples of the 3 the median needs"
            })
        );
    }

    #[test]
    fn only_measured_reasons_are_remeasured() {
        assert!(NotMeasured::Negative { value: -1.0 }.remeasurable());
        assert!(NotMeasured::TooFewSamples { got: 1, want: 3 }.remeasurable());
        assert!(!NotMeasured::Unavailable("no JIT".into()).remeasurable());
        assert!(!NotMeasured::Denominator("noise".into()).remeasurable());
    }

    /// A figure scaled to its column's unit gives the numbers of its reason
    /// in that unit too; reasons without numbers of the figure's unit stay.
    #[test]
    fn a_scaled_figure_gives_its_reason_in_the_new_unit() {
        let ns = Figure::NotMeasured(NotMeasured::BelowResolution {
            value: 89.0,
            resolution: 100.0,
        });
        assert_eq!(
            ns.scaled(1e-3).cell(|x| x.to_string()),
            "n/a (8.90e-2 is below 1.00e-1, the finest figure this measurement resolves)"
        );
        let noisy = Figure::NotMeasured(NotMeasured::WithinNoise {
            value: 2.0,
            spread: 6.0,
        });
        assert_eq!(
            noisy.scaled(100.0),
            Figure::NotMeasured(NotMeasured::WithinNoise {
                value: 200.0,
                spread: 600.0
            })
        );
        assert_eq!(
            Figure::NotMeasured(NotMeasured::Negative { value: -3.0 }).scaled(2.0),
            Figure::NotMeasured(NotMeasured::Negative { value: -6.0 })
        );
        let few = Figure::NotMeasured(NotMeasured::TooFewSamples { got: 1, want: 3 });
        assert_eq!(few.scaled(1e-3), few);
        assert_eq!(v(5.0).scaled(2.0), v(10.0));
    }
}
