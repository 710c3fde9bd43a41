//! `ember_train::scale` without devices or peers: option checks, shards, the parameter digest.
//! Training on two devices and on the ranks of an MPI job is tested end to end in
//! `models/cli/tests/cli/scale_cli.rs`.

use burn::backend::NdArray;
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Tensor, TensorData};
use ember_train::scale::{Job, Scale, param_digest, shard};

/// The scale of rank `rank` of an MPI job of `world` processes (as `connect` fills it in).
fn ranked(rank: usize, world: usize) -> Scale {
    Scale {
        mpi: true,
        job: Some(Job {
            rank,
            world,
            local_rank: rank,
        }),
        ..Scale::default()
    }
}

#[test]
fn bad_scales_are_refused_with_the_option_named() {
    let zero = Scale {
        devices: 0,
        ..Scale::default()
    };
    let no_time = Scale {
        timeout: std::time::Duration::ZERO,
        ..Scale::default()
    };
    let cases = [
        (zero, "--devices must be at least 1"),
        (no_time, "--collective-timeout must be at least 1 second"),
        (
            Scale {
                devices: 2,
                ..ranked(0, 2)
            },
            "an MPI job trains one device per process",
        ),
    ];
    for (scale, want) in cases {
        let got = scale.validate().unwrap_err().to_string();
        // a build without MPI refuses --ddp mpi first, naming the feature
        let want = match scale.mpi && !cfg!(feature = "mpi") {
            true => "the `mpi` feature",
            false => want,
        };
        assert!(got.contains(want), "{got:?} lacks {want:?}");
    }
    match cfg!(feature = "mpi") {
        true => assert!(ranked(1, 2).validate().is_ok()),
        false => {
            let got = ranked(1, 2).validate().unwrap_err().to_string();
            assert!(got.contains("the `mpi` feature"), "{got}");
        }
    }
}

#[test]
fn replicas_count_devices_and_processes() {
    let s = Scale {
        devices: 2,
        ..Scale::default()
    };
    assert_eq!(s.replicas(), 2);
    assert!(s.is_parallel() && s.writes());
    assert_eq!(ranked(1, 3).replicas(), 3);
    assert!(!ranked(1, 3).writes() && ranked(0, 3).writes());
    assert!(!Scale::default().is_parallel());
}

#[test]
fn shards_cover_the_order_in_equal_parts() {
    let order: Vec<usize> = vec![7, 3, 9, 1, 4];
    assert_eq!(shard(order.clone(), 0, 1), order);
    // padded from the start to 6 items: 7 3 9 1 4 7
    let (a, b) = (shard(order.clone(), 0, 2), shard(order.clone(), 1, 2));
    assert_eq!(a, vec![7, 9, 4]);
    assert_eq!(b, vec![3, 1, 7]);
    // steps of one item each: together they are the single-device order
    let together: Vec<usize> = a.iter().zip(&b).flat_map(|(x, y)| [*x, *y]).collect();
    assert_eq!(&together[..5], &order[..]);
    assert!(shard(Vec::new(), 1, 2).is_empty());
}

#[test]
fn the_parameter_digest_sees_one_ulp() {
    let device = Default::default();
    let layer: Linear<NdArray> = LinearConfig::new(3, 2).init(&device);
    let digest = param_digest(&layer);
    assert_eq!(digest, param_digest(&layer.clone()));
    let mut values = layer.weight.val().into_data().to_vec::<f32>().unwrap();
    values[4] = f32::from_bits(values[4].to_bits() + 1);
    let mut moved = layer.clone();
    moved.weight = Param::from_tensor(Tensor::from_data(TensorData::new(values, [3, 2]), &device));
    assert_ne!(digest, param_digest(&moved));
    assert_eq!(moved.num_params(), layer.num_params());
}
