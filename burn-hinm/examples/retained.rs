//! Retained saliency of none / OVW / Gyro at 75, 87.5 and 93.75 % on random matrices, and the
//! time of one Gyro search: `cargo run --release -p burn-hinm --example retained [ROWS COLS V]`.

use burn_hinm::gyro::{Method, search};
use burn_hinm::mask::Scores;
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("ROWS COLS V as numbers"))
        .collect();
    let (rows, cols, v) = match args[..] {
        [r, c, v] => (r, c, v),
        _ => (256, 512, 64),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
    // |w| of a Gaussian-like weight: the sum of three uniforms, centred
    let data: Vec<f64> = (0..rows * cols)
        .map(|_| ((0..3).map(|_| rng.random::<f64>()).sum::<f64>() - 1.5).abs())
        .collect();
    let scores = Scores::new(rows, cols, data).expect("finite scores");
    let total = scores.total();
    println!("{rows} × {cols}, V = {v}, |w| of a centred sum of three uniforms, seed 2026");
    println!("| total sparsity | none | OVW | Gyro | OVW search | Gyro search |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (vs, label) in [(0.5, "75 %"), (0.75, "87.5 %"), (0.875, "93.75 %")] {
        let mut row = format!("| {label} |");
        let mut seconds = Vec::new();
        for method in [Method::None, Method::Ovw, Method::Gyro] {
            let clock = Instant::now();
            let (_, kept) = search(&scores, v, vs, method, 1).expect("a valid level");
            seconds.push(clock.elapsed().as_secs_f64());
            row += &format!(" {:.4} |", kept.nm / total);
        }
        println!("{row} {:.2} s | {:.2} s |", seconds[1], seconds[2]);
    }
}
