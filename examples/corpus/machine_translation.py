"""Neural machine translation: an attention encoder-decoder over LoD word sequences, trained
with teacher forcing, then beam-search decoding with the trained parameters.

Written in the idioms of: the PaddlePaddle book, chapter 8 (08.machine_translation/train.py,
fluid 1.x): the source words, the target words and the next target words declared with
fluid.layers.data(..., lod_level=1); an encoder of fluid.layers.embedding (is_sparse=True), an
fc of three times the hidden width feeding fluid.layers.dynamic_gru forward and another with
is_reverse=True, concatenated; a decoder in fluid.layers.DynamicRNN (step_input over the target
embedding, memory(init=..., need_reorder=True) from the projected sequence_last_step of the
encoder, static_input for the encoder output and its projection) whose cell is the book's
simple_attention (fc, sequence_expand, elementwise_add, fc to one score, sequence_softmax,
reshape, elementwise_mul with axis=0, sequence_pool "sum"; here with a tanh on the mixed
state, see the comment there) then fc on [word, context] and gru_unit, an fc softmax over the
target vocabulary; cross_entropy, mean, fluid.clip.set_gradient_clip(GradientClipByGlobalNorm)
and Adam with a noam_decay learning rate and L2DecayRegularizer, the program built under
program_guard and unique_name.guard, a wmt16-style reader batched by paddle.batch (each trainer
taking its whole sentences of every batch) and fed by fluid.DataFeeder(feed_list=[names],
program=...); params saved with fluid.io.save_params.
Inference is a second program with the same parameter names, loaded with fluid.io.load_params:
init_ids / init_scores with lod_level=2 (fluid.create_lod_tensor), tensor arrays
(array_write / array_read) for the ids, scores and decoder states, a fluid.layers.While loop
(less_than, increment, is_empty, logical_not, logical_and into its condition) running the same
cell, topk, log, elementwise_add, lod_reset, fluid.layers.beam_search, sequence_expand as a
gather and assign back into the encoder output, then fluid.layers.beam_search_decode, fetched
with return_numpy=False and read through its two LoD levels.

The synthetic "language pair": the target sentence is the source sentence reversed (vocabulary
of 30 with <s> = 0 and <e> = 1, 2 to 6 words). 75 steps of 64 sentences; trainer 0 then prints
the beam's hypotheses (ids) for 8 new sentences and how many of the best ones are exact.

    python machine_translation.py --save_dir out
    paddle-launch --nproc_per_node 2 machine_translation.py --save_dir out
"""
import argparse
import os

import numpy as np

import spmd as paddle
import spmd.fluid as fluid

dict_size = 30
source_dict_size = target_dict_size = dict_size
bos_id = 0  # <s>
eos_id = 1  # <e>
word_dim = 16
hidden_dim = 64
decoder_size = hidden_dim
max_length = 10
beam_size = 3
batch_size = 64
is_sparse = True
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))
# Sentence lengths cycle with this period, which divides every trainer's share of a batch: the
# shares hold as many target words, so the mean over each share's words, averaged over the
# trainers, is the mean over the whole batch's words.
LENGTHS = [3, 5, 4, 6, 2, 5, 3, 4]


def wmt16_like(n_samples, seed):
    """wmt16.train() layout: (source ids with <s> and <e>, <s> + target ids, target ids +
    <e>); the target is the source reversed."""
    def reader():
        rng = np.random.RandomState(seed)
        for i in range(n_samples):
            words = [int(w) for w in rng.randint(2, dict_size, size=LENGTHS[i % len(LENGTHS)])]
            target = words[::-1]
            yield [bos_id] + words + [eos_id], [bos_id] + target, target + [eos_id]
    return reader


