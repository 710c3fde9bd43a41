//! Pretrained weights against PyTorch itself: the fixtures of
//! `testdata/pretrained/make_fixtures.py` (torchvision's and timm's exact key layouts, random
//! weights, PyTorch's logits on a batch).

use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::TensorData;
use ember_models::classifier::ModelKind;
use ember_models::deit::DeitConfig;
use ember_models::pretrained::{self, Architecture, Names, StateDict};
use ember_models::resnet::{Depth, ResNetConfig};
use ember_models::shape::Shape;
use std::path::{Path, PathBuf};

type B = NdArray;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/pretrained")
        .join(name)
}

fn tensor<const D: usize>(data: &TensorData) -> Tensor<B, D> {
    Tensor::from_data(data.clone().convert::<f32>(), &Default::default())
}

/// PyTorch's input and logits for fixture `name`.
fn expected(name: &str) -> (Tensor<B, 4>, Vec<f32>) {
    let dict = StateDict::open(&fixture("expected.safetensors")).unwrap();
    let input = tensor(dict.get(&format!("{name}.input")).unwrap());
    let logits = dict.get(&format!("{name}.logits")).unwrap().clone();
    (input, logits.to_vec().unwrap())
}

fn assert_close(got: Tensor<B, 2>, want: &[f32], what: &str) {
    let got: Vec<f32> = got.into_data().to_vec().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * scale,
            "{what}: logit {i} is {g}, PyTorch's {w}"
        );
    }
}

/// The model a fixture holds, built at its shape and loaded, with its logits on the input.
fn imported(file: &str) -> (Architecture, Vec<u8>, Tensor<B, 2>) {
    let name = file.split('.').next().unwrap();
    let dict = StateDict::open(&fixture(file)).unwrap();
    let (input, _) = expected(name);
    let device = Default::default();
    let arch = dict.architecture().unwrap();
    let (bytes, logits) = match &arch {
        Architecture::ResNet(c) => {
            let names = Names::torchvision(c);
            let m = pretrained::load(c.init::<B>(&device), &dict, &names).unwrap();
            (pretrained::export(&m, &names).unwrap(), m.forward(input))
        }
        Architecture::Deit(c) => {
            let m = pretrained::load(c.init::<B>(&device), &dict, &Names::Timm).unwrap();
            (
                pretrained::export(&m, &Names::Timm).unwrap(),
                m.forward(input),
            )
        }
    };
    if let Ok(dir) = std::env::var("EMBER_EXPORT_DIR") {
        std::fs::write(Path::new(&dir).join(format!("{name}.safetensors")), &bytes).unwrap();
    }
    (arch, bytes, logits)
}

#[test]
fn torchvision_resnets_give_pytorchs_logits() {
    for (file, kind, depth, width, classes) in [
        ("resnet18-w8.pth", ModelKind::Resnet18, Depth::R18, 8, 5),
        ("resnet50-w4.pth", ModelKind::Resnet50, Depth::R50, 4, 3),
    ] {
        let (arch, _, logits) = imported(file);
        let mut want = ResNetConfig::new(depth, false, classes).with_width(width);
        want.channels = 3;
        assert_eq!(arch, Architecture::ResNet(want), "{file}");
        // what a run or a packed model from them records to be rebuilt at their width
        assert_eq!(kind.shape_of(&arch), Some(Shape::Resnet { width }));
        let own = Architecture::ResNet(ResNetConfig::new(depth, false, classes));
        assert_eq!(kind.shape_of(&own), None, "{file}");
        let (_, expected) = expected(file.split('.').next().unwrap());
        assert_close(logits, &expected, file);
    }
}

/// The DeiT of `deit-d128.safetensors` (dim 128, 2 blocks, 2 heads, 16×16 patches of 32×32
/// RGB images) with `classes` classes.
pub fn deit_d128(classes: usize) -> DeitConfig {
    DeitConfig {
        dim: 128,
        depth: 2,
        heads: 2,
        image_size: 32,
        patch_size: 16,
        channels: 3,
        classes,
    }
}

#[test]
fn a_timm_deit_in_f16_gives_pytorchs_logits() {
    let (arch, _, logits) = imported("deit-d128.safetensors");
    let want = deit_d128(4);
    assert_eq!(arch, Architecture::Deit(want.clone()));
    assert_close(logits, &expected("deit-d128").1, "deit");
    let shape = Shape::Deit {
        dim: 128,
        depth: 2,
        heads: 2,
        patch: 16,
    };
    assert_eq!(ModelKind::DeitTi.shape_of(&arch), Some(shape));
    // the zoo's DeiT-Ti: 4×4 patches of CIFAR's images
    let own = DeitConfig {
        image_size: 32,
        patch_size: ember_models::classifier::DEIT_PATCH,
        ..DeitConfig::tiny(10)
    };
    assert_eq!(ModelKind::DeitTi.shape_of(&Architecture::Deit(own)), None);
}

