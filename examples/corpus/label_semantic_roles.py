"""Semantic role labeling: tag every word of a sentence with its role (IOB chunks) relative to
the sentence's predicate, with a deep LSTM tagger and a linear-chain CRF.

Written in the idioms of: the PaddlePaddle book, chapter 7 (label_semantic_roles/train.py,
fluid 1.x): eight LoD slots declared with fluid.data(..., lod_level=1) (the word, the
predicate, five context words around the predicate and a region mark) and the target
with fluid.layers.data(..., lod_level=1); fluid.embedding lookups, the six word slots sharing
one pretrained table (ParamAttr(name='emb', trainable=False), loaded after the startup program
with global_scope().find_var(...).get_tensor().set(...) from a file in the book's format: a
16-byte header then float32 rows), the predicate and mark embeddings with is_sparse=True;
tanh fc layers mixed by fluid.layers.sums, dynamic_lstm stacked with is_reverse alternating
(relu candidate, sigmoid gate and cell activations), linear_chain_crf as the loss (its
transition parameter named 'crfw' with a ParamAttr learning_rate), crf_decoding sharing it,
chunk_eval (IOB) with fluid.metrics.ChunkEvaluator accumulating its counts, and SGD with a
fluid.layers.exponential_decay learning rate; a conll05-style reader batched by paddle.batch
and fed by fluid.DataFeeder.

    python label_semantic_roles.py --save_dir out
    paddle-launch --nproc_per_node 2 label_semantic_roles.py --save_dir out
"""
import argparse
import os
import tempfile

import numpy as np

import spmd as paddle
import spmd.fluid as fluid

WORD_DICT_LEN = 60
PRED_DICT_LEN = 12
MARK_DICT_LEN = 2
# chunk types A0, A1, V in the IOB scheme: B-A0 0, I-A0 1, B-A1 2, I-A1 3, B-V 4, I-V 5, O 6
NUM_CHUNK_TYPES = 3
LABEL_DICT_LEN = NUM_CHUNK_TYPES * 2 + 1
PUNCT = 5  # word ids below this are punctuation: tagged O, and they end a chunk
WORD_DIM = 16
MARK_DIM = 5
HIDDEN_DIM = 32  # dynamic_lstm's size: 4 gates of a hidden state of 8
DEPTH = 4
MIX_HIDDEN_LR = 0.5
BATCH_SIZE = 16
EMBEDDING_NAME = "emb"
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def conll05_like(n_samples, seed):
    """conll05.test() layout: (word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, predicate, mark,
    target), each a list with one entry per word; the context words and the predicate repeat
    over the sentence, and mark is 1 within two words of the predicate. Words before the
    predicate are A0, after it A1, punctuation O, each run between punctuation one chunk."""
    def reader():
        rng = np.random.RandomState(seed)
        for _ in range(n_samples):
            length = rng.randint(5, 13)
            words = list(rng.randint(PUNCT, WORD_DICT_LEN, size=length))
            for pos in rng.choice(length, size=rng.randint(0, 3), replace=False):
                words[pos] = rng.randint(0, PUNCT)
            verb = rng.randint(1, length - 1)
            words[verb] = PUNCT + rng.randint(0, 10)
            labels, previous = [], None
            for i, w in enumerate(words):
                if i == verb:
                    chunk = 2
                elif w < PUNCT:
                    chunk = None
                else:
                    chunk = 0 if i < verb else 1
                if chunk is None:
                    labels.append(NUM_CHUNK_TYPES * 2)
                else:
                    labels.append(chunk * 2 + (1 if chunk == previous else 0))
                previous = chunk
            ctx = [words[verb + d] if 0 <= verb + d < length else 0 for d in (-2, -1, 0, 1, 2)]
            mark = [1 if abs(i - verb) <= 2 else 0 for i in range(length)]
            yield tuple([words] + [[c] * length for c in ctx]
                        + [[words[verb] - PUNCT] * length, mark, labels])
    return reader


def my_share(batch_reader):
    """This trainer's whole sentences of each global batch."""
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def write_pretrained_embedding(file_name, h, w):
    """What conll05.get_embedding() downloads: a 16-byte header, then [h, w] float32."""
    table = np.random.RandomState(3).normal(scale=0.5, size=(h, w)).astype(np.float32)
    with open(file_name, "wb") as f:
        f.write(b"\0" * 16)
        table.tofile(f)


def load_parameter(file_name, h, w):
    with open(file_name, "rb") as f:
        f.read(16)  # skip header.
        return np.fromfile(f, dtype=np.float32).reshape(h, w)


