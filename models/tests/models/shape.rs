//! The sizes a zoo kind is built at ([`Shape`]): its own, another width or DeiT shape, and the
//! bounds every shape is checked against before anything is built.

use burn::backend::{Autodiff, NdArray};
use burn::module::Module;
use ember_models::act::Activation;
use ember_models::classifier::{ModelKind, TrainableParams};
use ember_models::data::{DataSpec, ImageSpec};
use ember_models::shape::Shape;

const MNIST: DataSpec = DataSpec::Images(ImageSpec {
    channels: 1,
    side: 28,
    classes: 10,
});
const CIFAR: DataSpec = DataSpec::Images(ImageSpec {
    channels: 3,
    side: 32,
    classes: 10,
});

#[test]
fn a_shape_builds_the_kind_at_other_sizes_and_is_checked_first() {
    type B = Autodiff<NdArray>;
    let device = Default::default();
    let built = |kind: ModelKind, shape, input| {
        kind.build_shaped::<B, _>(shape, Activation::Relu, input, &device, TrainableParams)
    };
    // the own shape is what build makes; width 16 is the narrow ResNet-18's count
    let own = ModelKind::Resnet18Cifar.own_shape();
    assert_eq!(own, Some(Shape::Resnet { width: 64 }));
    assert_eq!(
        built(ModelKind::Resnet18Cifar, own, CIFAR).unwrap(),
        11_173_962
    );
    let w16 = Some(Shape::Resnet { width: 16 });
    assert_eq!(
        built(ModelKind::Resnet18Cifar, w16, CIFAR).unwrap(),
        701_466
    );
    // a DeiT of 16×16 patches: dim 128, 2 blocks, 2 heads on 32×32 images (4 patches)
    let deit = Shape::Deit {
        dim: 128,
        depth: 2,
        heads: 2,
        patch: 16,
    };
    let config = crate::pretrained::deit_d128(10);
    assert_eq!(
        built(ModelKind::DeitTi, Some(deit), CIFAR).unwrap(),
        config.init::<B>(&device).num_params()
    );
    assert_eq!(
        deit.to_string(),
        "dim 128, 2 blocks, 2 heads, 16×16 patches"
    );
    assert_eq!(Shape::from_json(&deit.to_json()), Ok(deit));
    assert!(Shape::from_json("{\"family\":\"resnet\"}").is_err());
    // shapes of another family, sizes of 0, heads that do not divide, patches that do not
    // tile: refused before anything is built
    let refusals = [
        (ModelKind::Resnet18, deit, "resnet18 cannot have the shape"),
        (
            ModelKind::Lenet5,
            Shape::Resnet { width: 8 },
            "lenet5 cannot",
        ),
        (
            ModelKind::Resnet18,
            Shape::Resnet { width: 0 },
            "width is 1 to 1024",
        ),
        (
            ModelKind::Resnet18,
            Shape::Resnet {
                width: 99_999_999_999,
            },
            "width is 1 to 1024",
        ),
        (
            ModelKind::DeitTi,
            Shape::Deit {
                dim: 1 << 40,
                depth: 2,
                heads: 2,
                patch: 16,
            },
            "width is 1 to 8192",
        ),
        (
            ModelKind::DeitTi,
            Shape::Deit {
                dim: 128,
                depth: 100_000,
                heads: 2,
                patch: 16,
            },
            "1 to 256 blocks",
        ),
        (
            ModelKind::DeitTi,
            Shape::Deit {
                dim: 128,
                depth: 2,
                heads: 3,
                patch: 16,
            },
            "its heads must divide its width",
        ),
        (
            ModelKind::DeitTi,
            Shape::Deit {
                dim: 128,
                depth: 2,
                heads: 2,
                patch: 5,
            },
            "its patches must tile the 32-pixel images",
        ),
    ];
    for (kind, shape, needle) in refusals {
        let input = if kind == ModelKind::Lenet5 {
            MNIST
        } else {
            CIFAR
        };
        let err = built(kind, Some(shape), input).unwrap_err().to_string();
        assert!(err.contains(needle), "{kind} {shape}: {err}");
    }
}
