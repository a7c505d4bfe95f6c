"""Sentiment classification with a stacked bidirectional-by-layers LSTM over LoD sequences.

Written in the idioms of: the PaddlePaddle book, chapter 6
(understand_sentiment/train_stacked_lstm.py, fluid 1.x): a "words" slot declared with
fluid.layers.data(..., lod_level=1), fluid.layers.embedding with is_sparse=True, an fc feeding
fluid.layers.dynamic_lstm (whose size is four times its hidden width), then layers of fc over
the previous [fc, lstm] pair (fc with a list input) + dynamic_lstm with is_reverse alternating,
sequence_pool "max" over the last fc and the last lstm, an fc softmax over both,
cross_entropy, mean, fluid.layers.accuracy and the Adam optimizer; an imdb-style
(word ids, label) reader batched by paddle.batch and fed through
fluid.io.DataLoader.from_generator (set_sample_list_generator), whose DataFeeder builds the LoD.

    python sentiment_stacked_lstm.py --save_dir out
    paddle-launch --nproc_per_node 2 sentiment_stacked_lstm.py --save_dir out
"""
import argparse
import os

import numpy

import spmd as paddle
import spmd.fluid as fluid

DICT_DIM = 60
CLASS_DIM = 2
EMB_DIM = 16
HID_DIM = 32  # dynamic_lstm's size: 4 gates of a hidden state of 8
STACKED_NUM = 3
BATCH_SIZE = 32
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def imdb_like(n_samples, seed):
    """imdb.train(word_dict) layout: (list of word ids, 0 or 1). Each review holds one "good"
    word (ids 2-6) and one "bad" word (ids 7-11) among neutral ones; which comes last decides
    the label, so the order of the words matters."""
    def reader():
        rng = numpy.random.RandomState(seed)
        for _ in range(n_samples):
            length = rng.randint(3, 12)
            words = list(rng.randint(12, DICT_DIM, size=length))
            first, last = sorted(rng.choice(length, size=2, replace=False))
            label = rng.randint(0, 2)
            words[last] = (2 if label == 1 else 7) + rng.randint(0, 5)
            words[first] = (7 if label == 1 else 2) + rng.randint(0, 5)
            yield words, label
    return reader


def my_share(batch_reader):
    """This trainer's whole samples of each global batch."""
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def stacked_lstm_net(data, input_dim, class_dim, emb_dim, hid_dim, stacked_num):
    assert stacked_num % 2 == 1
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    fc1 = fluid.layers.fc(input=emb, size=hid_dim)
    lstm1, cell1 = fluid.layers.dynamic_lstm(input=fc1, size=hid_dim)
    inputs = [fc1, lstm1]
    for i in range(2, stacked_num + 1):
        fc = fluid.layers.fc(input=inputs, size=hid_dim)
        lstm, cell = fluid.layers.dynamic_lstm(input=fc, size=hid_dim,
                                               is_reverse=(i % 2) == 0)
        inputs = [fc, lstm]
    fc_last = fluid.layers.sequence_pool(input=inputs[0], pool_type="max")
    lstm_last = fluid.layers.sequence_pool(input=inputs[1], pool_type="max")
    return fluid.layers.fc(input=[fc_last, lstm_last], size=class_dim, act="softmax")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="sentiment_stacked_lstm.model")
    parser.add_argument("--num_epochs", type=int, default=4)
    args = parser.parse_args()
    fluid.default_startup_program().random_seed = 7
    fluid.default_main_program().random_seed = 7

    data = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    prediction = stacked_lstm_net(data, DICT_DIM, CLASS_DIM, EMB_DIM, HID_DIM, STACKED_NUM)
    cost = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_cost = fluid.layers.mean(cost)
    accuracy = fluid.layers.accuracy(input=prediction, label=label)
    fluid.optimizer.Adam(learning_rate=0.01).minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    program = fluid.default_main_program()
    if TRAINERS > 1:
        program = fluid.CompiledProgram(program).with_data_parallel(loss_name=avg_cost.name)

    loader = fluid.io.DataLoader.from_generator(feed_list=[data, label], capacity=4,
                                                iterable=True)
    loader.set_sample_list_generator(
        my_share(paddle.batch(imdb_like(384, 5), batch_size=BATCH_SIZE)), places=place)
    for epoch in range(args.num_epochs):
        for step, feed in enumerate(loader()):
            loss, acc = exe.run(program, feed=feed, fetch_list=[avg_cost, accuracy])
            if step % 4 == 0 and TRAINER_ID == 0:
                print("Step %d, Epoch %d, cost %.6f, acc %.3f" % (step, epoch, loss, acc))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
