//! Host reference of the GEMM (multi-threaded, AVX2 where available): the kernel's test oracle
//! and the path on backends without CubeCL kernels. Same decoded-operand arithmetic and the same
//! accumulation order (k ascending, FP32, no fused multiply-add) as the kernel.

use super::expand;
use crate::approx::host::{BIAS, Decoded, decode, product};
use crate::approx::{ApproxMultiply, split_k};
use rayon::prelude::*;

/// Rows of a parallel task at most: they share every rhs panel while it is in cache.
const ROW_GROUP: usize = 16;
/// Columns of a packed rhs panel (one AVX2 vector).
const LANES: usize = 8;

/// Operands decoded into separate key and scale arrays.
#[derive(Default)]
struct Soa {
    keys: Vec<u32>,
    scales: Vec<f32>,
}

impl Soa {
    /// The first `len` entries, to fill: the buffers are grown where short and otherwise kept
    /// as they are (no values written but a growth's; a shorter product leaves the longer
    /// buffers' tail alone, so that a long product after it writes nothing twice).
    fn first(&mut self, len: usize) -> (&mut [u32], &mut [f32]) {
        if self.keys.len() < len {
            self.keys.resize(len, 0);
            self.scales.resize(len, 0.0);
        }
        (&mut self.keys[..len], &mut self.scales[..len])
    }
}

/// Bytes of decoded operands kept for the next product at most (larger ones are freed).
const KEEP: usize = 64 << 20;

thread_local! {
    /// This thread's last packed rhs and decoded lhs, whose buffers the next product fills
    /// again: a fresh allocation of an operand is fresh pages, and their faults cost a 16-row
    /// conv GEMM (LeNet-5 conv2, 150 × 6400) as much as its products (`docs/approx-mul.md`).
    /// Hold the largest operands this thread decoded (8 bytes a value) up to [`KEEP`] each.
    static OPERANDS: std::cell::RefCell<[Soa; 2]> = std::cell::RefCell::default();
}

/// Decodes `x` into the first `x.len()` entries of `into`.
fn decode_all(into: &mut Soa, x: &[f32], mul: &ApproxMultiply, lhs: bool) {
    let (keys, scales) = into.first(x.len());
    keys.par_chunks_mut(4096)
        .zip(scales.par_chunks_mut(4096))
        .zip(x.par_chunks(4096))
        .for_each(|((keys, scales), x)| {
            for ((key, scale), &v) in keys.iter_mut().zip(scales.iter_mut()).zip(x) {
                let d = decode(v, mul, lhs);
                (*key, *scale) = (d.key, d.scale);
            }
        });
}

/// The rhs `[batch, k, n]` decoded and packed as panels of 8 columns, each `[k][8]` contiguous,
/// so the inner loop reads memory in order (a row-major walk down k strides by `n` floats and,
/// for power-of-two `n`, keeps hitting the same few L1 sets). One pass, no decoded copy of the
/// whole rhs (its allocation's page faults cost a 16-row conv GEMM more than its products).
/// The columns past the last whole panel are left out. Keys carry [`key_bias`].
///
/// `pairs` (the AVX-512 loop's layout): two adjacent panels are stored together as `[k][16]`
/// (one 16-lane load a `k`, no two half loads joined), a batch entry's panels taking an even
/// number of places (an odd last panel stays `[k][8]`, its pair's second half unused).
/// Panel `p` of entry `bt` starts at `(bt · places(panels) + p) · k · 8` either way.
///
/// Fills the first entries of `into`'s buffers, grown where they are short (the places that no
/// panel fills, the second half of an odd last panel's pair, may keep a former product's
/// values: nothing reads them).
fn pack(into: &mut Soa, rhs: &[f32], mul: &ApproxMultiply, [batch, k, n]: [usize; 3], pairs: bool) {
    let panels = n / LANES;
    let places = places(panels, pairs);
    let bias = key_bias(mul);
    let (keys, scales) = into.first(batch * places * k * LANES);
    // a unit: one panel, or a pair of them
    let unit = if pairs { 2 } else { 1 };
    let units = places / unit;
    keys.par_chunks_mut(unit * k * LANES)
        .zip(scales.par_chunks_mut(unit * k * LANES))
        .enumerate()
        .for_each(|(bu, (pk, ps))| {
            let (bt, u) = (bu / units.max(1), bu % units.max(1));
            let first = u * unit;
            // lanes of the unit's rows: 16 for a whole pair, else 8
            let width = (panels - first).min(unit) * LANES;
            for kk in 0..k {
                let src = (bt * k + kk) * n + first * LANES;
                for l in 0..width {
                    let d = decode(rhs[src + l], mul, false);
                    (pk[kk * width + l], ps[kk * width + l]) = (d.key + bias, d.scale);
                }
            }
        });
}

