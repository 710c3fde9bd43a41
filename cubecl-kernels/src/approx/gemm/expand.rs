//! The host LUT GEMM by table expansion: no table lookup per product.
//!
//! With an `m`-bit table, an lhs value has one of `2^m` mantissa keys. So for each step `kk`
//! along `k` and a panel of [`LANES`] output columns, the table is expanded once against that
//! row of the rhs: `T[ma][l] = LUT[(ma << m) | mb(kk, l)] · sb(kk, l)`, every lhs mantissa `ma`
//! against the panel's `LANES` rhs values. Then every output row `i` adds
//! `sa(i, kk) · T[ma(i, kk)]`: a contiguous multiply and add over the panel's columns, with no
//! per-product gather. Expanding costs `2^m · LANES` products per step and panel, against
//! `rows · LANES` products of work; each expanded entry is a few vector operations for 16 lanes
//! where the per-product path reads the table once a product, so it pays from about `2^m / 8` rows
//! on with AVX-512 (more where the panel's lanes are few) and `2^m / 2` otherwise ([`min_rows`],
//! [`expands`]). Below, the lhs is the *packed* side (its rows) and the rhs the *expanded*
//! side (its columns are the lanes).
//!
//! **Three builds of the loops** ([`Build`]). With AVX-512 each table row `T[ma]` is built without
//! a gather either: the `2^m` entries of the packed key's table row sit in `2^m / 16` vectors, and
//! two-source permutes indexed by the lanes' keys pick each lane's entry (`m ≤ 4`: one permute;
//! `m = 6`: two, blended by key bit 5), then one multiply by the lanes' scales; from `m = 7` on the
//! lanes' columns of the table by their keys are read instead, 16 entries of 16 lanes transposed in
//! registers at a time. With AVX2 and FMA (no AVX-512) the table by the expanded side's key
//! holds each lane's column of entries contiguous, and 8 × 8 blocks of those columns are
//! transposed in registers into 8 entries of 8 lanes, then multiplied by the lanes' scales; the
//! rows' sums are whole vectors of 8. Elsewhere (and in the tests, to check one against the
//! others) a portable loop builds the same rows entry by entry. The packed side is read in place
//! through its strides (a value's sign and exponent bits are its scale, its top `m` mantissa
//! bits its key: no encoded copy); the expanded side is encoded once into keys and scales,
//! except in the direct tasks of a packed side of few rows, which read it in place too. Each task adds into a per-thread buffer of sums and
//! writes its own rectangle of the output (the transposed product 16 rows at a time, each
//! output row's run one contiguous write), so the write-back runs on every thread.
//!
//! **Bit-identical to the per-product path.** There a product is `(LUT · sa) · sb`, here
//! `sa · (LUT · sb)`. The scales are powers of two (or zero), so both round the same real value
//! once, provided neither `LUT · sa` nor `LUT · sb` leaves the normal range (a subnormal or an
//! overflowed intermediate would be rounded first). [`expands`] checks that for every operand
//! against the table's smallest and largest non-zero entry; a matrix with an operand outside the
//! band (a magnitude near `2^127`, an infinity, a NaN) takes the per-product path whole. The
//! sum runs over `kk` in order from `+0`, as there. The AVX-512 and AVX2 builds fuse each
//! multiply and add where every product `LUT · sa · sb` is itself normal, hence exact, so that
//! the add's rounding is the only one either way ([`Sum`]).
//!
//! When the lhs has fewer rows than the rhs has columns, the lhs is expanded instead: the
//! transposed product `Cᵀ = Bᵀ · Aᵀ` (the rhs's columns packed, the lhs's rows the lanes, the
//! table read by rhs key first), each product `(LUT · sb) · sa`, the same bits inside the band.
//! Both operands are read in place through strides and the sums written back transposed.
//!
//! An operand is read through the offsets of its rows and steps ([`Operand`], `operand.rs`):
//! strides for a matrix, or tables for a convolution's im2col columns gathered from its input
//! (`implicit.rs`); [`Plan`] checks a product once and runs it on any of its operands' step
//! ranges or batch groups.