def my_share(batch_reader):
    """This trainer's whole sentences of each global batch."""
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def encoder():
    src_word_id = fluid.layers.data(
        name="src_word_id", shape=[1], dtype="int64", lod_level=1)
    src_embedding = fluid.layers.embedding(
        input=src_word_id, size=[source_dict_size, word_dim], dtype="float32",
        is_sparse=is_sparse)

    fc_forward = fluid.layers.fc(input=src_embedding, size=hidden_dim * 3, bias_attr=False)
    src_forward = fluid.layers.dynamic_gru(input=fc_forward, size=hidden_dim)
    fc_backward = fluid.layers.fc(input=src_embedding, size=hidden_dim * 3, bias_attr=False)
    src_backward = fluid.layers.dynamic_gru(input=fc_backward, size=hidden_dim,
                                            is_reverse=True)
    encoded_vector = fluid.layers.concat(input=[src_forward, src_backward], axis=1)
    return encoded_vector


def cell(x, hidden, encoder_out, encoder_out_proj):
    def simple_attention(encoder_vec, encoder_proj, decoder_state):
        decoder_state_proj = fluid.layers.fc(
            input=decoder_state, size=decoder_size, bias_attr=False)
        decoder_state_expand = fluid.layers.sequence_expand(x=decoder_state_proj,
                                                            y=encoder_proj)
        # the book scores mixed_state itself; an fc to one score is linear, so there the
        # decoder state's term is the same at every source word, sequence_softmax cancels it,
        # and its projection's gradient is zero but for round-off (which Adam turns into
        # steps). tanh (Bahdanau et al.'s score) lets the decoder state steer the attention.
        mixed_state = fluid.layers.tanh(
            fluid.layers.elementwise_add(encoder_proj, decoder_state_expand))
        attention_weights = fluid.layers.fc(input=mixed_state, size=1, bias_attr=False)
        attention_weights = fluid.layers.sequence_softmax(input=attention_weights)
        weights_reshape = fluid.layers.reshape(x=attention_weights, shape=[-1])
        scaled = fluid.layers.elementwise_mul(x=encoder_vec, y=weights_reshape, axis=0)
        context = fluid.layers.sequence_pool(input=scaled, pool_type="sum")
        return context

    context = simple_attention(encoder_out, encoder_out_proj, hidden)
    out = fluid.layers.fc(input=[x, context], size=decoder_size * 3, bias_attr=False)
    out = fluid.layers.gru_unit(input=out, hidden=hidden, size=decoder_size * 3)[0]
    return out, out


def train_decoder(encoder_out):
    encoder_last = fluid.layers.sequence_last_step(input=encoder_out)
    encoder_last_proj = fluid.layers.fc(input=encoder_last, size=decoder_size, act="tanh")
    # cache the encoder_out's computed result in attention
    encoder_out_proj = fluid.layers.fc(input=encoder_out, size=decoder_size, bias_attr=False)

    trg_language_word = fluid.layers.data(
        name="target_language_word", shape=[1], dtype="int64", lod_level=1)
    trg_embedding = fluid.layers.embedding(
        input=trg_language_word, size=[target_dict_size, word_dim], dtype="float32",
        is_sparse=is_sparse)

    rnn = fluid.layers.DynamicRNN()
    with rnn.block():
        x = rnn.step_input(trg_embedding)
        pre_state = rnn.memory(init=encoder_last_proj, need_reorder=True)
        encoder_out = rnn.static_input(encoder_out)
        encoder_out_proj = rnn.static_input(encoder_out_proj)
        out, current_state = cell(x, pre_state, encoder_out, encoder_out_proj)
        prob = fluid.layers.fc(input=out, size=target_dict_size, act="softmax")

        rnn.update_memory(pre_state, current_state)
        rnn.output(prob)

    return rnn()


def train_model():
    encoder_out = encoder()
    rnn_out = train_decoder(encoder_out)
    label = fluid.layers.data(
        name="target_language_next_word", shape=[1], dtype="int64", lod_level=1)
    cost = fluid.layers.cross_entropy(input=rnn_out, label=label)
    avg_cost = fluid.layers.mean(cost)
    return avg_cost


