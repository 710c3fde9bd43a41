//! Retained saliency of none / OVW / Gyro at 75, 87.5 and 93.75 % on random matrices, and the
//! time of each search:
//!
//! ```text
//! cargo run --release -p burn-hinm --example retained [ROWS COLS V [LEVEL METHOD]]
//! ```
//!
//! With `LEVEL` (75, 87.5 or 93.75 % total sparsity) and `METHOD` (none, ovw or gyro), only that
//! search runs, and its line ends with a fingerprint of the mask (a hash of its permutations and
//! its 2:4 patterns): two builds that print the same fingerprint found the same mask.

use burn_hinm::gyro::{Method, search};
use burn_hinm::mask::Scores;
use rand::{Rng, SeedableRng};
use std::hash::{Hash, Hasher};
use std::time::Instant;

/// The total sparsities of the table and their vector sparsities.
const LEVELS: [(&str, f64); 3] = [("75", 0.5), ("87.5", 0.75), ("93.75", 0.875)];

/// What the arguments ask for: the matrix and tile sizes, and the one search to run if any.
type Request = (usize, usize, usize, Option<(String, f64, Method)>);

fn parse(args: &[String]) -> Result<Request, String> {
    let number = |s: &String| {
        s.parse::<usize>()
            .map_err(|_| format!("`{s}` is not a whole number"))
    };
    let (rows, cols, v) = match args {
        [] => (256, 512, 64),
        [r, c, v] | [r, c, v, _, _] => (number(r)?, number(c)?, number(v)?),
        [_, _, _, _] => return Err("give LEVEL and METHOD together".into()),
        _ => return Err("give ROWS COLS V, or nothing".into()),
    };
    let only = match args {
        [_, _, _, level, method] => {
            let vs = LEVELS
                .iter()
                .find(|(l, _)| l == level)
                .ok_or_else(|| format!("unknown level `{level}`"))?
                .1;
            let method: Method = method.parse().map_err(|e| format!("{e}"))?;
            Some((level.clone(), vs, method))
        }
        _ => None,
    };
    Ok((rows, cols, v, only))
}

fn usage(why: &str) -> ! {
    eprintln!("error: {why}");
    eprintln!(
        "usage: retained [ROWS COLS V [LEVEL METHOD]]  (LEVEL: 75, 87.5 or 93.75; METHOD: none, ovw or gyro)"
    );
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (rows, cols, v, only) = parse(&args).unwrap_or_else(|e| usage(&e));
    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
    // |w| of a Gaussian-like weight: the sum of three uniforms, centred
    let data: Vec<f64> = (0..rows * cols)
        .map(|_| ((0..3).map(|_| rng.random::<f64>()).sum::<f64>() - 1.5).abs())
        .collect();
    let scores = Scores::new(rows, cols, data).unwrap_or_else(|e| usage(&e.to_string()));
    let total = scores.total();
    let run = |vs: f64, method: Method| {
        let clock = Instant::now();
        let (mask, kept) =
            search(&scores, v, vs, method, 1).unwrap_or_else(|e| usage(&e.to_string()));
        let seconds = clock.elapsed().as_secs_f64();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&mask.out_perm, &mask.columns, &mask.keep).hash(&mut h);
        (kept.nm / total, seconds, h.finish())
    };
    println!("{rows} × {cols}, V = {v}, |w| of a centred sum of three uniforms, seed 2026");
    if let Some((level, vs, method)) = only {
        let (kept, seconds, fingerprint) = run(vs, method);
        println!("| total sparsity | method | retained | search | fingerprint |");
        println!("|---|---|---:|---:|---|");
        println!("| {level} % | {method:?} | {kept:.6} | {seconds:.2} s | {fingerprint:016x} |");
        return;
    }
    println!("| total sparsity | none | OVW | Gyro | OVW search | Gyro search |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (label, vs) in LEVELS {
        let mut row = format!("| {label} % |");
        let mut seconds = Vec::new();
        for method in [Method::None, Method::Ovw, Method::Gyro] {
            let (kept, s, _) = run(vs, method);
            seconds.push(s);
            row += &format!(" {kept:.4} |");
        }
        println!("{row} {:.2} s | {:.2} s |", seconds[1], seconds[2]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn good_arguments_parse() {
        assert_eq!(parse(&args("")).unwrap().0, 256);
        let (r, c, v, only) = parse(&args("64 128 16 87.5 ovw")).unwrap();
        assert_eq!((r, c, v), (64, 128, 16));
        let (level, vs, method) = only.unwrap();
        assert_eq!((level.as_str(), vs, method), ("87.5", 0.75, Method::Ovw));
        assert!(parse(&args("64 128 16")).unwrap().3.is_none());
    }

    #[test]
    fn bad_arguments_are_errors() {
        for (given, says) in [
            ("1 2", "ROWS COLS V"),
            ("1 2 3 4 5 6", "ROWS COLS V"),
            ("64 x 16", "`x` is not a whole number"),
            ("64 64 -4", "`-4` is not a whole number"),
            ("64 64 16 75", "LEVEL and METHOD together"),
            ("64 64 16 80 gyro", "unknown level `80`"),
            ("64 64 16 75 foo", "foo"),
        ] {
            let err = parse(&args(given)).unwrap_err();
            assert!(err.contains(says), "{given}: {err}");
        }
    }
}