/// What [`pack`] adds to every key: Mitchell's and MBM's key sums are then already the bits of
/// a significand in [1, 2) (`host::mbm_bits`), one vector add a product fewer; LUT keys are
/// table indices, left as they are.
fn key_bias(mul: &ApproxMultiply) -> u32 {
    match mul {
        ApproxMultiply::Mitchell | ApproxMultiply::Mbm => BIAS,
        ApproxMultiply::Plain | ApproxMultiply::Lut(_) => 0,
    }
}

/// Places of a batch entry's panels in [`pack`]'s layout.
fn places(panels: usize, pairs: bool) -> usize {
    if pairs {
        panels.next_multiple_of(2)
    } else {
        panels
    }
}

/// Batched GEMM `out[b] = lhs[b] · rhs[b]` with contiguous row-major `lhs: [batch, m, k]`,
/// `rhs: [batch, k, n]`, every product through `mul`, FP32 accumulation in k order.
///
/// A LUT multiply with many rows per batch entry takes the table expansion of `expand` (no
/// lookup per product, the same bits). Otherwise groups of rows run in parallel on rayon's
/// pool. The rhs is packed into 8-column panels; LUT products run four rows at a time against a panel (portable code: one panel load serves four
/// rows, each row reads its own 2^m-entry slice of the table), the other multiplies run 8 columns
/// at a time with AVX2 where the CPU has it. Every path does the same operations in the same
/// order as the scalar loop, so all give the same bits.
///
/// A long `k` with a small output is cut into the chunks of [`split_k`] exactly as the kernel
/// does (chunks in parallel, partial sums added in chunk order from `+0`).
pub fn gemm(lhs: &[f32], rhs: &[f32], dims: [usize; 4], mul: &ApproxMultiply) -> Vec<f32> {
    let simd = avx2_available();
    let [batch, m, k, n] = dims;
    let chunk = split_k(dims);
    if chunk >= k {
        return gemm_impl(lhs, rhs, dims, mul, simd, true);
    }
    assert_eq!(lhs.len(), batch * m * k, "lhs length");
    assert_eq!(rhs.len(), batch * k * n, "rhs length");
    let parts: Vec<Vec<f32>> = (0..k.div_ceil(chunk))
        .into_par_iter()
        .map(|s| {
            let (k0, k1) = (s * chunk, ((s + 1) * chunk).min(k));
            let a: Vec<f32> = lhs
                .chunks(k)
                .flat_map(|row| &row[k0..k1])
                .copied()
                .collect();
            let b: Vec<f32> = rhs
                .chunks(k * n)
                .flat_map(|mat| &mat[k0 * n..k1 * n])
                .copied()
                .collect();
            gemm_impl(&a, &b, [batch, m, k1 - k0, n], mul, simd, true)
        })
        .collect();
    (0..batch * m * n)
        .map(|i| parts.iter().fold(0.0f32, |acc, p| acc + p[i]))
        .collect()
}

/// [`gemm`](fn@gemm) without the split of a long `k`: every output sums its `k` products in ascending
/// order from `+0`, the order of the block-sparse weight gradient's reference
/// (`bsr::host::weight_grad`), whose host path calls this on its per-column panels.
pub fn gemm_in_order(lhs: &[f32], rhs: &[f32], dims: [usize; 4], mul: &ApproxMultiply) -> Vec<f32> {
    gemm_impl(lhs, rhs, dims, mul, avx2_available(), true)
}