/// The CRC-32 of each export that `make_fixtures.py --check` loaded into PyTorch strictly
/// (`load_state_dict(strict=True)`) and found to give PyTorch's logits.
#[test]
fn exports_are_the_files_pytorch_loaded() {
    let text = std::fs::read_to_string(fixture("exports.json")).unwrap();
    let digests: std::collections::BTreeMap<String, u32> = serde_json::from_str(&text).unwrap();
    for file in [
        "resnet18-w8.pth",
        "resnet50-w4.pth",
        "deit-d128.safetensors",
    ] {
        let name = file.split('.').next().unwrap();
        let (_, bytes, _) = imported(file);
        assert_eq!(crc32fast::hash(&bytes), digests[name], "{name}");
    }
}

#[test]
fn import_export_import_is_bit_exact() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["resnet18-w8.pth", "deit-d128.safetensors"] {
        let (_, bytes, _) = imported(file);
        let out = dir.path().join("again.safetensors");
        std::fs::write(&out, &bytes).unwrap();
        let (first, again) = (
            StateDict::open(&fixture(file)).unwrap(),
            StateDict::open(&out).unwrap(),
        );
        // parameters bit-exact; torchvision's batch-norm counters are not parameters
        for key in first.keys().filter(|k| !k.ends_with("num_batches_tracked")) {
            let a = first.get(key).unwrap().clone().convert::<f32>();
            let b = again.get(key).unwrap().clone().convert::<f32>();
            assert_eq!(a, b, "{file}: {key}");
        }
        assert_eq!(first.keys().count(), again.keys().count(), "{file}");
        // and once more: the second export is the same bytes
        let (_, twice, _) = {
            let dict = StateDict::open(&out).unwrap();
            let arch = dict.architecture().unwrap();
            let bytes = match arch {
                Architecture::ResNet(c) => {
                    let n = Names::torchvision(&c);
                    pretrained::export(
                        &pretrained::load(c.init::<B>(&Default::default()), &dict, &n).unwrap(),
                        &n,
                    )
                }
                Architecture::Deit(c) => pretrained::export(
                    &pretrained::load(c.init::<B>(&Default::default()), &dict, &Names::Timm)
                        .unwrap(),
                    &Names::Timm,
                ),
            };
            ((), bytes.unwrap(), ())
        };
        assert_eq!(twice, bytes, "{file}");
    }
}

