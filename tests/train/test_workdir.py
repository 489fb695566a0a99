"""A bucket workdir through its local mirror: changed files go up, a relaunch fetches them."""

from precisecoder.train.workdir import Workdir


def test_mirror_syncs_changed_files_and_a_fresh_mirror_fetches_them(tmp_path):
  bucket = tmp_path / "bucket"  # stands in for gs://...: the same epath calls
  run = Workdir(str(bucket), mirrored=True, local_root=str(tmp_path / "vm1"))
  assert run.checkpoints == str(bucket / "checkpoints")
  run.fetch()
  (run.local / "metrics.jsonl").write_text('{"step": 1}\n')
  (run.local / "eval").mkdir()
  (run.local / "eval" / "step_1.json").write_text("{}")
  run.sync()
  assert (bucket / "metrics.jsonl").read_text() == '{"step": 1}\n'
  (bucket / "eval" / "step_1.json").write_text("changed in the bucket")
  with open(run.local / "metrics.jsonl", "a") as f:
    f.write('{"step": 2}\n')
  run.sync()  # only what changed locally is copied
  assert (bucket / "metrics.jsonl").read_text().count("step") == 2
  assert (bucket / "eval" / "step_1.json").read_text() == "changed in the bucket"
  (bucket / "checkpoints" / "2").mkdir(parents=True)  # Orbax's, never mirrored

  relaunch = Workdir(str(bucket), mirrored=True, local_root=str(tmp_path / "vm2"))
  relaunch.fetch()
  assert (relaunch.local / "metrics.jsonl").read_text().count("step") == 2
  assert not (relaunch.local / "checkpoints").exists()
  local = Workdir(str(tmp_path / "plain"))
  assert local.local == tmp_path / "plain" and local.remote is None