/// The product of one chunk of `k`; `expansion`: whether a LUT multiply may take the table
/// expansion (the tests turn it off to compare the two paths).
fn gemm_impl(
    lhs: &[f32],
    rhs: &[f32],
    [batch, m, k, n]: [usize; 4],
    mul: &ApproxMultiply,
    simd: bool,
    expansion: bool,
) -> Vec<f32> {
    assert_eq!(lhs.len(), batch * m * k, "lhs length");
    assert_eq!(rhs.len(), batch * k * n, "rhs length");
    let mut out = vec![0f32; batch * m * n];
    if out.is_empty() {
        return out;
    }
    if let ApproxMultiply::Lut(table) = mul
        && expansion
        && let Some(out) = expand::gemm(lhs, rhs, [batch, m, k, n], table, simd)
    {
        return out;
    }
    let [mut a, mut packed] = OPERANDS.take();
    decode_all(&mut a, lhs, mul, true);
    let table = mul.table();
    // LUT products use the portable 4-row kernel below; the others AVX2 where present.
    let lut = matches!(mul, ApproxMultiply::Lut(_));
    let panels = if lut || simd { n / LANES } else { 0 };
    // the FP32-width models with AVX-512: 16 lanes a vector (two packed panels)
    let wide = !lut && simd && avx512_available();
    pack(
        &mut packed,
        rhs,
        mul,
        [batch, k, if panels > 0 { n } else { 0 }],
        wide,
    );
    let places = places(panels, wide);
    // the columns past the panels (all of them without AVX2), decoded `[batch, k, rest]`
    let first_rest = panels * LANES;
    let rest = n - first_rest;
    let rest_values: Vec<f32> = rhs
        .chunks(n)
        .flat_map(|row| &row[first_rest..])
        .copied()
        .collect();
    let mut b = Soa::default();
    decode_all(&mut b, &rest_values, mul, false);
    // groups of up to 16 rows, smaller where that leaves a thread idle (a 16-row conv GEMM
    // was one task): at least two tasks a thread, at least four rows a task (the LUT kernel's)
    let tasks = 2 * rayon::current_num_threads();
    let group = (batch * m).div_ceil(tasks).clamp(4, ROW_GROUP).min(m);
    out.par_chunks_mut(n * group)
        .enumerate()
        .for_each(|(chunk, rows)| {
            let first = chunk * group;
            let count = rows.len() / n;
            // panel `p` of entry `bt`, and `count` panels from it (a pair: `[k][16]`)
            let panels_at = |bt: usize, p: usize, count: usize| {
                let base = (bt * places + p) * k * LANES;
                let end = base + count * k * LANES;
                (&packed.keys[base..end], &packed.scales[base..end])
            };
            let panel = |bt: usize, p: usize| panels_at(bt, p, 1);
            // Panels: all rows of the group against one panel while it is in cache.
            for p in 0..panels {
                let mut r = 0;
                while r < count {
                    let row = first + r;
                    let bt = row / m;
                    if lut {
                        // Up to four rows of one batch entry share each load of the panel.
                        let take = (count - r).min(4).min(m - row % m);
                        let (pk, ps) = panel(bt, p);
                        let (pk, ps) = (pk, ps);
                        let at = r * n + p * LANES;
                        match take {
                            4 => {
                                store(lut_rows::<4>(&a, row, k, pk, ps, table), &mut rows[at..], n)
                            }
                            3 => {
                                store(lut_rows::<3>(&a, row, k, pk, ps, table), &mut rows[at..], n)
                            }
                            2 => {
                                store(lut_rows::<2>(&a, row, k, pk, ps, table), &mut rows[at..], n)
                            }
                            _ => {
                                store(lut_rows::<1>(&a, row, k, pk, ps, table), &mut rows[at..], n)
                            }
                        }
                        r += take;
                        continue;
                    }
                    #[cfg(target_arch = "x86_64")]
                    if wide {
                        // two adjacent panels per AVX-512 vector: the even one of each pair
                        // computes both, the odd one is done
                        if p % 2 == 1 {
                            r = count;
                            continue;
                        }
                        if p + 1 < panels {
                            let (pair, at) = (panels_at(bt, p, 2), r * n + p * LANES);
                            // SAFETY: AVX-512F was detected (`wide`); a pair holds k·16
                            // entries.
                            unsafe {
                                avx512::panel_pair(
                                    (
                                        &a.keys[row * k..(row + 1) * k],
                                        &a.scales[row * k..(row + 1) * k],
                                    ),
                                    pair,
                                    &mut rows[at..at + 2 * LANES],
                                    mul,
                                )
                            };
                            r += 1;
                            continue;
                        }
                    }
                    #[cfg(target_arch = "x86_64")]
                    {
                        let (pk, ps) = panel(bt, p);
                        // SAFETY: AVX2 was detected (non-LUT panels exist only then); the panel
                        // slices hold k·8 entries.
                        unsafe {
                            avx2::panel(
                                &a.keys[row * k..(row + 1) * k],
                                &a.scales[row * k..(row + 1) * k],
                                pk,
                                ps,
                                &mut rows[r * n + p * LANES..r * n + (p + 1) * LANES],
                                mul,
                            )
                        };
                    }
                    r += 1;
                }
            }
            // Remaining columns (all of them without AVX2): scalar, same order of operations.
            for (r, acc) in rows.chunks_mut(n).enumerate() {
                let row = first + r;
                let bt = row / m;
                for (j, o) in acc.iter_mut().enumerate().skip(panels * LANES) {
                    let mut s = 0f32;
                    for kk in 0..k {
                        let at = (bt * k + kk) * rest + j - first_rest;
                        let (x, y) = (
                            Decoded {
                                key: a.keys[row * k + kk],
                                scale: a.scales[row * k + kk],
                            },
                            Decoded {
                                key: b.keys[at],
                                scale: b.scales[at],
                            },
                        );
                        s += product(x, y, mul, table);
                    }
                    *o = s;
                }
            }
        });
    OPERANDS.set([a, packed].map(|o| {
        if o.keys.capacity() * 8 <= KEEP {
            o
        } else {
            Soa::default()
        }
    }));
    out
}

