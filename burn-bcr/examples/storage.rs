//! BCRC's index data against CSR's and a dense bitmask's for projected weights:
//! `cargo run --release -p burn-bcr --example storage`. The weights are random
//! matrices (a centred sum of three uniforms, seed 2026) of the GRU and VGG-16 layer shapes,
//! projected at 10×, 20× and 100× in blocks of 4 × 16 and 16 × 64 and in strips of 4 whole rows;
//! the time of each projection is printed beside it.

use burn_bcr::pack::{IndexBytes, pack};
use burn_bcr::project::{View, project};
use burn_bcr::{Block, Level};
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn main() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
    println!(
        "| layer (out × K) | rate | block | patterns | BCRC index | CSR index | bitmask | BCRC vs CSR | projection |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for (name, out, k) in [
        ("GRU input", 1024, 152),
        ("GRU 512", 1024, 512),
        ("GRU hidden", 1024, 1024),
        ("VGG-16 conv 128", 128, 1152),
        ("VGG-16 conv 512", 512, 4608),
    ] {
        let data: Vec<f32> = (0..out * k)
            .map(|_| (0..3).map(|_| rng.random::<f32>()).sum::<f32>() - 1.5)
            .collect();
        let view = View::new(out, k, data).expect("finite weights");
        for rate in [10.0, 20.0, 100.0] {
            for block in [(4, 16), (16, 64), (4, k)] {
                let level = Level {
                    rate,
                    block: Block::new(block.0, block.1).expect("a block"),
                };
                let clock = Instant::now();
                let mask = project(&view, level).expect("a valid level");
                let seconds = clock.elapsed().as_secs_f64();
                let sizes = IndexBytes::of(&pack(&view, &mask).expect("a packed weight"));
                println!(
                    "| {name} ({out} × {k}) | {rate}× | {} | {} | {} | {} | {} | {:+.0} % | {seconds:.2} s |",
                    level.block,
                    sizes.patterns,
                    sizes.bcrc,
                    sizes.csr,
                    sizes.bitmask,
                    -100.0 * sizes.saving_vs_csr()
                );
            }
        }
    }
}
