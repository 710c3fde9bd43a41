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
fn pack(
    into: &mut Soa,
    rhs: Rhs<'_>,
    mul: &ApproxMultiply,
    [batch, k, n]: [usize; 3],
    pairs: bool,
) {
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
                for l in 0..width {
                    let d = decode(rhs.at(bt, kk, first * LANES + l), mul, false);
                    (pk[kk * width + l], ps[kk * width + l]) = (d.key + bias, d.scale);
                }
            }
        });
}

/// The rhs of a product, `[batch, k, n]`, as it lies in memory.
#[derive(Clone, Copy)]
pub(super) struct Rhs<'a> {
    /// The values.
    pub(super) x: &'a [f32],
    /// Whether they are the transpose, `[batch, n, k]` row-major (a `swap_dims` of the last two
    /// axes, read in place), rather than row-major `[batch, k, n]`.
    pub(super) transposed: bool,
    /// `k` and `n`.
    pub(super) k: usize,
    pub(super) n: usize,
}

impl<'a> Rhs<'a> {
    /// `x` as a `[batch, k, n]` rhs, transposed or not.
    pub(super) fn new(x: &'a [f32], transposed: bool, [k, n]: [usize; 2]) -> Self {
        Self {
            x,
            transposed,
            k,
            n,
        }
    }

    /// Strides of a step along `k` and of a column.
    pub(super) fn strides(&self) -> (usize, usize) {
        if self.transposed {
            (1, self.k)
        } else {
            (self.n, 1)
        }
    }

    /// Entry `(kk, j)` of batch entry `bt`.
    fn at(&self, bt: usize, kk: usize, j: usize) -> f32 {
        let (step, col) = self.strides();
        self.x[bt * self.k * self.n + kk * step + j * col]
    }
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
    gemm_split(lhs, rhs, dims, mul, false)
}

/// [`gemm`](fn@gemm) with the rhs given transposed: `rhs_t` holds `[batch, n, k]` row-major, and
/// the product is `lhs[b] · rhs_t[b]ᵀ`, read in place (a convolution's weight gradient multiplies
/// by its im2col columns transposed). The same products in the same order as [`gemm`](fn@gemm)
/// of the transposed copy: the same bits.
pub fn gemm_nt(lhs: &[f32], rhs_t: &[f32], dims: [usize; 4], mul: &ApproxMultiply) -> Vec<f32> {
    gemm_split(lhs, rhs_t, dims, mul, true)
}

fn gemm_split(
    lhs: &[f32],
    rhs: &[f32],
    dims: [usize; 4],
    mul: &ApproxMultiply,
    transposed: bool,
) -> Vec<f32> {
    let simd = avx2_available();
    let [batch, m, k, n] = dims;
    let chunk = split_k(dims);
    if chunk >= k {
        return gemm_impl(
            lhs,
            Rhs::new(rhs, transposed, [k, n]),
            dims,
            mul,
            simd,
            true,
        );
    }
    assert_eq!(lhs.len(), batch * m * k, "lhs length");
    assert_eq!(rhs.len(), batch * k * n, "rhs length");
    let parts: Vec<Vec<f32>> = (0..k.div_ceil(chunk))
        .into_par_iter()
        .map(|s| {
            let (k0, k1) = (s * chunk, ((s + 1) * chunk).min(k));
            // the chunk's steps, the rhs in its own layout: runs of `k1 - k0` values of each
            // row, or of `(k1 - k0) · n` of each batch entry
            let runs = |x: &[f32], len: usize, run: std::ops::Range<usize>| {
                let mut out = Vec::with_capacity(x.len() / len * run.len());
                for part in x.chunks(len) {
                    out.extend_from_slice(&part[run.clone()]);
                }
                out
            };
            let a = runs(lhs, k, k0..k1);
            let b = if transposed {
                runs(rhs, k, k0..k1)
            } else {
                runs(rhs, k * n, k0 * n..k1 * n)
            };
            let b = Rhs::new(&b, transposed, [k1 - k0, n]);
            gemm_impl(&a, b, [batch, m, k1 - k0, n], mul, simd, true)
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
    let rhs = Rhs::new(rhs, false, [dims[2], dims[3]]);
    gemm_impl(lhs, rhs, dims, mul, avx2_available(), true)
}

/// The product of one chunk of `k`; `expansion`: whether a LUT multiply may take the table
/// expansion (the tests turn it off to compare the two paths).
fn gemm_impl(
    lhs: &[f32],
    rhs: Rhs<'_>,
    [batch, m, k, n]: [usize; 4],
    mul: &ApproxMultiply,
    simd: bool,
    expansion: bool,
) -> Vec<f32> {
    assert_eq!(lhs.len(), batch * m * k, "lhs length");
    assert_eq!(rhs.x.len(), batch * k * n, "rhs length");
    assert_eq!([rhs.k, rhs.n], [k, n], "rhs dims");
    if batch * m * n == 0 {
        return Vec::new();
    }
    if let ApproxMultiply::Lut(table) = mul
        && expansion
        && let Some(out) = expand::gemm(lhs, rhs, [batch, m, k, n], table, simd)
    {
        return out;
    }
    let mut out = vec![0f32; batch * m * n];
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
    let rest_values: Vec<f32> = (0..batch * k)
        .flat_map(|bk| (first_rest..n).map(move |j| rhs.at(bk / k, bk % k, j)))
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

pub(super) fn avx512_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

pub(super) fn avx2_available() -> bool {
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
mod avx2;

/// The FP32-width models on 16 lanes: [`avx2::panel`]'s operations in the same order, for
/// two adjacent packed panels at once.
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(test)]
mod tests;
