//! The ops of the concrete backends Ember's test suites and `ember-train` run on (`Wgpu` and
//! `NdArray`, f32), compiled once, here, in builds with debug assertions (the `dev` profile).
//!
//! Burn's backends are generic, so their ops are compiled where a concrete backend is first
//! named: without this module, in every test binary and in `ember-train`, each compiling
//! burn-cubecl's matmul, convolution and reduction launchers (cubek's kernels, expanded on the
//! host) again. Rust shares a generic function's compiled copy with the crates above the crate
//! that compiled it when both are built at `opt-level` 0 or 1 (the workspace's `dev` profile:
//! rustc's share-generics default), so [`backend_ops`] names every op of both backends and the
//! crates above link these copies instead of compiling their own: the workspace's test build
//! took 758 s instead of 1,371 s (`docs/architecture.md`, "Tests"). Optimised
//! builds do not share generics, so the module is left out of builds without debug assertions
//! (release), where it would only compile every op once more.

use burn_backend::Backend;
use burn_backend::ops::{
    ActivationOps, BoolTensorOps, FloatTensorOps, IntTensorOps, ModuleOps, QTensorOps,
    TransactionOps,
};

/// The address of every op of `$backend`, by trait.
macro_rules! ops {
    ($backend:ty; $($ops:ident: $($op:ident),+ ;)+) => {
        [$($(<$backend as $ops<$backend>>::$op as *const ()),+),+]
    };
}

