"""TensorBoard shows the loss curve of a `tpusim train` run: its EventAccumulator reads the
model_dir's event file and finds every summary tag with one point per summary step, and the
loss falls.

Usage: check_training_summaries.py TPUSIM
"""
import os
import subprocess
import sys
import tempfile


def main():
    tpusim = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        model_dir = os.path.join(d, "model")
        subprocess.run(
            [tpusim, "train", "--model", "mlp", "--data", os.path.join(d, "data"),
             "--model-dir", model_dir, "--train-steps", "40", "--iterations-per-loop", "10",
             "--batch-size", "256", "--eval-steps", "2"],
            check=True, capture_output=True, text=True)
        from tensorboard.backend.event_processing import event_accumulator

        acc = event_accumulator.EventAccumulator(model_dir)
        acc.Reload()
        tags = set(acc.Tags()["scalars"])
        want = {"loss", "learning_rate", "global_step/sec", "simulated_step_seconds",
                "infeed_wait_fraction", "mxu_utilization"}
        assert want <= tags, (want - tags)
        loss = acc.Scalars("loss")
        assert [e.step for e in loss] == [10, 20, 30, 40], [e.step for e in loss]
        assert loss[-1].value < loss[0].value, [e.value for e in loss]
        print("TensorBoard's EventAccumulator: tags", sorted(tags), "loss",
              [round(e.value, 4) for e in loss])
        eval_acc = event_accumulator.EventAccumulator(os.path.join(model_dir, "eval"))
        eval_acc.Reload()
        assert "accuracy" in eval_acc.Tags()["scalars"], eval_acc.Tags()
        print("eval accuracy at step", eval_acc.Scalars("accuracy")[0].step, ": ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
