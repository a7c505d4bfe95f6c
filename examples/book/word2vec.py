"""Word2vec: an N-gram neural language model predicting the 5th word from the 4 before it.

Written in the idioms of: the PaddlePaddle book, chapter 4 (word2vec/train.py, fluid 1.x):
four fluid.layers.embedding lookups sharing one table through ParamAttr("shared_w") with
sparse gradients (is_sparse=True, as the book trains it), concat, a sigmoid hidden fc, a
softmax fc, cross_entropy, paddle.batch over an imikolov-style N-gram reader,
fluid.io.DataLoader.from_generator with a sample-list generator, an exponential_decay learning
rate and the Adagrad optimizer.

    python examples/book/word2vec.py --save_dir out
    paddle-launch --nproc_per_node 2 examples/book/word2vec.py --save_dir out
"""
import argparse
import os

import numpy

import spmd as paddle
import spmd.fluid as fluid

EMBED_SIZE = 16
HIDDEN_SIZE = 64
N = 5
DICT_SIZE = 50
BATCH_SIZE = 32
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def ngram_reader(n_samples, seed):
    """imikolov.train(word_dict, N) layout: a tuple of N int word ids."""
    def reader():
        rng = numpy.random.RandomState(seed)
        for _ in range(n_samples):
            first = rng.randint(0, DICT_SIZE)
            # a learnable pattern: each next word is the previous one plus 1 or 2
            words = [first]
            for _ in range(N - 1):
                words.append((words[-1] + 1 + rng.randint(0, 2)) % DICT_SIZE)
            yield tuple(words)
    return reader


def my_share(batch_reader):
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def inference_program(words, is_sparse):
    embeds = [fluid.layers.embedding(input=w, size=[DICT_SIZE, EMBED_SIZE], dtype="float32",
                                     is_sparse=is_sparse, param_attr="shared_w")
              for w in words]
    concat_embed = fluid.layers.concat(input=embeds, axis=1)
    hidden1 = fluid.layers.fc(input=concat_embed, size=HIDDEN_SIZE, act="sigmoid")
    predict_word = fluid.layers.fc(input=hidden1, size=DICT_SIZE, act="softmax")
    return predict_word


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="word2vec.model")
    parser.add_argument("--num_epochs", type=int, default=2)
    args = parser.parse_args()
    fluid.default_startup_program().random_seed = 1
    fluid.default_main_program().random_seed = 1

    names = ["firstw", "secondw", "thirdw", "fourthw", "nextw"]
    words = [fluid.data(name=n, shape=[None, 1], dtype="int64") for n in names]
    predict_word = inference_program(words[:4], is_sparse=True)
    cost = fluid.layers.cross_entropy(input=predict_word, label=words[4])
    avg_cost = fluid.layers.mean(cost)
    learning_rate = fluid.layers.exponential_decay(
        learning_rate=0.2, decay_steps=20, decay_rate=0.9, staircase=True)
    optimizer = fluid.optimizer.AdagradOptimizer(learning_rate=learning_rate)
    optimizer.minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    program = fluid.default_main_program()
    if TRAINERS > 1:
        program = fluid.CompiledProgram(program).with_data_parallel(loss_name=avg_cost.name)

    loader = fluid.io.DataLoader.from_generator(feed_list=words, capacity=8, iterable=True)
    loader.set_sample_list_generator(
        my_share(paddle.batch(ngram_reader(640, 7), batch_size=BATCH_SIZE)), places=place)
    for pass_id in range(args.num_epochs):
        for step, data in enumerate(loader()):
            avg_cost_np, lr = exe.run(program, feed=data, fetch_list=[avg_cost, learning_rate])
            if step % 10 == 0 and TRAINER_ID == 0:
                print("Pass %d, Batch %d, Cost %.5f, lr %.4f" % (pass_id, step, avg_cost_np,
                                                                 lr))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
