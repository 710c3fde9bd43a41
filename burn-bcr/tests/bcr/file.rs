//! The packed model file `model.bcr`: exact round trips, damaged bytes refused with the reason,
//! and a packed model loaded into a fresh one computing what the packed model did.

use crate::{net, packed_weights};
use burn::backend::NdArray;
use burn::tensor::{Distribution, Tensor};
use burn_bcr::BcrError;
use burn_bcr::backend::{Bcr, BcrDevice};
use burn_bcr::file::{Header, MAGIC, PackedModel, Sizes, Stored, VERSION};
use burn_bcr::module::{check_fits, load_packed, pack_module, params};
use cubecl_kernels::bcrc::Bcrc;
use cubecl_kernels::decorator::file::Format;
use std::collections::BTreeMap;

type B = Bcr<NdArray>;

/// A packed net (both layers in BCRC) and its file contents.
fn packed_file() -> (crate::Net<B>, PackedModel) {
    let device = BcrDevice::<NdArray>::new(Default::default(), ());
    let model = net::<B>(&device);
    let (packed, _) = packed_weights(&model, |_| true);
    let mut stored = BTreeMap::new();
    for (path, (dims, values)) in params(&model) {
        let layer = path.strip_suffix(".weight").unwrap_or_default();
        let s = match packed.get(layer) {
            Some(w) => Stored::Packed((**w).clone()),
            None => Stored::Dense(values),
        };
        stored.insert(path, (dims, s));
    }
    let file = PackedModel {
        model: "tiny".into(),
        about: [("level".to_string(), crate::LEVEL.to_string())].into(),
        params: stored,
    };
    (pack_module(model, &packed), file)
}

/// `header` and `payload` framed as a valid `model.bcr` (checksum recomputed).
fn frame(header: &Header, payload: &[u8]) -> Vec<u8> {
    let format = Format {
        magic: MAGIC,
        version: VERSION,
        what: "test",
    };
    format.write(&serde_json::to_vec(header).unwrap(), payload)
}

/// The header and payload of a file's bytes.
fn unframe(bytes: &[u8]) -> (Header, Vec<u8>) {
    let len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let header = serde_json::from_slice(&bytes[16..16 + len]).unwrap();
    (header, bytes[16 + len..bytes.len() - 4].to_vec())
}

#[test]
fn files_round_trip_exactly_and_load_into_a_fresh_model() {
    let (sparse, file) = packed_file();
    let bytes = file.to_bytes();
    assert_eq!(&bytes[..8], b"EMBERBCR");
    let back = PackedModel::from_bytes(&bytes).unwrap();
    assert_eq!(back, file);
    assert_eq!(back.to_bytes(), bytes);
    let (header, _) = unframe(&bytes);
    let fc = header
        .params
        .iter()
        .find(|e| e.path == "fc.weight")
        .unwrap();
    let Some((_, Stored::Packed(w))) = file.params.get("fc.weight") else {
        panic!("fc.weight is packed")
    };
    let sizes = Sizes {
        out: 16,
        k: 24,
        groups: w.groups(),
        nnz: 96,
    };
    assert_eq!(
        (fc.dims.as_slice(), fc.packed),
        (&[24, 16][..], Some(sizes))
    );
    assert_eq!(
        header.params.iter().filter(|e| e.packed.is_none()).count(),
        2
    );

    // a fresh net (other weights) loaded from the file computes what the packed one did
    let device = BcrDevice::<NdArray>::new(Default::default(), ());
    let loaded = load_packed(net::<B>(&device), &back).unwrap();
    assert!(
        loaded
            .fc
            .weight
            .val()
            .into_primitive()
            .tensor()
            .inner
            .as_packed()
            .is_some()
    );
    let x = Tensor::<B, 4>::random([1, 6, 5, 4], Distribution::Default, &device);
    let v = Tensor::<B, 2>::random([3, 24], Distribution::Default, &device);
    let same = |a: Tensor<B, 4>, b: Tensor<B, 4>| {
        assert_eq!(
            a.into_data().to_vec::<f32>().unwrap(),
            b.into_data().to_vec::<f32>().unwrap()
        )
    };
    same(loaded.conv.forward(x.clone()), sparse.conv.forward(x));
    same(
        loaded.fc.forward(v.clone()).unsqueeze(),
        sparse.fc.forward(v).unsqueeze(),
    );
}

fn refusal(bytes: &[u8]) -> BcrError {
    PackedModel::from_bytes(bytes).unwrap_err()
}

#[test]
fn damaged_files_are_refused_with_the_reason() {
    let (_, file) = packed_file();
    let bytes = file.to_bytes();

    cubecl_kernels::testing::assert_damage_refused(&bytes, "EMBERBCR", PackedModel::from_bytes);
    // the framing's refusals are file errors
    let cut = refusal(&bytes[..bytes.len() - 9]);
    assert!(matches!(&cut, BcrError::File(_)), "{cut}");
    let mut magic = bytes.clone();
    magic[..8].copy_from_slice(b"EMBERHNM");
    let e = refusal(&magic).to_string();
    assert!(
        e.contains("not a packed BCR model (no EMBERBCR header)"),
        "{e}"
    );

    // a structurally broken BCRC weight under a valid checksum
    let mut broken = file.clone();
    if let Some((_, Stored::Packed(w))) = broken.params.get_mut("fc.weight") {
        w.reorder[0] = w.reorder[1];
    }
    let e = refusal(&broken.to_bytes());
    assert!(
        matches!(&e, BcrError::Corrupt(m) if m.contains("fc.weight") && m.contains("permutation")),
        "{e}"
    );
    let mut broken = file.clone();
    if let Some((_, Stored::Packed(w))) = broken.params.get_mut("conv.weight") {
        w.compact_column[0] = 54; // the view has 54 columns
    }
    let e = refusal(&broken.to_bytes()).to_string();
    assert!(
        e.contains("conv.weight") && e.contains("out of range"),
        "{e}"
    );
}