def optimizer_func():
    fluid.clip.set_gradient_clip(clip=fluid.clip.GradientClipByGlobalNorm(clip_norm=5.0))
    # the book's noam_decay(hidden_dim, 1000), scaled to 75 steps; a larger rate makes the
    # training chaotic enough that float32 round-off (1 process vs 2 ranks) grows past 1e-3
    lr_decay = fluid.layers.learning_rate_scheduler.noam_decay(hidden_dim, 10,
                                                               learning_rate=0.5)
    return fluid.optimizer.Adam(
        learning_rate=lr_decay,
        regularization=fluid.regularizer.L2DecayRegularizer(regularization_coeff=1e-4))


def train(save_dir, num_epochs):
    train_prog = fluid.Program()
    startup_prog = fluid.Program()
    train_prog.random_seed = startup_prog.random_seed = 90
    with fluid.program_guard(train_prog, startup_prog):
        with fluid.unique_name.guard():
            avg_cost = train_model()
            optimizer = optimizer_func()
            optimizer.minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)

    # not shuffled (the book shuffles wmt16): the lengths' cycle must line up with the shares
    train_data = paddle.batch(wmt16_like(4800, 7), batch_size=batch_size)

    feeder = fluid.DataFeeder(
        feed_list=["src_word_id", "target_language_word", "target_language_next_word"],
        place=place, program=train_prog)

    exe.run(startup_prog)
    prog = train_prog
    if TRAINERS > 1:
        prog = fluid.CompiledProgram(train_prog).with_data_parallel(loss_name=avg_cost.name)

    for pass_id in range(num_epochs):
        batch_id = 0
        for data in my_share(train_data)():
            cost = exe.run(prog, feed=feeder.feed(data), fetch_list=[avg_cost])[0]
            if batch_id % 10 == 0 and TRAINER_ID == 0:
                print("pass_id: %d, batch_id: %d, loss: %f" % (pass_id, batch_id, cost))
            batch_id += 1
    if TRAINER_ID == 0:
        fluid.io.save_params(exe, save_dir, main_program=train_prog)


def infer_decoder(encoder_out):
    encoder_last = fluid.layers.sequence_last_step(input=encoder_out)
    encoder_last_proj = fluid.layers.fc(input=encoder_last, size=decoder_size, act="tanh")
    encoder_out_proj = fluid.layers.fc(input=encoder_out, size=decoder_size, bias_attr=False)

    max_len = fluid.layers.fill_constant(shape=[1], dtype="int64", value=max_length)
    counter = fluid.layers.zeros(shape=[1], dtype="int64", force_cpu=True)

    init_ids = fluid.layers.data(name="init_ids", shape=[1], dtype="int64", lod_level=2)
    init_scores = fluid.layers.data(name="init_scores", shape=[1], dtype="float32",
                                    lod_level=2)
    # create and init arrays to save selected ids, scores and states for each step
    ids_array = fluid.layers.array_write(init_ids, i=counter)
    scores_array = fluid.layers.array_write(init_scores, i=counter)
    state_array = fluid.layers.array_write(encoder_last_proj, i=counter)

    cond = fluid.layers.less_than(x=counter, y=max_len)
    while_op = fluid.layers.While(cond=cond)
    with while_op.block():
        pre_ids = fluid.layers.array_read(array=ids_array, i=counter)
        pre_score = fluid.layers.array_read(array=scores_array, i=counter)
        pre_state = fluid.layers.array_read(array=state_array, i=counter)

        pre_ids_emb = fluid.layers.embedding(
            input=pre_ids, size=[target_dict_size, word_dim], dtype="float32",
            is_sparse=is_sparse)
        out, current_state = cell(pre_ids_emb, pre_state, encoder_out, encoder_out_proj)
        prob = fluid.layers.fc(input=current_state, size=target_dict_size, act="softmax")

        # beam search
        topk_scores, topk_indices = fluid.layers.topk(prob, k=beam_size)
        accu_scores = fluid.layers.elementwise_add(
            x=fluid.layers.log(topk_scores),
            y=fluid.layers.reshape(pre_score, shape=[-1]), axis=0)
        accu_scores = fluid.layers.lod_reset(x=accu_scores, y=pre_ids)
        selected_ids, selected_scores = fluid.layers.beam_search(
            pre_ids, pre_score, topk_indices, accu_scores, beam_size, end_id=eos_id)

        fluid.layers.increment(x=counter, value=1, in_place=True)
        # save selected ids and corresponding scores of each step
        fluid.layers.array_write(selected_ids, array=ids_array, i=counter)
        fluid.layers.array_write(selected_scores, array=scores_array, i=counter)
        # update rnn state by sequence_expand acting as gather
        current_state = fluid.layers.sequence_expand(current_state, selected_ids)
        fluid.layers.array_write(current_state, array=state_array, i=counter)
        current_enc_out = fluid.layers.sequence_expand(encoder_out, selected_ids)
        fluid.layers.assign(current_enc_out, encoder_out)
        current_enc_out_proj = fluid.layers.sequence_expand(encoder_out_proj, selected_ids)
        fluid.layers.assign(current_enc_out_proj, encoder_out_proj)

        # update conditional variable
        length_cond = fluid.layers.less_than(x=counter, y=max_len)
        finish_cond = fluid.layers.logical_not(fluid.layers.is_empty(x=selected_ids))
        fluid.layers.logical_and(x=length_cond, y=finish_cond, out=cond)

    translation_ids, translation_scores = fluid.layers.beam_search_decode(
        ids=ids_array, scores=scores_array, beam_size=beam_size, end_id=eos_id)

    return translation_ids, translation_scores