use super::reference::{Rhs, avx2_available};
use crate::approx::{LutTable, MANT_MASK};
use rayon::prelude::*;
use std::sync::Arc;

pub(in crate::approx) use layouts::Layouts;

/// Output columns of a panel (two 512-bit vectors).
pub(super) const LANES: usize = 32;
/// Steps along `k` expanded together (each output row then adds eight steps while its sums
/// stay in registers: ResNet-18-w16's convolutions at b64 took 12–15 % less time than with four
/// steps, and more with sixteen).
const STEPS: usize = 8;

/// Rows the expansion must be shared by for it to pay, with `lanes` columns on the expanded
/// side. With AVX-512 an expanded entry (two-source permutes, blends and a multiply) costs about
/// two per-product operations per vector of 16 lanes, so a panel's `2^m` entries of
/// `⌈live / 16⌉` vectors pay for themselves at `2^m · 2 · ⌈live / 16⌉ / live` rows (`live`: the
/// panel's columns, at most 32), at least 8: `2^m / 8` for whole vectors (ResNet-18-w16's
/// first-stage weight gradients, 144 rows at `m = 7`, expand). The AVX2 and portable builds:
/// `2^m / 2`. Fewer rows run [`direct`]ly where [`step_cost`] says so.
pub(super) fn min_rows(bits: u32, build: Build, lanes: usize) -> usize {
    let width = 1usize << bits;
    if build == Build::Avx512 {
        let live = lanes.clamp(1, LANES);
        (width * 2 * live.div_ceil(16)).div_ceil(live).max(8)
    } else {
        (width / 2).max(1)
    }
}

/// Lanes from which a task of few rows runs [`direct`]ly rather than on the per-product path.
const DIRECT_LANES: usize = 4;

/// Whether a task of `rows` packed rows against `lanes` expanded ones runs without expanded
/// tables. AVX-512: at most a quarter as many rows as keys; at each step each row's entry is
/// picked from its key's table row by the lanes' keys, as an expanded entry is (per row and
/// step a table row's `2^m` values read and permuted, which costs less than expanding every
/// key for a step's few rows; the lanes read in place, and the table's rows as bytes where the
/// CPU has byte permutes: `avx512/direct.rs`). AVX2: fewer rows than the expansion needs ([`min_rows`]); at
/// each step each row's entries are read one by one from its key's entries of the lanes'
/// table columns, the lanes read in place (`avx2::direct_in_place`). Never in the portable
/// build.
pub(super) fn direct(rows: usize, bits: u32, build: Build, lanes: usize) -> bool {
    match build {
        Build::Avx512 => rows <= (1 << bits) / 4,
        Build::Avx2 => rows < min_rows(bits, build, lanes),
        Build::Portable => false,
    }
}

/// The estimated cycles of one step of the product with `rows` packed rows against `lanes`
/// expanded ones (measured at `m = 7` on AVX-512: an expanded entry about 6 cycles a vector of
/// 16 lanes by permutes, about 4.4 by the transposes that build it now, not counted here; a
/// row's addition 2, a row's direct entry and addition 24; with AVX2 a row's
/// direct entries 12 a vector of 8 lanes, in those units: their 8 scalar reads and column
/// offsets), or `None` where neither way pays ([`min_rows`], and [`DIRECT_LANES`] for the
/// [`direct`] one). The plan packs the side that costs less. LeNet-5's conv1 weight gradient
/// (`dy: [6, 50176]` times 25 taps) runs directly, 6 rows against 25 lanes: 4.3 ms at b64 on
/// one thread with AVX-512, where the per-product path took 8.7 ms and its im2col columns 5 ms
/// more.
pub(super) fn step_cost(rows: usize, lanes: usize, bits: u32, build: Build) -> Option<usize> {
    const ENTRY: usize = 6;
    const ADD: usize = 2;
    const DIRECT: usize = 24;
    const GATHER: usize = 12;
    let vectors = lanes.div_ceil(16);
    if rows > 0 && lanes >= DIRECT_LANES && direct(rows, bits, build, lanes) {
        return Some(match build {
            Build::Avx2 => rows * GATHER * lanes.div_ceil(8),
            _ => rows * DIRECT * vectors,
        });
    }
    (rows >= min_rows(bits, build, lanes)).then(|| ((1 << bits) * ENTRY + rows * ADD) * vectors)
}