/// Writes `R` rows of 8 results, `n` apart, at the start of `out`.
fn store<const R: usize>(acc: [[f32; LANES]; R], out: &mut [f32], n: usize) {
    for (t, lanes) in acc.iter().enumerate() {
        out[t * n..t * n + LANES].copy_from_slice(lanes);
    }
}

/// `R` rows (from `row`) against one packed panel with a LUT multiply: each load of the panel's
/// keys and scales serves `R` rows, and each row reads only its 2^m-entry slice of the table.
fn lut_rows<const R: usize>(
    a: &Soa,
    row: usize,
    k: usize,
    pk: &[u32],
    ps: &[f32],
    table: &[f32],
) -> [[f32; LANES]; R] {
    let width = table.len().isqrt(); // 2^m
    let mut acc = [[0f32; LANES]; R];
    for kk in 0..k {
        let kb: &[u32; LANES] = pk[kk * LANES..(kk + 1) * LANES]
            .try_into()
            .expect("panel row");
        let sb: &[f32; LANES] = ps[kk * LANES..(kk + 1) * LANES]
            .try_into()
            .expect("panel row");
        for (r, lanes) in acc.iter_mut().enumerate() {
            let at = (row + r) * k + kk;
            let (ka, sa) = (a.keys[at] as usize, a.scales[at]);
            let slice = &table[ka..ka + width];
            for l in 0..LANES {
                // kb < 2^m: the mask only lets the compiler drop the bounds check.
                lanes[l] += (slice[kb[l] as usize & (width - 1)] * sa) * sb[l];
            }
        }
    }
    acc
}

