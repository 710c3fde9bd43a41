use burn::backend::NdArray;
use burn::prelude::*;
use cubecl_kernels::hinm::reference;
use cubecl_kernels::testing::{random_packed, uniform};
use std::time::Instant;
fn main() {
    let shapes = [
        ("l3", 196usize, 2304usize, 256usize),
        ("l4", 49, 4608, 512),
        ("fc1", 197, 384, 1536),
        ("fc2", 197, 1536, 384),
    ];
    let only = std::env::args().nth(1);
    for (name, m, k, out) in shapes {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let x = uniform(m * k, 3);
        let a = uniform(m * k, 5);
        let b = uniform(k * out, 4);
        let dev = Default::default();
        let at = Tensor::<NdArray, 2>::from_data(TensorData::new(a.clone(), [m, k]), &dev);
        let bt = Tensor::<NdArray, 2>::from_data(TensorData::new(b.clone(), [k, out]), &dev);
        let mut best_d = f64::MAX;
        for _ in 0..1000 {
            let t = Instant::now();
            std::hint::black_box(at.clone().matmul(bt.clone()).into_data());
            best_d = best_d.min(t.elapsed().as_secs_f64());
        }
        let w = random_packed(out, k, 64, (k / 2) / 4 * 4, 1);
        let mut best = f64::MAX;
        for _ in 0..1000 {
            let t = Instant::now();
            std::hint::black_box(reference::spmm(&x, m, &w));
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{name}: dense {:.3} ms  75% {:.3} ms",
            best_d * 1e3,
            best * 1e3
        );
    }
}
