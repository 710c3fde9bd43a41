//! The host GEMM against the textbook product, its split-K order, its vector loops against the
//! scalar ones bit for bit, and the table expansion.

use super::*;
use crate::approx::LutTable;
use crate::approx::host::{binades, mitchell_significand, multiply};

/// [`super::gemm_impl`] of a row-major rhs.
fn gemm_impl(
    lhs: &[f32],
    rhs: &[f32],
    dims: [usize; 4],
    mul: &ApproxMultiply,
    simd: bool,
    expansion: bool,
) -> Vec<f32> {
    let rhs = Rhs::new(rhs, false, [dims[2], dims[3]]);
    super::gemm_impl(lhs, rhs, dims, mul, simd, expansion)
}

/// `[batch, k, n]` row-major as `[batch, n, k]` row-major.
fn transpose(x: &[f32], [batch, k, n]: [usize; 3]) -> Vec<f32> {
    (0..batch * n * k)
        .map(|i| {
            let (bt, j, kk) = (i / (n * k), i / k % n, i % k);
            x[(bt * k + kk) * n + j]
        })
        .collect()
}

/// The row count from which every build of the expansion takes a product at `bits`, with
/// `lanes` columns on the expanded side.
fn min_rows(bits: u32, lanes: usize) -> usize {
    // the most any build needs, so that every build the tests run expands
    [
        expand::Build::Avx512,
        expand::Build::Avx2,
        expand::Build::Portable,
    ]
    .into_iter()
    .map(|build| expand::min_rows(bits, build, lanes))
    .max()
    .unwrap_or(1)
}

#[test]
fn plain_gemm_is_the_textbook_product() {
    let lhs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // [1, 2, 3]
    let rhs = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]; // [1, 3, 2]
    let out = gemm(&lhs, &rhs, [1, 2, 3, 2], &ApproxMultiply::Plain);
    assert_eq!(out, vec![4.0, 5.0, 10.0, 11.0]);
}

