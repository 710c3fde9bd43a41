//! The Euclidean projection onto the BCR set: the weights of a GEMM view whose zeros, inside
//! every block, form whole rows and whole columns, with at most `budget` weights kept.
//!
//! A point of the set keeps, in block `b`, the entries of `r_b` of its rows crossed with `c_b`
//! of its columns (`r_b · c_b` weights), and `Σ_b r_b·c_b ≤ budget`. The nearest such point to
//! `W` keeps `W`'s values on its support, so the projection is the support that keeps the most
//! energy `Σ w²`. Ember computes it in two steps, stated exactly:
//!
//! 1. **Per block, every shape.** For every `(r, c)`, the row set and column set keeping the
//!    most energy, `E_b(r, c)`. **Exact** when the block's smaller side has at most
//!    [`EXACT_SIDE`] lines: every subset of that side is enumerated and, for each, the other
//!    side's top lines by energy over the subset are taken (the best `c` of them for every `c`
//!    at once). Above it, a **greedy bound**: the better of "the top `r` rows by energy, then
//!    the top `c` columns over them" and "the top `c` columns, then the top `r` rows over them".
//!    Ties go to the lower index (stable orders, never thresholds).
//! 2. **Across blocks, the budget.** Maximise `Σ_b E_b(r_b, c_b)` subject to
//!    `Σ_b r_b·c_b = budget` (a multiple-choice knapsack). The upper concave hull of each
//!    block's `(size, energy)` points gives segments of falling gain per weight; they are taken
//!    in order of gain per weight, all blocks together, while they fit (a block whose next
//!    segment does not fit takes no further one). This is the optimum of the knapsack's linear
//!    relaxation up to the first segment that does not fit, and exact for the budget it uses.
//!    The weights left (fewer than one segment) are then filled one move at a time, each move
//!    changing one block's shape to any shape at most the remaining weights larger, the move
//!    keeping the most energy first, until the budget is met exactly (or no move fits: then
//!    fewer weights are kept, which only raises the rate; on real layers this does not happen).
//!
//! The result is feasible by construction and idempotent: a point of the set keeps all its
//! energy within the budget (every block's smallest full-energy shape fits), so projecting it
//! again changes no value.

use crate::error::BcrError;
use crate::level::{Block, Level};

/// Blocks whose smaller side has at most this many lines are projected exactly (`2^8` subsets
/// of it enumerated).
pub const EXACT_SIDE: usize = 8;

/// A weight's GEMM view, `out × K` row-major: `K = d_in` for a Linear (Burn stores its weight as
/// `[d_in, d_out]`, so the view is its transpose) and `K = c_in·kh·kw` in that order for a
/// convolution (`[c_out, c_in, kh, kw]` is already row-major `out × K`).
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// Rows (outputs).
    pub rows: usize,
    /// Columns `K` (inputs).
    pub cols: usize,
    /// The values, row-major.
    pub data: Vec<f32>,
}

