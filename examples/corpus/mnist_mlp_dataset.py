"""Recognize digits with a multilayer perceptron, reading MNIST through paddle.dataset.

Written in the idioms of: the PaddlePaddle book, chapter 2 (recognize_digits/train.py,
multilayer_perceptron variant, fluid 1.x) as run on a machine without internet:
paddle.dataset.mnist.train() / test() read from Paddle's cache folder
(~/.cache/paddle/dataset/mnist/, placed there beforehand), paddle.reader.shuffle +
paddle.batch, fluid.DataFeeder, two relu fc layers and a softmax fc, cross_entropy, accuracy,
a test program cloned for_test, and the Adamax optimizer with an inverse_time_decay rate.

# corpus-data: mnist   (run_corpus.py writes small MNIST files into a temporary cache folder)

    python mnist_mlp_dataset.py --save_dir out
    paddle-launch --nproc_per_node 2 mnist_mlp_dataset.py --save_dir out
"""
import argparse
import os
import random

import numpy

import spmd as paddle
import spmd.fluid as fluid

BATCH_SIZE = 32
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def multilayer_perceptron(img, label):
    hidden = fluid.layers.fc(input=img, size=64, act="relu")
    hidden = fluid.layers.fc(input=hidden, size=32, act="relu")
    prediction = fluid.layers.fc(input=hidden, size=10, act="softmax")
    loss = fluid.layers.cross_entropy(input=prediction, label=label)
    return prediction, fluid.layers.mean(loss), fluid.layers.accuracy(prediction, label)


def my_share(batch_reader):
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="mnist_mlp.model")
    parser.add_argument("--num_epochs", type=int, default=2)
    args = parser.parse_args()
    random.seed(7)  # paddle.reader.shuffle: every trainer shuffles alike
    fluid.default_startup_program().random_seed = 7
    fluid.default_main_program().random_seed = 7

    img = fluid.layers.data(name="img", shape=[784], dtype="float32")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    prediction, avg_loss, acc = multilayer_perceptron(img, label)
    test_program = fluid.default_main_program().clone(for_test=True)
    lr = fluid.layers.inverse_time_decay(learning_rate=0.01, decay_steps=4, decay_rate=0.5)
    fluid.optimizer.Adamax(learning_rate=lr).minimize(avg_loss)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    train_program = fluid.default_main_program()
    if TRAINERS > 1:
        train_program = fluid.CompiledProgram(train_program).with_data_parallel(
            loss_name=avg_loss.name)
    feeder = fluid.DataFeeder(feed_list=[img, label], place=place)
    train_reader = my_share(paddle.batch(
        paddle.reader.shuffle(paddle.dataset.mnist.train(), buf_size=500),
        batch_size=BATCH_SIZE, drop_last=True))
    test_reader = paddle.batch(paddle.dataset.mnist.test(), batch_size=BATCH_SIZE)
    for epoch_id in range(args.num_epochs):
        for step_id, data in enumerate(train_reader()):
            loss, accuracy = exe.run(train_program, feed=feeder.feed(data),
                                     fetch_list=[avg_loss, acc])
            if step_id % 4 == 0 and TRAINER_ID == 0:
                print("Pass %d, Batch %d, Cost %f, Acc %f" % (epoch_id, step_id, loss, accuracy))
        accs = [exe.run(test_program, feed=feeder.feed(d), fetch_list=[acc])[0]
                for d in test_reader()]
        if TRAINER_ID == 0:
            print("Test with Epoch %d, accuracy: %.4f" % (epoch_id, numpy.mean(accs)))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
