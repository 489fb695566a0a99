"""`python -m precisecoder.train`: the train command (precisecoder.commands.train).

An entry point, run and never imported, so it may reach up to the command layer."""

from precisecoder.commands.train import main

if __name__ == "__main__":
  main()