/// Table widths the expansion runs at (a block's expanded tables: `STEPS · 2^m · LANES` f32,
/// 256 KiB at `m = 8`).
const MAX_BITS: u32 = 8;

/// A value's bits `v` as its scale (its sign and exponent bits: `±2^e`, `±0` for zero and
/// subnormals; in the band no infinity or NaN reaches here) and its `bits`-bit table key (its
/// top mantissa bits).
#[inline(always)]
fn split(v: u32, bits: u32) -> (f32, usize) {
    (
        f32::from_bits(v & 0xff80_0000),
        ((v & MANT_MASK) >> (23 - bits)) as usize,
    )
}

/// [`split`] of each value of `x` into `keys` and `scales` (as many of each).
#[inline(always)]
fn split_each(x: &[f32], keys: &mut [u32], scales: &mut [f32], bits: u32) {
    for ((key, scale), v) in keys.iter_mut().zip(scales).zip(x) {
        let (s, k) = split(v.to_bits(), bits);
        (*key, *scale) = (k as u32, s);
    }
}

/// `lhs: [batch, m, k] · rhs: [batch, k, n]` (row-major) under the `m`-bit `table` by
/// expansion, or `None` where it does not run ([`expands`]). The rhs is expanded against the
/// lhs's rows when they are the longer side; else the lhs against the rhs's columns (the
/// transposed product `Cᵀ = Bᵀ · Aᵀ`, read and written in place). `simd`: whether the
/// AVX-512 or AVX2 build may run (the tests run every build, [`Build::of`]).
pub(super) fn gemm(
    lhs: &[f32],
    rhs: Rhs<'_>,
    dims: [usize; 4],
    table: &LutTable,
    simd: bool,
) -> Option<Vec<f32>> {
    let [_, m, k, n] = dims;
    let (rhs_step, rhs_col) = rhs.strides();
    let lhs = Operand {
        x: lhs,
        base: 0,
        rows: m,
        batch: m * k,
        row: Index::Stride(k),
        step: Index::Stride(1),
    };
    let rhs = Operand {
        x: rhs.x,
        base: 0,
        rows: n,
        batch: k * n,
        row: Index::Stride(rhs_col),
        step: Index::Stride(rhs_step),
    };
    Some(Plan::new(lhs, rhs, dims, table, simd)?.run(lhs, rhs, k))
}

/// A product the expansion takes: its operands passed the band check ([`expands`]) and the
/// packed side has the rows the expansion needs.
pub(super) struct Plan {
    dims: [usize; 4],
    /// Whether the rhs is the packed side (the transposed product `Cᵀ = Bᵀ · Aᵀ`).
    transposed: bool,
    build: Build,
    bits: u32,
    /// How the rows' products are added (the AVX-512 and AVX2 builds fuse them where
    /// [`Sum::Fused`]).
    sum: Sum,
    /// The rows the expansion needs.
    min_rows: usize,
    /// The table by the expanded side's key (the AVX2 and portable builds'), and by the packed
    /// side's with its row stride (the AVX-512 build's, padded for whole-vector permutes).
    by_expanded: Arc<[f32]>,
    by_packed: (Arc<[f32]>, usize),
    /// The table by the packed side's key as bytes (`avx512::BYTE_ROW` a row), for the AVX-512
    /// build's direct tasks where the CPU has byte permutes ([`build::bytes_available`]) and
    /// every entry packs into a byte (`m ≤ 7`: every table Algorithm 1 builds).
    bytes: Option<Arc<[u8]>>,
}

