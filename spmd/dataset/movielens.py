"""paddle.dataset.movielens: MovieLens 1M from Paddle's cache folder
(DATA_HOME/movielens/movielens%2Fml-1m.zip: ml-1m/movies.dat, users.dat, ratings.dat).

Each sample is a list [user id, gender (0 male, 1 female), age bucket (index into
`age_table`), job id, movie id, [category ids], [title word ids], [rating * 2 - 5.0]], one per
line of ratings.dat, a line going to the test set when a uniform draw from a RandomState seeded
with `rand_seed` is below `test_ratio` (the draws Paddle makes, so the same split).

Two differences from Paddle, both for data parallelism: Paddle numbers categories and title
words in the iteration order of a Python set, which changes from one process to the next
(string hashing is randomised), so ranks would disagree on ids; spmd numbers them in sorted
order, the same in every process. And the draws come from a private RandomState, leaving
numpy's global random state alone (Paddle reseeds it).

>>> import spmd as paddle
>>> sample = next(paddle.dataset.movielens.train()())   # doctest: +SKIP
>>> len(sample)                                          # doctest: +SKIP
8
"""
from __future__ import annotations

import functools
import os
import re
import zipfile

import numpy as np

from ..errors import InvalidArgumentError
from . import common

__all__ = ["age_table", "get_movie_title_dict", "max_job_id", "max_movie_id", "max_user_id",
           "movie_categories", "movie_info", "test", "train", "user_info"]

age_table = [1, 18, 25, 35, 45, 50, 56]
URL = "https://dataset.bj.bcebos.com/movielens%2Fml-1m.zip"
MD5 = "c4d9eecfca2ab87c1945afe126590906"
_TITLE = re.compile(r"^(.*)\((\d+)\)$")


class _Meta:
    """The parsed movies.dat and users.dat with their dictionaries."""

    def __init__(self, movies, users, title_dict, categories_dict):
        self.movies, self.users = movies, users
        self.title_dict, self.categories_dict = title_dict, categories_dict


_META: dict[tuple, _Meta] = {}


class MovieInfo:
    """A movie: id, categories (names) and title (without the year).

    >>> MovieInfo("1", ["Comedy"], "Toy Story ")
    <MovieInfo id(1), title(Toy Story ), categories(['Comedy'])>
    """

    def __init__(self, index, categories, title):
        self.index = int(index)
        self.categories = categories
        self.title = title

    def value(self):
        """[movie id, [category ids], [title word ids]]."""
        return _movie_value(self, _meta())

    def __str__(self):
        return f"<MovieInfo id({self.index}), title({self.title}), categories({self.categories})>"

    __repr__ = __str__


class UserInfo:
    """A user: id, gender, age bucket (index into age_table) and job id.

    >>> UserInfo("3", "F", "25", "7").value()
    [3, 1, 2, 7]
    """

    def __init__(self, index, gender, age, job_id):
        self.index = int(index)
        self.is_male = gender == "M"
        self.age = age_table.index(int(age))
        self.job_id = int(job_id)

    def value(self):
        """[user id, 0 male / 1 female, age bucket, job id]."""
        return [self.index, 0 if self.is_male else 1, self.age, self.job_id]

    def __str__(self):
        gender = "M" if self.is_male else "F"
        return (f"<UserInfo id({self.index}), gender({gender}), age({age_table[self.age]}), "
                f"job({self.job_id})>")

    __repr__ = __str__


def _movie_value(movie: MovieInfo, meta: _Meta) -> list:
    return [movie.index, [meta.categories_dict[c] for c in movie.categories],
            [meta.title_dict[w.lower()] for w in movie.title.split()]]


def _iter_lines(package: zipfile.ZipFile, name: str, path: str):
    # streamed: ratings.dat has a million lines
    try:
        f = package.open(name)
    except KeyError:
        raise InvalidArgumentError(f"{path} has no {name}: it is not the ml-1m archive Paddle "
                                   "reads; copy the original file") from None
    with f:
        for line in f:
            line = line.decode("latin-1").strip()
            if line:
                yield line


