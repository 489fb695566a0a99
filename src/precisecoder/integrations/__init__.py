"""PreciseCoder's reward where researchers already train, and a reward server.

One small module per trainer, each mirroring that trainer's reward contract:
  trl        `reward_functions(tasks, terms, lam)`: GRPOTrainer(reward_funcs=...)
  verl       `compute_score` / `compute_score_batch`: custom_reward_function
  tunix      `reward_functions(tasks, terms, lam)`: GRPOLearner(reward_fns=...)
  openrlhf   `reward_func(queries, prompts, labels)`: --reward.remote_url FILE.py
and what they stand on:
  adapters   task lookup, completion -> program, reward terms as named callables
  service    one scoring thread per process: batches callers, caches results by content
  server     the Starlette app of `precisecoder serve` (/score, /get_reward, /health)
  client     `RemoteScorer`: scoring on servers, round-robin with retries

Nothing here imports a trainer: the adapters are plain callables with the trainers' calling
conventions, so they install with the main package.
"""