impl Plan {
    /// The plan of `lhs` (`m` rows of `k` steps) times `rhs` (`n` columns of `k` steps),
    /// `dims = [batch, m, k, n]`, or `None` where the expansion does not run.
    pub(super) fn new(
        lhs: Operand<'_>,
        rhs: Operand<'_>,
        dims: [usize; 4],
        table: &LutTable,
        simd: bool,
    ) -> Option<Self> {
        let [_, m, k, n] = dims;
        let bits = table.bits();
        let build = Build::of(simd);
        // the cheaper way round: the lhs packed against the rhs's columns, or the transposed
        // product (ties: the longer side packed)
        let cost = |packed: &Operand<'_>, lanes: &Operand<'_>| {
            step_cost(packed.rows, lanes.rows, bits, build)
        };
        let transposed_product = match (cost(&lhs, &rhs), cost(&rhs, &lhs)) {
            (Some(a), Some(b)) => a > b || (a == b && m < n),
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (None, None) => return None,
        };
        let (packed, expanded) = if transposed_product {
            (rhs, lhs)
        } else {
            (lhs, rhs)
        };
        let min_rows = min_rows(bits, build, expanded.rows);
        if k == 0 {
            return None;
        }
        let sum = expands(
            packed.x,
            expanded.x,
            [packed.rows, min_rows.min(packed.rows)],
            expanded.rows,
            table,
        )?;
        let layouts = table.expansion_layouts();
        let (by_expanded, by_packed) = if transposed_product {
            (&layouts.by_lhs, &layouts.packed_rhs)
        } else {
            (&layouts.by_rhs, &layouts.packed_lhs)
        };
        let (by_expanded, by_packed) = (by_expanded.clone(), (by_packed.clone(), layouts.stride));
        let bytes = match transposed_product {
            false => &layouts.bytes_lhs,
            true => &layouts.bytes_rhs,
        };
        let bytes = bytes
            .clone()
            .filter(|_| build == Build::Avx512 && build::bytes_available());
        Some(Self {
            dims,
            transposed: transposed_product,
            build,
            bits,
            sum,
            min_rows,
            by_expanded,
            by_packed,
            bytes,
        })
    }

    /// The product over the first `k` steps of `lhs` and `rhs` (the operands the plan was
    /// made for, or their steps from some `k0` on, [`Operand::steps_from`], or another batch
    /// entry's rows of the same shape): `[batch, m, n]`.
    pub(super) fn run(&self, lhs: Operand<'_>, rhs: Operand<'_>, k: usize) -> Vec<f32> {
        self.run_in(lhs, rhs, k, [self.dims[3], 1])
    }

    /// Whether [`Plan::run_in`] can write the output in segments of `segment` columns: the
    /// transposed product (the columns are the packed rows, written 16 at a time), whole
    /// runs of 16 a segment.
    pub(super) fn segments(&self, segment: usize) -> bool {
        let n = self.dims[3];
        self.transposed && segment > 0 && segment.is_multiple_of(16) && n.is_multiple_of(segment)
    }