#[test]
fn split_k_sums_chunks_in_order() {
    // 2 × 3 outputs, k = 3000: cut into chunks; integers keep every sum exact
    let (m, k, n) = (2, 3000, 3);
    assert!(split_k([1, m, k, n]) < k);
    let lhs: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let rhs: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let got = gemm(&lhs, &rhs, [1, m, k, n], &ApproxMultiply::Plain);
    let want: Vec<f32> = (0..m * n)
        .map(|o| {
            (0..k)
                .map(|kk| lhs[o / n * k + kk] * rhs[kk * n + o % n])
                .sum()
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        got,
        gemm_impl(
            &lhs,
            &rhs,
            [1, m, k, n],
            &ApproxMultiply::Plain,
            false,
            true
        )
    );
}

/// Mantissa sums at and around every edge of MBM's cases (`host::mbm`: the carry, the
/// correction's overflow without one, the half correction's fit with one), one product an
/// output (`k = 1`), on every vector path (AVX-512 pairs, an AVX2 panel, the scalar tail):
/// the definition's bits. Random operands reach an edge's exact value only by chance.
#[test]
fn mbm_vector_loops_keep_the_edges_of_its_cases() {
    use crate::approx::{MANT_MASK, MBM_CORRECTION as C};
    let one = |key: u32| f32::from_bits(0x3f80_0000 | key);
    let edges = [1 << 23, (1 << 23) - C, (1 << 24) - C / 2];
    let a_keys = [0, 1, C / 2, C, 1 << 22, MANT_MASK - 1, MANT_MASK];
    let mut b_keys: Vec<u32> = a_keys
        .iter()
        .flat_map(|&ka| {
            edges
                .iter()
                .flat_map(move |&e| (e - 2..=e + 2).filter_map(move |s| s.checked_sub(ka)))
        })
        .filter(|&kb| kb <= MANT_MASK)
        .collect();
    b_keys.sort_unstable();
    b_keys.dedup();
    // three AVX-512 pairs' worth and an odd panel and a tail at least
    while b_keys.len() % 8 != 3 || b_keys.len() < 59 {
        b_keys.push(b_keys.len() as u32 * 77_777 % MANT_MASK);
    }
    let lhs: Vec<f32> = a_keys.iter().map(|&k| one(k)).collect();
    let rhs: Vec<f32> = b_keys.iter().map(|&k| -one(k) * 4.0).collect();
    let (m, n) = (lhs.len(), rhs.len());
    let got = gemm_impl(
        &lhs,
        &rhs,
        [1, m, 1, n],
        &ApproxMultiply::Mbm,
        avx2_available(),
        false,
    );
    for (i, &a) in lhs.iter().enumerate() {
        for (j, &b) in rhs.iter().enumerate() {
            let want = multiply(a, b, &ApproxMultiply::Mbm);
            assert_eq!(got[i * n + j].to_bits(), want.to_bits(), "{a} · {b}");
        }
    }
}

#[test]
fn vector_and_scalar_loops_agree_bit_for_bit() {
    let table: Vec<f32> = (0..1u32 << 10)
        .map(|i| mitchell_significand((i >> 5) << 18, (i & 31) << 18))
        .collect();
    let kinds = [
        ApproxMultiply::Plain,
        ApproxMultiply::Mitchell,
        ApproxMultiply::Mbm,
        ApproxMultiply::Lut(LutTable::new(5, table)),
    ];
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let u = (s >> 40) as f32 / (1u64 << 24) as f32;
        (u * 2.0 - 1.0) * 2f32.powi(((s >> 20) % 16) as i32 - 8)
    };
    let mut lhs: Vec<f32> = (0..2 * 21 * 300).map(|_| next()).collect();
    lhs[5] = f32::INFINITY;
    lhs[700] = f32::NAN;
    lhs[9] = 1e-40;
    assert!(
        avx2_available() || !cfg!(target_arch = "x86_64"),
        "CI machines have AVX2"
    );
    // k spans two k blocks; n = 37: four 8-lane panels (two AVX-512 pairs) and a scalar
    // tail; n = 29: three panels (a pair, one AVX2 panel) and a tail
    for n in [37, 29] {
        let dims = [2, 21, 300, n];
        let rhs: Vec<f32> = (0..2 * 300 * n).map(|_| next()).collect();
        for mul in &kinds {
            let scalar = gemm_impl(&lhs, &rhs, dims, mul, false, false);
            let vector = gemm_impl(&lhs, &rhs, dims, mul, avx2_available(), false);
            for (i, (a, b)) in scalar.iter().zip(&vector).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{mul:?} n = {n} [{i}]: {a} vs {b}"
                );
            }
            // and every entry equals a plain triple loop over scalar multiplies
            for (row, got_row) in scalar.chunks(n).enumerate() {
                let (bt, i) = (row / 21, row % 21);
                for (col, &got) in got_row.iter().enumerate() {
                    let mut want = 0f32;
                    for kk in 0..300 {
                        want += multiply(
                            lhs[(bt * 21 + i) * 300 + kk],
                            rhs[(bt * 300 + kk) * n + col],
                            mul,
                        );
                    }
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{mul:?} [{row}, {col}]: {got} vs {want}"
                    );
                }
            }
        }
    }
}

/// The product by the table expansion where it takes the operands, `Build::of` choosing at
/// most `build` (the portable one where `build` is).
fn expanded_by(
    build: expand::Build,
    lhs: &[f32],
    rhs: &[f32],
    dims: [usize; 4],
    mul: &ApproxMultiply,
) -> Vec<f32> {
    let simd = build != expand::Build::Portable;
    expand::with_widest(build, || gemm_impl(lhs, rhs, dims, mul, simd, true))
}

fn mitchell_table(bits: u32) -> LutTable {
    match crate::approx::host::mitchell_table(bits) {
        ApproxMultiply::Lut(table) => table,
        _ => unreachable!("a LUT multiply"),
    }
}