impl View {
    /// A view of `rows × cols` values; all finite.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Result<Self, BcrError> {
        if rows == 0 || cols == 0 || data.len() != rows * cols {
            return Err(BcrError::Shape(format!(
                "{} values for a {rows} × {cols} view",
                data.len()
            )));
        }
        if let Some(i) = data.iter().position(|w| !w.is_finite()) {
            return Err(BcrError::NonFinite(format!(
                "weight {} at row {}, column {} of the GEMM view",
                data[i],
                i / cols,
                i % cols
            )));
        }
        Ok(Self { rows, cols, data })
    }

    /// The view `d_out × d_in` of a Linear weight stored as Burn does, `[d_in, d_out]`.
    pub fn linear(weight: &[f32], d_in: usize, d_out: usize) -> Result<Self, BcrError> {
        if weight.len() != d_in * d_out {
            return Err(BcrError::Shape(format!(
                "{} values for a Linear weight [{d_in}, {d_out}]",
                weight.len()
            )));
        }
        let data = (0..d_out)
            .flat_map(|o| (0..d_in).map(move |i| weight[i * d_out + o]))
            .collect();
        Self::new(d_out, d_in, data)
    }

    /// The view back in a Linear weight's layout `[d_in, d_out]`.
    pub fn to_linear(&self) -> Vec<f32> {
        let (d_out, d_in) = (self.rows, self.cols);
        (0..d_in)
            .flat_map(|i| (0..d_out).map(move |o| self.data[o * d_in + i]))
            .collect()
    }

    /// The view `c_out × (c_in·kh·kw)` of a convolution weight `[c_out, c_in, kh, kw]` (`dims`:
    /// its shape, any number of kernel axes); its layout is the view's.
    pub fn conv(weight: &[f32], dims: &[usize]) -> Result<Self, BcrError> {
        let out = dims.first().copied().unwrap_or(0);
        let k: usize = dims.iter().skip(1).product();
        Self::new(out, k, weight.to_vec())
    }

    /// The sum of the squares, in f64.
    pub fn energy(&self) -> f64 {
        self.data.iter().map(|&w| f64::from(w) * f64::from(w)).sum()
    }
}

/// Which weights of a view a BCR pattern keeps: entry `(i, j)` in block `(i / R, j / C)` is kept
/// when row `i` and column `j` are both kept in that block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BcrMask {
    /// Rows of the view.
    pub rows: usize,
    /// Columns of the view.
    pub cols: usize,
    /// The block size.
    pub block: Block,
    /// Per block column `bj`, per row `i`: whether row `i` is kept in block `(i / R, bj)`;
    /// `block_cols × rows`, row-major.
    pub row_keep: Vec<bool>,
    /// Per block row `bi`, per column `j`: whether column `j` is kept in block `(bi, j / C)`;
    /// `block_rows × cols`, row-major.
    pub col_keep: Vec<bool>,
}

impl BcrMask {
    /// A mask that keeps nothing.
    pub fn empty(rows: usize, cols: usize, block: Block) -> Self {
        let (br, bc) = (rows.div_ceil(block.rows), cols.div_ceil(block.cols));
        Self {
            rows,
            cols,
            block,
            row_keep: vec![false; bc * rows],
            col_keep: vec![false; br * cols],
        }
    }

    /// Blocks down and across.
    pub fn blocks(&self) -> (usize, usize) {
        (
            self.rows.div_ceil(self.block.rows),
            self.cols.div_ceil(self.block.cols),
        )
    }

    /// The rows and columns of the view block `(bi, bj)` covers (a remainder block is smaller).
    pub fn span(&self, bi: usize, bj: usize) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let Block { rows: r, cols: c } = self.block;
        (
            bi * r..((bi + 1) * r).min(self.rows),
            bj * c..((bj + 1) * c).min(self.cols),
        )
    }

    /// Whether entry `(i, j)` of the view is kept.
    pub fn is_kept(&self, i: usize, j: usize) -> bool {
        let (bi, bj) = (i / self.block.rows, j / self.block.cols);
        self.row_keep[bj * self.rows + i] && self.col_keep[bi * self.cols + j]
    }

    /// The kept rows and columns of block `(bi, bj)`, view indices ascending.
    pub fn kept(&self, bi: usize, bj: usize) -> (Vec<usize>, Vec<usize>) {
        let (rs, cs) = self.span(bi, bj);
        (
            rs.filter(|&i| self.row_keep[bj * self.rows + i]).collect(),
            cs.filter(|&j| self.col_keep[bi * self.cols + j]).collect(),
        )
    }

    /// Weights kept.
    pub fn nnz(&self) -> usize {
        let (br, bc) = self.blocks();
        (0..br)
            .flat_map(|bi| (0..bc).map(move |bj| (bi, bj)))
            .map(|(bi, bj)| {
                let (r, c) = self.kept(bi, bj);
                r.len() * c.len()
            })
            .sum()
    }

    /// The dense 0/1 mask of the view, row-major.
    pub fn dense(&self) -> Vec<bool> {
        (0..self.rows)
            .flat_map(|i| (0..self.cols).map(move |j| (i, j)))
            .map(|(i, j)| self.is_kept(i, j))
            .collect()
    }

    /// `view` with every pruned weight set to zero.
    pub fn apply(&self, view: &View) -> View {
        let data = view
            .data
            .iter()
            .enumerate()
            .map(|(at, &w)| {
                if self.is_kept(at / view.cols, at % view.cols) {
                    w
                } else {
                    0.0
                }
            })
            .collect();
        View {
            data,
            ..view.clone()
        }
    }
}

