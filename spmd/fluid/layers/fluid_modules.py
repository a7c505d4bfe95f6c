"""fluid 1.8's fluid.layers submodules (fluid.layers.nn, .ops, .tensor, ...): programs import
them by name (`import paddle.fluid.layers.ops as ops`, `from paddle.fluid.layers import nn`).
Each spmd module of that name holds the names of fluid's module that spmd provides (the same
objects as fluid.layers.<name>); a name fluid's module has and spmd does not yet is an
AttributeError that says so, instead of Python's bare one.

>>> import spmd.fluid.layers.ops as ops
>>> ops.cos is __import__("spmd").fluid.layers.cos
True
"""
from __future__ import annotations

from ... import layers as _layers

__all__ = ["FLUID_MODULES", "SHADOWED_MODULES", "populate"]

# fluid 1.8.5's fluid.layers submodules and the names each lists in __all__ (read from
# PaddlePaddle 1.8.5 itself)
FLUID_MODULES = {
    "control_flow": (
        "DynamicRNN IfElse Print StaticRNN Switch While array_length array_read array_write "
        "case cond create_array equal greater_equal greater_than increment is_empty "
        "less_equal less_than not_equal reorder_lod_tensor_by_rank switch_case while_loop "
    ).split(),
    "detection": (
        "anchor_generator bipartite_match box_clip box_coder box_decoder_and_assign "
        "collect_fpn_proposals density_prior_box detection_output distribute_fpn_proposals "
        "generate_mask_labels generate_proposal_labels generate_proposals iou_similarity "
        "locality_aware_nms matrix_nms multi_box_head multiclass_nms polygon_box_transform "
        "prior_box retinanet_detection_output retinanet_target_assign "
        "roi_perspective_transform rpn_target_assign sigmoid_focal_loss ssd_loss "
        "target_assign yolo_box yolov3_loss "
    ).split(),
    "distributions": (
        "Categorical MultivariateNormalDiag Normal Uniform "
    ).split(),
    "io": (
        "create_py_reader_by_data data double_buffer load py_reader read_file "
    ).split(),
    "learning_rate_scheduler": (
        "cosine_decay exponential_decay inverse_time_decay linear_lr_warmup natural_exp_decay "
        "noam_decay piecewise_decay polynomial_decay "
    ).split(),
    "loss": (
        "bpr_loss center_loss cross_entropy edit_distance hsigmoid huber_loss kldiv_loss "
        "margin_rank_loss mse_loss nce npair_loss rank_loss "
        "sampled_softmax_with_cross_entropy sigmoid_cross_entropy_with_logits "
        "softmax_with_cross_entropy square_error_cost teacher_student_sigmoid_loss warpctc "
    ).split(),
    "metric_op": (
        "accuracy auc "
    ).split(),
    "nn": (
        "adaptive_pool2d adaptive_pool3d add_position_encoding addcmul addmm affine_channel "
        "affine_grid allclose autoincreased_step_counter batch_norm bilinear_tensor_product "
        "bmm brelu chunk_eval clamp clip clip_by_norm continuous_value_model conv2d "
        "conv2d_transpose conv3d conv3d_transpose cos_sim crf_decoding crop crop_tensor cross "
        "ctc_greedy_decoder data_norm deformable_conv deformable_roi_pooling diag_embed "
        "dice_loss dist dot dropout elementwise_add elementwise_div elementwise_equal "
        "elementwise_floordiv elementwise_max elementwise_min elementwise_mod elementwise_mul "
        "elementwise_pow elementwise_sub elu embedding expand expand_as fc filter_by_instag "
        "flatten flip fsp_matrix gather gather_nd gather_tree gaussian_random "
        "gaussian_random_batch_size_like get_tensor_from_selected_rows grid_sampler "
        "group_norm hard_sigmoid hard_swish hash im2sequence image_resize image_resize_short "
        "index_sample index_select inplace_abn instance_norm interpolate l2_normalize "
        "label_smooth layer_norm leaky_relu linear_chain_crf lod_append lod_reset log log1p "
        "log_loss log_softmax logical_and logical_not logical_or logical_xor logsumexp lrn "
        "matmul maxout mean mean_iou merge_selected_rows meshgrid mish mul multiplex nonzero "
        "one_hot pad pad2d pad_constant_like pixel_shuffle pool2d pool3d pow prelu prroi_pool "
        "psroi_pool py_func randint randn random_crop randperm rank reduce_all reduce_any "
        "reduce_max reduce_mean reduce_min reduce_prod reduce_sum relu relu6 reshape "
        "resize_bilinear resize_nearest resize_trilinear roi_align roi_pool roll row_conv "
        "sampling_id scale scatter scatter_nd scatter_nd_add selu shape shard_index "
        "shuffle_channel sign similarity_focus size slice smooth_l1 soft_relu softmax "
        "space_to_depth spectral_norm split squeeze stack stanh strided_slice sum swish t "
        "temporal_shift topk transpose unfold uniform_random uniform_random_batch_size_like "
        "unique unique_with_counts unsqueeze unstack where "
    ).split(),
    "ops": (
        "abs acos asin atan ceil cos cumsum erf exp floor gelu hard_shrink logsigmoid "
        "reciprocal round rsqrt sigmoid sin softplus softshrink softsign sqrt square tanh "
        "tanh_shrink thresholded_relu "
    ).split(),
    "sequence_lod": (
        "sequence_concat sequence_conv sequence_enumerate sequence_expand sequence_expand_as "
        "sequence_first_step sequence_last_step sequence_mask sequence_pad sequence_pool "
        "sequence_reshape sequence_reverse sequence_scatter sequence_slice sequence_softmax "
        "sequence_unpad "
    ).split(),
    "tensor": (
        "arange argmax argmin argsort assign cast concat create_global_var create_parameter "
        "create_tensor diag eye fill_constant fill_constant_batch_size_like full full_like "
        "has_inf has_nan isfinite kron linspace ones ones_like range reverse sums "
        "tensor_array_to_tensor trace tril triu zeros zeros_like "
    ).split(),
}

# fluid.layers.rnn: a module whose name fluid.layers' attribute gives to the rnn function (see
# spmd/fluid/layers/__init__.py), so it is kept apart from the modules above
SHADOWED_MODULES = {
    "rnn": (
        "BasicDecoder BeamSearchDecoder DecodeHelper Decoder GRUCell GreedyEmbeddingHelper "
        "LSTMCell RNNCell SampleEmbeddingHelper TrainingHelper beam_search beam_search_decode "
        "dynamic_decode dynamic_gru dynamic_lstm dynamic_lstmp gru_unit lstm lstm_unit rnn "
    ).split(),
}


def populate(namespace: dict, module: str, extra: dict | None = None) -> list[str]:
    """Fill `namespace` (a submodule's globals) with spmd's objects for fluid's `module`
    names, plus `extra`; install a module __getattr__ naming what is missing. Returns the
    names provided (the submodule's __all__)."""
    names = {**FLUID_MODULES, **SHADOWED_MODULES}[module]
    provided = [n for n in names if hasattr(_layers, n)]
    namespace.update({n: getattr(_layers, n) for n in provided})
    namespace.update(extra or {})
    missing = frozenset(names) - set(provided)
    where = f"fluid.layers.{module}"

    def __getattr__(name: str):
        if name in missing:
            raise AttributeError(
                f"{where}.{name} is in fluid 1.8 but not in spmd yet: see the README's "
                f"fluid.layers coverage table for when (LoD, control flow and detection "
                f"layers come with later work)")
        raise AttributeError(f"module {where!r} has no attribute {name!r}")

    namespace["__getattr__"] = __getattr__
    return provided
