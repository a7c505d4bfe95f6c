"""Sentiment classification with a text CNN over variable-length word sequences (LoD).

Written in the idioms of: the PaddlePaddle book, chapter 6 (understand_sentiment/train_conv.py,
fluid 1.x): a "words" slot declared with fluid.layers.data(..., lod_level=1), one
fluid.layers.embedding with is_sparse=True, two fluid.nets.sequence_conv_pool branches (filter
sizes 3 and 4, tanh, "sqrt" pooling) fed together to an fc softmax, cross_entropy, mean,
fluid.layers.accuracy, the Adagrad optimizer; an imdb-style (word ids, label) reader shuffled
by paddle.reader.shuffle and batched by paddle.batch, each batch turned into LoD tensors by
fluid.DataFeeder; a test pass on a for_test clone of the main program after every epoch, as the
book's event handler does.

    python sentiment_conv.py --save_dir out
    paddle-launch --nproc_per_node 2 sentiment_conv.py --save_dir out
"""
import argparse
import os
import random

import numpy

import spmd as paddle
import spmd.fluid as fluid

DICT_DIM = 100
CLASS_DIM = 2
EMB_DIM = 16
HID_DIM = 16
BATCH_SIZE = 32
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def imdb_like(n_samples, seed):
    """imdb.train(word_dict) layout: (list of word ids, 0 or 1). Ids 2-11 are "good" words,
    12-21 "bad" ones, the rest neutral; a review is positive when it has more good words."""
    def reader():
        rng = numpy.random.RandomState(seed)
        for _ in range(n_samples):
            label = rng.randint(0, 2)
            length = rng.randint(4, 16)
            words = list(rng.randint(22, DICT_DIM, size=length))
            strong = 2 if label == 1 else 12
            for pos in rng.choice(length, size=rng.randint(1, 4), replace=False):
                words[pos] = strong + rng.randint(0, 10)
            yield words, label
    return reader


def my_share(batch_reader):
    """This trainer's whole samples of each global batch."""
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def convolution_net(data, input_dim, class_dim, emb_dim, hid_dim):
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    conv_3 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=3,
                                           act="tanh", pool_type="sqrt")
    conv_4 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=4,
                                           act="tanh", pool_type="sqrt")
    return fluid.layers.fc(input=[conv_3, conv_4], size=class_dim, act="softmax")


def train_program():
    data = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    prediction = convolution_net(data, DICT_DIM, CLASS_DIM, EMB_DIM, HID_DIM)
    cost = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_cost = fluid.layers.mean(cost)
    accuracy = fluid.layers.accuracy(input=prediction, label=label)
    return data, label, avg_cost, accuracy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="sentiment_conv.model")
    parser.add_argument("--num_epochs", type=int, default=3)
    args = parser.parse_args()
    fluid.default_startup_program().random_seed = 6
    fluid.default_main_program().random_seed = 6

    data, label, avg_cost, accuracy = train_program()
    test_program = fluid.default_main_program().clone(for_test=True)
    fluid.optimizer.Adagrad(learning_rate=0.1).minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    feeder = fluid.DataFeeder(feed_list=[data, label], place=place)
    program = fluid.default_main_program()
    if TRAINERS > 1:
        program = fluid.CompiledProgram(program).with_data_parallel(loss_name=avg_cost.name)

    random.seed(6)  # every trainer shuffles alike, so the global batches agree
    train_reader = paddle.batch(paddle.reader.shuffle(imdb_like(512, 3), buf_size=512),
                                batch_size=BATCH_SIZE)
    test_reader = paddle.batch(imdb_like(128, 11), batch_size=BATCH_SIZE)
    for epoch in range(args.num_epochs):
        for step, batch in enumerate(my_share(train_reader)()):
            cost, acc = exe.run(program, feed=feeder.feed(batch),
                                fetch_list=[avg_cost, accuracy])
            if step % 5 == 0 and TRAINER_ID == 0:
                print("Step %d, Epoch %d, cost %.6f, acc %.3f" % (step, epoch, cost, acc))
        if TRAINER_ID == 0:
            costs, accs = [], []
            for batch in test_reader():
                cost, acc = exe.run(test_program, feed=feeder.feed(batch),
                                    fetch_list=[avg_cost, accuracy])
                costs.append(float(cost))
                accs.append(float(acc))
            print("Epoch %d, test cost %.6f, test acc %.3f"
                  % (epoch, numpy.mean(costs), numpy.mean(accs)))
    if TRAINER_ID == 0:
        fluid.io.save_params(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
