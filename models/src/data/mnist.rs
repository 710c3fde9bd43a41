//! MNIST and Fashion-MNIST: idx files in a directory, or the embedded MNIST subset.

use super::idx::{self, IdxArray};
use crate::error::{Error, Result};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, InMemDataset};
use burn::prelude::*;
use std::path::{Path, PathBuf};

/// Image side of MNIST-like data.
pub const SIDE: usize = 28;
/// Number of classes.
pub const CLASSES: usize = 10;
/// MNIST's pixel mean and standard deviation (over the training set, pixels in [0, 1]).
const MEAN: f32 = 0.1307;
const STD: f32 = 0.3081;

/// One image and its label.
#[derive(Clone, Debug)]
pub struct MnistItem {
    /// 28×28 pixels, row-major, 0..=255.
    pub pixels: Vec<u8>,
    /// The class, 0..=9.
    pub label: u8,
}

/// A split of an MNIST-like dataset.
pub struct MnistSplit {
    items: InMemDataset<MnistItem>,
}

impl MnistSplit {
    /// Builds a split from decoded image and label arrays, checking that they agree.
    pub fn from_arrays(images: IdxArray, labels: IdxArray, origin: &Path) -> Result<Self> {
        if images.dims.len() != 3 || images.dims[1] != SIDE || images.dims[2] != SIDE {
            return Err(Error::malformed(
                origin,
                format!(
                    "images have dimensions {:?}, expected [n, 28, 28]",
                    images.dims
                ),
            ));
        }
        if images.dims[0] != labels.dims[0] {
            return Err(Error::malformed(
                origin,
                format!("{} images but {} labels", images.dims[0], labels.dims[0]),
            ));
        }
        if let Some(bad) = labels.data.iter().find(|&&l| l as usize >= CLASSES) {
            return Err(Error::malformed(
                origin,
                format!("label {bad} is not a digit class 0-9"),
            ));
        }
        let items = images
            .data
            .chunks_exact(SIDE * SIDE)
            .zip(labels.data.iter())
            .map(|(p, &label)| MnistItem {
                pixels: p.to_vec(),
                label,
            })
            .collect();
        Ok(Self {
            items: InMemDataset::new(items),
        })
    }

    /// Keeps the first `n` items (all if `n` is larger).
    pub fn truncate(self, n: usize) -> Self {
        let items: Vec<_> = self.items.iter().take(n).collect();
        Self {
            items: InMemDataset::new(items),
        }
    }

    /// The items as a Burn dataset.
    pub fn dataset(self) -> InMemDataset<MnistItem> {
        self.items
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the split is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Where the data comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MnistSource {
    /// The MNIST subset compiled into the binary (12,000 train / 2,000 test images).
    Embedded,
    /// A directory with the standard idx files (`train-images-idx3-ubyte[.gz]`, ...).
    Dir(PathBuf),
}

impl std::fmt::Display for MnistSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Embedded => write!(f, "embedded MNIST subset (12000 train / 2000 test)"),
            Self::Dir(d) => write!(f, "{}", d.display()),
        }
    }
}

const EMBEDDED: [(&str, &[u8]); 4] = [
    (
        "train-images-idx3-ubyte",
        include_bytes!("../../data/mnist-subset/train-images-idx3-ubyte.gz"),
    ),
    (
        "train-labels-idx1-ubyte",
        include_bytes!("../../data/mnist-subset/train-labels-idx1-ubyte.gz"),
    ),
    (
        "t10k-images-idx3-ubyte",
        include_bytes!("../../data/mnist-subset/t10k-images-idx3-ubyte.gz"),
    ),
    (
        "t10k-labels-idx1-ubyte",
        include_bytes!("../../data/mnist-subset/t10k-labels-idx1-ubyte.gz"),
    ),
];

fn load_array(source: &MnistSource, name: &str, dims: usize) -> Result<IdxArray> {
    match source {
        MnistSource::Dir(dir) => {
            if !dir.is_dir() {
                return Err(Error::Invalid(format!(
                    "--data-dir {} is not a directory",
                    dir.display()
                )));
            }
            idx::read(dir, name, dims)
        }
        MnistSource::Embedded => {
            let (_, gz) = EMBEDDED
                .iter()
                .find(|(n, _)| *n == name)
                .expect("embedded file list");
            let path = PathBuf::from(format!("<embedded>/{name}.gz"));
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(*gz), &mut bytes)
                .map_err(|e| Error::io(&path, e))?;
            idx::parse(&bytes, dims, &path)
        }
    }
}

/// Loads the training or test split.
pub fn load(source: &MnistSource, train: bool) -> Result<MnistSplit> {
    let prefix = if train { "train" } else { "t10k" };
    let images = load_array(source, &format!("{prefix}-images-idx3-ubyte"), 3)?;
    let labels = load_array(source, &format!("{prefix}-labels-idx1-ubyte"), 1)?;
    let origin = match source {
        MnistSource::Dir(d) => d.join(format!("{prefix}-*")),
        MnistSource::Embedded => PathBuf::from(format!("<embedded>/{prefix}-*")),
    };
    MnistSplit::from_arrays(images, labels, &origin)
}

/// A batch of normalised MNIST images `[batch, 1, 28, 28]` and their labels.
pub type MnistBatch<B> = super::Batch<B>;

/// Turns items into a [`MnistBatch`].
#[derive(Clone, Debug, Default)]
pub struct MnistBatcher;

impl<B: Backend> Batcher<B, MnistItem, MnistBatch<B>> for MnistBatcher {
    fn batch(&self, items: Vec<MnistItem>, device: &B::Device) -> MnistBatch<B> {
        let n = items.len();
        let pixels: Vec<f32> = items
            .iter()
            .flat_map(|it| it.pixels.iter().map(|&p| (p as f32 / 255.0 - MEAN) / STD))
            .collect();
        let labels: Vec<i64> = items.iter().map(|it| it.label as i64).collect();
        MnistBatch {
            inputs: super::Inputs::Images(Tensor::from_data(
                TensorData::new(pixels, [n, 1, SIDE, SIDE]),
                device,
            )),
            targets: Tensor::from_data(TensorData::new(labels, [n]), device),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_subset_is_real_mnist() {
        let train = load(&MnistSource::Embedded, true).unwrap();
        let test = load(&MnistSource::Embedded, false).unwrap();
        assert_eq!((train.len(), test.len()), (12000, 2000));
        // The first training labels of MNIST are 5, 0, 4, 1, 9, 2.
        let first: Vec<u8> = train.dataset().iter().take(6).map(|i| i.label).collect();
        assert_eq!(first, vec![5, 0, 4, 1, 9, 2]);
    }

    fn rejected(dims: Vec<usize>, labels: Vec<u8>) -> String {
        let n: usize = dims.iter().product();
        let images = IdxArray {
            dims,
            data: vec![0; n],
        };
        let labels = IdxArray {
            dims: vec![labels.len()],
            data: labels,
        };
        match MnistSplit::from_arrays(images, labels, Path::new("d")) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn images_and_labels_must_agree() {
        let err = rejected(vec![2, 28, 28], vec![0, 1, 2]);
        assert!(err.contains("2 images but 3 labels"), "{err}");
        let err = rejected(vec![2, 14, 14], vec![0, 1]);
        assert!(err.contains("expected [n, 28, 28]"), "{err}");
        let err = rejected(vec![2, 28, 28], vec![0, 12]);
        assert!(err.contains("label 12"), "{err}");
    }
}
