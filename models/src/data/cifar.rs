//! CIFAR-10 from local files: an ImageFolder of JPEG/PNG images (`train/<class>/*.jpg`,
//! `test/<class>/*.png`, e.g. `shared/datasets/cifar10-jpg.tar.gz` extracted), or the official
//! binary format (`data_batch_1..5.bin`, `test_batch.bin`: records of one label byte and
//! 3 × 1024 pixel bytes, red plane first). Training batches get the standard augmentation
//! (random 32×32 crop of the image zero-padded by 4, random horizontal flip); every batch is
//! normalised with CIFAR-10's per-channel mean and standard deviation.

use crate::error::{Error, Result};
use burn::data::dataloader::batcher::Batcher;
use burn::prelude::*;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Image side.
pub const SIDE: usize = 32;
/// Colour channels.
pub const CHANNELS: usize = 3;
/// Number of classes.
pub const CLASSES: usize = 10;
/// CIFAR-10's class names, in label order (the ImageFolder's sorted directory names).
pub const CLASS_NAMES: [&str; CLASSES] = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
];
/// Per-channel mean and standard deviation of the training set (pixels in [0, 1]).
const MEAN: [f32; 3] = [0.4914, 0.4822, 0.4465];
const STD: [f32; 3] = [0.2470, 0.2435, 0.2616];
/// Bytes of one binary record.
const RECORD: usize = 1 + CHANNELS * SIDE * SIDE;

/// One image and its label.
#[derive(Clone, Debug, PartialEq)]
pub struct CifarItem {
    /// `3 × 32 × 32` pixels, channel-major (all red, all green, all blue), 0..=255.
    pub pixels: Vec<u8>,
    /// The class, `0..10`.
    pub label: u8,
}

/// Where CIFAR-10 is read from.
#[derive(Clone, Debug, PartialEq)]
pub enum CifarSource {
    /// A directory with `train/` and `test/` ImageFolders of JPEG or PNG images.
    ImageFolder(PathBuf),
    /// A directory with the official binary batches.
    Binary(PathBuf),
}

impl CifarSource {
    /// The format found in `dir`: the binary batches if `test_batch.bin` is there, else an
    /// ImageFolder.
    pub fn detect(dir: &Path) -> Self {
        if dir.join("test_batch.bin").is_file() {
            Self::Binary(dir.to_path_buf())
        } else {
            Self::ImageFolder(dir.to_path_buf())
        }
    }
}

impl std::fmt::Display for CifarSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ImageFolder(d) => write!(f, "CIFAR-10 images in {}", d.display()),
            Self::Binary(d) => write!(f, "CIFAR-10 binary batches in {}", d.display()),
        }
    }
}

/// A split of CIFAR-10.
pub type CifarSplit = super::Split<CifarItem>;

/// Loads the training (`train = true`) or test split.
pub fn load(source: &CifarSource, train: bool) -> Result<CifarSplit> {
    match source {
        CifarSource::Binary(dir) => {
            let files: Vec<PathBuf> = if train {
                (1..=5)
                    .map(|i| dir.join(format!("data_batch_{i}.bin")))
                    .collect()
            } else {
                vec![dir.join("test_batch.bin")]
            };
            let mut items = Vec::new();
            for f in &files {
                if !f.is_file() {
                    return Err(Error::MissingFile {
                        path: f.clone(),
                        dir: dir.clone(),
                    });
                }
                let bytes = std::fs::read(f).map_err(|e| Error::io(f, e))?;
                items.extend(parse_binary(&bytes, f)?);
            }
            Ok(CifarSplit::new(items))
        }
        CifarSource::ImageFolder(dir) => {
            let split = dir.join(if train { "train" } else { "test" });
            load_image_folder(&split)
        }
    }
}

