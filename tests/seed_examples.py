"""The code examples of ../shared/seeds/ (Paddle's own documents), extracted verbatim so tests
run them with only the import line changed (`import paddle` -> `import spmd as paddle`, `fluid`
-> `spmd.fluid`). Where no GPU is present, `CUDAPlace(0)` becomes `CPUPlace()` and `use_cuda =
True` becomes False: the only other substitution. Fragments that use names they never define
(`loss`, `feed_dict`, ...) get those from a preamble the test writes; the fragment is unchanged."""
from __future__ import annotations

import pathlib
import re
import textwrap

SEEDS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "seeds"

IMPORTS = [
    (r"^import paddle\.static as static$", "import spmd.static as static"),
    (r"^import paddle\.fluid as fluid$", "import spmd.fluid as fluid"),
    (r"^import paddle$", "import spmd as paddle"),
    (r"^from paddle\.fluid import compiler$", "from spmd.fluid import compiler"),
]
CPU_ONLY = [
    (r"paddle\.CUDAPlace\(0\)(?= #)", "paddle.CPUPlace()"),
    (r"^use_cuda = True$", "use_cuda = False"),
    (r"use_cuda=True", "use_cuda=False"),
]


def seed_text(prefix: str) -> str:
    (path,) = sorted(SEEDS.glob(f"{prefix}_*.txt"))
    return path.read_text()


def paddle_api_examples(prefix: str) -> list[str]:
    """The plain-text 'Example' sections of a paddle API page (seed 002)."""
    text = seed_text(prefix)
    # an example runs to the next method signature ("with_data_parallel ( ...") or the end
    blocks = re.findall(r"\nExample\n\n(.*?)(?=\n[a-z_]+ \( |\Z)", text, re.S)
    return [b.strip("\n") + "\n" for b in blocks]


def rst_code_blocks(prefix: str) -> list[str]:
    """The `.. code-block:: python` blocks of an rst page, dedented."""
    text = seed_text(prefix)
    blocks = []
    for m in re.finditer(r"\.\.\s+code-block:: python\n\n((?:[ \t]+.*\n|\n)+)", text):
        blocks.append(textwrap.dedent(m.group(1).expandtabs(8)))
    return blocks


def compiled_program_guide() -> str:
    """Seed 000's example. Paddle's document rebinds `loss` to the fetched list
    (`loss = exe.run(...)`) and then uses `loss.name`, which fails in fluid itself; the first
    result is named `loss_value` here, the one change."""
    return rst_code_blocks("000")[0].replace("loss = exe.run(fluid.default_main_program(),",
                                             "loss_value = exe.run(fluid.default_main_program(),")


def nccl2_example() -> str:
    """Seed 004's nccl2-mode fragment. Paddle's document has a typo that is a syntax error,
    `trainers.split(",)`; it is the one character fixed here."""
    block = rst_code_blocks("004")[0]
    fragment = block[block.index("# for nccl2 mode"):]
    return fragment.replace('trainers.split(",)', 'trainers.split(",")')


def port(code: str, cuda: bool) -> str:
    """Change the import lines (and, without CUDA, the GPU place) and nothing else."""
    for pattern, repl in IMPORTS + ([] if cuda else CPU_ONLY):
        code = re.sub(pattern, repl, code, flags=re.M)
    return code