def infer_model():
    encoder_out = encoder()
    translation_ids, translation_scores = infer_decoder(encoder_out)
    return translation_ids, translation_scores


def infer(save_dir):
    infer_prog = fluid.Program()
    startup_prog = fluid.Program()
    with fluid.program_guard(infer_prog, startup_prog):
        with fluid.unique_name.guard():
            translation_ids, translation_scores = infer_model()

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)

    test_data = paddle.batch(wmt16_like(8, 11), batch_size=4)

    fluid.io.load_params(exe, save_dir, main_program=infer_prog)

    exact = total = 0
    for data in test_data():
        src_word_id = fluid.create_lod_tensor(
            data=[x[0] for x in data], recursive_seq_lens=[[len(x[0]) for x in data]],
            place=place)
        init_ids = fluid.create_lod_tensor(
            data=np.array([[bos_id]] * len(data), dtype="int64"),
            recursive_seq_lens=[[1] * len(data)] * 2, place=place)
        init_scores = fluid.create_lod_tensor(
            data=np.array([[0.]] * len(data), dtype="float32"),
            recursive_seq_lens=[[1] * len(data)] * 2, place=place)
        seq_ids, seq_scores = exe.run(
            infer_prog,
            feed={"src_word_id": src_word_id, "init_ids": init_ids,
                  "init_scores": init_scores},
            fetch_list=[translation_ids, translation_scores], return_numpy=False)
        # lod[0]: the hypotheses of each source sentence; lod[1]: the words of each hypothesis
        for i in range(len(seq_ids.lod()[0]) - 1):  # for each source sentence
            start = seq_ids.lod()[0][i]
            end = seq_ids.lod()[0][i + 1]
            print("Original sentence:", data[i][0][1:-1])
            print("Translated score and sentence:")
            for j in range(end - start):  # for each candidate
                sub_start = seq_ids.lod()[1][start + j]
                sub_end = seq_ids.lod()[1][start + j + 1]
                hyp = np.array(seq_ids)[sub_start:sub_end][1:-1].ravel().tolist()
                score = float(np.array(seq_scores)[sub_end - 1])
                print("%.4f" % score, hyp)
                if j == 0:
                    total += 1
                    exact += hyp == data[i][0][1:-1][::-1]
    print("best hypothesis is the reversed source for %d of %d sentences" % (exact, total))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="machine_translation.inference.model")
    parser.add_argument("--num_epochs", type=int, default=1)
    args = parser.parse_args()
    train(args.save_dir, args.num_epochs)
    if TRAINER_ID == 0:
        infer(args.save_dir)


if __name__ == "__main__":
    main()