/// Decodes binary records (`label, 3072 pixels`), checking the length and the labels.
pub fn parse_binary(bytes: &[u8], origin: &Path) -> Result<Vec<CifarItem>> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(RECORD) {
        return Err(Error::malformed(
            origin,
            format!(
                "{} bytes is not a whole number of {RECORD}-byte CIFAR-10 records",
                bytes.len()
            ),
        ));
    }
    bytes
        .chunks_exact(RECORD)
        .enumerate()
        .map(|(i, r)| {
            if r[0] as usize >= CLASSES {
                return Err(Error::malformed(
                    origin,
                    format!("record {i} has label {}, expected 0-9", r[0]),
                ));
            }
            Ok(CifarItem {
                pixels: r[1..].to_vec(),
                label: r[0],
            })
        })
        .collect()
}

/// Reads an ImageFolder: one directory per class (labels in sorted name order), every `.jpg`,
/// `.jpeg` or `.png` in it a 32×32 image. The items come interleaved by class (the first image
/// of every class, then the second, …), so that the first N of a split (`--train-limit`,
/// `--test-limit`) are balanced over classes, as in the binary batches.
pub fn load_image_folder(dir: &Path) -> Result<CifarSplit> {
    let classes: Vec<PathBuf> = super::sorted_entries(dir)?
        .into_iter()
        .filter(|p| p.is_dir())
        .collect();
    if classes.len() != CLASSES {
        return Err(Error::malformed(
            dir,
            format!(
                "an ImageFolder of CIFAR-10 needs {CLASSES} class directories, found {}",
                classes.len()
            ),
        ));
    }
    let mut by_class = Vec::with_capacity(CLASSES);
    for (label, class) in classes.iter().enumerate() {
        let mut class_items = Vec::new();
        for file in super::sorted_entries(class)? {
            if !super::is_image_file(&file) {
                continue;
            }
            class_items.push(CifarItem {
                pixels: decode_image(&file)?,
                label: label as u8,
            });
        }
        by_class.push(class_items);
    }
    let items = super::interleave(by_class);
    if items.is_empty() {
        return Err(Error::malformed(dir, "no JPEG or PNG image in it"));
    }
    Ok(CifarSplit::new(items))
}

/// Decodes one 32×32 image file into channel-major RGB bytes.
pub fn decode_image(file: &Path) -> Result<Vec<u8>> {
    let img = image::open(file)
        .map_err(|e| Error::malformed(file, format!("cannot decode the image: {e}")))?
        .to_rgb8();
    if img.width() as usize != SIDE || img.height() as usize != SIDE {
        return Err(Error::malformed(
            file,
            format!(
                "the image is {}×{}, CIFAR-10 images are 32×32",
                img.width(),
                img.height()
            ),
        ));
    }
    let mut planar = vec![0u8; CHANNELS * SIDE * SIDE];
    for (i, px) in img.pixels().enumerate() {
        for c in 0..CHANNELS {
            planar[c * SIDE * SIDE + i] = px.0[c];
        }
    }
    Ok(planar)
}

/// A batch of normalised images `[batch, 3, 32, 32]` and their labels.
pub type CifarBatch<B> = super::Batch<B>;

/// Batches CIFAR items; with `augment`, every image is randomly cropped (4-pixel zero padding)
/// and flipped first, from a seeded generator.
pub struct CifarBatcher {
    augment: Option<Mutex<StdRng>>,
}

impl CifarBatcher {
    /// No augmentation (evaluation).
    pub fn plain() -> Self {
        Self { augment: None }
    }
    /// Random crop + flip, seeded.
    pub fn augmented(seed: u64) -> Self {
        Self {
            augment: Some(Mutex::new(StdRng::seed_from_u64(seed))),
        }
    }
}

