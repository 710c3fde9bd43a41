//! `ember_train::scale` without devices or peers: option checks, shards, the parameter digest,
//! a port in use. Training on two devices and two processes is tested end to end in
//! `models/cli/tests/cli/scale_cli.rs`.

use burn::backend::NdArray;
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Tensor, TensorData};
use ember_train::scale::{Ddp, Scale, connect, param_digest, shard};
use std::net::TcpListener;

fn ddp(rank: u32, world: u32, coordinator: &str) -> Scale {
    Scale {
        ddp: Some(Ddp {
            rank,
            world,
            coordinator: coordinator.into(),
            port: None,
            host: None,
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
            ddp(2, 2, "127.0.0.1:29500"),
            "--rank 2 is not below --world 2",
        ),
        (ddp(0, 0, "127.0.0.1:29500"), "--world must be at least 1"),
        (ddp(0, 2, "127.0.0.1"), "expected HOST:PORT"),
        (ddp(0, 2, "127.0.0.1:http"), "expected HOST:PORT"),
        (ddp(0, 2, ":29500"), "expected HOST:PORT"),
        (ddp(0, 2, "127.0.0.1:0"), "expected HOST:PORT"),
    ];
    for (scale, want) in cases {
        let got = scale.validate().unwrap_err().to_string();
        assert!(got.contains(want), "{got:?} lacks {want:?}");
    }
    assert!(ddp(1, 2, "localhost:29500").validate().is_ok());
}

#[test]
fn replicas_count_devices_and_processes() {
    let s = Scale {
        devices: 2,
        ..ddp(1, 3, "h:1")
    };
    assert_eq!(s.replicas(), 6);
    assert!(s.is_parallel());
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

#[test]
fn a_tensor_service_port_in_use_is_refused_before_anything_starts() {
    let taken = TcpListener::bind(("0.0.0.0", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut scale = ddp(1, 2, "127.0.0.1:29500");
    if let Some(d) = scale.ddp.as_mut() {
        d.port = Some(port);
    }
    let err = connect(&scale).unwrap_err().to_string();
    assert!(
        err.contains(&format!("port {port} cannot be opened")),
        "{err}"
    );
}

#[test]
fn a_coordinator_port_in_use_or_a_host_that_does_not_resolve_is_refused() {
    let taken = TcpListener::bind(("0.0.0.0", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let free = TcpListener::bind(("0.0.0.0", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut scale = ddp(0, 2, &format!("127.0.0.1:{port}"));
    if let Some(d) = scale.ddp.as_mut() {
        d.port = Some(free);
    }
    let err = connect(&scale).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "the --coordinator port: port {port} cannot be opened"
        )),
        "{err}"
    );
    let err = connect(&ddp(1, 2, "no-such-host.invalid:29500"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("the host name does not resolve"), "{err}");
}