#[test]
fn the_table_expansion_gives_the_per_product_bits() {
    // every table row width of the AVX-512 build (16 entries and fewer, 32, 64, 128, 256)
    for bits in [3, 4, 5, 6, 7, 8] {
        let mul = ApproxMultiply::Lut(mitchell_table(bits));
        let ApproxMultiply::Lut(table) = &mul else {
            unreachable!()
        };
        // rows enough to expand, not a multiple of the rows a block adds at once; k not a
        // multiple of the steps (each remainder); n a partial last panel; zeros, subnormals
        // and exponents far apart
        let rows = min_rows(bits, 45).max(40) + 1;
        let k = 37 + bits as usize % 3;
        let dims = [2, rows, k, 45];
        let mut lhs = crate::approx::host::binades(2 * rows * k, 7 + u64::from(bits), 60);
        let mut rhs = crate::approx::host::binades(2 * k * 45, 11, 60);
        lhs[3] = 0.0;
        lhs[4] = -0.0;
        lhs[8] = 1e-40;
        rhs[5] = -3e-39;
        rhs[6] = 0.0;
        lhs[9] = 1e30;
        rhs[9] = 1e-30;
        assert!(
            expand::expands(&lhs, &rhs, [rows, min_rows(bits, 45)], 45, table).is_some(),
            "m = {bits}"
        );
        // every build the CPU runs (the portable one, AVX2, AVX-512, each SIMD build with its
        // direct way for few rows; AVX-512's with and without the table's bytes) gives the
        // per-product bits
        let every_build = |lhs: &[f32], rhs: &[f32], dims: [usize; 4], what: &str| {
            let direct = gemm_impl(lhs, rhs, dims, &mul, avx2_available(), false);
            for build in expand::builds_here() {
                for bytes in [true, false] {
                    if !bytes && build != expand::Build::Avx512 {
                        continue;
                    }
                    let expanded = expand::with_byte_tables(bytes, || {
                        expanded_by(build, lhs, rhs, dims, &mul)
                    });
                    for (i, (a, b)) in direct.iter().zip(&expanded).enumerate() {
                        assert_eq!(
                            a.to_bits(),
                            b.to_bits(),
                            "m = {bits}, {what}, {build:?}, bytes {bytes} [{i}]: {a} vs {b}"
                        );
                    }
                }
            }
        };
        every_build(&lhs, &rhs, dims, "rhs expanded");
        // a panel of one partial vector (LeNet-5's 6 channels: one vector of 8 with AVX2)
        let six = crate::approx::host::binades(2 * k * 6, 43, 60);
        every_build(&lhs, &six, [2, rows, k, 6], "six columns");
        // fewer rows than columns: the lhs expanded, through the transposed product
        let wide = [2, 20, 37, min_rows(bits, 20).max(40) + 3];
        let lhs = crate::approx::host::binades(2 * 20 * 37, 13, 60);
        let rhs = crate::approx::host::binades(2 * 37 * wide[3], 17, 60);
        let sum = expand::expands(&rhs, &lhs, [wide[3], min_rows(bits, 20)], 20, table);
        assert_eq!(sum, Some(expand::Sum::Fused), "m = {bits}");
        every_build(&lhs, &rhs, wide, "lhs expanded");
        // few rows against a partial vector and against a partial pair (with AVX-512 and with
        // AVX2 they run without expanded tables, `expand::direct`, the lanes read in place, in
        // chunks of steps with AVX-512: `k` past two of them, not a whole number), each way
        // round; with AVX2 also the most rows that run directly
        let few = ((1usize << bits) / 4).max(1);
        let most = expand::min_rows(bits, expand::Build::Avx2, 20) - 1;
        assert!(expand::direct(few, bits, expand::Build::Avx512, 20));
        assert!(expand::direct(most, bits, expand::Build::Avx2, 20));
        assert!(!expand::direct(most + 1, bits, expand::Build::Avx2, 20));
        for (few, lanes) in [(few, 9), (few, 20), (most, 20), (5, 6)] {
            let k = 150;
            let lhs = crate::approx::host::binades(2 * few * k, 29, 60);
            let rhs = crate::approx::host::binades(2 * k * lanes, 31, 60);
            every_build(&lhs, &rhs, [2, few, k, lanes], "few lhs rows");
            let (lhs, rhs) = (
                crate::approx::host::binades(2 * lanes * k, 37, 60),
                crate::approx::host::binades(2 * k * few, 41, 60),
            );
            every_build(&lhs, &rhs, [2, lanes, k, few], "few rhs columns");
        }
        if bits == 7 {
            // packed rows past a task's cached sums (256 KiB: 4096 rows of one vector), split
            // into blocks of rows
            let tall = [1, 16, 9, 4096 + 5];
            let lhs = crate::approx::host::binades(16 * 9, 19, 60);
            let rhs = crate::approx::host::binades(9 * tall[3], 23, 60);
            every_build(&lhs, &rhs, tall, "rows in blocks");
        }
        // through the public entry, split along a long k as the kernel splits it
        let long = [1, rows, 3000, 16];
        assert!(split_k(long) < 3000);
        let (lhs, rhs) = (
            crate::approx::host::binades(rows * 3000, 3, 20),
            crate::approx::host::binades(3000 * 16, 5, 20),
        );
        let want: Vec<f32> = {
            let chunk = split_k(long);
            let parts: Vec<Vec<f32>> = (0..3000usize.div_ceil(chunk))
                .map(|s| {
                    let (k0, k1) = (s * chunk, ((s + 1) * chunk).min(3000));
                    let a: Vec<f32> = lhs.chunks(3000).flat_map(|r| &r[k0..k1]).copied().collect();
                    let b = rhs[k0 * 16..k1 * 16].to_vec();
                    gemm_impl(&a, &b, [1, rows, k1 - k0, 16], &mul, false, false)
                })
                .collect();
            (0..rows * 16)
                .map(|i| parts.iter().fold(0.0f32, |acc, p| acc + p[i]))
                .collect()
        };
        let got = gemm(&lhs, &rhs, long, &mul);
        assert!(
            got.iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "m = {bits}: split k"
        );
    }
}

