//! The block-size tuner (GRIM's Listing 1) on the host path, per layer of VGG-16 (CIFAR-10,
//! batch 1: M = the layer's output pixels) and of a 2 × 256 GRU over 39 MFCC features (batch 32
//! per step): `cargo run --release -p burn-bcr --example tune [RATE] [THRESHOLD]` (defaults 10
//! and 1.10). Candidates: blocks of 1, 2, 4, 8, 16 and 32 rows by 16 columns, in that order;
//! each synthesized layer is timed as the best of 20 calls of the host BCRC product.

use burn_bcr::Block;
use burn_bcr::pack::pack;
use burn_bcr::tune::find_opt_blk;
use cubecl_kernels::bcrc::reference::spmm;
use std::time::Instant;

fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("RATE and THRESHOLD as numbers"))
        .collect();
    let rate = args.first().copied().unwrap_or(10.0);
    let threshold = args.get(1).copied().unwrap_or(1.10);
    let sizes: Vec<Block> = [1, 2, 4, 8, 16, 32]
        .map(|r| Block::new(r, 16).expect("a block"))
        .to_vec();
    // (name, M, out, K)
    let mut layers: Vec<(String, usize, usize, usize)> = Vec::new();
    let (mut c_in, mut side) = (3, 32);
    for (i, c) in [
        64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512,
    ]
    .into_iter()
    .enumerate()
    {
        if c == 0 {
            side /= 2;
            continue;
        }
        layers.push((format!("vgg16 layer {i}"), side * side, c, c_in * 9));
        c_in = c;
    }
    for (name, k) in [
        ("gru1 input", 39),
        ("gru1 hidden", 256),
        ("gru2 input", 256),
        ("gru2 hidden", 256),
    ] {
        // the three gates' weights of one kind together: 768 × K
        layers.push((name.to_string(), 32, 768, k));
    }
    println!(
        "rate {rate}×, threshold {threshold}: Listing 1 on the host BCRC product (best of 20)"
    );
    println!(
        "| layer | M × K → out | chosen | latency per candidate (µs, in order; the last failed the threshold unless all passed) |"
    );
    println!("|---|---|---|---|");
    for (name, m, out, k) in layers {
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 37 % 97) as f32 - 48.0) / 48.0)
            .collect();
        let tuned = find_opt_blk(out, k, rate, &sizes, threshold, |view, mask| {
            let w = pack(view, mask).expect("a packed layer");
            (0..20)
                .map(|_| {
                    let t = Instant::now();
                    std::hint::black_box(spmm(&x, m, &w));
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        });
        match tuned {
            Ok(t) => {
                let times: Vec<String> = t
                    .trials
                    .iter()
                    .map(|tr| format!("{}: {:.0}", tr.block, tr.seconds * 1e6))
                    .collect();
                println!(
                    "| {name} | {m} × {k} → {out} | {} | {} |",
                    t.block,
                    times.join(", ")
                );
            }
            Err(e) => println!("| {name} | {m} × {k} → {out} | — | {e} |"),
        }
    }
}