    /// [`Plan::run`] with the output's columns in segments of `segment`
    /// ([`Plan::segments`], else `segment = n`): column `j` of row `i` (of batch entry `bt`)
    /// at `bt·m·n + (j / segment)·m·segment + i·segment + j % segment`, the layout
    /// `[n / segment, m, segment]` (a convolution's `[B, C_out, L]` for its `[C_out, B·L]`).
    /// `concurrent`: the runs made at once on the thread pool (split-K's chunks), which share
    /// its threads: a run splits its rows only for threads the others leave idle, since each
    /// block of rows expands the tables again.
    pub(super) fn run_in(
        &self,
        lhs: Operand<'_>,
        rhs: Operand<'_>,
        k: usize,
        [segment, concurrent]: [usize; 2],
    ) -> Vec<f32> {
        let [_, m, _, n] = self.dims;
        assert!(
            segment == n || self.segments(segment),
            "expansion output segments"
        );
        // the packed side and the expanded side (the lhs packed, or the transposed product)
        let (packed, expanded) = if self.transposed {
            (rhs, lhs)
        } else {
            (lhs, rhs)
        };
        let batch = self.dims[0];
        let (bits, min_rows, build, sum) = (self.bits, self.min_rows, self.build, self.sum);
        let (by_expanded, by_packed) = (&self.by_expanded[..], &self.by_packed);
        expanded.check(batch, k);
        let rows = packed.rows;
        let lanes = expanded.rows;
        // a plan of fewer packed rows than the expansion needs runs every task directly, the
        // lanes read in place (`avx2::direct_in_place`, `avx512::direct_task`)
        let in_place = match build {
            Build::Avx2 => rows < min_rows,
            #[cfg(target_arch = "x86_64")]
            Build::Avx512 => direct(rows, bits, build, lanes) && avx512::fits(&expanded),
            _ => false,
        };
        let (e_keys, e_scales) = match in_place {
            true => Default::default(),
            false => expanded.pack_lanes([batch, k], bits, build),
        };
        let panels = lanes.div_ceil(LANES);
        // tasks: (batch entry, panel, block of rows); rows split only when the panels alone leave
        // threads idle (each block expands the table again), never below `min_rows`
        // rows a block
        let threads = rayon::current_num_threads().div_ceil(concurrent.max(1));
        let splits = threads.div_ceil(batch * panels).min(rows / min_rows).max(1);
        let cached = (SUMS_BLOCK / (4 * LANES.min(lanes.next_multiple_of(16)))).max(min_rows);
        // whole runs of 16 rows a block, so that no run of the transposed write-back crosses
        // an output segment
        let block = rows.div_ceil(splits).min(cached).next_multiple_of(16);
        let blocks = rows.div_ceil(block);
        packed.check(batch, k);
        // not zeroed: the tasks write every value (a zeroed output of ResNet-18-w16's first
        // stage, 37 MB, took a memset as long as the write-back)
        let len = batch * m * n;
        let mut out: Vec<f32> = Vec::with_capacity(len);
        let dst = Dst {
            ptr: out.as_mut_ptr(),
            len,
        };
        // each run of 16 columns of the transposed write-back inside one segment
        let out_at = |bt: usize, i: usize, j: usize| {
            bt * m * n + j / segment * m * segment + i * segment + j % segment
        };
        (0..batch * panels * blocks).into_par_iter().for_each(|t| {
            let (bt, p, r) = (t / (panels * blocks), t / blocks % panels, t % blocks);
            let (r0, r1) = (r * block, ((r + 1) * block).min(rows));
            let (c0, c1) = (p * LANES, ((p + 1) * LANES).min(lanes));
            let cols = build.sum_cols(c1 - c0);
            let a = Rows {
                p: packed,
                bt,
                r0,
                r1,
            };
            let at = bt * k * lanes;
            with_sums((r1 - r0) * cols, |sums| {
                let dims = [k, lanes, p * LANES];
                match (in_place, build) {
                    // SAFETY: `Build::of` chose the AVX2 build: the CPU supports AVX2 and FMA.
                    #[cfg(target_arch = "x86_64")]
                    (true, Build::Avx2) => unsafe {
                        let sum = (bits, sum == Sum::Fused);
                        avx2::direct_in_place(a, (expanded, bt), dims, by_expanded, sum, sums)
                    },
                    // SAFETY: `Build::of` chose the AVX-512 build: the CPU supports AVX-512F.
                    #[cfg(target_arch = "x86_64")]
                    (true, _) => unsafe {
                        let sum = (bits, sum == Sum::Fused);
                        let tables = (&by_packed.0[..], self.bytes.as_deref());
                        avx512::direct_task(a, (expanded, bt), dims, tables, sum, sums)
                    },
                    _ => task(
                        a,
                        (&e_keys[at..], &e_scales[at..]),
                        dims,
                        (by_expanded, (&by_packed.0[..], by_packed.1), bits),
                        (build, sum),
                        sums,
                    ),
                }
                let live = c1 - c0;
                if !self.transposed {
                    for (i, row) in sums.chunks_exact(cols).enumerate() {
                        // SAFETY: this task alone writes rows r0..r1, columns c0..c1 of entry bt.
                        unsafe { dst.write((bt * m + r0 + i) * n + c0, &row[..live]) };
                    }
                } else {
                    // the transposed product: packed row r is output column r, lane l output
                    // row l
                    let at = |l: usize, r: usize| out_at(bt, c0 + l, r0 + r);
                    // SAFETY: this task alone writes output rows c0..c1, columns r0..r1 of
                    // entry bt, the sums' lanes and rows.
                    unsafe { write::transposed(dst, sums, [cols, live], build, at) };
                }
            });
        });
        // SAFETY: the tasks wrote every value: entry `bt`'s rows `r0..r1` (of `rows`) and
        // columns `c0..c1` (of `lanes`) for every task, `rows · lanes = m · n` values an entry
        // (a panicking task propagates its panic before this line).
        unsafe { out.set_len(len) };
        out
    }
}

