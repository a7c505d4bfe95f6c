"""CTR-DNN: click-through-rate prediction from one dense and several categorical slots.

Written in the idioms of: PaddleRec / the model zoo's ctr/dnn (fluid 1.x) and Paddle's
dist_ctr.py test model, dense part: one embedding per sparse slot (one id per slot, no LoD),
concat with the dense features, three relu fc layers, softmax + cross_entropy, the auc layer
(global and batch AUC with its state variables), Adam, and a non-iterable
fluid.io.DataLoader.from_generator driven by start() / fluid.core.EOFException / reset().

    python ctr_dnn.py --save_dir out
    paddle-launch --nproc_per_node 2 ctr_dnn.py --save_dir out
"""
import argparse
import os

import numpy

import spmd.fluid as fluid

SPARSE_SLOTS = 4
SPARSE_DIM = 100
DENSE_DIM = 13
BATCH_SIZE = 64
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def ctr_batches(n_batches, seed):
    """Global batches of (dense [B, 13] float32, slot ids [B, 1] int64 each, label [B, 1])."""
    rng = numpy.random.RandomState(seed)
    weights = rng.normal(size=SPARSE_DIM)
    for _ in range(n_batches):
        dense = rng.uniform(0, 1, size=(BATCH_SIZE, DENSE_DIM)).astype("float32")
        ids = [rng.randint(0, SPARSE_DIM, size=(BATCH_SIZE, 1)).astype("int64")
               for _ in range(SPARSE_SLOTS)]
        score = sum(weights[i[:, 0]] for i in ids) + dense[:, 0]
        label = (score > numpy.median(score)).astype("int64").reshape(-1, 1)
        yield [dense] + ids + [label]


def my_share_of_batches():
    per = BATCH_SIZE // TRAINERS
    for batch in ctr_batches(12, seed=11):
        yield [a[TRAINER_ID * per:(TRAINER_ID + 1) * per] for a in batch]


def ctr_dnn_model(embedding_size=8):
    dense_input = fluid.data(name="dense_input", shape=[None, DENSE_DIM], dtype="float32")
    sparse_inputs = [fluid.data(name="C" + str(i), shape=[None, 1], dtype="int64")
                     for i in range(SPARSE_SLOTS)]
    label = fluid.data(name="label", shape=[None, 1], dtype="int64")

    def embedding_layer(input):
        emb = fluid.layers.embedding(
            input=input, is_sparse=False, size=[SPARSE_DIM, embedding_size],
            param_attr=fluid.ParamAttr(
                name="SparseFeatFactors",
                initializer=fluid.initializer.Uniform(low=-0.1, high=0.1)))
        return fluid.layers.reshape(emb, [-1, embedding_size])

    concated = fluid.layers.concat([embedding_layer(s) for s in sparse_inputs] + [dense_input],
                                   axis=1)
    fc = concated
    for size in (64, 32, 16):
        fc = fluid.layers.fc(
            input=fc, size=size, act="relu",
            param_attr=fluid.ParamAttr(initializer=fluid.initializer.Normal(
                scale=1 / numpy.sqrt(fc.shape[1]))))
    predict = fluid.layers.fc(input=fc, size=2, act="softmax")
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.reduce_mean(cost)
    auc_var, batch_auc_var, auc_states = fluid.layers.auc(
        input=predict, label=label, num_thresholds=2 ** 12, slide_steps=20)
    return [dense_input] + sparse_inputs + [label], avg_cost, auc_var, batch_auc_var


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="ctr_dnn.model")
    parser.add_argument("--num_epochs", type=int, default=2)
    args = parser.parse_args()
    fluid.default_startup_program().random_seed = 3
    fluid.default_main_program().random_seed = 3

    inputs, avg_cost, auc_var, batch_auc_var = ctr_dnn_model()
    fluid.optimizer.Adam(learning_rate=1e-3).minimize(avg_cost)
    loader = fluid.io.DataLoader.from_generator(feed_list=inputs, capacity=4, iterable=False)
    loader.set_batch_generator(my_share_of_batches)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    program = fluid.default_main_program()
    if TRAINERS > 1:
        program = fluid.CompiledProgram(program).with_data_parallel(loss_name=avg_cost.name)
    for epoch in range(args.num_epochs):
        loader.start()
        step = 0
        try:
            while True:
                loss, auc, batch_auc = exe.run(program,
                                               fetch_list=[avg_cost, auc_var, batch_auc_var])
                if step % 5 == 0 and TRAINER_ID == 0:
                    print("epoch %d step %d loss %.6f auc %.4f batch_auc %.4f" % (
                        epoch, step, loss, auc, batch_auc))
                step += 1
        except fluid.core.EOFException:
            loader.reset()
        if TRAINER_ID == 0:
            print("epoch %d done after %d steps" % (epoch, step))
    if TRAINER_ID == 0:
        fluid.io.save_params(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