#[test]
fn operands_outside_the_band_keep_the_per_product_path() {
    let table = mitchell_table(5);
    let (rows, n) = (64, 8);
    let at = [rows, min_rows(5, n)];
    let lhs = crate::approx::host::binades(rows * 4, 1, 10);
    let rhs = crate::approx::host::binades(4 * n, 2, 10);
    assert!(expand::expands(&lhs, &rhs, at, n, &table).is_some());
    // too few rows for the expansion to pay
    let few = min_rows(5, n) - 1;
    let at_few = [few, min_rows(5, n)];
    assert!(expand::expands(&lhs[..few * 4], &rhs, at_few, n, &table).is_none());
    for bad in [f32::INFINITY, f32::NAN, 2f32.powi(127), -3e38] {
        let mut l = lhs.clone();
        l[17] = bad;
        assert!(expand::expands(&l, &rhs, at, n, &table).is_none(), "{bad}");
        let mut r = rhs.clone();
        r[3] = bad;
        assert!(expand::expands(&lhs, &r, at, n, &table).is_none(), "{bad}");
    }
    // a side without a normal value (zeros) leaves the other side's bounds in force: an
    // expanded entry past f32::MAX times a zero scale would be a NaN, not the per-product zero
    let zeros = vec![0.0; rows * 4];
    let mut r = rhs.clone();
    r[3] = -3e38;
    assert!(expand::expands(&zeros, &r, at, n, &table).is_none());
    let lut = ApproxMultiply::Lut(table.clone());
    let got = gemm(&zeros, &r, [1, rows, 4, n], &lut);
    let want = gemm_impl(&zeros, &r, [1, rows, 4, n], &lut, false, false);
    assert!(
        got.iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    // an entry below 1 makes the smallest normal scale's intermediate subnormal
    let mut small: Vec<f32> = table.significands().to_vec();
    small[1] = 0.75;
    let small = LutTable::new(5, small);
    let mut l = lhs.clone();
    l[0] = f32::MIN_POSITIVE;
    assert!(expand::expands(&l, &rhs, at, n, &table).is_some());
    assert!(expand::expands(&l, &rhs, at, n, &small).is_none());
    // and the product of such operands is the per-product one, through the public entry
    let mul = ApproxMultiply::Lut(small);
    let mut l = lhs.clone();
    l[17] = f32::INFINITY;
    let got = gemm(&l, &rhs, [1, rows, 4, n], &mul);
    let want = gemm_impl(&l, &rhs, [1, rows, 4, n], &mul, false, false);
    assert!(
        got.iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
    );
}

/// Products past the normal range (each operand in the band) keep a separate multiply and add
/// ([`expand::Sum::Separate`]): the rounded product is added, as on the per-product path. Two
/// products of `±2^128` overflow to `+inf` and `-inf`, whose sum is a NaN; a fused
/// multiply-add would round `+inf + -2^128` to `+inf` instead.
#[test]
fn products_past_the_normal_range_are_added_separately() {
    let bits = 7;
    let table = mitchell_table(bits);
    let (k, n) = (8, 20);
    let rows = min_rows(bits, n).max(16) + 3;
    let at = [rows, min_rows(bits, n)];
    let lhs = crate::approx::host::binades(rows * k, 3, 10);
    let rhs = crate::approx::host::binades(k * n, 5, 10);
    assert_eq!(
        expand::expands(&lhs, &rhs, at, n, &table),
        Some(expand::Sum::Fused)
    );
    // operands near 2^-70 (in the band) whose products are subnormal
    let tiny = |x: &[f32]| x.iter().map(|v| v * 2f32.powi(-70)).collect::<Vec<f32>>();
    let sum = expand::expands(&tiny(&lhs), &tiny(&rhs), at, n, &table);
    assert_eq!(sum, Some(expand::Sum::Separate));
    // operands near 2^64 whose products overflow: row 0 against column 3
    let (mut big_l, mut big_r) = (lhs.clone(), rhs.clone());
    big_l[..2].copy_from_slice(&[2f32.powi(64); 2]);
    (big_r[3], big_r[n + 3]) = (2f32.powi(64), -(2f32.powi(64)));
    let sum = expand::expands(&big_l, &big_r, at, n, &table);
    assert_eq!(sum, Some(expand::Sum::Separate));
    let mul = ApproxMultiply::Lut(table);
    for (l, r, what) in [
        (tiny(&lhs), tiny(&rhs), "subnormal products"),
        (big_l, big_r, "overflowing products"),
    ] {
        let want = gemm_impl(&l, &r, [1, rows, k, n], &mul, false, false);
        if what == "overflowing products" {
            assert!(want[3].is_nan(), "+inf + -inf");
        }
        for build in expand::builds_here() {
            let got = expanded_by(build, &l, &r, [1, rows, k, n], &mul);
            for (i, (a, b)) in want.iter().zip(&got).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{what}, {build:?} [{i}]: {a} vs {b}"
                );
            }
        }
    }
}

