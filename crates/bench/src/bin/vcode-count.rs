//! The callgrind workload of the vcode codegen benchmark, on its own.
//!
//! ```text
//! vcode-count virtual|fixed|empty|empty_framed|branchy_virtual|branchy_fixed|client_getreg|client_fixed [FUNCTIONS]
//! vcode-count counts          # vcode instructions per function of each mode
//! valgrind --tool=callgrind --toggle-collect=fastpath_bench_gen_virtual target/release/vcode-count virtual
//! ```
//!
//! Generates FUNCTIONS (default 1000) copies of the workload function;
//! see `fastpath_bench::callgrind` for what the toggle counts.

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "virtual".into());
    if mode == "counts" {
        // The vcode instructions (labels included) of each mode's function,
        // counted by the reference backend: the divisors of the counts.
        match fastpath_bench::callgrind::instruction_counts() {
            Ok(c) => {
                for (m, n) in c {
                    println!("{m} {n}");
                }
                return;
            }
            Err(e) => {
                eprintln!("vcode-count: {e}");
                std::process::exit(2);
            }
        }
    }
    let n = match args.next().map(|s| s.parse::<usize>()) {
        None => fastpath_bench::callgrind::FUNCS,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("vcode-count: bad function count: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = fastpath_bench::callgrind::child_main(&mode, n) {
        eprintln!("vcode-count: {e}");
        std::process::exit(2);
    }
}
