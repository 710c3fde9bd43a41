//! The host LUT GEMM by table expansion: no table lookup per product.
//!
//! With an `m`-bit table, an lhs value has one of `2^m` mantissa keys. So for each step `kk`
//! along `k` and a panel of [`WIDTH`] output columns, the table is expanded once against that
//! row of the rhs: `T[ma][l] = LUT[(ma << m) | mb(kk, l)] · sb(kk, l)`, every lhs mantissa `ma`
//! against the panel's `WIDTH` rhs values. Then every output row `i` adds
//! `sa(i, kk) · T[ma(i, kk)]`: a contiguous multiply and add over the panel's columns, with no
//! per-product gather. Expanding costs `2^m · WIDTH` products per step and panel, against
//! `rows · WIDTH` products of work, so it pays when the rows far outnumber `2^m`
//! ([`expands`]).
//!
//! **Bit-identical to the per-product path.** There a product is `(LUT · sa) · sb`, here
//! `sa · (LUT · sb)`. The scales are powers of two (or zero), so both round the same real value
//! once, provided neither `LUT · sa` nor `LUT · sb` leaves the normal range (a subnormal or an
//! overflowed intermediate would be rounded first). [`expands`] checks that for every operand
//! against the table's smallest and largest non-zero entry; a matrix with an operand outside the
//! band (a magnitude near `2^127`, an infinity, a NaN) takes the per-product path whole. The
//! sum runs over `kk` in order from `+0`, as there.
//!
//! When the lhs has fewer rows than the rhs has columns, the caller expands the lhs instead:
//! the transposed product `Cᵀ = Bᵀ · Aᵀ`, each product `(LUT · sb) · sa`, the same bits inside
//! the band (its table in [`by_rhs_key`]'s layout is the table itself).

use crate::approx::LutTable;
use rayon::prelude::*;

/// Output columns of a panel (one 512-bit vector, two 256-bit ones).
pub(super) const WIDTH: usize = 16;
/// Steps along `k` expanded together (each output row then adds four steps while its sums
/// stay in registers).
const STEPS: usize = 4;
/// Rows the expansion is shared by must be at least this many times `2^m`.
const ROWS_PER_KEY: usize = 2;
/// Table widths the expansion runs at (a step's expanded table: `2^m · WIDTH` f32, 16 KiB at
/// `m = 8`).
const MAX_BITS: u32 = 8;

/// Whether a `[batch, rows, k] · [batch, k, n]` product under `table` takes the expansion:
/// enough rows for the expansion to pay, a narrow enough table, and every operand inside the
/// band where the two orders of multiplication give the same bits (see the module docs).
pub(super) fn expands(lhs: &[f32], rhs: &[f32], rows: usize, n: usize, table: &LutTable) -> bool {
    let bits = table.bits();
    if bits > MAX_BITS || rows < ROWS_PER_KEY << bits || n == 0 {
        return false;
    }
    let (lo, hi) = table
        .significands()
        .iter()
        .map(|s| s.abs())
        .filter(|&s| s != 0.0)
        .fold((f64::INFINITY, 0f64), |(lo, hi), s| {
            (lo.min(f64::from(s)), hi.max(f64::from(s)))
        });
    if !lo.is_finite() {
        // an all-zero table: every product is ±0 in both orders
        return true;
    }
    // a scale s = ±2^e (the value's sign and exponent) is safe when lo·|s| is normal and
    // hi·|s| is finite; zero and subnormal values have scale ±0, always safe
    let (min_normal, max_finite) = (f64::from(f32::MIN_POSITIVE), f64::from(f32::MAX));
    let safe = |x: &f32| {
        let scale = f32::from_bits(x.to_bits() & 0xff80_0000).abs();
        if !scale.is_finite() {
            return false;
        }
        let scale = f64::from(scale);
        scale == 0.0 || (lo * scale >= min_normal && hi * scale <= max_finite)
    };
    lhs.par_iter().all(safe) && rhs.par_iter().all(safe)
}

/// `table`'s entries with the rhs key first (`[mb][ma]`, a rhs key's `2^m` entries contiguous):
/// the layout [`gemm`] expands from. For the transposed product `Cᵀ = Bᵀ · Aᵀ`, whose rhs key
/// is the lhs key of `C`, that layout is `table` itself.
pub(super) fn by_rhs_key(table: &LutTable) -> Vec<f32> {
    let width = 1usize << table.bits();
    let lut = table.significands();
    (0..width * width)
        .map(|at| lut[((at % width) << table.bits()) | (at / width)])
        .collect()
}