/// One block's best support for every shape: `energy[r · (c_max + 1) + c] = E(r, c)`.
#[derive(Clone, Debug)]
struct Table {
    r_max: usize,
    c_max: usize,
    energy: Vec<f64>,
}

impl Table {
    fn at(&self, r: usize, c: usize) -> f64 {
        self.energy[r * (self.c_max + 1) + c]
    }
}

/// The indices of the `n` largest of `values`, ties to the lower index, in that order (largest
/// first).
fn top(values: &[f64], n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    idx.truncate(n);
    idx
}

/// A block's squared values, `lines × other` row-major, its smaller side first (transposed
/// when it has more rows than columns).
struct Energies {
    lines: usize,
    other: usize,
    sq: Vec<f64>,
    transposed: bool,
    /// Above [`EXACT_SIDE`]: per `c`, every line's energy over the `c` other-side lines of most
    /// energy overall (the column-first candidates); empty otherwise.
    overs: Vec<Vec<f64>>,
}

impl Energies {
    fn of(view: &View, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>) -> Self {
        let (nr, nc) = (rows.len(), cols.len());
        let sq = |i: usize, j: usize| {
            let w = f64::from(view.data[(rows.start + i) * view.cols + cols.start + j]);
            w * w
        };
        let mut e = if nr <= nc {
            Self {
                lines: nr,
                other: nc,
                sq: (0..nr)
                    .flat_map(|i| (0..nc).map(move |j| sq(i, j)))
                    .collect(),
                transposed: false,
                overs: Vec::new(),
            }
        } else {
            Self {
                lines: nc,
                other: nr,
                sq: (0..nc)
                    .flat_map(|j| (0..nr).map(move |i| sq(i, j)))
                    .collect(),
                transposed: true,
                overs: Vec::new(),
            }
        };
        if e.lines > EXACT_SIDE {
            let order = top(&e.sums(0..e.lines), e.other);
            let mut over = vec![0.0; e.lines];
            for &o in &order {
                for (l, x) in over.iter_mut().enumerate() {
                    *x += e.sq[l * e.other + o];
                }
                e.overs.push(over.clone());
            }
        }
        e
    }

    /// The other side's energies over a set of lines.
    fn sums(&self, lines: impl Iterator<Item = usize>) -> Vec<f64> {
        let mut s = vec![0.0; self.other];
        for l in lines {
            for (s, &v) in s
                .iter_mut()
                .zip(&self.sq[l * self.other..(l + 1) * self.other])
            {
                *s += v;
            }
        }
        s
    }

    /// The line sets to try for `k` lines: every subset of that size when the side is small
    /// (exact), else the greedy candidates (see the module's documentation) for every `c`.
    fn candidates(&self, k: usize) -> Vec<Vec<usize>> {
        if self.lines <= EXACT_SIDE {
            (0u32..1 << self.lines)
                .filter(|m| m.count_ones() as usize == k)
                .map(|m| (0..self.lines).filter(|&l| m >> l & 1 == 1).collect())
                .collect()
        } else {
            let line_energy: Vec<f64> = (0..self.lines)
                .map(|l| self.sq[l * self.other..(l + 1) * self.other].iter().sum())
                .collect();
            let mut sets = vec![sorted(top(&line_energy, k))];
            // column-first: for every c, the best k lines over the top c other-side lines
            for over in &self.overs {
                let set = sorted(top(over, k));
                if !sets.contains(&set) {
                    sets.push(set);
                }
            }
            sets
        }
    }

