"""CTR-DNN with sparse embeddings: several categorical slots, each a variable-length list of
feature ids (a LoD tensor), looked up in one sparse table and sum-pooled per sample.

Written in the idioms of: the model zoo's ctr/dnn and PaddleRec's ctr-dnn (fluid 1.x): slot
variables declared with fluid.layers.data(..., lod_level=1), fluid.layers.embedding with
is_sparse=True sharing one table ("SparseFeatFactors") across slots, sequence_pool(..., "sum"),
concat with the dense features, relu fc layers, softmax + cross_entropy, reduce_mean, the auc
layer, Adam; samples batched with paddle.batch and fed by fluid.io.DataLoader.from_generator
(set_sample_list_generator), whose DataFeeder builds each slot's LoD.

    python ctr_sparse_lod.py --save_dir out
    paddle-launch --nproc_per_node 2 ctr_sparse_lod.py --save_dir out
"""
import argparse
import os

import numpy

import spmd as paddle
import spmd.fluid as fluid

SPARSE_SLOTS = 3
SPARSE_DIM = 200
DENSE_DIM = 8
BATCH_SIZE = 32
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def sample_reader(n_samples, seed):
    """(dense [8] float32, slot 0 ids, slot 1 ids, slot 2 ids, label): 1-4 ids per slot."""
    def reader():
        rng = numpy.random.RandomState(seed)
        weights = rng.normal(size=SPARSE_DIM)
        for _ in range(n_samples):
            dense = rng.uniform(0, 1, size=DENSE_DIM).astype("float32")
            slots = [list(rng.randint(0, SPARSE_DIM, size=rng.randint(1, 5)))
                     for _ in range(SPARSE_SLOTS)]
            score = sum(weights[ids].sum() for ids in slots) + dense[0]
            yield [dense] + slots + [int(score > 0)]
    return reader


def my_share(batch_reader):
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def ctr_model(embedding_size=8):
    dense_input = fluid.layers.data(name="dense_input", shape=[DENSE_DIM], dtype="float32")
    sparse_inputs = [fluid.layers.data(name="C" + str(i), shape=[1], lod_level=1,
                                       dtype="int64") for i in range(SPARSE_SLOTS)]
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")

    def embedding_layer(input):
        emb = fluid.layers.embedding(
            input=input, is_sparse=True, size=[SPARSE_DIM, embedding_size],
            param_attr=fluid.ParamAttr(
                name="SparseFeatFactors",
                initializer=fluid.initializer.Uniform(low=-0.1, high=0.1)))
        return fluid.layers.sequence_pool(input=emb, pool_type="sum")

    concated = fluid.layers.concat([embedding_layer(s) for s in sparse_inputs] + [dense_input],
                                   axis=1)
    fc = concated
    for size in (32, 16):
        fc = fluid.layers.fc(input=fc, size=size, act="relu")
    predict = fluid.layers.fc(input=fc, size=2, act="softmax")
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.mean(cost)
    auc_var, batch_auc_var, _ = fluid.layers.auc(input=predict, label=label)
    return [dense_input] + sparse_inputs + [label], avg_cost, auc_var


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="ctr_sparse_lod.model")
    parser.add_argument("--num_epochs", type=int, default=2)
    args = parser.parse_args()
    fluid.default_startup_program().random_seed = 4
    fluid.default_main_program().random_seed = 4

    inputs, avg_cost, auc_var = ctr_model()
    fluid.optimizer.Adam(learning_rate=0.01).minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    program = fluid.default_main_program()
    if TRAINERS > 1:
        program = fluid.CompiledProgram(program).with_data_parallel(loss_name=avg_cost.name)
    loader = fluid.io.DataLoader.from_generator(feed_list=inputs, capacity=4, iterable=True)
    loader.set_sample_list_generator(
        my_share(paddle.batch(sample_reader(640, 5), batch_size=BATCH_SIZE)), places=place)
    for epoch in range(args.num_epochs):
        for step, data in enumerate(loader()):
            loss, auc = exe.run(program, feed=data, fetch_list=[avg_cost, auc_var])
            if step % 5 == 0 and TRAINER_ID == 0:
                print("epoch %d step %d loss %.6f auc %.4f" % (epoch, step, loss, auc))
    if TRAINER_ID == 0:
        fluid.io.save_params(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