/// Bytes of a task's sums at most (its rows are split further beyond): each block of steps
/// reads and writes every row's sums once, from L2 rather than memory when they fit.
const SUMS_BLOCK: usize = 256 << 10;

/// Values of a task's sums kept per thread for the next product at most (larger buffers are
/// freed after use).
const KEEP_SUMS: usize = 16 << 20;

thread_local! {
    /// This thread's sums buffer: a fresh allocation of a task's sums is fresh pages, and
    /// their faults cost as much as the rows' products on a narrow panel.
    static SUMS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `f` of this thread's sums buffer of `len` values, not zeroed: a task's first block of
/// steps (`k0 = 0`) sets its sums, from `+0` (a zero fill of every task's sums took as long as
/// the write-back).
fn with_sums<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    crate::scratch::with_scratch(&SUMS, len, KEEP_SUMS, f)
}

/// A task's rows `r0..r1` of batch entry `bt` of the packed side, read in place.
#[derive(Clone, Copy)]
struct Rows<'a> {
    p: Operand<'a>,
    bt: usize,
    r0: usize,
    r1: usize,
}

impl Rows<'_> {
    /// The offset of the rows' batch entry and the offsets of the `S` steps from `k0`,
    /// asserting that every row's value at every one of those steps lies inside the operand
    /// (the bound the builds' unchecked reads rely on).
    #[inline(always)]
    fn step_offsets<const S: usize>(&self, k0: usize) -> (usize, [usize; S]) {
        let p = self.p;
        let base = p.base + self.bt * p.batch;
        let steps: [usize; S] = std::array::from_fn(|s| p.step.at(k0 + s));
        assert!(
            base + p.row.last(self.r1) + steps.iter().max().copied().unwrap_or(0) < p.x.len(),
            "expansion operand"
        );
        (base, steps)
    }

    /// `group(i0, live)` for the rows in whole groups of `r`, then one at a time.
    #[inline(always)]
    fn in_groups(&self, r: usize, mut group: impl FnMut(usize, usize)) {
        let rows = self.r1 - self.r0;
        let mut i0 = 0;
        while i0 < rows {
            let live = if rows - i0 >= r { r } else { 1 };
            group(i0, live);
            i0 += live;
        }
    }

    /// The bits of row `r0 + i`'s values at the `steps` steps from `k0` (the rest zero), as
    /// [`split`] reads them.
    #[inline(always)]
    fn steps(&self, i: usize, k0: usize, steps: usize) -> [u32; STEPS] {
        std::array::from_fn(|s| {
            if s < steps {
                self.p.at(self.bt, self.r0 + i, k0 + s).to_bits()
            } else {
                0
            }
        })
    }
}

/// One task's sums: its rows against the panel of columns from `c0` of the rhs (keys and
/// scales `[k, n]`), added into `sums`, a row of [`Build::sum_cols`] values per row (the
/// columns past `n` are padded with key 0 and scale 0 and not written back). The table both
/// ways: by the expanded side's key (the AVX2 and portable builds) and by the packed side's key
/// with its row stride (the AVX-512 build). The AVX-512 and AVX2 builds fuse each multiply and
/// add where `sum` is [`Sum::Fused`].
fn task(
    a: Rows<'_>,
    b: (&[u32], &[f32]),
    dims: [usize; 3],
    (by_expanded, by_packed, bits): (&[f32], (&[f32], usize), u32),
    (build, sum): (Build, Sum),
    sums: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        let fused = sum == Sum::Fused;
        match build {
            // SAFETY: `Build::of` chose this build: the CPU supports AVX-512F.
            Build::Avx512 => {
                let tables = (by_expanded, by_packed, bits);
                return unsafe { avx512::task(a, b, dims, tables, fused, sums) };
            }
            // SAFETY: `Build::of` chose this build: the CPU supports AVX2 and FMA.
            Build::Avx2 => {
                return unsafe { avx2::task(a, b, dims, by_expanded, (bits, fused), sums) };
            }
            Build::Portable => {}
        }
        if avx2_available() {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { task_avx2(a, b, dims, by_expanded, bits, sums) };
        }
    }
    let _ = (build, by_packed, sum);
    task_plain(a, b, dims, by_expanded, bits, sums)
}

