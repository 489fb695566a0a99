"""Training: the GRPO/GDPO RL loop, SFT and DPO trainers, losses, checkpoints, metrics."""
