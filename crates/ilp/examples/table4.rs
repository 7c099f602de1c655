//! Runs the Table 4 experiment: `cargo run --release -p ilp --example
//! table4 [llc-multiple | quick | cache]` (default 16; `cache`: only the
//! in-cache rows).
fn main() {
    let arg = std::env::args().nth(1).unwrap_or_default();
    let cfg = if arg == "quick" {
        ilp::table4::Config::quick()
    } else if arg == "cache" {
        ilp::table4::Config::in_cache()
    } else {
        ilp::table4::Config::standard(arg.parse().unwrap_or(16))
    };
    let rows = ilp::table4::run(&cfg, |s| eprintln!("{s}"));
    print!("{}", ilp::table4::markdown(&rows));
}
