"""SimNet-BOW: a pairwise text-matching model with a hinge loss.

Written in the idioms of: Paddle 1.x's distributed unit-test model dist_simnet_bow.py and the
model zoo's PaddleNLP similarity_net BOW (fluid 1.x), on fixed-length padded id sequences
instead of LoD: a shared embedding table (ParamAttr name, Uniform initializer), a
bag-of-words sum (reduce_sum), softsign, a shared fc, cos_sim for query/positive and
query/negative, the hinge loss built from fill_constant_batch_size_like,
elementwise_sub/add/max, reduce_mean, an accuracy from less_than + cast, and SGD with a
fluid.layers.inverse_time_decay rate.

    python simnet_bow.py --save_dir out
    paddle-launch --nproc_per_node 2 simnet_bow.py --save_dir out
"""
import argparse
import os

import numpy

import spmd.fluid as fluid

DICT_DIM, EMB_DIM, HID_DIM, SEQ_LEN, MARGIN = 60, 16, 16, 6, 0.1
BATCH_SIZE = 20
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def bow_encoder(ids):
    emb = fluid.layers.embedding(
        input=ids, size=[DICT_DIM, EMB_DIM], is_sparse=False,
        param_attr=fluid.ParamAttr(name="__emb__",
                                   initializer=fluid.initializer.Uniform(-0.5, 0.5)))
    bow = fluid.layers.reduce_sum(emb, dim=1)
    soft = fluid.layers.softsign(bow)
    return fluid.layers.fc(input=soft, size=HID_DIM,
                           param_attr=fluid.ParamAttr(
                               name="__fc__",
                               initializer=fluid.initializer.Xavier(uniform=True)),
                           bias_attr=fluid.ParamAttr(name="__fc_b__"))


def get_loss(cos_q_pt, cos_q_nt):
    loss_op1 = fluid.layers.elementwise_sub(
        fluid.layers.fill_constant_batch_size_like(input=cos_q_pt, shape=[-1, 1],
                                                   value=MARGIN, dtype="float32"),
        cos_q_pt)
    loss_op2 = fluid.layers.elementwise_add(loss_op1, cos_q_nt)
    loss_op3 = fluid.layers.elementwise_max(
        fluid.layers.fill_constant_batch_size_like(input=loss_op2, shape=[-1, 1], value=0.0,
                                                   dtype="float32"),
        loss_op2)
    return fluid.layers.reduce_mean(loss_op3)


def sample_batch(step):
    rng = numpy.random.RandomState(40 + step)
    query = rng.randint(1, DICT_DIM, size=(BATCH_SIZE, SEQ_LEN, 1)).astype("int64")
    pos = query.copy()
    pos[:, SEQ_LEN // 2:] = rng.randint(1, DICT_DIM, size=(BATCH_SIZE, SEQ_LEN - SEQ_LEN // 2, 1))
    neg = rng.randint(1, DICT_DIM, size=(BATCH_SIZE, SEQ_LEN, 1)).astype("int64")
    return query, pos, neg


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="simnet_bow.model")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    fluid.default_startup_program().random_seed = 1
    fluid.default_main_program().random_seed = 1
    q = fluid.data(name="query_ids", shape=[None, SEQ_LEN, 1], dtype="int64")
    pt = fluid.data(name="pos_title_ids", shape=[None, SEQ_LEN, 1], dtype="int64")
    nt = fluid.data(name="neg_title_ids", shape=[None, SEQ_LEN, 1], dtype="int64")
    q_fc, pt_fc, nt_fc = bow_encoder(q), bow_encoder(pt), bow_encoder(nt)
    cos_q_pt = fluid.layers.cos_sim(q_fc, pt_fc)
    cos_q_nt = fluid.layers.cos_sim(q_fc, nt_fc)
    avg_cost = get_loss(cos_q_pt, cos_q_nt)
    acc = fluid.layers.reduce_mean(fluid.layers.cast(
        fluid.layers.less_than(cos_q_nt, cos_q_pt), "float32"))
    lr = fluid.layers.inverse_time_decay(learning_rate=0.5, decay_steps=5, decay_rate=0.5)
    fluid.optimizer.SGD(learning_rate=lr).minimize(avg_cost)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    program = fluid.default_main_program()
    if TRAINERS > 1:
        program = fluid.CompiledProgram(program).with_data_parallel(loss_name=avg_cost.name)
    per = BATCH_SIZE // TRAINERS
    mine = slice(TRAINER_ID * per, (TRAINER_ID + 1) * per)
    for step in range(args.steps):
        query, pos, neg = sample_batch(step)
        cost, accuracy = exe.run(program, feed={"query_ids": query[mine],
                                                "pos_title_ids": pos[mine],
                                                "neg_title_ids": neg[mine]},
                                 fetch_list=[avg_cost, acc])
        if TRAINER_ID == 0:
            print("step %d cost %.6f acc %.3f" % (step, cost, accuracy))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