def db_lstm(word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark):
    predicate_embedding = fluid.embedding(input=predicate, size=[PRED_DICT_LEN, WORD_DIM],
                                          dtype="float32", is_sparse=True, param_attr="vemb")
    mark_embedding = fluid.embedding(input=mark, size=[MARK_DICT_LEN, MARK_DIM],
                                     dtype="float32", is_sparse=True)
    word_input = [word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2]
    emb_layers = [
        fluid.embedding(size=[WORD_DICT_LEN, WORD_DIM], input=x,
                        param_attr=fluid.ParamAttr(name=EMBEDDING_NAME, trainable=False))
        for x in word_input
    ]
    emb_layers.append(predicate_embedding)
    emb_layers.append(mark_embedding)

    hidden_0_layers = [fluid.layers.fc(input=emb, size=HIDDEN_DIM, act="tanh")
                       for emb in emb_layers]
    hidden_0 = fluid.layers.sums(input=hidden_0_layers)
    lstm_0 = fluid.layers.dynamic_lstm(input=hidden_0, size=HIDDEN_DIM,
                                       candidate_activation="relu",
                                       gate_activation="sigmoid", cell_activation="sigmoid")

    # stack L-LSTM and R-LSTM with direct edges
    input_tmp = [hidden_0, lstm_0]
    for i in range(1, DEPTH):
        mix_hidden = fluid.layers.sums(input=[
            fluid.layers.fc(input=input_tmp[0], size=HIDDEN_DIM, act="tanh"),
            fluid.layers.fc(input=input_tmp[1], size=HIDDEN_DIM, act="tanh"),
        ])
        lstm = fluid.layers.dynamic_lstm(input=mix_hidden, size=HIDDEN_DIM,
                                         candidate_activation="relu",
                                         gate_activation="sigmoid", cell_activation="sigmoid",
                                         is_reverse=((i % 2) == 1))
        input_tmp = [mix_hidden, lstm]

    return fluid.layers.sums(input=[
        fluid.layers.fc(input=input_tmp[0], size=LABEL_DICT_LEN, act="tanh"),
        fluid.layers.fc(input=input_tmp[1], size=LABEL_DICT_LEN, act="tanh"),
    ])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="label_semantic_roles.model")
    parser.add_argument("--num_epochs", type=int, default=6)
    args = parser.parse_args()
    fluid.default_startup_program().random_seed = 90
    fluid.default_main_program().random_seed = 90

    names = ["word_data", "ctx_n2_data", "ctx_n1_data", "ctx_0_data", "ctx_p1_data",
             "ctx_p2_data", "verb_data", "mark_data"]
    word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, predicate, mark = [
        fluid.data(name=n, shape=[None, 1], dtype="int64", lod_level=1) for n in names]
    feature_out = db_lstm(word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark)
    target = fluid.layers.data(name="target", shape=[1], dtype="int64", lod_level=1)
    crf_cost = fluid.layers.linear_chain_crf(
        input=feature_out, label=target,
        param_attr=fluid.ParamAttr(name="crfw", learning_rate=MIX_HIDDEN_LR))
    avg_cost = fluid.layers.mean(crf_cost)
    sgd_optimizer = fluid.optimizer.SGD(learning_rate=fluid.layers.exponential_decay(
        learning_rate=0.1, decay_steps=40, decay_rate=0.5, staircase=True))
    sgd_optimizer.minimize(avg_cost)

    crf_decode = fluid.layers.crf_decoding(input=feature_out,
                                           param_attr=fluid.ParamAttr(name="crfw"))
    (precision, recall, f1_score, num_infer_chunks, num_label_chunks,
     num_correct_chunks) = fluid.layers.chunk_eval(
        input=crf_decode, label=target, chunk_scheme="IOB",
        num_chunk_types=NUM_CHUNK_TYPES)
    chunk_evaluator = fluid.metrics.ChunkEvaluator()

    place = fluid.CPUPlace()
    feeder = fluid.DataFeeder(
        feed_list=[word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, predicate, mark, target],
        place=place)
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    with tempfile.TemporaryDirectory() as tmp:
        embedding_file = os.path.join(tmp, "emb")
        write_pretrained_embedding(embedding_file, WORD_DICT_LEN, WORD_DIM)
        embedding_param = fluid.global_scope().find_var(EMBEDDING_NAME).get_tensor()
        embedding_param.set(load_parameter(embedding_file, WORD_DICT_LEN, WORD_DIM), place)
    program = fluid.default_main_program()
    if TRAINERS > 1:
        program = fluid.CompiledProgram(program).with_data_parallel(loss_name=avg_cost.name)

    train_data = paddle.batch(conll05_like(320, 7), batch_size=BATCH_SIZE)
    batch_id = 0
    for pass_id in range(args.num_epochs):
        chunk_evaluator.reset()
        for data in my_share(train_data)():
            cost, nums_infer, nums_label, nums_correct = exe.run(
                program, feed=feeder.feed(data),
                fetch_list=[avg_cost, num_infer_chunks, num_label_chunks,
                            num_correct_chunks])
            chunk_evaluator.update(nums_infer, nums_label, nums_correct)
            if batch_id % 5 == 0 and TRAINER_ID == 0:
                print("Pass %d, Batch %d, avg_cost %.5f" % (pass_id, batch_id, cost))
            batch_id += 1
        if TRAINER_ID == 0:
            p, r, f1 = chunk_evaluator.eval()
            print("Pass %d, this trainer's chunks: precision %.3f recall %.3f f1 %.3f"
                  % (pass_id, p, r, f1))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
