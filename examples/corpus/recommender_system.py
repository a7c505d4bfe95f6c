"""Recommender system: predict a user's rating of a movie from user and movie features, with the
movie's categories and title words as variable-length LoD slots.

Written in the idioms of: the PaddlePaddle book, chapter 5 (recommender_system/train.py,
fluid 1.x): `import paddle.fluid.layers as layers` and `paddle.fluid.nets as nets`; user
features (user id, gender, age and job ids through layers.embedding with is_sparse=True and
string param_attr table names, one fc each, concat, a tanh fc), movie features (the movie id
embedding + fc; category ids declared lod_level=1 -> embedding -> sequence_pool "sum"; title
word ids lod_level=1 -> embedding -> nets.sequence_conv_pool), layers.cos_sim of the two,
layers.scale by 5, square_error_cost, mean, SGD; a movielens-style reader shuffled by
paddle.reader.shuffle and batched by paddle.batch, fed by fluid.DataFeeder over the book's
feed_order, a test pass on a for_test clone, then fluid.io.save_inference_model and an infer
step on create_lod_tensor inputs through fluid.io.load_inference_model.

    python recommender_system.py --save_dir out
    paddle-launch --nproc_per_node 2 recommender_system.py --save_dir out
"""
import argparse
import os
import random

import numpy as np

import spmd as paddle
import spmd.fluid as fluid
import spmd.fluid.layers as layers
import spmd.fluid.nets as nets

IS_SPARSE = True
BATCH_SIZE = 64
USR_DICT_SIZE, GENDER_DICT_SIZE, AGE_DICT_SIZE, JOB_DICT_SIZE = 60, 2, 7, 21
MOV_DICT_SIZE, CATEGORY_DICT_SIZE, MOV_TITLE_DICT_SIZE = 90, 8, 48
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))
FEED_ORDER = ["user_id", "gender_id", "age_id", "job_id", "movie_id", "category_id",
              "movie_title", "score"]


class MovieLensLike:
    """movielens.train() layout: [user id, gender id, age id, job id, movie id, [category ids],
    [title word ids], [score]]. Users of a job like some categories and dislike others; a
    rating is 3 plus how much the user likes the movie's categories.
    Each category has its own title words, so titles carry the categories too."""

    def __init__(self, seed=0):
        rng = np.random.RandomState(seed)
        job_taste = rng.choice([-1.0, 0.0, 1.0], size=(JOB_DICT_SIZE, CATEGORY_DICT_SIZE))
        self.users = [(rng.randint(0, GENDER_DICT_SIZE), rng.randint(0, AGE_DICT_SIZE),
                       rng.randint(0, JOB_DICT_SIZE)) for _ in range(USR_DICT_SIZE)]
        self.taste = np.array([job_taste[job] for _, _, job in self.users])
        self.movies = []
        words_per_category = MOV_TITLE_DICT_SIZE // CATEGORY_DICT_SIZE
        for _ in range(MOV_DICT_SIZE):
            cats = sorted(rng.choice(CATEGORY_DICT_SIZE, size=rng.randint(1, 4), replace=False))
            title = [int(c * words_per_category + rng.randint(0, words_per_category))
                     for c in rng.choice(cats, size=rng.randint(2, 7))]
            self.movies.append(([int(c) for c in cats], title))

    def reader(self, n_samples, seed):
        def read():
            rng = np.random.RandomState(seed)
            for _ in range(n_samples):
                uid, mid = rng.randint(0, USR_DICT_SIZE), rng.randint(0, MOV_DICT_SIZE)
                cats, title = self.movies[mid]
                score = np.clip(3.0 + 2.0 * self.taste[uid, cats].mean(), 1.0, 5.0)
                yield [uid, *self.users[uid], mid, cats, title, [float(score)]]
        return read


def get_usr_combined_features():
    uid = layers.data(name="user_id", shape=[1], dtype="int64")
    usr_emb = layers.embedding(input=uid, dtype="float32", size=[USR_DICT_SIZE, 32],
                               param_attr="user_table", is_sparse=IS_SPARSE)
    usr_fc = layers.fc(input=usr_emb, size=32)

    usr_gender_id = layers.data(name="gender_id", shape=[1], dtype="int64")
    usr_gender_emb = layers.embedding(input=usr_gender_id, size=[GENDER_DICT_SIZE, 16],
                                      param_attr="gender_table", is_sparse=IS_SPARSE)
    usr_gender_fc = layers.fc(input=usr_gender_emb, size=16)

    usr_age_id = layers.data(name="age_id", shape=[1], dtype="int64")
    usr_age_emb = layers.embedding(input=usr_age_id, size=[AGE_DICT_SIZE, 16],
                                   is_sparse=IS_SPARSE, param_attr="age_table")
    usr_age_fc = layers.fc(input=usr_age_emb, size=16)

    usr_job_id = layers.data(name="job_id", shape=[1], dtype="int64")
    usr_job_emb = layers.embedding(input=usr_job_id, size=[JOB_DICT_SIZE, 16],
                                   param_attr="job_table", is_sparse=IS_SPARSE)
    usr_job_fc = layers.fc(input=usr_job_emb, size=16)

    concat_embed = layers.concat(input=[usr_fc, usr_gender_fc, usr_age_fc, usr_job_fc], axis=1)
    return layers.fc(input=concat_embed, size=64, act="tanh")