/// How many ops `B` has (those of burn-backend 0.21's backend traits), each compiled in this
/// crate: their addresses, kept through `black_box`.
fn addresses<B: Backend>() -> usize {
    std::hint::black_box(ops!(B;
        FloatTensorOps:
        float_from_data, float_random, float_zeros, float_ones, float_full, float_into_data,
        float_device, float_to_device, float_into_int, float_empty, float_repeat_dim, float_add,
        float_add_scalar, float_clamp_min, float_clamp_max, float_clamp, float_sub,
        float_sub_scalar, float_mul, float_mul_scalar, float_div, float_div_scalar, float_remainder,
        float_remainder_scalar, float_matmul, float_cross, float_neg, float_recip, float_transpose,
        float_swap_dims, float_permute, float_flip, float_reshape, float_gather, float_scatter_add,
        float_scatter_nd, float_gather_nd, float_select, float_select_add, float_slice,
        float_slice_assign, float_mask_where, float_mask_fill, float_equal, float_not_equal,
        float_equal_elem, float_not_equal_elem, float_greater, float_greater_elem,
        float_greater_equal, float_greater_equal_elem, float_lower, float_lower_elem,
        float_lower_equal, float_lower_equal_elem, float_detach, float_set_require_grad,
        float_is_require_grad, float_sum, float_sum_dim, float_prod, float_prod_dim, float_mean,
        float_mean_dim, float_cumsum, float_cumprod, float_cummin, float_cummax, float_cast,
        float_exp, float_log, float_log1p, float_powf, float_powi, float_powi_scalar,
        float_powi_scalar_impl, float_powf_scalar, float_powf_scalar_impl, float_sqrt, float_abs,
        float_cos, float_sin, float_tan, float_cosh, float_sinh, float_tanh, float_acos,
        float_acosh, float_asin, float_asinh, float_atan, float_atanh, float_atan2, float_round,
        float_floor, float_ceil, float_trunc, float_erf, float_cat, float_argmax, float_argtopk,
        float_topk, float_argmin, float_max, float_max_dim, float_max_dim_with_indices, float_min,
        float_min_dim, float_min_dim_with_indices, float_max_abs, float_max_abs_dim, float_any,
        float_any_dim, float_all, float_all_dim, float_sign, float_expand, float_sort,
        float_sort_with_indices, float_argsort, float_grid_sample_2d, float_unfold, float_is_nan,
        float_is_inf
    ;
        IntTensorOps:
        int_empty, int_into_data, int_from_data, int_device, int_to_device, int_reshape, int_slice,
        int_slice_assign, int_into_float, int_mask_where, int_mask_fill, int_gather,
        int_scatter_add, int_scatter_nd, int_gather_nd, int_select, int_select_add, int_repeat_dim,
        int_cat, int_equal, int_not_equal, int_equal_elem, int_not_equal_elem, int_greater,
        int_greater_elem, int_greater_equal, int_greater_equal_elem, int_lower, int_lower_elem,
        int_lower_equal, int_lower_equal_elem, int_add, int_add_scalar, int_powi, int_powi_scalar,
        int_powi_scalar_impl, int_clamp_min, int_clamp_max, int_clamp, int_sub, int_sub_scalar,
        int_mul, int_mul_scalar, int_div, int_div_scalar, int_remainder, int_remainder_scalar,
        int_matmul, int_neg, int_zeros, int_ones, int_full, int_sum, int_sum_dim, int_prod,
        int_prod_dim, int_mean, int_mean_dim, int_cumsum, int_cumprod, int_cummin, int_cummax,
        int_argmax, int_argtopk, int_topk, int_argmin, int_max, int_max_dim,
        int_max_dim_with_indices, int_max_abs, int_max_abs_dim, int_min, int_min_dim,
        int_min_dim_with_indices, int_abs, int_transpose, int_swap_dims, int_permute, int_flip,
        int_random, int_arange_step, int_arange, int_any, int_any_dim, int_all, int_all_dim,
        int_sign, int_expand, int_sort, int_sort_with_indices, int_argsort, bitwise_and,
        bitwise_and_scalar, bitwise_or, bitwise_or_scalar, bitwise_xor, bitwise_xor_scalar,
        bitwise_not, bitwise_left_shift, bitwise_left_shift_scalar, bitwise_right_shift,
        bitwise_right_shift_scalar, int_cast, int_unfold
    ;
        BoolTensorOps:
        bool_empty, bool_zeros, bool_ones, bool_into_data, bool_from_data, bool_into_int,
        bool_into_float, bool_device, bool_to_device, bool_reshape, bool_slice, bool_slice_assign,
        bool_mask_where, bool_mask_fill, bool_gather, bool_scatter_or, bool_select, bool_select_or,
        bool_repeat_dim, bool_cat, bool_equal, bool_not_equal, bool_equal_elem, bool_not_equal_elem,
        bool_not, bool_and, bool_or, bool_xor, bool_transpose, bool_swap_dims, bool_permute,
        bool_flip, bool_any, bool_any_dim, bool_all, bool_all_dim, bool_argwhere, bool_expand,
        bool_unfold
    ;
        ModuleOps:
        embedding, embedding_backward, linear, linear_x_backward, linear_weight_backward,
        linear_bias_backward, conv1d, conv1d_x_backward, conv1d_weight_backward,
        conv1d_bias_backward, conv2d, conv2d_x_backward, conv2d_weight_backward,
        conv2d_bias_backward, deform_conv2d, deform_conv2d_backward, conv3d, conv3d_x_backward,
        conv3d_weight_backward, conv3d_bias_backward, conv_transpose1d, conv_transpose1d_x_backward,
        conv_transpose1d_weight_backward, conv_transpose1d_bias_backward, conv_transpose2d,
        conv_transpose2d_x_backward, conv_transpose2d_weight_backward,
        conv_transpose2d_bias_backward, conv_transpose3d, conv_transpose3d_x_backward,
        conv_transpose3d_weight_backward, conv_transpose3d_bias_backward, unfold4d, avg_pool1d,
        avg_pool1d_backward, avg_pool2d, avg_pool2d_backward, adaptive_avg_pool2d,
        adaptive_avg_pool2d_backward, adaptive_avg_pool1d, adaptive_avg_pool1d_backward, max_pool1d,
        max_pool1d_with_indices, max_pool1d_with_indices_backward, max_pool2d,
        max_pool2d_with_indices, max_pool2d_with_indices_backward, interpolate,
        interpolate_backward, attention, layer_norm, ctc_loss, has_ctc_loss_backward,
        ctc_loss_backward, rfft, irfft
    ;
        ActivationOps:
        leaky_relu, relu, relu_backward, gelu, prelu, gelu_backward, sigmoid, sigmoid_backward,
        hard_sigmoid, log_sigmoid, softmax, log_softmax, softmin, log_sigmoid_backward
    ;
        QTensorOps:
        q_from_data, quantize, quantize_dynamic, dequantize, q_device, q_to_device, q_reshape,
        q_into_data, q_detach, q_set_require_grad, q_is_require_grad, q_expand, q_transpose,
        q_swap_dims, q_permute, q_flip, q_select, q_slice, q_gather, q_repeat_dim, q_add,
        q_add_scalar, q_clamp_min, q_clamp_max, q_clamp, q_sub, q_sub_scalar, q_mul, q_mul_scalar,
        q_div, q_div_scalar, q_matmul, q_neg, q_recip, q_sum, q_sum_dim, q_prod, q_prod_dim, q_mean,
        q_mean_dim, q_cumsum, q_cumprod, q_cummin, q_cummax, q_exp, q_log, q_log1p, q_powf, q_powi,
        q_powi_scalar, q_powf_scalar, q_sqrt, q_abs, q_cos, q_sin, q_tan, q_cosh, q_sinh, q_tanh,
        q_erf, q_cat, q_argmax, q_argtopk, q_topk, q_argmin, q_max, q_max_dim,
        q_max_dim_with_indices, q_min, q_min_dim, q_min_dim_with_indices, q_max_abs, q_max_abs_dim,
        q_any, q_any_dim, q_all, q_all_dim, q_sort, q_sort_with_indices, q_argsort
    ;
        TransactionOps:
        tr_execute
    ;
        ))
    .len()
}

/// Compiles every op of `Wgpu` and `NdArray` (their addresses, never called): see the module
/// docs. Not part of the API.
#[doc(hidden)]
pub fn backend_ops() -> usize {
    addresses::<burn_wgpu::Wgpu>() + addresses::<burn_ndarray::NdArray>()
}
