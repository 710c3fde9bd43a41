//! How a contraction weight in Burn's layout maps to the `out × K` GEMM view its packed forms
//! (HiNM's, BCRC's) are stored in. Plain host code.

/// How a weight of Burn's layout maps to the `out × K` view of its packed form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A Linear weight `[d_in, d_out]`: `out = d_out`, `K = d_in`.
    Linear {
        /// Inputs.
        d_in: usize,
        /// Outputs.
        d_out: usize,
    },
    /// A convolution weight `[c_out, c_in, k…]`: `out = c_out`, `K = c_in · Π k`.
    Conv {
        /// The weight's dimensions (rank 3 to 5).
        dims: [usize; 5],
        /// Its rank.
        rank: usize,
    },
}

impl Layout {
    /// The layout of a weight of shape `dims`, or `None` for a shape that is not a contraction
    /// weight (rank < 2 or > 5).
    pub fn of(dims: &[usize]) -> Option<Self> {
        match dims.len() {
            2 => Some(Self::Linear {
                d_in: dims[0],
                d_out: dims[1],
            }),
            3..=5 => {
                let mut all = [1; 5];
                all[..dims.len()].copy_from_slice(dims);
                Some(Self::Conv {
                    dims: all,
                    rank: dims.len(),
                })
            }
            _ => None,
        }
    }

    /// `(out, K)` of the GEMM view.
    pub fn view(&self) -> (usize, usize) {
        match *self {
            Self::Linear { d_in, d_out } => (d_out, d_in),
            Self::Conv { dims, rank } => (dims[0], dims[1..rank].iter().product()),
        }
    }

    /// The weight's shape in Burn's layout.
    pub fn shape(&self) -> Vec<usize> {
        match *self {
            Self::Linear { d_in, d_out } => vec![d_in, d_out],
            Self::Conv { dims, rank } => dims[..rank].to_vec(),
        }
    }

    /// The weight in Burn's layout from its `out × K` view (row-major).
    pub fn from_view(&self, view: &[f32]) -> Vec<f32> {
        match *self {
            Self::Linear { d_in, d_out } => {
                let mut w = vec![0f32; d_in * d_out];
                for o in 0..d_out {
                    for i in 0..d_in {
                        w[i * d_out + o] = view[o * d_in + i];
                    }
                }
                w
            }
            Self::Conv { .. } => view.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_weights_are_the_transpose_of_their_view() {
        let l = Layout::of(&[3, 2]).unwrap();
        assert_eq!(l.view(), (2, 3));
        assert_eq!(l.shape(), [3, 2]);
        // view rows: outputs [1 2 3] and [4 5 6]; Burn's [d_in, d_out] row-major
        assert_eq!(
            l.from_view(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
        );
    }

    #[test]
    fn convolution_weights_are_their_view() {
        let l = Layout::of(&[4, 3, 2, 5]).unwrap();
        assert_eq!(l.view(), (4, 30));
        assert_eq!(l.shape(), [4, 3, 2, 5]);
        assert_eq!(Layout::of(&[4, 3, 2]).unwrap().view(), (4, 6));
        let v: Vec<f32> = (0..120).map(|i| i as f32).collect();
        assert_eq!(l.from_view(&v), v);
        assert_eq!(Layout::of(&[7]), None);
        assert_eq!(Layout::of(&[1, 1, 1, 1, 1, 1]), None);
    }
}
