//! Weight-gradient products with their long sum split across a GPU ("split-K").
//!
//! A weight gradient sums over every position of the batch: a convolution's over `B·L` (batch
//! × output positions), a linear layer's over `B·T` rows. Its output is small (`C_out × K`) and
//! cubek's matmul, as burn-cubecl 0.21 runs it without autotune (`SimpleCyclicCmma` on CUDA),
//! gives each cube one tile of the output and loops over the whole sum. ResNet-18-CIFAR's
//! first-stage weight gradient at batch 128 is a `64 × 576` output over 131,072 terms: a dozen
//! cubes on a GPU of 132 multiprocessors, each looping 131,072 times.
//!
//! Here the sum is cut into `S` equal chunks ([`chunks`]), the chunks run as one batched matmul
//! of `S` times as many cubes, and the `S` partial products are added (`sum_dim`). `S` is
//! chosen so that the cubes cover the device twice, each chunk keeps at least [`MIN_CHUNK`]
//! terms, and `S` divides the sum. [`weight_product`] splits operands as they lie (a linear
//! layer's rows are cut with no copy; chunks along a contiguous axis are copied by cubek's
//! matmul); a convolution's weight gradient splits into runs of whole samples whose im2col
//! columns are stored together instead (`ops::conv::native_weight_grad`,
//! [`sample_chunks`]). A CPU running the kernels (lavapipe) and the host backends keep the one
//! product: more cubes do not help two cores, and the copies do cost (measured in
//! `docs/architecture.md`, "Weight gradients on a GPU").
//!
//! The partial sums change the order of the additions, so a split product differs from the
//! unsplit one in the last bits.

use super::matmul::reshape;
use burn_backend::TensorMetadata;
use burn_backend::tensor::FloatTensor;
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use cubecl_kernels::decorator::{CubeVisitor, KernelBackend};
use cubecl_kernels::matmul::{self, MatmulKernel};

/// The fewest terms of the sum one chunk keeps.
pub const MIN_CHUNK: usize = 256;

/// The side of the output tile one cube is taken to compute (cubek's CMMA tiles are 64 to 128
/// wide; the smaller side counts cubes generously).
pub const TILE: usize = 64;

/// Into how many chunks to split the `k`-term sums of `groups` products of `m × n` outputs on
/// a device of `units` multiprocessors (0 for a CPU): 1 where the output's tiles alone cover
/// the device twice; else the largest divisor of `k` up to what covers it twice, with chunks of
/// at least [`MIN_CHUNK`] terms.
pub fn chunks(groups: usize, m: usize, n: usize, k: usize, units: usize) -> usize {
    split(groups, m, n, k, k, units)
}

/// [`chunks`] for a convolution's weight gradient split into runs of whole samples: the sum
/// has `batch · positions` terms and the count divides `batch`.
pub fn sample_chunks(
    groups: usize,
    m: usize,
    n: usize,
    batch: usize,
    positions: usize,
    units: usize,
) -> usize {
    split(groups, m, n, batch * positions, batch, units)
}

/// The chunks of a `k`-term sum, a divisor of `parts` (see [`chunks`]).
fn split(groups: usize, m: usize, n: usize, k: usize, parts: usize, units: usize) -> usize {
    if units == 0 {
        return 1;
    }
    let tiles = (groups * m.div_ceil(TILE) * n.div_ceil(TILE)).max(1);
    let want = (2 * units).div_ceil(tiles);
    let most = want.min(k / MIN_CHUNK);
    (1..=most)
        .rev()
        .find(|s| parts.is_multiple_of(*s))
        .unwrap_or(1)
}

/// How the two operands hold the sum's axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `a: [G, m, k]`, `b: [G, n, k]` → `a · bᵀ`, `[G, m, n]` (a convolution's weight
    /// gradient: the output gradient and the im2col columns, positions innermost).
    Inner,
    /// `a: [k, m]`, `b: [k, n]` → `aᵀ · b`, `[m, n]` (a linear layer's weight gradient: the
    /// inputs and the output gradient as rows).
    Outer,
}

/// How a product's sum is split.
#[derive(Clone, Copy, Debug)]
pub enum Split {
    /// By [`chunks`] from the runtime's multiprocessors
    /// ([`cubecl_kernels::runtime::gpu_units`]: 0 on a CPU, so never split there).
    Auto,
    /// Exactly this many chunks (tests, and benchmarks of the split itself).
    Chunks(usize),
}

struct Product {
    layout: Layout,
    split: Split,
    kernel: MatmulKernel,
}

impl Product {
    /// `(groups, m, n, k)` of the operands' shapes.
    fn dims<B: KernelBackend>(&self, a: &FloatTensor<B>, b: &FloatTensor<B>) -> [usize; 4] {
        let (sa, sb) = (a.shape(), b.shape());
        match self.layout {
            Layout::Inner => [sa[0], sa[1], sb[1], sa[2]],
            Layout::Outer => [1, sa[1], sb[1], sa[0]],
        }
    }