/// `pixels` shifted by `(dy, dx)` with zeros shifted in (a crop of the 4-padded image), and
/// mirrored left-right when `flip`.
pub fn crop_flip(pixels: &[u8], dy: i32, dx: i32, flip: bool) -> Vec<u8> {
    let mut out = vec![0u8; pixels.len()];
    let s = SIDE as i32;
    for c in 0..CHANNELS {
        for y in 0..s {
            for x in 0..s {
                let (sy, sx) = (y + dy, if flip { s - 1 - x } else { x } + dx);
                if (0..s).contains(&sy) && (0..s).contains(&sx) {
                    out[c * SIDE * SIDE + (y * s + x) as usize] =
                        pixels[c * SIDE * SIDE + (sy * s + sx) as usize];
                }
            }
        }
    }
    out
}

impl<B: Backend> Batcher<B, CifarItem, CifarBatch<B>> for CifarBatcher {
    fn batch(&self, items: Vec<CifarItem>, device: &B::Device) -> CifarBatch<B> {
        let n = items.len();
        let plane = SIDE * SIDE;
        let mut data = Vec::with_capacity(n * CHANNELS * plane);
        let mut rng = self
            .augment
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()));
        for item in &items {
            let pixels = match rng.as_mut() {
                Some(rng) => {
                    let (dy, dx) = (rng.random_range(-4..=4), rng.random_range(-4..=4));
                    crop_flip(&item.pixels, dy, dx, rng.random_bool(0.5))
                }
                None => item.pixels.clone(),
            };
            for (i, &p) in pixels.iter().enumerate() {
                let c = i / plane;
                data.push((p as f32 / 255.0 - MEAN[c]) / STD[c]);
            }
        }
        let targets: Vec<i64> = items.iter().map(|i| i.label as i64).collect();
        CifarBatch {
            inputs: super::Inputs::Images(Tensor::from_data(
                TensorData::new(data, [n, CHANNELS, SIDE, SIDE]),
                device,
            )),
            targets: Tensor::from_data(TensorData::new(targets, [n]), device),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    /// Three real CIFAR-10 test images (lossless PNG, from `shared/datasets/cifar-samples`),
    /// committed beside the crate so the test needs nothing outside the repository.
    fn samples() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/cifar10")
    }

    #[test]
    fn binary_records_round_trip_and_bad_files_are_refused() {
        let mut bytes = Vec::new();
        for label in [3u8, 9] {
            bytes.push(label);
            bytes.extend((0..3072).map(|i| (i % 251) as u8 ^ label));
        }
        let items = parse_binary(&bytes, Path::new("x.bin")).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].label, 9);
        assert_eq!(items[1].pixels[5], 5 ^ 9);
        let short = parse_binary(&bytes[..3000], Path::new("x.bin")).unwrap_err();
        assert!(short.to_string().contains("not a whole number"), "{short}");
        let mut bad = bytes.clone();
        bad[RECORD] = 10;
        let err = parse_binary(&bad, Path::new("x.bin")).unwrap_err();
        assert!(err.to_string().contains("record 1 has label 10"), "{err}");
    }

    #[test]
    fn image_folders_come_interleaved_by_class() {
        let tmp = std::env::temp_dir().join(format!("ember-cifar-folder-{}", std::process::id()));
        for class in CLASS_NAMES {
            std::fs::create_dir_all(tmp.join(class)).unwrap();
        }
        let cat = samples().join("cifar10_00_3.png");
        // two airplanes, three cats, one truck
        for (class, n) in [("airplane", 2), ("cat", 3), ("truck", 1)] {
            for i in 0..n {
                std::fs::copy(&cat, tmp.join(class).join(format!("{i}.png"))).unwrap();
            }
        }
        let labels: Vec<u8> = load_image_folder(&tmp)
            .unwrap()
            .items()
            .iter()
            .map(|i| i.label)
            .collect();
        assert_eq!(labels, vec![0, 3, 9, 0, 3, 3]);
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn png_samples_decode_to_their_pixels() {
        // cifar10_00_3.png: the first CIFAR-10 test image, a cat (label 3)
        let dir = samples();
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cifar10_00_"))
            })
            .expect("the first CIFAR-10 sample");
        let planar = decode_image(&file).unwrap();
        assert_eq!(planar.len(), 3 * 32 * 32);
        let rgb = image::open(&file).unwrap().to_rgb8();
        let px = rgb.get_pixel(7, 5).0;
        for (c, v) in px.into_iter().enumerate() {
            assert_eq!(planar[c * 1024 + 5 * 32 + 7], v);
        }
        // not an image, and the wrong size
        let tmp = std::env::temp_dir().join(format!("ember-cifar-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(tmp.join("a.png"), b"not a png").unwrap();
        let err = decode_image(&tmp.join("a.png")).unwrap_err();
        assert!(err.to_string().contains("cannot decode"), "{err}");
        image::RgbImage::new(16, 16)
            .save(tmp.join("b.png"))
            .unwrap();
        let err = decode_image(&tmp.join("b.png")).unwrap_err();
        assert!(err.to_string().contains("16×16"), "{err}");
        // a folder without ten class directories
        let err = load_image_folder(&tmp).err().unwrap();
        assert!(err.to_string().contains("10 class directories"), "{err}");
        // an ImageFolder: labels from the sorted class directories, the pixels of the files
        let folder = tmp.join("test");
        for name in CLASS_NAMES {
            std::fs::create_dir_all(folder.join(name)).unwrap();
        }
        std::fs::copy(&file, folder.join("cat/0000.png")).unwrap();
        std::fs::write(folder.join("cat/notes.txt"), "skipped").unwrap();
        let split = load(&CifarSource::ImageFolder(tmp.clone()), false).unwrap();
        assert_eq!(split.len(), 1);
        assert_eq!(split.items()[0].label, 3);
        assert_eq!(split.items()[0].pixels, planar);
        std::fs::copy(tmp.join("b.png"), folder.join("dog/0001.png")).unwrap();
        let err = load(&CifarSource::ImageFolder(tmp.clone()), false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("16×16"), "{err}");
        let err = load(&CifarSource::Binary(tmp.clone()), true).err().unwrap();
        assert!(err.to_string().contains("data_batch_1.bin"), "{err}");
        let _ = std::fs::remove_dir_all(&tmp);
    }

    #[test]
    fn crop_and_flip_move_pixels_and_pad_with_zeros() {
        let pixels: Vec<u8> = (0..3072).map(|i| (i % 256) as u8).collect();
        assert_eq!(crop_flip(&pixels, 0, 0, false), pixels);
        let shifted = crop_flip(&pixels, 2, -3, false);
        assert_eq!(shifted[5 * 32 + 7], pixels[7 * 32 + 4]);
        assert_eq!(
            shifted[31 * 32],
            0,
            "rows shifted in from below the image are zero"
        );
        let flipped = crop_flip(&pixels, 0, 0, true);
        assert_eq!(flipped[1024 + 3 * 32], pixels[1024 + 3 * 32 + 31]);
    }

    #[test]
    fn batches_are_normalised_and_augmentation_is_seeded() {
        let item = CifarItem {
            pixels: vec![255; 3072],
            label: 4,
        };
        let batch: CifarBatch<NdArray> =
            CifarBatcher::plain().batch(vec![item.clone()], &Default::default());
        let images = batch.inputs.images();
        assert_eq!(images.dims(), [1, 3, 32, 32]);
        let v: Vec<f32> = images.into_data().to_vec().unwrap();
        assert!((v[0] - (1.0 - MEAN[0]) / STD[0]).abs() < 1e-6);
        assert!((v[2048] - (1.0 - MEAN[2]) / STD[2]).abs() < 1e-6);
        let varied = CifarItem {
            pixels: (0..3072).map(|i| (i * 7 % 256) as u8).collect(),
            label: 1,
        };
        let run = |seed| -> Vec<f32> {
            let b: CifarBatch<NdArray> =
                CifarBatcher::augmented(seed).batch(vec![varied.clone(); 4], &Default::default());
            b.inputs.images().into_data().to_vec().unwrap()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