/// A transposed rhs read in place gives the bits of the row-major copy on every path: the
/// table expansion with either side packed, the per-product LUT path (too few rows to
/// expand), the FP32-width models' vector loops (AVX-512 pairs, an odd panel, a tail), the
/// plain product, and a long `k` split into chunks.
#[test]
fn a_transposed_rhs_gives_the_bits_of_its_row_major_copy() {
    let lut = ApproxMultiply::Lut(mitchell_table(7));
    let cases: [(&str, [usize; 4], &ApproxMultiply); 8] = [
        ("lut, lhs packed", [2, 70, 37, 45], &lut),
        ("lut, rhs packed", [1, 16, 37, 150], &lut),
        ("lut, direct", [2, 5, 37, 7], &lut),
        ("lut, per product", [2, 3, 37, 3], &lut),
        ("lut, split k", [1, 16, 3000, 20], &lut),
        ("mbm", [2, 5, 37, 59], &ApproxMultiply::Mbm),
        (
            "mitchell, split k",
            [1, 6, 3000, 27],
            &ApproxMultiply::Mitchell,
        ),
        ("plain", [1, 3, 37, 19], &ApproxMultiply::Plain),
    ];
    for (what, dims, mul) in cases {
        let [batch, m, k, n] = dims;
        let lhs = binades(batch * m * k, 21, 30);
        let rhs = binades(batch * k * n, 23, 30);
        let want = gemm(&lhs, &rhs, dims, mul);
        let got = gemm_nt(&lhs, &transpose(&rhs, [batch, k, n]), dims, mul);
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (a, b)) in want.iter().zip(&got).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{what} [{i}]: {a} vs {b}");
        }
    }
    // the cases reach the paths they name
    assert!(split_k([1, 16, 3000, 20]) < 3000);
    assert!(150 >= min_rows(7, 16) && 70 >= min_rows(7, 45) && 7 < min_rows(7, 5));
    let avx512 = expand::Build::Avx512;
    assert!(expand::direct(5, 7, avx512, 7) && !expand::direct(33, 7, avx512, 7));
}