    /// `E(k lines, c others)` for every shape, the small side first.
    fn table(&self) -> Table {
        let (lmax, omax) = (self.lines, self.other);
        let mut energy = vec![0.0; (lmax + 1) * (omax + 1)];
        for k in 1..=lmax {
            for set in self.candidates(k) {
                let sums = self.sums(set.iter().copied());
                let mut acc = 0.0;
                for (c, o) in top(&sums, omax).into_iter().enumerate() {
                    acc += sums[o];
                    let e = &mut energy[k * (omax + 1) + c + 1];
                    if acc > *e {
                        *e = acc;
                    }
                }
            }
        }
        Table {
            r_max: lmax,
            c_max: omax,
            energy,
        }
    }

    /// The best support of `k` lines and `c` others (block-local indices, ascending), the first
    /// candidate reaching the table's energy.
    fn support(&self, k: usize, c: usize) -> (Vec<usize>, Vec<usize>) {
        if k == 0 || c == 0 {
            return (vec![], vec![]);
        }
        let mut best: Option<(f64, Vec<usize>, Vec<usize>)> = None;
        for set in self.candidates(k) {
            let sums = self.sums(set.iter().copied());
            let others = sorted(top(&sums, c));
            let e: f64 = others.iter().map(|&o| sums[o]).sum();
            if best.as_ref().is_none_or(|(b, _, _)| e > *b) {
                best = Some((e, set, others));
            }
        }
        let (_, lines, others) = best.expect("at least one candidate");
        (lines, others)
    }
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v
}

/// One block's options as the allocation sees them: sizes `r·c` with their best energy.
struct Options {
    /// `(size, energy, r, c)` of every shape, in the block's own orientation (rows, columns).
    all: Vec<(usize, f64, usize, usize)>,
    /// Indices into `all` of the upper concave hull, from the empty shape up to the smallest
    /// shape of the block's full energy.
    hull: Vec<usize>,
}

impl Options {
    fn of(table: &Table, transposed: bool) -> Self {
        let mut all = Vec::with_capacity((table.r_max + 1) * (table.c_max + 1));
        for k in 0..=table.r_max {
            for c in 0..=table.c_max {
                let (r, cc) = if transposed { (c, k) } else { (k, c) };
                all.push((k * c, table.at(k, c), r, cc));
            }
        }
        // per size, the best energy (first shape reaching it); then the hull over sizes
        let mut by_size: Vec<usize> = (0..all.len()).collect();
        by_size.sort_by(|&a, &b| all[a].0.cmp(&all[b].0).then(all[b].1.total_cmp(&all[a].1)));
        let mut hull: Vec<usize> = Vec::new();
        let mut best = f64::NEG_INFINITY;
        for &o in &by_size {
            let (s, e, ..) = all[o];
            if e <= best || hull.last().is_some_and(|&h| all[h].0 == s) {
                // no more energy than a smaller shape, or a second shape of the same size
                continue;
            }
            best = e;
            // drop points under the chord from the one before them to this one (concavity)
            while hull.len() >= 2 {
                let (a, b) = (all[hull[hull.len() - 2]], all[hull[hull.len() - 1]]);
                let cross = (b.1 - a.1) * (s - a.0) as f64 - (e - a.1) * (b.0 - a.0) as f64;
                if cross <= 0.0 {
                    hull.pop();
                } else {
                    break;
                }
            }
            hull.push(o);
        }
        Self { all, hull }
    }
}