fn refusal(path: &Path) -> String {
    match StateDict::open(path).and_then(|d| d.architecture().map(|_| d)) {
        Ok(_) => panic!("{} was accepted", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn files_that_are_not_state_dicts_are_refused_with_what_they_are() {
    let err = refusal(&fixture("resnet18-script.pt"));
    assert!(err.contains("TorchScript archive"), "{err}");
    let err = refusal(&fixture("resnet18-model.pth"));
    assert!(
        err.contains("whole pickled model") || err.contains("not a state dict"),
        "{err}"
    );
    let err = refusal(&fixture("distilled.safetensors"));
    assert!(err.contains("distilled DeiT (dist_token)"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes, reason) in [
        (
            "truncated.pth",
            std::fs::read(fixture("resnet18-w8.pth")).unwrap()[..5000].to_vec(),
            "it is a zip archive (torch.save) that cannot be read: truncated or damaged",
        ),
        (
            "truncated.safetensors",
            std::fs::read(fixture("deit-d128.safetensors")).unwrap()[..5000].to_vec(),
            "not a readable safetensors file",
        ),
        (
            "text.pth",
            b"not a model at all\n".to_vec(),
            "not a PyTorch file: its first bytes are neither",
        ),
        ("empty.pth", vec![], "it is empty"),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let err = refusal(&file);
        let want = format!("{}: {reason}", file.display());
        assert!(err.starts_with(&want), "{name}: {err}");
    }
    let err = refusal(&expected_file());
    assert!(err.contains("unknown architecture"), "{err}");
}

/// Tensors by key: shape and f32 values.
type Tensors = std::collections::BTreeMap<String, (Vec<usize>, Vec<f32>)>;

fn expected_file() -> PathBuf {
    fixture("expected.safetensors")
}

/// Writes a copy of a fixture's tensors with `edit` applied, as safetensors.
fn edited(file: &str, edit: impl Fn(&mut Tensors)) -> (tempfile::TempDir, PathBuf) {
    let dict = StateDict::open(&fixture(file)).unwrap();
    let mut tensors: Tensors = dict
        .keys()
        .map(|k| {
            let d = dict.get(k).unwrap().clone();
            (
                k.to_string(),
                (d.shape.to_vec(), d.convert::<f32>().to_vec().unwrap()),
            )
        })
        .collect();
    edit(&mut tensors);
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(k, (s, v))| (k, s, v.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .collect();
    let views = bytes.iter().map(|(k, s, b)| {
        (
            k.clone(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b).unwrap(),
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edited.safetensors");
    std::fs::write(&path, safetensors::serialize(views, None).unwrap()).unwrap();
    (dir, path)
}

fn load_error(path: &Path) -> String {
    let dict = match StateDict::open(path) {
        Ok(d) => d,
        Err(e) => return e.to_string(),
    };
    let Architecture::ResNet(c) = dict.architecture().unwrap() else {
        panic!()
    };
    match pretrained::load(
        c.init::<B>(&Default::default()),
        &dict,
        &Names::torchvision(&c),
    ) {
        Ok(_) => panic!("{} was loaded", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_missing_extra_wrongly_shaped_or_nan_tensor_is_named() {
    let (_d, f) = edited("resnet18-w8.pth", |t| {
        t.remove("layer2.1.bn1.running_var");
    });
    assert!(
        load_error(&f).contains("key layer2.1.bn1.running_var is missing"),
        "{}",
        load_error(&f)
    );
    let (_d, f) = edited("resnet18-w8.pth", |t| {
        t.insert("layer2.1.extra.weight".into(), (vec![2], vec![0.0, 1.0]));
    });
    assert!(
        load_error(&f).contains("1 key that the model has no parameter for: layer2.1.extra.weight"),
        "{}",
        load_error(&f)
    );
    let (_d, f) = edited("resnet18-w8.pth", |t| {
        t.insert(
            "layer3.0.conv2.weight".into(),
            (vec![32, 32, 1, 1], vec![0.0; 1024]),
        );
    });
    assert!(load_error(&f).contains("key layer3.0.conv2.weight is [32, 32, 1, 1]; the model's blocks.4.layers.1.conv.weight needs [32, 32, 3, 3]"), "{}", load_error(&f));
    let (_d, f) = edited("resnet18-w8.pth", |t| {
        t.get_mut("layer1.0.conv1.weight").unwrap().1[3] = f32::NAN;
    });
    assert!(
        load_error(&f).contains("tensor layer1.0.conv1.weight holds NaN"),
        "{}",
        load_error(&f)
    );
    let (_d, f) = edited("resnet18-w8.pth", |t| {
        t.remove("layer4.1.conv1.weight");
    });
    let err = StateDict::open(&f)
        .unwrap()
        .architecture()
        .unwrap_err()
        .to_string();
    assert!(err.contains("[2, 2, 2, 1] basic blocks"), "{err}");
}

#[test]
fn prelu_slopes_have_no_torchvision_name() {
    let mut config = ResNetConfig::new(Depth::R18, false, 3).with_width(2);
    config.act = ember_models::act::Activation::Prelu;
    let m = config.init::<B>(&Default::default());
    let err = pretrained::export(&m, &Names::torchvision(&config))
        .unwrap_err()
        .to_string();
    assert!(err.contains("--names ember"), "{err}");
    // Ember's own names take any model
    let bytes = pretrained::export(&m, &Names::Ember).unwrap();
    assert!(!bytes.is_empty());
}

/// torchvision's ImageNet evaluation transform (`Resize(256)`, `CenterCrop(224)`, `ToTensor`,
/// `Normalize`) of the fixture folder's two images, against [`folder::preprocess`]: the same
/// crop, pixels within the two resamplers' rounding (PIL's antialiased bilinear in 8 bits,
/// the `image` crate's triangle filter in f32).
#[test]
fn imagenet_folder_images_are_what_torchvision_makes_of_them() {
    use ember_models::data::folder;
    let want = StateDict::open(&fixture("expected.safetensors")).unwrap();
    for class in ["cat", "dog"] {
        let got = folder::preprocess(&fixture(&format!("folder/{class}/image.png"))).unwrap();
        let want: Vec<f32> = want
            .get(&format!("folder.{class}"))
            .unwrap()
            .clone()
            .convert::<f32>()
            .to_vec()
            .unwrap();
        assert_eq!(got.len(), want.len());
        let diff: Vec<f32> = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).collect();
        let max = diff.iter().fold(0f32, |m, d| m.max(*d));
        let mean = diff.iter().sum::<f32>() / diff.len() as f32;
        // one 8-bit level is 1/255/0.225 ≈ 0.017 after normalisation, F16 adds 0.002
        assert!(
            max < 0.021 && mean < 0.002,
            "{class}: max {max}, mean {mean}"
        );
        // and through torchvision's ResNet-18 fixture: PyTorch's logits on its own pixels
        let dict = StateDict::open(&fixture("resnet18-w8.pth")).unwrap();
        let Architecture::ResNet(c) = dict.architecture().unwrap() else {
            panic!("a ResNet")
        };
        let names = Names::torchvision(&c);
        let model = pretrained::load(c.init::<B>(&Default::default()), &dict, &names).unwrap();
        let input = Tensor::<B, 1>::from_floats(got.as_slice(), &Default::default());
        let logits: Vec<f32> = model
            .forward(input.reshape([1, 3, 224, 224]))
            .into_data()
            .to_vec()
            .unwrap();
        let torch = want_logits(class);
        let scale = torch.iter().fold(1f32, |m, v| m.max(v.abs()));
        for (g, w) in logits.iter().zip(&torch) {
            assert!(
                (g - w).abs() < 1e-2 * scale,
                "{class}: logits {logits:?}, PyTorch's {torch:?}"
            );
        }
    }
}

fn want_logits(class: &str) -> Vec<f32> {
    let dict = StateDict::open(&fixture("expected.safetensors")).unwrap();
    dict.get(&format!("folder.{class}.logits"))
        .unwrap()
        .clone()
        .to_vec()
        .unwrap()
}

#[test]
fn an_image_folder_lists_its_classes_and_refuses_what_is_not_an_image() {
    use ember_models::data::folder::{self, FolderSource};
    let dir = tempfile::tempdir().unwrap();
    let err = FolderSource::detect(dir.path()).unwrap_err().to_string();
    assert!(err.contains("no class directories"), "{err}");
    for class in ["b", "a"] {
        let d = dir.path().join("val").join(class);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(fixture("folder/cat/image.png"), d.join("1.png")).unwrap();
        std::fs::copy(fixture("folder/dog/image.png"), d.join("2.png")).unwrap();
    }
    std::fs::write(dir.path().join("val/a/notes.txt"), "not listed").unwrap();
    let source = FolderSource::detect(dir.path()).unwrap();
    assert_eq!(source.classes, ["a", "b"]);
    let split = folder::load(&source).unwrap();
    assert_eq!(split.len(), 4);
    let items = split.dataset();
    let labels: Vec<usize> = (0..4)
        .map(|i| burn::data::dataset::Dataset::get(&items, i).unwrap().label)
        .collect();
    // interleaved by class, so that the first N are balanced
    assert_eq!(labels, [0, 1, 0, 1]);
    let fake = dir.path().join("val/b/3.jpg");
    std::fs::write(&fake, "not a jpeg").unwrap();
    let err = folder::load(&source).err().unwrap().to_string();
    assert!(
        err.contains("3.jpg") && err.contains("not a readable image"),
        "{err}"
    );
}

#[test]
fn an_image_folder_trains_from_train_beside_val_with_the_same_classes() {
    use burn::data::dataloader::batcher::Batcher;
    use ember_models::data::folder::{self, FolderBatcher, FolderSource, SIDE};
    let dir = tempfile::tempdir().unwrap();
    let class = |split: &str, name: &str| {
        let d = dir.path().join(split).join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(fixture("folder/cat/image.png"), d.join("1.png")).unwrap();
    };
    class("val", "a");
    class("val", "b");
    // no train/: evaluation only
    let source = FolderSource::detect(dir.path()).unwrap();
    let err = folder::load_train(&source).unwrap_err().to_string();
    assert!(err.contains("no train/ beside it"), "{err}");
    // train/ of other classes: refused, naming one
    class("train", "a");
    class("train", "c");
    let err = FolderSource::detect(dir.path()).unwrap_err().to_string();
    assert!(err.contains("c is in one of them only"), "{err}");
    std::fs::remove_dir_all(dir.path().join("train/c")).unwrap();
    class("train", "b");
    let source = FolderSource::detect(dir.path()).unwrap();
    assert_eq!(folder::load_train(&source).unwrap().len(), 2);
    // training batches: each image as evaluation makes it, or mirrored left-right, by seed
    let item =
        burn::data::dataset::Dataset::get(&folder::load(&source).unwrap().dataset(), 0).unwrap();
    let pixels_of = |b: &FolderBatcher, item: &folder::FolderItem| -> Vec<f32> {
        let batch: ember_models::data::Batch<B> = b.batch(vec![item.clone()], &Default::default());
        let ember_models::data::Inputs::Images(x) = batch.inputs else {
            unreachable!()
        };
        x.into_data().to_vec().unwrap()
    };
    let pixels = |b: &FolderBatcher| pixels_of(b, &item);
    // the same class and file stored elsewhere: the flip is decided by the names alone
    assert!(item.path.ends_with("a/1.png"), "{}", item.path.display());
    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(other.path().join("a")).unwrap();
    std::fs::copy(&item.path, other.path().join("a/1.png")).unwrap();
    let moved = folder::FolderItem {
        path: other.path().join("a/1.png"),
        ..item.clone()
    };
    let plain = pixels(&FolderBatcher::new());
    let mirrored: Vec<f32> = plain
        .chunks(SIDE)
        .flat_map(|row| row.iter().rev().copied())
        .collect();
    let mut flips = 0;
    for seed in 0..16 {
        let got = pixels(&FolderBatcher::augmented(seed));
        assert!(got == plain || got == mirrored, "seed {seed}");
        flips += usize::from(got == mirrored);
        assert_eq!(got, pixels(&FolderBatcher::augmented(seed)), "seed {seed}");
        let elsewhere = pixels_of(&FolderBatcher::augmented(seed), &moved);
        assert_eq!(got, elsewhere, "seed {seed}");
    }
    assert!((3..=13).contains(&flips), "{flips} of 16 seeds flipped");
    // a PNG whose header claims 100,000 × 100,000 pixels is listed (its header reads), then
    // refused when decoded, within the decoder's memory limit, naming the file
    let huge = dir.path().join("val/a/huge.png");
    std::fs::write(&huge, png_header(100_000, 100_000)).unwrap();
    let items = folder::load(&source).unwrap().dataset();
    let item = (0..burn::data::dataset::Dataset::len(&items))
        .map(|i| burn::data::dataset::Dataset::get(&items, i).unwrap())
        .find(|i| i.path == huge)
        .unwrap();
    let batcher = FolderBatcher::new();
    let _: ember_models::data::Batch<B> = batcher.batch(vec![item], &Default::default());
    let err = batcher.failure().unwrap().to_string();
    assert!(
        err.contains("huge.png") && err.contains("Memory limit exceeded"),
        "{err}"
    );
}

/// A PNG of `w` × `h` RGB pixels whose image data is a few zero bytes.
fn png_header(w: u32, h: u32) -> Vec<u8> {
    let chunk = |kind: &[u8], data: &[u8]| {
        let mut c = (data.len() as u32).to_be_bytes().to_vec();
        c.extend_from_slice(kind);
        c.extend_from_slice(data);
        let crc = crc32fast::hash(&[kind, data].concat());
        c.extend_from_slice(&crc.to_be_bytes());
        c
    };
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    // zlib: a stored block of 100 zero bytes, and its Adler-32
    let mut idat = vec![0x78, 0x01, 0x01, 100, 0, !100, 0xff];
    idat.extend_from_slice(&[0; 100]);
    idat.extend_from_slice(&(100u32 << 16 | 1).to_be_bytes());
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(chunk(b"IHDR", &ihdr));
    png.extend(chunk(b"IDAT", &idat));
    png.extend(chunk(b"IEND", &[]));
    png
}

#[test]
fn weights_wider_than_the_zoo_builds_are_refused_before_the_model_is_built() {
    use burn::backend::Autodiff;
    use burn::tensor::backend::AutodiffBackend;
    use ember_models::act::Activation;
    use ember_models::classifier::{ModelVisitor, TrainableClassifier};
    use ember_models::data::{DataSpec, ImageSpec};
    // a stem 1025 channels wide: the whole model would not be built, nor recorded by a run
    let (_dir, path) = edited("resnet18-w8.pth", |t| {
        let n = 1025 * 3 * 7 * 7;
        t.insert("conv1.weight".into(), (vec![1025, 3, 7, 7], vec![0.0; n]));
    });
    let dict = StateDict::open(&path).unwrap();
    struct Built;
    impl<A: AutodiffBackend> ModelVisitor<A> for Built {
        type Output = ();
        fn visit<M: TrainableClassifier<A>>(self, _: M) {}
    }
    let spec = DataSpec::Images(ImageSpec {
        channels: 3,
        side: 224,
        classes: 5,
    });
    let err = ModelKind::Resnet18
        .build_pretrained::<Autodiff<B>, _>(
            &dict,
            pretrained::Head::Keep,
            Activation::Relu,
            spec,
            &Default::default(),
            Built,
        )
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("a ResNet's width is 1 to 1024"), "{err}");
}
