"""TensorBoard's own event reader reads the event file tpusim writes: every scalar, its tag, step
and value; and TensorFlow's summary_iterator parses every record.

Usage: check_event_file.py TPUSIM_WRITE_SUMMARIES
"""
import os
import subprocess
import sys
import tempfile


def main():
    writer = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        path = subprocess.run([writer, d], check=True, capture_output=True, text=True).stdout.strip()
        print("tpusim wrote", path)

        from tensorboard.backend.event_processing import event_accumulator

        acc = event_accumulator.EventAccumulator(d)
        acc.Reload()
        tags = sorted(acc.Tags()["scalars"])
        assert tags == ["learning_rate", "loss"], tags
        loss = acc.Scalars("loss")
        assert [e.step for e in loss] == list(range(0, 100, 10)), loss
        for e in loss:
            want = 1.0 / (e.step + 1)
            assert abs(e.value - want) < 1e-7, (e.step, e.value, want)
        assert all(abs(e.value - 0.1) < 1e-7 for e in acc.Scalars("learning_rate"))
        print("TensorBoard's EventAccumulator: loss at", len(loss), "steps, learning_rate: ok")

        import tensorflow as tf

        events = list(tf.compat.v1.train.summary_iterator(path))
        assert events[0].file_version == "brain.Event:2", events[0]
        assert len(events) == 21, len(events)
        print("tf.compat.v1.train.summary_iterator:", len(events), "events: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
