"""`python -m precisecoder.train`: see precisecoder.train.main."""

from precisecoder.train.main import main

if __name__ == "__main__":
  main()
