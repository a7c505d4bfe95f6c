"""fluid.contrib.layers.nn: fluid 1.8's contributed ops (PaddleRec's and search's custom
kernels); the ones spmd lacks are named in docs/fluid_coverage.md with the reason."""
from ..._pending import missing_names

__all__: list[str] = []

# fluid 1.8 names spmd does not provide
MISSING = [
    "fused_elemwise_activation", "sequence_topk_avg_pooling", "var_conv_2d",
    "match_matrix_tensor", "tree_conv", "fused_embedding_seq_pool", "multiclass_nms2",
    "search_pyramid_hash", "shuffle_batch", "partial_concat", "partial_sum", "tdm_child",
    "rank_attention", "tdm_sampler"]
missing_names(globals(), MISSING)