fn avx512_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{ApproxMultiply, LANES};
    use crate::approx::MBM_CORRECTION;
    use crate::approx::host::mbm;
    use std::arch::x86_64::*;

    /// `acc[0..8] = Σ_k a[k] · panel[k][0..8]` in k order.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn panel(
        a_keys: &[u32],
        a_scales: &[f32],
        b_keys: &[u32],
        b_scales: &[f32],
        acc: &mut [f32],
        mul: &ApproxMultiply,
    ) {
        // the panels' keys carry `key_bias`: Mitchell's and MBM's key sums are then already the
        // bits of a significand in [1, 2) (`host::mbm_bits`)
        macro_rules! run {
            (|$ka:ident, $sa:ident, $kb:ident, $sb:ident| $product:expr) => {{
                let mut s = _mm256_setzero_ps();
                for (kk, (&ka, &sa)) in a_keys.iter().zip(a_scales).enumerate() {
                    // SAFETY: kk < k and the panels hold k·8 entries.
                    let ($kb, $sb) = unsafe {
                        (
                            _mm256_loadu_si256(b_keys.as_ptr().add(kk * LANES) as *const __m256i),
                            _mm256_loadu_ps(b_scales.as_ptr().add(kk * LANES)),
                        )
                    };
                    let $ka = _mm256_set1_epi32(ka as i32);
                    let $sa = _mm256_set1_ps(sa);
                    s = _mm256_add_ps(s, $product);
                }
                // SAFETY: acc has 8 entries.
                unsafe { _mm256_storeu_ps(acc.as_mut_ptr(), s) };
            }};
        }
        // every biased key sum is below 2^31 (`BIAS + 2^24`): signed comparisons order them
        let c = |v: u32| _mm256_set1_epi32(v as i32);
        match mul {
            ApproxMultiply::Plain => run!(|_ka, sa, _kb, sb| _mm256_mul_ps(sa, sb)),
            // Table gathers were slower than the portable 4-row loop (`lut_rows`) on the CPU
            // measured; LUT multiplies never reach this function.
            ApproxMultiply::Lut(_) => unreachable!("LUT panels use lut_rows"),
            ApproxMultiply::Mitchell => run!(|ka, sa, kb, sb| {
                // (127 + carry) << 23 | mant == (ka + kb) + (127 << 23)
                let bits = _mm256_add_epi32(kb, ka);
                _mm256_mul_ps(_mm256_mul_ps(_mm256_castsi256_ps(bits), sa), sb)
            }),
            ApproxMultiply::Mbm => run!(|ka, sa, kb, sb| {
                // `host::mbm_bits`, operation for operation
                let sum = _mm256_add_epi32(kb, ka);
                let carry = _mm256_cmpgt_epi32(sum, c(mbm::CARRY - 1));
                let over = _mm256_cmpgt_epi32(sum, c(mbm::OVER - 1));
                let fits = _mm256_cmpgt_epi32(c(mbm::FITS), sum);
                let no_carry = _mm256_blendv_epi8(
                    _mm256_add_epi32(sum, c(MBM_CORRECTION)),
                    _mm256_srli_epi32::<1>(_mm256_add_epi32(sum, c(mbm::RENORM))),
                    over,
                );
                let with_carry = _mm256_add_epi32(sum, _mm256_and_si256(fits, c(mbm::HALF)));
                let bits = _mm256_blendv_epi8(no_carry, with_carry, carry);
                _mm256_mul_ps(_mm256_mul_ps(_mm256_castsi256_ps(bits), sa), sb)
            }),
        }
    }
}

