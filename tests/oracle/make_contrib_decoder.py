"""Reference numbers for fluid 1.8's contrib seq2seq decoder (fluid.contrib.decoder:
InitState, StateCell, TrainingDecoder, BeamSearchDecoder) on a tiny model, for
tests/unit/test_contrib_decoder.py.

Run it with PaddlePaddle 1.8.5's Python, from a folder outside the checkout:

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_contrib_decoder.py

The encoder sums a source sequence's embeddings into a tanh fc; the state cell's h starts
there (need_reorder) and steps as tanh(fc([h, word])). Training: teacher-forced decoding
over the target words, softmax fc, cross entropy, SGD; it stores the losses and the final
parameters. Decoding: BeamSearchDecoder's own step (decode()) from the same kind of encoder,
storing the ids and scores beam_search_decode gives, with their LoD. Every parameter starts
at a fixed ramp chosen by its place in creation order, so fluid's and spmd's names need not
agree. train and decode are shared with the test.
"""
import os
import sys

import numpy as np

VOCAB, EMB, HIDDEN, LR, STEPS = 7, 4, 5, 0.5, 3


def _ramp(shape, seed):
    n = int(np.prod(shape))
    lo, hi = -0.8 + 0.05 * seed, 0.7 - 0.03 * seed
    values = np.linspace(lo, hi, n)
    return np.sin(values * (3 + seed)).reshape(shape).astype("float32")


def _set_params(fluid, program, place, offset=0):
    scope = fluid.global_scope()
    params = program.global_block().all_parameters()
    for i, p in enumerate(params):
        scope.find_var(p.name).get_tensor().set(_ramp(p.shape, i + offset), place)
    return [p.name for p in params]


def _encoder(fluid):
    src = fluid.layers.data("src", [1], dtype="int64", lod_level=1)
    emb = fluid.layers.embedding(src, [VOCAB, EMB])
    return fluid.layers.fc(fluid.layers.sequence_pool(emb, "sum"), HIDDEN, act="tanh")


def _cell(fluid, decoder, context):
    h = decoder.InitState(init=context, need_reorder=True)
    cell = decoder.StateCell(inputs={"x": None}, states={"h": h}, out_state="h")

    @cell.state_updater
    def updater(state_cell):
        word = state_cell.get_input("x")
        prev_h = state_cell.get_state("h")
        state_cell.set_state("h", fluid.layers.fc([prev_h, word], HIDDEN, act="tanh"))
    return cell


SRC = ([[2], [3], [4], [1], [5], [6]], [[3, 1, 2]])
TRG = ([[0], [2], [3], [0], [4], [0], [5], [6]], [[3, 2, 3]])
NEXT = ([[2], [3], [1], [4], [1], [5], [6], [1]], [[3, 2, 3]])


def train(fluid, decoder):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        cell = _cell(fluid, decoder, _encoder(fluid))
        trg = fluid.layers.data("trg", [1], dtype="int64", lod_level=1)
        trg_emb = fluid.layers.embedding(trg, [VOCAB, EMB])
        dec = decoder.TrainingDecoder(cell)
        with dec.block():
            word = dec.step_input(trg_emb)
            dec.state_cell.compute_state(inputs={"x": word})
            score = fluid.layers.fc(dec.state_cell.get_state("h"), VOCAB, act="softmax")
            dec.state_cell.update_states()
            dec.output(score)
        label = fluid.layers.data("next", [1], dtype="int64", lod_level=1)
        loss = fluid.layers.mean(fluid.layers.cross_entropy(dec(), label))
        fluid.optimizer.SGD(LR).minimize(loss)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        names = _set_params(fluid, main, place)
        feed = {k: fluid.create_lod_tensor(np.array(d, "int64"), lod, place)
                for k, (d, lod) in (("src", SRC), ("trg", TRG), ("next", NEXT))}
        losses = [float(np.array(exe.run(main, feed=feed, fetch_list=[loss])[0]).reshape(-1)[0])
                  for _ in range(STEPS)]
        final = [np.array(fluid.global_scope().find_var(n).get_tensor()) for n in names]
    return {"losses": losses, "final": final}


def decode(fluid, decoder, beam_size=2, max_len=4, topk_size=3, src=SRC, offset=0):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        cell = _cell(fluid, decoder, _encoder(fluid))
        init_ids = fluid.layers.data("init_ids", [1], dtype="int64", lod_level=2)
        init_scores = fluid.layers.data("init_scores", [1], dtype="float32", lod_level=2)
        dec = decoder.BeamSearchDecoder(cell, init_ids, init_scores, VOCAB, EMB,
                                        topk_size=topk_size, sparse_emb=False,
                                        max_len=max_len, beam_size=beam_size, end_id=1)
        dec.decode()
        ids, scores = dec()
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    batch = len(src[1][0])
    lod = [[1] * batch, [1] * batch]
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        _set_params(fluid, main, place, offset)
        feed = {"src": fluid.create_lod_tensor(np.array(src[0], "int64"), src[1], place),
                "init_ids": fluid.create_lod_tensor(np.zeros((batch, 1), "int64"), lod, place),
                "init_scores": fluid.create_lod_tensor(np.ones((batch, 1), "float32"), lod,
                                                       place)}
        got_ids, got_scores = exe.run(main, feed=feed, fetch_list=[ids, scores],
                                      return_numpy=False)
    return {"ids": np.array(got_ids), "ids_lod": [list(x) for x in got_ids.lod()],
            "scores": np.array(got_scores), "scores_lod": [list(x) for x in got_scores.lod()]}


# offset: other parameter values; 9 and 11 make hypotheses reach the end id (1) early
DECODE_CASES = {"beam2": {}, "beam3_long": {"beam_size": 3, "max_len": 6, "topk_size": 4},
                "greedy": {"beam_size": 1, "topk_size": 1},
                "ends_early": {"max_len": 5, "offset": 9},
                "mixed_ends": {"max_len": 5, "offset": 11}}


def main():
    import paddle
    import paddle.fluid as fluid
    from paddle.fluid.contrib.decoder import beam_search_decoder as decoder

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    cases = {}
    with fluid.unique_name.guard():
        cases["train"] = train(fluid, decoder)
    for name, kwargs in DECODE_CASES.items():
        with fluid.unique_name.guard():
            cases["decode/" + name] = decode(fluid, decoder, **kwargs)
    save("contrib_decoder", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
