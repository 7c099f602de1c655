//! Runs the Table 4 experiment: `cargo run --release -p ilp --example
//! table4 [llc-multiple]` (default 16).
fn main() {
    let mult = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(16);
    let rows = ilp::table4::run(&ilp::table4::Config::standard(mult), |s| eprintln!("{s}"));
    print!("{}", ilp::table4::markdown(&rows));
}
