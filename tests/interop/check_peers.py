"""The interop tier's peers are the pinned versions and work: TensorFlow reads a TFRecord it
wrote, TensorBoard's event reader reads an event file, JAX computes a bf16 matmul.

Usage: check_peers.py REQUIREMENTS_TXT
"""
import importlib.metadata
import os
import sys
import tempfile


def pinned(requirements_path):
    pins = {}
    with open(requirements_path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                name, version = line.split("==", 1)
                pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def main():
    pins = pinned(sys.argv[1])
    failures = []
    for dist in ("tensorflow-cpu", "tensorboard", "jax", "jaxlib", "onnx", "onnxruntime",
                 "tf2onnx", "xprof"):
        want = pins.get(dist)
        got = importlib.metadata.version(dist)
        print(f"{dist}: installed {got}, pinned {want}")
        if want is None or got != want:
            failures.append(f"{dist} is {got}, requirements.txt pins {want}")

    import numpy as np
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            w.write(b"hello")
        got = [r.numpy() for r in tf.data.TFRecordDataset(path)]
        if got != [b"hello"]:
            failures.append(f"TensorFlow TFRecord round trip gave {got}")

        from tensorboard.backend.event_processing import event_file_loader

        writer = tf.summary.create_file_writer(tmp)
        with writer.as_default():
            tf.summary.scalar("loss", 0.5, step=3)
        writer.flush()
        events = [f for f in os.listdir(tmp) if f.startswith("events.out.tfevents")]
        if len(events) != 1:
            failures.append(f"expected one event file, found {events}")
        else:
            loaded = list(event_file_loader.EventFileLoader(os.path.join(tmp, events[0])).Load())
            if not any(v.tag == "loss" for e in loaded for v in e.summary.value):
                failures.append("TensorBoard's loader did not find the 'loss' scalar")

    import jax
    import jax.numpy as jnp

    a = jnp.ones((4, 8), dtype=jnp.bfloat16)
    b = jnp.ones((8, 2), dtype=jnp.bfloat16)
    c = jnp.matmul(a, b, preferred_element_type=jnp.float32)
    if not np.array_equal(np.asarray(c), np.full((4, 2), 8.0, np.float32)):
        failures.append(f"JAX bf16 matmul gave {c}")
    print("jax devices:", jax.devices())

    for f in failures:
        print("FAILED:", f)
    if not failures:
        print("interop peers: pinned versions installed and working")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