#[test]
fn headers_that_do_not_match_their_payload_are_refused_without_panicking() {
    let (_, file) = packed_file();
    let (header, payload) = unframe(&file.to_bytes());
    let edit = |f: &dyn Fn(&mut Header)| {
        let mut h = header.clone();
        f(&mut h);
        refusal(&frame(&h, &payload)).to_string()
    };
    let fc = |h: &Header| -> usize { h.params.iter().position(|e| e.path == "fc.weight").unwrap() };
    let sizes = |h: &Header| h.params[fc(h)].packed.unwrap();
    let set = |h: &mut Header, s: Sizes| {
        let at = fc(h);
        h.params[at].packed = Some(s);
    };
    // sizes that overflow or run past the payload
    let e = edit(&|h| {
        let s = sizes(h);
        set(
            h,
            Sizes {
                groups: usize::MAX,
                ..s
            },
        )
    });
    assert!(e.contains("overflow"), "{e}");
    let e = edit(&|h| {
        let s = sizes(h);
        set(
            h,
            Sizes {
                nnz: usize::MAX / 2,
                ..s
            },
        )
    });
    assert!(e.contains("truncated in fc.weight's weights"), "{e}");
    let e = edit(&|h| {
        let s = sizes(h);
        set(
            h,
            Sizes {
                groups: s.groups + 1,
                ..s
            },
        )
    });
    assert!(e.contains("fc.weight"), "{e}");
    // a view that is not the parameter's shape's
    let e = edit(&|h| {
        let s = sizes(h);
        set(
            h,
            Sizes {
                out: 24,
                k: 16,
                ..s
            },
        )
    });
    assert!(
        e.contains("a 24 × 16 BCRC weight for a parameter of shape [24, 16]"),
        "{e}"
    );
    let e = edit(&|h| h.params[0].dims = vec![usize::MAX, 3]);
    assert!(e.contains("overflows"), "{e}");
    // a parameter missing from the header leaves bytes over; one listed twice is refused
    let e = edit(&|h| {
        h.params.pop();
    });
    assert!(e.contains("bytes follow the last parameter"), "{e}");
    let e = edit(&|h| {
        let first = h.params[0].clone();
        h.params.insert(1, first);
    });
    assert!(e.contains("it has conv.bias twice"), "{e}");
    // a header that is not the format's
    let e = refusal(
        &Format {
            magic: MAGIC,
            version: VERSION,
            what: "",
        }
        .write(b"[1, 2]", &payload),
    )
    .to_string();
    assert!(e.contains("header is not readable"), "{e}");
    let e = refusal(
        &Format {
            magic: MAGIC,
            version: 2,
            what: "",
        }
        .write(b"{}", &[]),
    )
    .to_string();
    assert!(e.contains("format version 2"), "{e}");
    // every truncation of the file is refused (never a panic)
    let bytes = file.to_bytes();
    for len in (0..bytes.len()).step_by(7) {
        assert!(
            PackedModel::from_bytes(&bytes[..len]).is_err(),
            "{len} bytes"
        );
    }
}

#[test]
fn packed_weights_of_the_wrong_shape_are_refused_naming_the_parameter() {
    let (_, file) = packed_file();
    let device = BcrDevice::<NdArray>::new(Default::default(), ());
    // a BCRC weight of the transposed view for fc.weight
    let mut wrong = file.clone();
    let other = cubecl_kernels::bcrc::random_bcrc(24, 16, (4, 4), (2, 2), 3);
    wrong.params.insert(
        "fc.weight".into(),
        (vec![24, 16], Stored::Packed(other.clone())),
    );
    let e = load_packed(net::<B>(&device), &wrong).unwrap_err();
    assert!(matches!(&e, BcrError::Shape(_)), "{e}");
    let e = e.to_string();
    assert!(e.contains("fc.weight") && e.contains("24 × 16"), "{e}");
    assert!(check_fits(&other, &[16, 24]).is_ok());
    assert!(check_fits(&other, &[24, 16]).is_err());
    // a parameter whose shape differs from the model's, or that the model lacks
    let mut wrong = file.clone();
    wrong
        .params
        .insert("fc.bias".into(), (vec![8], Stored::Dense(vec![0.0; 8])));
    let e = load_packed(net::<B>(&device), &wrong)
        .unwrap_err()
        .to_string();
    assert!(e.contains("fc.bias is [8] in it, [16] in the model"), "{e}");
    let mut wrong = file.clone();
    wrong
        .params
        .insert("fc2.bias".into(), (vec![8], Stored::Dense(vec![0.0; 8])));
    let e = load_packed(net::<B>(&device), &wrong)
        .unwrap_err()
        .to_string();
    assert!(e.contains("fc2.bias"), "{e}");
    // a BCRC weight that does not hold together
    let mut broken: Bcrc = other;
    broken.reorder[0] = broken.reorder[1];
    assert!(matches!(
        check_fits(&broken, &[16, 24]),
        Err(BcrError::Corrupt(_))
    ));
}
