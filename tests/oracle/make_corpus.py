"""Run corpus programs in real fluid (PaddlePaddle 1.8.5), their import lines switched back to
paddle, and store the printed lines that do not depend on random initialization: the
learning-rate sequences of examples/corpus/lr_schedules.py (the paddle 2.x scheduler, which
1.8.5 lacks, is left out)."""
import os
import re
import subprocess
import sys
import tempfile

import paddle

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from oracle_io import save  # noqa: E402

CORPUS = os.path.join(HERE, "..", "..", "examples", "corpus")


def as_fluid(source):
    source = source.replace("import spmd as paddle\n", "import paddle\n")
    source = source.replace("import spmd.fluid as fluid\n", "import paddle.fluid as fluid\n")
    return re.sub(r'    "paddle2_step_decay": lambda: [^\n]*\n[^\n]*\n', "", source)


def run(name):
    with open(os.path.join(CORPUS, name + ".py")) as f:
        source = as_fluid(f.read())
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, name + ".py")
        with open(script, "w") as f:
            f.write(source)
        out = subprocess.check_output([sys.executable, script, "--save_dir", tmp],
                                      cwd=tmp, stderr=subprocess.DEVNULL)
    return out.decode()


lines = [line for line in run("lr_schedules").splitlines() if " lr: " in line]
save("corpus", {"lr_schedules": lines}, meta={"paddle": paddle.__version__})
