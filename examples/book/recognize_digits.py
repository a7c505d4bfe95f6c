"""Recognize digits with a two-stage conv-pool network.

Written in the idioms of: the PaddlePaddle book, chapter 2 (recognize_digits/train.py,
convolutional_neural_network, fluid 1.x): fluid.nets.simple_img_conv_pool, batch_norm-free
LeNet-style stack, softmax fc + cross_entropy, Adam with a piecewise_decay learning rate,
paddle.batch over a reader creator,
fluid.DataFeeder, a test program cloned for_test, accuracy, fluid.metrics.Accuracy.
The 8x8 images are scikit-learn's bundled digits (no download).

    python examples/book/recognize_digits.py --save_dir out
    paddle-launch --nproc_per_node 2 examples/book/recognize_digits.py --save_dir out
"""
import argparse
import os

from sklearn.datasets import load_digits

import spmd as paddle
import spmd.fluid as fluid

BATCH_SIZE = 64
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def digits_reader(train):
    digits = load_digits()
    images = (digits.images / 16.0 * 2.0 - 1.0).astype("float32")
    labels = digits.target.astype("int64")
    part = slice(0, 1400) if train else slice(1400, None)

    def reader():
        for img, label in zip(images[part], labels[part]):
            yield img.reshape(1, 8, 8), int(label)
    return reader


def my_share(batch_reader):
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def convolutional_neural_network(img, label):
    conv_pool_1 = fluid.nets.simple_img_conv_pool(
        input=img, filter_size=3, num_filters=8, pool_size=2, pool_stride=2, conv_padding=1,
        act="relu")
    conv_pool_2 = fluid.nets.simple_img_conv_pool(
        input=conv_pool_1, filter_size=3, num_filters=16, pool_size=2, pool_stride=2,
        conv_padding=1, act="relu")
    prediction = fluid.layers.fc(input=conv_pool_2, size=10, act="softmax")
    loss = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_loss = fluid.layers.mean(loss)
    acc = fluid.layers.accuracy(input=prediction, label=label)
    return prediction, avg_loss, acc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="recognize_digits.model")
    parser.add_argument("--num_epochs", type=int, default=2)
    args = parser.parse_args()

    startup_program = fluid.default_startup_program()
    main_program = fluid.default_main_program()
    startup_program.random_seed = main_program.random_seed = 90

    img = fluid.layers.data(name="img", shape=[1, 8, 8], dtype="float32")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    prediction, avg_loss, acc = convolutional_neural_network(img, label)
    test_program = main_program.clone(for_test=True)
    optimizer = fluid.optimizer.Adam(learning_rate=fluid.layers.piecewise_decay(
        boundaries=[30], values=[0.003, 0.001]))
    optimizer.minimize(avg_loss)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(startup_program)
    feeder = fluid.DataFeeder(feed_list=[img, label], place=place)
    train_program = main_program
    if TRAINERS > 1:
        train_program = fluid.CompiledProgram(main_program).with_data_parallel(
            loss_name=avg_loss.name)
    train_reader = my_share(paddle.batch(digits_reader(True), batch_size=BATCH_SIZE,
                                         drop_last=True))
    test_reader = paddle.batch(digits_reader(False), batch_size=BATCH_SIZE)

    for epoch_id in range(args.num_epochs):
        for step_id, data in enumerate(train_reader()):
            metrics = exe.run(train_program, feed=feeder.feed(data),
                              fetch_list=[avg_loss, acc])
            if step_id % 10 == 0 and TRAINER_ID == 0:
                print("Pass %d, Batch %d, Cost %f, Acc %f" % (
                    epoch_id, step_id, metrics[0], metrics[1]))
        accuracy = fluid.metrics.Accuracy()
        for data in test_reader():
            acc_np, = exe.run(test_program, feed=feeder.feed(data), fetch_list=[acc])
            accuracy.update(value=acc_np, weight=len(data))
        if TRAINER_ID == 0:
            print("Test with Epoch %d, accuracy: %s" % (epoch_id, accuracy.eval()))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, main_program)


if __name__ == "__main__":
    main()
