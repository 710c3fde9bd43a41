//! `ember_train::memory`.

use burn_approx_mul::Multiplier;
use ember_train::backend::BackendKind;
use ember_train::memory::*;

#[test]
fn ndarray_without_the_counting_allocator_is_a_clear_error() {
    // this test binary does not install `CountingAllocator`
    assert_eq!(heap_in_use(), None);
    let err = measure(MemoryOptions {
        model: MemoryModel::ResmlpSmall,
        image_size: 32,
        patch_size: None,
        classes: None,
        batch: 2,
        policies: Vec::new(),
        backend: BackendKind::Ndarray,
        multiplier: Multiplier::native(),
    })
    .unwrap_err();
    assert!(err.to_string().contains("counting allocator"), "{err}");
}