def _parse(path: str) -> _Meta:
    try:
        package = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InvalidArgumentError(f"cannot read the zip archive {path}: {exc}; copy the "
                                   "original file again") from exc
    with package:
        movie_lines = list(_iter_lines(package, "ml-1m/movies.dat", path))
        user_lines = list(_iter_lines(package, "ml-1m/users.dat", path))
    movies, words, categories = {}, set(), set()
    for line in movie_lines:
        movie_id, title, cats = line.split("::")
        cats = cats.split("|")
        title = _TITLE.match(title).group(1)
        movies[int(movie_id)] = MovieInfo(movie_id, cats, title)
        categories.update(cats)
        words.update(w.lower() for w in title.split())
    users = {}
    for line in user_lines:
        uid, gender, age, job, _ = line.split("::")
        users[int(uid)] = UserInfo(uid, gender, age, job)
    return _Meta(movies, users, {w: i for i, w in enumerate(sorted(words))},
                 {c: i for i, c in enumerate(sorted(categories))})


def _meta() -> _Meta:
    path = common.download(URL, "movielens", MD5)
    stat = os.stat(path)
    key = (path, stat.st_size, stat.st_mtime_ns)
    if key not in _META:
        _META[key] = _parse(path)
    return _META[key]


def _reader(rand_seed: int = 0, test_ratio: float = 0.1, is_test: bool = False):
    meta = _meta()
    path = common.download(URL, "movielens", MD5)
    draws = np.random.RandomState(rand_seed)
    with zipfile.ZipFile(path) as package:
        for line in _iter_lines(package, "ml-1m/ratings.dat", path):
            if (draws.random_sample() < test_ratio) != is_test:
                continue
            uid, movie_id, rating, _ = line.split("::")
            user, movie = meta.users[int(uid)], meta.movies[int(movie_id)]
            yield user.value() + _movie_value(movie, meta) + [[float(rating) * 2 - 5.0]]


def _reader_creator(**kwargs):
    return lambda: _reader(**kwargs)


train = functools.partial(_reader_creator, is_test=False)
train.__doc__ = """train(rand_seed=0, test_ratio=0.1): the ratings not drawn for the test set.

>>> import spmd
>>> reader = spmd.dataset.movielens.train()   # doctest: +SKIP
"""
test = functools.partial(_reader_creator, is_test=True)
test.__doc__ = """test(rand_seed=0, test_ratio=0.1): the ratings drawn for the test set.

>>> import spmd
>>> reader = spmd.dataset.movielens.test()    # doctest: +SKIP
"""


def get_movie_title_dict() -> dict:
    """Lower-cased title word -> id (sorted order).

    >>> import spmd
    >>> n = len(spmd.dataset.movielens.get_movie_title_dict())   # doctest: +SKIP
    """
    return _meta().title_dict


def max_movie_id() -> int:
    """The largest movie id in movies.dat.

    >>> import spmd
    >>> n_movies = spmd.dataset.movielens.max_movie_id() + 1   # doctest: +SKIP
    """
    return max(m.index for m in _meta().movies.values())


def max_user_id() -> int:
    """The largest user id in users.dat.

    >>> import spmd
    >>> n_users = spmd.dataset.movielens.max_user_id() + 1     # doctest: +SKIP
    """
    return max(u.index for u in _meta().users.values())


def max_job_id() -> int:
    """The largest job id in users.dat.

    >>> import spmd
    >>> n_jobs = spmd.dataset.movielens.max_job_id() + 1       # doctest: +SKIP
    """
    return max(u.job_id for u in _meta().users.values())


def movie_categories() -> dict:
    """Category name -> id (sorted order).

    >>> import spmd
    >>> n = len(spmd.dataset.movielens.movie_categories())   # doctest: +SKIP
    """
    return _meta().categories_dict


def user_info() -> dict:
    """User id -> UserInfo.

    >>> import spmd
    >>> user = spmd.dataset.movielens.user_info()[1]   # doctest: +SKIP
    """
    return _meta().users


def movie_info() -> dict:
    """Movie id -> MovieInfo.

    >>> import spmd
    >>> movie = spmd.dataset.movielens.movie_info()[1]   # doctest: +SKIP
    """
    return _meta().movies


def fetch():
    """Check that the ml-1m archive is in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.movielens.fetch()   # doctest: +SKIP
    """
    common.download(URL, "movielens", MD5)