/// [`task_plain`] compiled for AVX2 (the same operations in the same order).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn task_avx2(
    a: Rows<'_>,
    b: (&[u32], &[f32]),
    dims: [usize; 3],
    by_expanded: &[f32],
    bits: u32,
    sums: &mut [f32],
) {
    task_plain(a, b, dims, by_expanded, bits, sums)
}

/// A task's `2^m`, its panel's live lanes (the rest are padding) and the values in a row of
/// its sums.
fn task_state(a: &Rows<'_>, sums: &[f32], [n, c0]: [usize; 2], bits: u32) -> [usize; 3] {
    let width = 1usize << bits;
    let cols = sums.len() / (a.r1 - a.r0).max(1);
    assert!(
        cols <= LANES && sums.len() == (a.r1 - a.r0) * cols,
        "expansion sums"
    );
    [width, (n - c0).min(LANES), cols]
}

/// The portable build: each expanded row entry by entry from the table's columns (one per
/// expanded-side key).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // lanes indexed alike in several arrays: vectorised as is
fn task_plain(
    a: Rows<'_>,
    (b_keys, b_scales): (&[u32], &[f32]),
    [k, n, c0]: [usize; 3],
    by_expanded: &[f32],
    bits: u32,
    sums: &mut [f32],
) {
    let [width, lanes, cols] = task_state(&a, sums, [n, c0], bits);
    let mut expanded = vec![[0f32; LANES]; STEPS * width];
    for k0 in (0..k).step_by(STEPS) {
        let steps = STEPS.min(k - k0);
        for s in 0..steps {
            let at = (k0 + s) * n + c0;
            let table = &mut expanded[s * width..(s + 1) * width];
            for l in 0..LANES {
                // padded columns: zero scale, key 0
                let (key, scale) = if l < lanes {
                    (b_keys[at + l] as usize, b_scales[at + l])
                } else {
                    (0, 0.0)
                };
                let column = &by_expanded[key * width..(key + 1) * width];
                for (entry, &lut) in table.iter_mut().zip(column) {
                    entry[l] = lut * scale;
                }
            }
        }
        for (i, sum) in sums.chunks_exact_mut(cols).enumerate() {
            let row = a.steps(i, k0, steps);
            let mut acc = [0f32; LANES];
            if k0 > 0 {
                acc[..cols].copy_from_slice(sum);
            }
            for (s, &x) in row[..steps].iter().enumerate() {
                let (scale, key) = split(x, bits);
                let t = &expanded[s * width + key];
                for l in 0..LANES {
                    acc[l] += scale * t[l];
                }
            }
            sum.copy_from_slice(&acc[..cols]);
        }
    }
}

/// The band check: which operands the expansion may take.
mod band;
/// The builds of the loops and the CPU features they need.
mod build;
#[cfg(test)]
pub(super) use band::exponent_range;
pub(super) use band::{Sum, expands};
pub(super) use build::Build;
#[cfg(test)]
pub(super) use build::{builds_here, with_byte_tables, with_widest};

/// The AVX2 build: expanded rows by transposes, sums in registers.
#[cfg(target_arch = "x86_64")]
mod avx2;
/// The AVX-512 build: expanded rows by permutes, sums in registers.
#[cfg(target_arch = "x86_64")]
mod avx512;
mod layouts;
mod operand;
/// The tasks' write-back into the output they share.
mod write;
use write::Dst;

pub(super) use operand::{Index, Operand};
