"""Reference outputs for fluid 1.8's contributed ops with their own C++ kernels
(fluid.contrib.layers match_matrix_tensor, sequence_topk_avg_pooling, var_conv_2d,
tree_conv, rank_attention, tdm_child, tdm_sampler, search_pyramid_hash, multiclass_nms2 and
fluid.layers.filter_by_instag), for tests/unit/test_contrib_ops.py.

Run it with PaddlePaddle 1.8.5's Python, from a folder outside the checkout:

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_contrib_ops.py

Each case in CASES builds one layer on fixed inputs and stores its outputs, their LoD and
the gradients of sum(out * W) (W a fixed ramp shaped like each float output) for the case's
float inputs and every parameter (sorted by name), as tests/oracle/make_sequence.py does.
run_case is shared with the test, which runs the same programs with spmd.fluid.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from oracle.make_sequence import _data, _feed, _lod, _message, _ramp  # noqa: E402


def _rng(name):
    return np.random.RandomState(sum(ord(ch) * (i + 1) for i, ch in enumerate(name)) % 10007)


def _floats(name, *shape):
    return _rng(name).uniform(-1, 1, shape).astype("float32")


def _param(fluid, name, shape):
    init = fluid.initializer.NumpyArrayInitializer(_ramp(shape, -0.7, 0.9))
    return fluid.ParamAttr(name=name, initializer=init)


def _contrib(fluid):
    return fluid.contrib.layers


# A case: (feeds, build, grads). feeds: name -> (array, recursive lengths or None, whether its
# gradient is stored); build(fluid, vars, param) -> list of output variables.
def _match(x_lengths, y_lengths, width, channels, act=None):
    feeds = {"x": (_floats("mx", sum(x_lengths), width), [x_lengths], True),
             "y": (_floats("my", sum(y_lengths), width), [y_lengths], True)}

    def build(fluid, v, param):
        out, _ = _contrib(fluid).match_matrix_tensor(
            v["x"], v["y"], channels, act=act, param_attr=param("mm.w", (width, channels, width)))
        return [out]
    return feeds, build


def _maps(name, channels, rows, cols):
    sizes = [channels * r * c for r, c in zip(rows, cols)]
    feeds = {"x": (_floats(name, sum(sizes), 1), [sizes], True),
             "row": (np.zeros((sum(rows), 1), "float32"), [rows], False),
             "col": (np.zeros((sum(cols), 1), "float32"), [cols], False)}
    return feeds


def _topk(channels, rows, cols, topks):
    feeds = _maps("topk", channels, rows, cols)

    def build(fluid, v, param):
        return [_contrib(fluid).sequence_topk_avg_pooling(v["x"], v["row"], v["col"], topks,
                                                          channels)]
    return feeds, build


def _var_conv(cin, cout, rows, cols, filter_size, stride, act=None):
    feeds = _maps("varconv", cin, rows, cols)
    kh, kw = (filter_size, filter_size) if isinstance(filter_size, int) else filter_size

    def build(fluid, v, param):
        return [_contrib(fluid).var_conv_2d(v["x"], v["row"], v["col"], cin, cout,
                                            filter_size, stride, act=act,
                                            param_attr=param("vc.w", (cout, cin * kh * kw)))]
    return feeds, build


NMS_BOXES = np.array([[[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 9, 9],
                       [21, 19, 31, 29]],
                      [[5, 5, 15, 15], [40, 40, 50, 50], [5, 6, 15, 16], [0, 0, 1, 1],
                       [41, 41, 50, 51]]], "float32")
NMS_SCORES = _rng("nms").uniform(0, 1, (2, 3, 5)).astype("float32")


def _nms2(return_index, **kwargs):
    feeds = {"boxes": (NMS_BOXES, None, False), "scores": (NMS_SCORES, None, False)}

    def build(fluid, v, param):
        got = _contrib(fluid).multiclass_nms2(v["boxes"], v["scores"], return_index=return_index,
                                              **kwargs)
        return list(got) if isinstance(got, tuple) else [got]
    return feeds, build


# two trees of 8 nodes (node ids from 1; [0, 0] pads the edge list). Every row of
# NodesVector is a node: fluid 1.8.5 leaves the output rows past the edges' node count
# uninitialized (they hold stale memory), spmd gives them zeros.
TREE_EDGES = np.array([[[1, 2], [1, 3], [2, 4], [2, 5], [3, 6], [6, 7], [7, 8], [0, 0]],
                       [[1, 2], [2, 3], [2, 4], [4, 5], [4, 6], [4, 7], [1, 8], [0, 0]]],
                      "int32")


def _tree_conv(output_size, num_filters, max_depth, act="tanh", bias=True):
    feeds = {"nodes": (_floats("tree", 2, 8, 3), None, True),
             "edges": (TREE_EDGES, None, False)}

    def build(fluid, v, param):
        return [_contrib(fluid).tree_conv(
            v["nodes"], v["edges"], output_size, num_filters, max_depth, act=act,
            param_attr=param("tc.w", (3, 3, output_size, num_filters)),
            bias_attr=param("tc.b", (8, output_size, num_filters)) if bias else False)]
    return feeds, build


# TDM tree: node 0 pads; 1, 2 form layer 1; 3..6 layer 2 (items 1..4 at the leaves)
TDM_INFO = np.array([[0, 0, 0, 1, 2], [0, 1, 0, 3, 4], [0, 1, 0, 5, 6], [1, 2, 1, 0, 0],
                     [2, 2, 1, 0, 0], [3, 2, 2, 0, 0], [4, 2, 2, 0, 0]], "int32")


def _int_param(fluid, value):
    return fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(value))


def _tdm_child(ids, dtype="int32", ids_dtype="int32"):
    feeds = {"x": (np.array(ids, ids_dtype).reshape(-1, 1), None, False)}

    def build(fluid, v, param):
        return list(_contrib(fluid).tdm_child(v["x"], 7, 2,
                                              _int_param(fluid, TDM_INFO.astype(dtype)),
                                              dtype=dtype))
    return feeds, build


TDM_TRAVEL = np.array([[1, 3], [1, 4], [2, 5], [2, 6]], "int32")
TDM_LAYER = np.array([[1], [2], [3], [4], [5], [6]], "int32")


def _tdm_sampler(ids, negs, output_positive=True, output_list=False, travel=TDM_TRAVEL):
    feeds = {"x": (np.array(ids, "int32").reshape(-1, 1), None, False)}

    def build(fluid, v, param):
        out = _contrib(fluid).tdm_sampler(
            v["x"], negs, [2, 4], 4, tree_travel_attr=_int_param(fluid, travel),
            tree_layer_attr=_int_param(fluid, TDM_LAYER), output_positive=output_positive,
            output_list=output_list, seed=0)
        flat = []
        for part in out:
            flat.extend(part if isinstance(part, list) else [part])
        return flat
    return feeds, build


def _pyramid(lengths, layers, training, drop, seed=3, num_emb=6, rand_len=2, space_len=40,
             width=1):
    # width > 1: fluid's kernel reads the first rows-many ids of X's flat data (the LoD
    # counts rows; Paddle's test_pyramid_hash_op.py feeds [16, 10])
    ids = _rng("pyramid").randint(0, 30, (sum(lengths), width)).astype("int32")
    feeds = {"x": (ids, [lengths], False)}

    def build(fluid, v, param):
        table = fluid.initializer.NumpyArrayInitializer(
            _floats("pyramid_w", space_len + rand_len, 1))
        return [_contrib(fluid).search_pyramid_hash(
            v["x"], num_emb, space_len, layers, rand_len, drop, training, False, 1, 1, seed,
            0.1, param_attr=fluid.ParamAttr(name="ph.w", initializer=table))]
    return feeds, build


def _instag(ins_lengths, tags, tag_lengths, wanted, is_lod, empty=0):
    rows = sum(ins_lengths) if ins_lengths else len(tag_lengths)
    feeds = {"ins": (_floats("instag", rows, 3), [ins_lengths] if ins_lengths else None, True),
             "tag": (np.array(tags, "int64").reshape(-1, 1), [tag_lengths], False),
             "wanted": (np.array(wanted, "int64"), None, False)}

    def build(fluid, v, param):
        out, weight = fluid.layers.filter_by_instag(v["ins"], v["tag"], v["wanted"], is_lod,
                                                    out_val_if_empty=empty)
        return [out, weight]
    return feeds, build, (1,)


CASES = {
    "match_matrix_tensor/basic": _match([2, 3], [3, 1], 2, 2),
    "match_matrix_tensor/act_empty": _match([1, 0, 2], [2, 3, 1], 3, 3, act="tanh"),
    "sequence_topk_avg_pooling/basic": _topk(2, [3, 2], [4, 5], [1, 3]),
    "sequence_topk_avg_pooling/short_rows": _topk(1, [2, 1, 2], [2, 3, 1], [1, 2, 4]),
    "var_conv_2d/3x3": _var_conv(2, 3, [3, 4], [5, 2], 3, 1),
    "var_conv_2d/stride_rect": _var_conv(1, 2, [5, 3], [4, 6], [3, 2], [2, 3], act="relu"),
    "var_conv_2d/even_kernel": _var_conv(2, 1, [2, 3], [3, 3], 2, 1),
    "multiclass_nms2/index": _nms2(True, score_threshold=0.2, nms_top_k=4, keep_top_k=5,
                                   nms_threshold=0.3, normalized=False),
    "multiclass_nms2/no_index": _nms2(False, score_threshold=0.4, nms_top_k=-1, keep_top_k=3,
                                      background_label=-1),
    "search_pyramid_hash/infer": _pyramid([4, 1, 0, 3], 3, False, 0.5),
    "search_pyramid_hash/infer_layers4": _pyramid([6, 2], 4, False, 1.0, num_emb=4,
                                                  rand_len=4),
    "search_pyramid_hash/train_dropout": _pyramid([5, 3, 7], 3, True, 0.4, seed=11),
    "search_pyramid_hash/wide_rows": _pyramid([3, 5, 2, 6], 4, True, 0.5, width=10),
    "filter_by_instag/lod": _instag([2, 1, 2], [1, 2, 3, 2, 5], [2, 1, 2], [2], True),
    "filter_by_instag/rows": _instag(None, [1, 2, 3, 2, 5, 4], [1, 1, 1, 1, 1, 1], [2, 5],
                                     False),
    "filter_by_instag/several_tags": _instag([1, 3, 1, 1], [7, 1, 9, 4, 4, 9, 6],
                                             [1, 3, 2, 1], [9, 6], True),
    "tree_conv/depth2": _tree_conv(4, 2, 2),
    "tree_conv/depth3_no_bias": _tree_conv(2, 1, 3, act=None, bias=False),
    "tree_conv/one_output": _tree_conv(1, 1, 2, act=None),
    "tdm_child/int32": _tdm_child([2, 3, 0, 1]),
    "tdm_child/int64_ids": _tdm_child([1, 6, 2], ids_dtype="int64"),
    "tdm_sampler/positives": _tdm_sampler([0, 1, 2, 3], [0, 0]),
    "tdm_sampler/list": _tdm_sampler([3, 0], [0, 0], output_list=True),
    "tdm_sampler/padded_path": _tdm_sampler([0, 1], [0, 0],
                                            travel=np.array([[1, 3], [1, 0], [2, 5], [2, 6]],
                                                            "int32")),
}


def run_case(fluid, name):
    """Build CASES[name] twice (forward, then with the weighted loss) and run both. A case's
    optional third element: the outputs left out of the loss (filter_by_instag's LossWeight,
    a float64 variable fluid's kernel fills with float32)."""
    feeds_spec, build, *rest = CASES[name]
    skip = rest[0] if rest else ()

    def program(weights=None):
        prog, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(prog, startup):
            vs = {}
            for k, (a, lengths, grad) in sorted(feeds_spec.items()):
                vs[k] = _data(fluid, k, a, lengths)
                vs[k].stop_gradient = not grad
            outs = build(fluid, vs, lambda n, s: _param(fluid, n, s))
            grads = []
            if weights is not None:
                terms = []
                for i, (o, w) in enumerate(zip(outs, weights)):
                    if w is not None and i not in skip:
                        wv = fluid.data(f"w{i}", list(w.shape), "float32")
                        terms.append(fluid.layers.reduce_sum(o * wv))
                loss = fluid.layers.sums(terms) if len(terms) > 1 else terms[0]
                params = sorted((p for p in prog.global_block().all_parameters()
                                 if not p.stop_gradient), key=lambda p: p.name)
                wrt = [vs[k] for k in sorted(feeds_spec) if feeds_spec[k][2]] + params
                grads = fluid.gradients([loss], wrt)
        return prog, startup, outs, grads

    feed = {k: _feed(fluid, a, lengths) for k, (a, lengths, _) in feeds_spec.items()}
    exe = fluid.Executor(fluid.CPUPlace())
    try:
        prog, startup, outs, _ = program()
        exe.run(startup)
        got = exe.run(prog, feed=feed, fetch_list=outs, return_numpy=False)
    except Exception as e:  # noqa: BLE001 - the oracle's refusal is the stored answer
        return {"error": "run", "message": _message(e)}
    arrays = [np.array(t) for t in got]
    result = {"outs": arrays, "lods": [_lod(t) for t in got]}
    weights = [_ramp(a.shape, 0.5, 1.5) if a.dtype.kind == "f" and a.size else None
               for a in arrays]
    has_params = any(not p.stop_gradient for p in prog.global_block().all_parameters())
    trainable = any(feeds_spec[k][2] for k in feeds_spec) or has_params
    if not trainable or all(w is None for w in weights):
        result["grads"] = []
        return result
    prog, startup, outs, grads = program(weights)
    exe.run(startup)
    for i, w in enumerate(weights):
        if w is not None and i not in skip:
            feed[f"w{i}"] = w
    try:
        got = exe.run(prog, feed=feed, fetch_list=grads, return_numpy=False)
    except Exception as e:  # noqa: BLE001 - a gradient fluid fails is stored as such
        result["grad_error"] = _message(e)
        return result
    result["grads"] = [np.array(g) for g in got]
    return result


def main():
    import paddle
    import paddle.fluid as fluid
    from oracle_io import save

    cases = {}
    for name in CASES:
        with fluid.unique_name.guard():
            cases[name] = run_case(fluid, name)
    save("contrib_ops", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