/// The FP32-width models on 16 lanes: [`avx2::panel`]'s operations in the same order, for
/// two adjacent packed panels at once.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{ApproxMultiply, LANES};
    use crate::approx::MBM_CORRECTION;
    use crate::approx::host::mbm;
    use std::arch::x86_64::*;

    /// `acc[0..16] = Σ_k a[k] · pair[k][0..16]` in k order (`pair`: two panels packed
    /// together, `[k][16]`).
    #[target_feature(enable = "avx512f")]
    pub(super) fn panel_pair(
        (a_keys, a_scales): (&[u32], &[f32]),
        (b_keys, b_scales): (&[u32], &[f32]),
        acc: &mut [f32],
        mul: &ApproxMultiply,
    ) {
        macro_rules! run {
            (|$ka:ident, $sa:ident, $kb:ident, $sb:ident| $product:expr) => {{
                let mut s = _mm512_setzero_ps();
                let rows = b_keys
                    .chunks_exact(2 * LANES)
                    .zip(b_scales.chunks_exact(2 * LANES));
                for ((&ka, &sa), (keys, scales)) in a_keys.iter().zip(a_scales).zip(rows) {
                    // SAFETY: each chunk holds 16 entries.
                    let ($kb, $sb) = unsafe {
                        (
                            _mm512_loadu_si512(keys.as_ptr().cast()),
                            _mm512_loadu_ps(scales.as_ptr()),
                        )
                    };
                    let $ka = _mm512_set1_epi32(ka as i32);
                    let $sa = _mm512_set1_ps(sa);
                    s = _mm512_add_ps(s, $product);
                }
                // SAFETY: acc has 16 entries.
                unsafe { _mm512_storeu_ps(acc[..16].as_mut_ptr(), s) };
            }};
        }
        let c = |v: u32| _mm512_set1_epi32(v as i32);
        match mul {
            ApproxMultiply::Plain => run!(|_ka, sa, _kb, sb| _mm512_mul_ps(sa, sb)),
            ApproxMultiply::Lut(_) => unreachable!("LUT panels use lut_rows"),
            ApproxMultiply::Mitchell => run!(|ka, sa, kb, sb| {
                let bits = _mm512_add_epi32(kb, ka);
                _mm512_mul_ps(_mm512_mul_ps(_mm512_castsi512_ps(bits), sa), sb)
            }),
            ApproxMultiply::Mbm => run!(|ka, sa, kb, sb| {
                // `host::mbm_bits`, operation for operation
                let sum = _mm512_add_epi32(kb, ka);
                let carry = _mm512_cmpge_epu32_mask(sum, c(mbm::CARRY));
                let over = _mm512_cmpge_epu32_mask(sum, c(mbm::OVER));
                let fits = _mm512_cmplt_epu32_mask(sum, c(mbm::FITS));
                let no_carry = _mm512_mask_blend_epi32(
                    over,
                    _mm512_add_epi32(sum, c(MBM_CORRECTION)),
                    _mm512_srli_epi32::<1>(_mm512_add_epi32(sum, c(mbm::RENORM))),
                );
                let with_carry = _mm512_mask_add_epi32(sum, fits, sum, c(mbm::HALF));
                let bits = _mm512_mask_blend_epi32(carry, no_carry, with_carry);
                _mm512_mul_ps(_mm512_mul_ps(_mm512_castsi512_ps(bits), sa), sb)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approx::LutTable;
    use crate::approx::host::{mitchell_significand, multiply};

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
            // rows enough to expand; k not a multiple of the steps; n a partial last panel;
            // zeros, subnormals and exponents far apart
            let rows = (2usize << bits).max(40);
            let dims = [2, rows, 37, 45];
            let mut lhs = crate::approx::host::binades(2 * rows * 37, 7 + u64::from(bits), 60);
            let mut rhs = crate::approx::host::binades(2 * 37 * 45, 11, 60);
            lhs[3] = 0.0;
            lhs[4] = -0.0;
            lhs[8] = 1e-40;
            rhs[5] = -3e-39;
            rhs[6] = 0.0;
            lhs[9] = 1e30;
            rhs[9] = 1e-30;
            assert!(expand::expands(&lhs, &rhs, rows, 45, table), "m = {bits}");
            // both builds of the expansion (portable, and AVX-512 where the CPU has it) give
            // the per-product bits
            let both_builds = |lhs: &[f32], rhs: &[f32], dims: [usize; 4], what: &str| {
                let direct = gemm_impl(lhs, rhs, dims, &mul, avx2_available(), false);
                for simd in [false, true] {
                    let expanded = gemm_impl(lhs, rhs, dims, &mul, simd, true);
                    for (i, (a, b)) in direct.iter().zip(&expanded).enumerate() {
                        assert_eq!(
                            a.to_bits(),
                            b.to_bits(),
                            "m = {bits}, {what}, simd {simd} [{i}]: {a} vs {b}"
                        );
                    }
                }
            };
            both_builds(&lhs, &rhs, dims, "rhs expanded");
            // fewer rows than columns: the lhs expanded, through the transposed product
            let wide = [2, 20, 37, (2usize << bits).max(40) + 3];
            let lhs = crate::approx::host::binades(2 * 20 * 37, 13, 60);
            let rhs = crate::approx::host::binades(2 * 37 * wide[3], 17, 60);
            assert!(expand::expands(&rhs, &lhs, wide[3], 20, table));
            both_builds(&lhs, &rhs, wide, "lhs expanded");
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
                        let a: Vec<f32> =
                            lhs.chunks(3000).flat_map(|r| &r[k0..k1]).copied().collect();
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
        let lhs = crate::approx::host::binades(rows * 4, 1, 10);
        let rhs = crate::approx::host::binades(4 * n, 2, 10);
        assert!(expand::expands(&lhs, &rhs, rows, n, &table));
        // too few rows for the expansion to pay
        assert!(!expand::expands(&lhs[..63 * 4], &rhs, 63, n, &table));
        for bad in [f32::INFINITY, f32::NAN, 2f32.powi(127), -3e38] {
            let mut l = lhs.clone();
            l[17] = bad;
            assert!(!expand::expands(&l, &rhs, rows, n, &table), "{bad}");
            let mut r = rhs.clone();
            r[3] = bad;
            assert!(!expand::expands(&lhs, &r, rows, n, &table), "{bad}");
        }
        // an entry below 1 makes the smallest normal scale's intermediate subnormal
        let mut small: Vec<f32> = table.significands().to_vec();
        small[1] = 0.75;
        let small = LutTable::new(5, small);
        let mut l = lhs.clone();
        l[0] = f32::MIN_POSITIVE;
        assert!(expand::expands(&l, &rhs, rows, n, &table));
        assert!(!expand::expands(&l, &rhs, rows, n, &small));
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
}