/// The product by expansion: `lhs` decoded keys (each `ma << m`) and scales `[batch, rows, k]`,
/// `rhs` keys and scales `[batch, k, n]`, both row-major; `out: [batch, rows, n]`; the `m`-bit
/// table in the layout of [`by_rhs_key`] (`by_rhs[mb · 2^m + ma]` multiplies `ma` by `mb`).
pub(super) fn gemm(
    (a_keys, a_scales): (&[u32], &[f32]),
    (b_keys, b_scales): (&[u32], &[f32]),
    [batch, rows, k, n]: [usize; 4],
    (by_rhs, bits): (&[f32], u32),
) -> Vec<f32> {
    let panels = n.div_ceil(WIDTH);
    // tasks: (batch entry, panel, block of rows); rows split only when the panels alone leave
    // threads idle, never below `ROWS_PER_KEY · 2^m` rows a block
    let threads = rayon::current_num_threads();
    let splits = (2 * threads)
        .div_ceil(batch * panels)
        .min(rows / (ROWS_PER_KEY << bits))
        .max(1);
    let block = rows.div_ceil(splits);
    let blocks = rows.div_ceil(block);
    let parts: Vec<(usize, usize, usize, Vec<[f32; WIDTH]>)> = (0..batch * panels * blocks)
        .into_par_iter()
        .map(|t| {
            let (bt, p, r) = (t / (panels * blocks), t / blocks % panels, t % blocks);
            let (r0, r1) = (r * block, ((r + 1) * block).min(rows));
            let a = |i: usize| (bt * rows + i) * k;
            let sums = task(
                (&a_keys[a(r0)..a(r1)], &a_scales[a(r0)..a(r1)]),
                (&b_keys[bt * k * n..], &b_scales[bt * k * n..]),
                [k, n, p * WIDTH],
                by_rhs,
                bits,
            );
            (bt, p, r0, sums)
        })
        .collect();
    let mut out = vec![0f32; batch * rows * n];
    for (bt, p, r0, sums) in parts {
        let (c0, c1) = (p * WIDTH, ((p + 1) * WIDTH).min(n));
        for (i, lanes) in sums.iter().enumerate() {
            let row = (bt * rows + r0 + i) * n;
            out[row + c0..row + c1].copy_from_slice(&lanes[..c1 - c0]);
        }
    }
    out
}

/// One task's sums: its rows (`a`: keys and scales `[rows, k]`) against the panel of columns
/// from `c0` of the rhs (`b`: keys and scales `[k, n]`), a row of [`WIDTH`] sums per row (the
/// columns past `n` are padded with zero scales and dropped by the caller).
fn task(
    a: (&[u32], &[f32]),
    b: (&[u32], &[f32]),
    [k, n, c0]: [usize; 3],
    by_rhs: &[f32],
    bits: u32,
) -> Vec<[f32; WIDTH]> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { task_avx512(a, b, [k, n, c0], by_rhs, bits) };
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { task_avx2(a, b, [k, n, c0], by_rhs, bits) };
        }
    }
    task_plain(a, b, [k, n, c0], by_rhs, bits)
}

/// [`task_plain`] compiled for AVX-512 (the same operations in the same order).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn task_avx512(
    a: (&[u32], &[f32]),
    b: (&[u32], &[f32]),
    dims: [usize; 3],
    by_rhs: &[f32],
    bits: u32,
) -> Vec<[f32; WIDTH]> {
    task_plain(a, b, dims, by_rhs, bits)
}

/// [`task_plain`] compiled for AVX2 (the same operations in the same order).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn task_avx2(
    a: (&[u32], &[f32]),
    b: (&[u32], &[f32]),
    dims: [usize; 3],
    by_rhs: &[f32],
    bits: u32,
) -> Vec<[f32; WIDTH]> {
    task_plain(a, b, dims, by_rhs, bits)
}

#[inline(always)]
#[allow(clippy::needless_range_loop)] // lanes indexed alike in several arrays: vectorised as is
fn task_plain(
    (a_keys, a_scales): (&[u32], &[f32]),
    (b_keys, b_scales): (&[u32], &[f32]),
    [k, n, c0]: [usize; 3],
    by_rhs: &[f32],
    bits: u32,
) -> Vec<[f32; WIDTH]> {
    let width = 1usize << bits;
    let rows = a_keys.len() / k.max(1);
    let lanes = (n - c0).min(WIDTH);
    let mut sums = vec![[0f32; WIDTH]; rows];
    // STEPS expanded tables, each `[2^m][WIDTH]`
    let mut expanded = vec![[0f32; WIDTH]; STEPS * width];
    for k0 in (0..k).step_by(STEPS) {
        let steps = STEPS.min(k - k0);
        for s in 0..steps {
            let at = (k0 + s) * n + c0;
            let table = &mut expanded[s * width..(s + 1) * width];
            for l in 0..WIDTH {
                // padded columns: zero scale, key 0
                let (key, scale) = if l < lanes {
                    (b_keys[at + l] as usize, b_scales[at + l])
                } else {
                    (0, 0.0)
                };
                let column = &by_rhs[key * width..(key + 1) * width];
                for (entry, &lut) in table.iter_mut().zip(column) {
                    entry[l] = lut * scale;
                }
            }
        }
        for (i, sum) in sums.iter_mut().enumerate() {
            let at = i * k + k0;
            let mut acc = *sum;
            for s in 0..steps {
                let (key, scale) = (a_keys[at + s] >> bits, a_scales[at + s]);
                let t = &expanded[s * width + (key as usize & (width - 1))];
                for l in 0..WIDTH {
                    acc[l] += scale * t[l];
                }
            }
            *sum = acc;
        }
    }
    sums
}