    fn run<B: KernelBackend>(
        &self,
        a: FloatTensor<B>,
        b: FloatTensor<B>,
        s: usize,
    ) -> FloatTensor<B> {
        let [g, m, n, k] = self.dims::<B>(&a, &b);
        assert!(
            s >= 1 && k % s == 0,
            "split-K: {s} chunks of a {k}-term sum"
        );
        let c = k / s;
        let product = |l, r| matmul::matmul::<B>(self.kernel, l, r).0;
        match (self.layout, s) {
            (Layout::Inner, 1) => product(a, B::float_swap_dims(b, 1, 2)),
            (Layout::Outer, 1) => product(B::float_swap_dims(a, 0, 1), b),
            (Layout::Inner, _) => {
                // [G, m, S, c] → [G, S, m, c]; [G, n, S, c] → [G, S, c, n]
                let a = B::float_permute(reshape::<B>(a, &[g, m, s, c]), &[0, 2, 1, 3]);
                let b = B::float_permute(reshape::<B>(b, &[g, n, s, c]), &[0, 2, 3, 1]);
                let partial = product(a, b); // [G, S, m, n]
                reshape::<B>(B::float_sum_dim(partial, 1), &[g, m, n])
            }
            (Layout::Outer, _) => {
                // [S, c, m] → [S, m, c] (a transposed view); [S, c, n]
                let a = B::float_swap_dims(reshape::<B>(a, &[s, c, m]), 1, 2);
                let b = reshape::<B>(b, &[s, c, n]);
                reshape::<B>(B::float_sum_dim(product(a, b), 0), &[m, n])
            }
        }
    }
}

impl<B: KernelBackend> CubeVisitor<B> for Product {
    type Output = FloatTensor<B>;

    fn cube<R: CubeRuntime>(
        self,
        inputs: Vec<CubeTensor<R>>,
        rewrap: &dyn Fn(CubeTensor<R>) -> FloatTensor<B>,
    ) -> FloatTensor<B> {
        let units = cubecl_kernels::runtime::gpu_units(&inputs[0].client);
        let mut it = inputs.into_iter().map(rewrap);
        let (a, b) = (it.next().expect("a"), it.next().expect("b"));
        let s = match self.split {
            Split::Chunks(s) => s,
            Split::Auto => {
                let [g, m, n, k] = self.dims::<B>(&a, &b);
                chunks(g, m, n, k, units)
            }
        };
        self.run::<B>(a, b, s)
    }

    fn host(self, inputs: Vec<FloatTensor<B>>) -> FloatTensor<B> {
        let mut it = inputs.into_iter();
        let (a, b) = (it.next().expect("a"), it.next().expect("b"));
        let s = match self.split {
            Split::Chunks(s) => s,
            Split::Auto => 1,
        };
        self.run::<B>(a, b, s)
    }
}

/// The weight-gradient product of `a` and `b` laid out as `layout` says, its sum split as
/// `split` says (see the module's docs), its matmuls on `kernel`. Panics if [`Split::Chunks`]
/// does not divide the sum.
pub fn weight_product<B: KernelBackend>(
    layout: Layout,
    a: FloatTensor<B>,
    b: FloatTensor<B>,
    split: Split,
    kernel: MatmulKernel,
) -> FloatTensor<B> {
    let product = Product {
        layout,
        split,
        kernel,
    };
    B::visit(product, vec![a, b])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_and_outputs_that_fill_the_device_keep_one_product() {
        assert_eq!(chunks(1, 64, 576, 131_072, 0), 1);
        // 8 × 72 tiles of 64 cover 132 multiprocessors more than twice
        assert_eq!(chunks(1, 512, 4608, 2048, 132), 1);
    }

    #[test]
    fn a_few_output_tiles_split_the_sum_to_cover_the_device_twice() {
        // ResNet-18-CIFAR's first stage at b128: 1 × 9 tiles; 264 / 9 → 30, the largest
        // divisor of 2^17 up to 30 is 16
        assert_eq!(chunks(1, 64, 576, 131_072, 132), 16);
        // DeiT-Ti's 192 × 192 weight over 64 × 65 rows: 9 tiles, 30 wanted, 4160 / 256 = 16
        // at most, and 16 divides 4160
        assert_eq!(chunks(1, 192, 192, 4160, 132), 16);
        // 3 · 1031 terms: at most 12 chunks, of which only 3 divides the sum
        assert_eq!(chunks(1, 192, 192, 3093, 132), 3);
    }

    #[test]
    fn sample_chunks_divide_the_batch() {
        // ResNet-18-CIFAR's first stage at b128 (L = 1024): 16 runs of 8 samples
        assert_eq!(sample_chunks(1, 64, 576, 128, 1024, 132), 16);
        // its last stage (512 × 4608 outputs: 576 tiles) is not split
        assert_eq!(sample_chunks(1, 512, 4608, 128, 16, 132), 1);
        // a batch of 24 at 64 positions: 9 tiles want 30 chunks, 6 keep 256 terms; 6 divides 24
        assert_eq!(sample_chunks(1, 64, 576, 24, 64, 132), 6);
        // a prime batch is not split into samples
        assert_eq!(sample_chunks(1, 64, 576, 127, 1024, 132), 1);
        assert_eq!(sample_chunks(1, 64, 576, 128, 1024, 0), 1);
    }

    #[test]
    fn chunks_keep_their_minimum_length_and_divide_the_sum() {
        for k in [1, 255, 256, 511, 1000, 4099, 65_536] {
            let s = chunks(1, 8, 8, k, 132);
            assert_eq!(k % s, 0, "k {k}");
            assert!(s == 1 || k / s >= MIN_CHUNK, "k {k}: {s} chunks");
        }
        // a prime sum has no split
        assert_eq!(chunks(1, 8, 8, 4099, 132), 1);
    }
}