/// The BCR projection of `view` at `level`: the mask of the support keeping the most energy
/// within `level.budget(rows · cols)` weights, found as the module's documentation states.
pub fn project(view: &View, level: Level) -> Result<BcrMask, BcrError> {
    let block = level.block;
    block.fits(view.rows, view.cols)?;
    if let Some(i) = view.data.iter().position(|w| !w.is_finite()) {
        return Err(BcrError::NonFinite(format!(
            "weight {} at row {}, column {} of the GEMM view",
            view.data[i],
            i / view.cols,
            i % view.cols
        )));
    }
    let budget = level.budget(view.rows * view.cols);
    let mut mask = BcrMask::empty(view.rows, view.cols, block);
    let (br, bc) = mask.blocks();
    let energies: Vec<Energies> = (0..br * bc)
        .map(|b| {
            let (rows, cols) = mask.span(b / bc, b % bc);
            Energies::of(view, rows, cols)
        })
        .collect();
    let options: Vec<Options> = energies
        .iter()
        .map(|e| Options::of(&e.table(), e.transposed))
        .collect();
    let choice = allocate(&options, budget);
    for (b, (e, &o)) in energies.iter().zip(&choice).enumerate() {
        let (_, _, r, c) = options[b].all[o];
        let (k, c2) = if e.transposed { (c, r) } else { (r, c) };
        let (lines, others) = e.support(k, c2);
        let (rows, cols) = if e.transposed {
            (others, lines)
        } else {
            (lines, others)
        };
        let (bi, bj) = (b / bc, b % bc);
        let (rs, cs) = mask.span(bi, bj);
        for i in rows {
            mask.row_keep[bj * view.rows + rs.start + i] = true;
        }
        for j in cols {
            mask.col_keep[bi * view.cols + cs.start + j] = true;
        }
    }
    Ok(mask)
}

/// Each block's shape (an index into its `all`), `Σ size = budget` where some sequence of moves
/// reaches it: the hull greedy, then the fill (module documentation).
fn allocate(options: &[Options], budget: usize) -> Vec<usize> {
    // start empty: the first hull point of every block is its empty shape (size 0)
    let mut at: Vec<usize> = vec![0; options.len()];
    let mut used = 0usize;
    let mut segments: Vec<(f64, usize, usize)> = Vec::new();
    for (b, o) in options.iter().enumerate() {
        for h in 1..o.hull.len() {
            let (a, z) = (o.all[o.hull[h - 1]], o.all[o.hull[h]]);
            segments.push(((z.1 - a.1) / (z.0 - a.0) as f64, b, h));
        }
    }
    segments.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut stuck = vec![false; options.len()];
    for (_, b, h) in segments {
        if stuck[b] || at[b] != h - 1 {
            continue;
        }
        let o = &options[b];
        let grow = o.all[o.hull[h]].0 - o.all[o.hull[h - 1]].0;
        if used + grow <= budget {
            used += grow;
            at[b] = h;
        } else {
            stuck[b] = true;
        }
    }
    let mut shape: Vec<usize> = at.iter().zip(options).map(|(&h, o)| o.hull[h]).collect();
    // the fill: one move at a time, the one keeping the most energy, ties to the lower block
    // and the smaller growth
    while used < budget {
        let slack = budget - used;
        let mut best: Option<(f64, usize, usize, usize)> = None;
        for (b, o) in options.iter().enumerate() {
            let (s0, e0, ..) = o.all[shape[b]];
            for (i, &(s, e, ..)) in o.all.iter().enumerate() {
                if s > s0 && s - s0 <= slack {
                    let gain = e - e0;
                    // blocks come in ascending order: a tie with another block keeps the first
                    let better = best.is_none_or(|(g, bb, _, d)| {
                        gain > g || (gain == g && bb == b && s - s0 < d)
                    });
                    if better {
                        best = Some((gain, b, i, s - s0));
                    }
                }
            }
        }
        let Some((_, b, i, grow)) = best else { break };
        shape[b] = i;
        used += grow;
    }
    shape
}

/// The energy `mask` keeps of `view`, in f64.
pub fn retained(view: &View, mask: &BcrMask) -> f64 {
    mask.apply(view).energy()
}

#[cfg(test)]
mod tests;
