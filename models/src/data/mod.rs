//! Data loaders. Every loader reads local files (nothing is downloaded at run time).

pub mod cifar;
pub mod fsdd;
pub mod idx;
pub mod mfcc;
pub mod mnist;
pub mod sequence;
pub mod ts;

use crate::error::{Error, Result};
use burn::prelude::*;
use std::path::PathBuf;

/// A batch of normalised images and their labels, whatever the dataset.
#[derive(Clone, Debug)]
pub struct ImageBatch<B: Backend> {
    /// `[batch, channels, side, side]`, normalised per channel.
    pub images: Tensor<B, 4>,
    /// `[batch]` class indices.
    pub targets: Tensor<B, 1, Int>,
}

/// Shape of a dataset's images and number of classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSpec {
    /// Colour channels.
    pub channels: usize,
    /// Image side in pixels (images are square).
    pub side: usize,
    /// Number of classes.
    pub classes: usize,
}

/// The datasets `ember train` and `ember eval` read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetKind {
    /// MNIST-like idx files (MNIST, Fashion-MNIST); the embedded MNIST subset by default.
    Mnist,
    /// CIFAR-10: an ImageFolder of JPEG/PNG (`train/`, `test/`) or the official binary batches.
    Cifar10,
}

crate::choices!(DatasetKind {
    Mnist => "mnist",
    Cifar10 => "cifar10",
});

impl DatasetKind {
    /// Shape of its images and number of classes.
    pub fn spec(self) -> ImageSpec {
        match self {
            Self::Mnist => ImageSpec {
                channels: 1,
                side: mnist::SIDE,
                classes: mnist::CLASSES,
            },
            Self::Cifar10 => ImageSpec {
                channels: cifar::CHANNELS,
                side: cifar::SIDE,
                classes: cifar::CLASSES,
            },
        }
    }
}

/// Where a dataset is read from.
#[derive(Clone, Debug, PartialEq)]
pub enum DataSource {
    /// MNIST-like idx files, or the embedded subset.
    Mnist(mnist::MnistSource),
    /// CIFAR-10 files.
    Cifar10(cifar::CifarSource),
}

impl DataSource {
    /// The source of `kind` in `dir` (`None`: the embedded data, which only MNIST has).
    pub fn new(kind: DatasetKind, dir: Option<PathBuf>) -> Result<Self> {
        match (kind, dir) {
            (DatasetKind::Mnist, dir) => Ok(Self::Mnist(
                dir.map_or(mnist::MnistSource::Embedded, mnist::MnistSource::Dir),
            )),
            (DatasetKind::Cifar10, Some(dir)) => {
                if !dir.is_dir() {
                    return Err(Error::Invalid(format!(
                        "--data-dir {}: no such directory",
                        dir.display()
                    )));
                }
                Ok(Self::Cifar10(cifar::CifarSource::detect(&dir)))
            }
            (DatasetKind::Cifar10, None) => Err(Error::Invalid(
                "--dataset cifar10 needs --data-dir: a directory with train/ and test/ image \
                 folders (e.g. ../shared/datasets/cifar10-jpg.tar.gz extracted) or the official \
                 binary batches (data_batch_1.bin … test_batch.bin)"
                    .into(),
            )),
        }
    }

    /// Which dataset this is.
    pub fn kind(&self) -> DatasetKind {
        match self {
            Self::Mnist(_) => DatasetKind::Mnist,
            Self::Cifar10(_) => DatasetKind::Cifar10,
        }
    }

    /// Shape of its images and number of classes.
    pub fn spec(&self) -> ImageSpec {
        self.kind().spec()
    }
}

impl std::fmt::Display for DataSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Mnist(s) => s.fmt(f),
            Self::Cifar10(s) => s.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cifar_needs_an_existing_directory() {
        let err = DataSource::new(DatasetKind::Cifar10, None).unwrap_err();
        assert!(err.to_string().contains("needs --data-dir"), "{err}");
        let err =
            DataSource::new(DatasetKind::Cifar10, Some("/nonexistent/cifar".into())).unwrap_err();
        assert!(err.to_string().contains("no such directory"), "{err}");
        let mnist = DataSource::new(DatasetKind::Mnist, None).unwrap();
        assert_eq!((mnist.kind(), mnist.spec().side), (DatasetKind::Mnist, 28));
    }
}
