//! Prints the generated loop of a Table 4 pipeline.
fn main() {
    use ilp::Step::*;
    let which = std::env::args().nth(1).unwrap_or_default();
    let steps = match which.as_str() {
        "crc" => vec![Copy, Crc32],
        "swap" => vec![Copy, Checksum, Bswap32],
        _ => vec![Copy, Checksum],
    };
    println!("{}", ilp::Pipeline::new(&steps).unwrap().disassemble());
}
