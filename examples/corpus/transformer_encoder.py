"""A one-layer Transformer encoder classifying fixed-length token sequences.

Written in the idioms of: the model zoo's PaddleNLP transformer (fluid 1.x transformer/model.py)
and the book's machine-translation chapter, dense parts: word + position embeddings
(position table from a NumpyArrayInitializer), multi-head attention written with fc,
reshape, transpose, matmul(alpha=...), softmax and an additive mask; layer_norm with
pre/post-process, a relu feed-forward; label_smooth + softmax_with_cross_entropy(soft_label),
noam_decay with Adam (beta1/beta2/epsilon as the model zoo sets them) and
fluid.nets.scaled_dot_product_attention in a second head.

    python transformer_encoder.py --save_dir out
    paddle-launch --nproc_per_node 2 transformer_encoder.py --save_dir out
"""
import argparse
import os

import numpy

import spmd.fluid as fluid

SEQ_LEN, VOCAB, D_MODEL, N_HEAD, D_INNER, CLASSES = 8, 30, 16, 2, 32, 3
BATCH_SIZE = 16
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def position_encoding_init(n_position, d_pos_vec):
    position = numpy.arange(n_position)[:, None]
    scaled = position / numpy.power(10000, 2 * (numpy.arange(d_pos_vec) // 2) / d_pos_vec)
    table = numpy.zeros((n_position, d_pos_vec))
    table[:, 0::2], table[:, 1::2] = numpy.sin(scaled[:, 0::2]), numpy.cos(scaled[:, 1::2])
    return table.astype("float32")


def multi_head_attention(x, attn_bias):
    d_key = D_MODEL // N_HEAD
    q, k, v = [fluid.layers.fc(input=x, size=D_MODEL, bias_attr=False, num_flatten_dims=2)
               for _ in range(3)]

    def split_heads(t):
        t = fluid.layers.reshape(x=t, shape=[0, 0, N_HEAD, d_key])
        return fluid.layers.transpose(x=t, perm=[0, 2, 1, 3])

    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    product = fluid.layers.matmul(x=q, y=k, transpose_y=True, alpha=d_key ** -0.5)
    weights = fluid.layers.softmax(product + attn_bias)
    out = fluid.layers.matmul(weights, v)
    out = fluid.layers.transpose(out, perm=[0, 2, 1, 3])
    out = fluid.layers.reshape(x=out, shape=[0, 0, D_MODEL])
    return fluid.layers.fc(input=out, size=D_MODEL, bias_attr=False, num_flatten_dims=2)


def encoder_layer(x, attn_bias):
    attn = multi_head_attention(x, attn_bias)
    x = fluid.layers.layer_norm(x + attn, begin_norm_axis=len(x.shape) - 1)
    hidden = fluid.layers.fc(input=x, size=D_INNER, num_flatten_dims=2, act="relu")
    ffn = fluid.layers.fc(input=hidden, size=D_MODEL, num_flatten_dims=2)
    return fluid.layers.layer_norm(x + ffn, begin_norm_axis=len(x.shape) - 1)


def model(src_word, src_pos, attn_bias, label):
    word_emb = fluid.layers.embedding(src_word, size=[VOCAB, D_MODEL],
                                      param_attr=fluid.ParamAttr(
                                          name="src_word_emb_table",
                                          initializer=fluid.initializer.Normal(
                                              0.0, D_MODEL ** -0.5)))
    pos_emb = fluid.layers.embedding(src_pos, size=[SEQ_LEN, D_MODEL], param_attr=fluid.ParamAttr(
        name="src_pos_enc_table", trainable=False,
        initializer=fluid.initializer.NumpyArrayInitializer(
            position_encoding_init(SEQ_LEN, D_MODEL))))
    enc_input = fluid.layers.scale(word_emb, scale=D_MODEL ** 0.5) + pos_emb
    enc = encoder_layer(enc_input, attn_bias)
    context = fluid.nets.scaled_dot_product_attention(enc, enc, enc, num_heads=1)
    pooled = fluid.layers.reduce_mean(enc + context, dim=1)
    logits = fluid.layers.fc(input=pooled, size=CLASSES)
    smoothed = fluid.layers.label_smooth(
        label=fluid.layers.one_hot(input=label, depth=CLASSES), epsilon=0.1)
    cost = fluid.layers.softmax_with_cross_entropy(logits=logits, label=smoothed,
                                                   soft_label=True)
    return fluid.layers.mean(cost)


def batch(step):
    rng = numpy.random.RandomState(100 + step)
    words = rng.randint(1, VOCAB, size=(BATCH_SIZE, SEQ_LEN, 1)).astype("int64")
    lengths = rng.randint(4, SEQ_LEN + 1, size=BATCH_SIZE)
    bias = numpy.zeros((BATCH_SIZE, N_HEAD, SEQ_LEN, SEQ_LEN), dtype="float32")
    for i, n in enumerate(lengths):
        words[i, n:, 0] = 0
        bias[i, :, :, n:] = -1e9
    pos = numpy.tile(numpy.arange(SEQ_LEN).reshape(1, SEQ_LEN, 1), (BATCH_SIZE, 1, 1))
    label = (words[:, 0, 0] % CLASSES).reshape(-1, 1).astype("int64")
    return words, pos.astype("int64"), bias, label


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="transformer.model")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    fluid.default_main_program().random_seed = 9
    fluid.default_startup_program().random_seed = 9
    src_word = fluid.data(name="src_word", shape=[None, SEQ_LEN, 1], dtype="int64")
    src_pos = fluid.data(name="src_pos", shape=[None, SEQ_LEN, 1], dtype="int64")
    attn_bias = fluid.data(name="src_slf_attn_bias", shape=[None, N_HEAD, SEQ_LEN, SEQ_LEN],
                           dtype="float32")
    label = fluid.data(name="label", shape=[None, 1], dtype="int64")
    avg_cost = model(src_word, src_pos, attn_bias, label)
    lr = fluid.layers.noam_decay(D_MODEL, warmup_steps=4) * 0.5
    fluid.optimizer.Adam(learning_rate=lr, beta1=0.9, beta2=0.997,
                         epsilon=1e-9).minimize(avg_cost)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    program = fluid.default_main_program()
    if TRAINERS > 1:
        program = fluid.CompiledProgram(program).with_data_parallel(loss_name=avg_cost.name)
    per = BATCH_SIZE // TRAINERS
    mine = slice(TRAINER_ID * per, (TRAINER_ID + 1) * per)
    for step in range(args.steps):
        words, pos, bias, lab = batch(step)
        cost, = exe.run(program, feed={"src_word": words[mine], "src_pos": pos[mine],
                                       "src_slf_attn_bias": bias[mine], "label": lab[mine]},
                        fetch_list=[avg_cost])
        if TRAINER_ID == 0:
            print("step %d, avg cost %.6f" % (step, cost))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
