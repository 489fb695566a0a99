"""Task environments: which module a failed run lacked, and which environment to name."""

import pytest

from precisecoder.data import environments


@pytest.mark.parametrize(
  "detail, module",
  [
    (
      "TestCases.test_1 did not run (ModuleNotFoundError: No module named 'sklearn' (<program>:3))",
      "sklearn",
    ),
    ("ModuleNotFoundError(\"No module named 'matplotlib.pyplot'\")", "matplotlib"),
    ("assert #0 failed: got 6, expected == 5", None),
    ("", None),
  ],
)
def test_missing_module_is_read_from_a_failure(detail, module):
  assert environments.missing_module(detail) == module


def test_task_sets_come_from_the_source_field_or_the_id():
  assert environments.dataset_of("BigCodeBench/13") == "bigcodebench"
  assert environments.dataset_of("abc301_a", "LiveCodeBench") == "livecodebench"


def test_advice_names_the_environment_of_a_known_task_set_and_asks_for_one_otherwise():
  lines = environments.advice(
    [
      ("bigcodebench", "sklearn"),
      ("bigcodebench", "cv2"),
      ("bigcodebench", "sklearn"),
      ("mine", "torch_geometric"),
    ],
    "/usr/bin/python3",
  )
  assert lines[0].startswith(
    "3 run(s) of bigcodebench could not import sklearn, cv2 under "
    "/usr/bin/python3: these tasks need the BigCodeBench environment"
  )
  assert "--python .venv-bigcodebench/bin/python" in lines[0]
  assert lines[1].startswith("1 run(s) of mine could not import torch_geometric")
  assert "pass --python" in lines[1]
  assert environments.advice([], "/usr/bin/python3") == []