/// The plan packs the side that costs less (`expand::step_cost`, AVX-512 build).
#[test]
fn the_plan_packs_the_cheaper_side() {
    let cost = |rows, lanes| expand::step_cost(rows, lanes, 7, expand::Build::Avx512);
    // LeNet-5's conv1 weight gradient: its 6 output channels packed (run directly) rather
    // than its 25 taps against 6 lanes
    assert!(cost(6, 25).is_some() && cost(6, 25) < cost(25, 6));
    // ResNet-18-w16's first-stage weight gradient: the 144 taps packed, expanded
    assert!(cost(144, 16) < cost(16, 144));
    // under 4 lanes nothing runs directly, and few rows do not pay for the expansion
    assert_eq!(cost(3, 3), None);
    assert_eq!(cost(40, 3), None);
    // the AVX2 build: fewer rows than 2^m / 2 run directly (a gather a row and 8 lanes), so
    // LeNet-5's conv1 weight gradient packs its 6 output channels against the 25 taps
    let avx2 = |rows, lanes| expand::step_cost(rows, lanes, 7, expand::Build::Avx2);
    assert!(avx2(6, 25).is_some() && avx2(6, 25) < avx2(25, 6));
    assert!(avx2(63, 25).is_some() && avx2(64, 25).is_some());
    assert_eq!(avx2(40, 3), None);
    // and a long side against few rows expands rather than gathering for each of them
    assert!(avx2(2000, 6) < avx2(6, 2000));
    // the portable build: no direct way, 2^m / 2 rows
    assert_eq!(expand::step_cost(6, 25, 7, expand::Build::Portable), None);
    assert!(expand::step_cost(64, 25, 7, expand::Build::Portable).is_some());
}

/// The expansion's row threshold weighs the panel's live lanes (`expand::min_rows`).
#[test]
fn the_expansion_threshold_weighs_the_live_lanes() {
    // whole vectors: 2^m / 8
    assert_eq!(expand::min_rows(7, expand::Build::Avx512, 16), 16);
    assert_eq!(expand::min_rows(7, expand::Build::Avx512, 32), 16);
    assert_eq!(expand::min_rows(7, expand::Build::Avx512, 1000), 16);
    // a partial vector or pair: LeNet-5's 6 channels, 20 columns
    assert_eq!(expand::min_rows(7, expand::Build::Avx512, 6), 43);
    assert_eq!(expand::min_rows(7, expand::Build::Avx512, 20), 26);
    // never below 8; the AVX2 and portable builds 2^m / 2
    assert_eq!(expand::min_rows(3, expand::Build::Avx512, 16), 8);
    for build in [expand::Build::Avx2, expand::Build::Portable] {
        assert_eq!(expand::min_rows(7, build, 16), 64);
        assert_eq!(expand::min_rows(7, build, 6), 64);
    }
}

/// The band check's exponent scan (`expand::exponent_range`, vectorised) against its
/// definition: normal values only for the smallest, every value for the largest.
#[test]
fn the_exponent_scan_finds_the_normal_range() {
    let want = |x: &[f32]| {
        let e = |v: &f32| (v.to_bits() >> 23) & 0xff;
        let lo = x.iter().map(e).filter(|&e| e != 0).min().unwrap_or(255);
        (lo, x.iter().map(e).max().unwrap_or(0))
    };
    let base = binades(200_003, 29, 60);
    let specials = [
        0.0,
        -0.0,
        1e-40,
        -1e-45,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::INFINITY,
    ];
    let mut cases: Vec<Vec<f32>> = vec![
        Vec::new(),
        vec![0.0; 70],
        vec![1e-40; 33],
        vec![f32::NAN],
        base.clone(),
    ];
    for (i, &special) in specials.iter().enumerate() {
        // one special value at a place no whole vector or chunk starts at
        let mut x = base.clone();
        let at = (i * 65_537 + 13) % x.len();
        x[at] = special;
        cases.push(x);
        // the only normal value in the last, partial vector of zeros
        let mut x = vec![0.0f32; 131_075];
        x[131_074] = if special == 0.0 { 3.0 } else { special };
        cases.push(x);
    }
    for (i, x) in cases.iter().enumerate() {
        assert_eq!(expand::exponent_range(x), want(x), "case {i}");
    }
}
