"""Integer arithmetic the code does in many places: division rounded up."""


def cdiv(a: int, b: int) -> int:
  """`a / b` rounded up (for b > 0): how many parts of at most `b` hold `a`."""
  return -(-a // b)


def round_up(a: int, multiple: int) -> int:
  """The least multiple of `multiple` (> 0) that is at least `a`."""
  return cdiv(a, multiple) * multiple