def get_mov_combined_features():
    mov_id = layers.data(name="movie_id", shape=[1], dtype="int64")
    mov_emb = layers.embedding(input=mov_id, dtype="float32", size=[MOV_DICT_SIZE, 32],
                               param_attr="movie_table", is_sparse=IS_SPARSE)
    mov_fc = layers.fc(input=mov_emb, size=32)

    category_id = layers.data(name="category_id", shape=[1], dtype="int64", lod_level=1)
    mov_categories_emb = layers.embedding(input=category_id, size=[CATEGORY_DICT_SIZE, 32],
                                          is_sparse=IS_SPARSE)
    mov_categories_hidden = layers.sequence_pool(input=mov_categories_emb, pool_type="sum")

    mov_title_id = layers.data(name="movie_title", shape=[1], dtype="int64", lod_level=1)
    mov_title_emb = layers.embedding(input=mov_title_id, size=[MOV_TITLE_DICT_SIZE, 32],
                                     is_sparse=IS_SPARSE)
    mov_title_conv = nets.sequence_conv_pool(input=mov_title_emb, num_filters=32,
                                             filter_size=3, act="tanh", pool_type="sum")

    concat_embed = layers.concat(input=[mov_fc, mov_categories_hidden, mov_title_conv], axis=1)
    return layers.fc(input=concat_embed, size=64, act="tanh")


def inference_program():
    usr_combined_features = get_usr_combined_features()
    mov_combined_features = get_mov_combined_features()
    inference = layers.cos_sim(X=usr_combined_features, Y=mov_combined_features)
    return layers.scale(x=inference, scale=5.0)


def train_program():
    scale_infer = inference_program()
    label = layers.data(name="score", shape=[1], dtype="float32")
    square_cost = layers.square_error_cost(input=scale_infer, label=label)
    avg_cost = layers.mean(square_cost)
    return avg_cost, scale_infer


def my_share(batch_reader):
    """This trainer's whole samples of each global batch."""
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def infer(exe, place, dirname):
    """The book's infer step: one user and one movie as LoD tensors, through the saved model."""
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        program, feed_names, fetch_targets = fluid.io.load_inference_model(dirname, exe)
        feed = {
            "user_id": fluid.create_lod_tensor([[1]], [[1]], place),
            "gender_id": fluid.create_lod_tensor([[1]], [[1]], place),
            "age_id": fluid.create_lod_tensor([[0]], [[1]], place),
            "job_id": fluid.create_lod_tensor([[10]], [[1]], place),
            "movie_id": fluid.create_lod_tensor([[78]], [[1]], place),
            "category_id": fluid.create_lod_tensor([[2, 5, 7]], [[3]], place),
            "movie_title": fluid.create_lod_tensor([[13, 33, 42, 16, 36]], [[5]], place),
        }
        results = exe.run(program, feed={n: feed[n] for n in feed_names},
                          fetch_list=fetch_targets, return_numpy=False)
        print("infer results: %.4f" % np.array(results[0])[0, 0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="recommender_system.model")
    parser.add_argument("--num_epochs", type=int, default=5)
    args = parser.parse_args()
    fluid.default_startup_program().random_seed = 5
    fluid.default_main_program().random_seed = 5

    avg_cost, scale_infer = train_program()
    main_program = fluid.default_main_program()
    test_program = main_program.clone(for_test=True)
    fluid.optimizer.Adam(learning_rate=0.01).minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    feed_list = [main_program.global_block().var(name) for name in FEED_ORDER]
    feeder = fluid.DataFeeder(feed_list, place)
    program = main_program
    if TRAINERS > 1:
        program = fluid.CompiledProgram(main_program).with_data_parallel(
            loss_name=avg_cost.name)

    data = MovieLensLike(seed=1)
    random.seed(5)  # every trainer shuffles alike, so the global batches agree
    train_reader = paddle.batch(paddle.reader.shuffle(data.reader(1024, 2), buf_size=1024),
                                batch_size=BATCH_SIZE)
    test_reader = paddle.batch(data.reader(256, 3), batch_size=BATCH_SIZE)
    for epoch in range(args.num_epochs):
        for batch_id, batch in enumerate(my_share(train_reader)()):
            cost, = exe.run(program, feed=feeder.feed(batch), fetch_list=[avg_cost])
            if batch_id % 5 == 0 and TRAINER_ID == 0:
                print("Epoch %d, Batch %d, train cost %.5f" % (epoch, batch_id, cost))
        if TRAINER_ID == 0:
            test_costs = [float(exe.run(test_program, feed=feeder.feed(batch),
                                        fetch_list=[avg_cost])[0])
                          for batch in test_reader()]
            print("Epoch %d, Test Loss %.5f" % (epoch, np.mean(test_costs)))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, main_program)
        inference_dir = os.path.join(args.save_dir, "inference_model")
        fluid.io.save_inference_model(inference_dir, FEED_ORDER[:-1], [scale_infer], exe)
        infer(exe, place, inference_dir)


if __name__ == "__main__":
    main()
