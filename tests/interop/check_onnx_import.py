"""Keras models exported by tf2onnx (an MLP, the MNIST guide's CNN, a BERT-style encoder layer,
MobileNetV2, a small ViT, ResNet-50), imported by tpusim: each model's forward pass on tpusim's cpu
backend (fp32) and tpusim backend (a simulated v3 core; the MXU multiplies in bf16) against
onnxruntime's on the same inputs and weights (and the gpu backend's, fp32, where a CUDA device
is), and `tpusim import` on each file.

Usage: check_onnx_import.py FORWARD_BINARY TPUSIM_BINARY
FORWARD_BINARY is tests/interop/onnx_forward.cc. Each model gets random weights (biases too: an
exporter drops an all-zero bias). max |ours - onnxruntime| / max |onnxruntime| must stay within
1e-4 on cpu and 3e-2 on tpusim (bf16 products over hundreds of terms).

Then training through the CLI: the BERT layer on synthetic token ids (tpusim and the cpu agree
step for step), and the Keras regression of examples/onnx on its tf.Example records (tpusim's
mean squared error against onnxruntime's on the same records).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import onnx  # noqa: E402
import onnxruntime  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402
from keras import layers  # noqa: E402

TOLERANCE = {"cpu": 1e-4, "gpu": 1e-4, "tpusim": 3e-2}
RNG = np.random.default_rng(7)


def randomize(model):
    """Every weight drawn again (small, so activations stay in range), biases included; batch
    norm's moving variances positive."""
    for w in model.weights:
        if w.path.endswith("moving_variance"):
            w.assign(RNG.uniform(0.5, 1.5, w.shape).astype(w.dtype))
            continue
        scale = 0.5 / np.sqrt(max(1, np.prod(w.shape[:-1])))
        w.assign(RNG.normal(0, scale, w.shape).astype(w.dtype))


def mlp():
    return keras.Sequential([keras.Input((784,)), layers.Dense(256, activation="relu"),
                             layers.Dense(128, activation="relu"), layers.Dense(10)])


def mnist_cnn():
    """The TPUEstimator MNIST guide's network (tpusim's zoo mnist_cnn)."""
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(32, 5, padding="same", activation="relu"), layers.MaxPooling2D(2),
        layers.Conv2D(64, 5, padding="same", activation="relu"), layers.MaxPooling2D(2),
        layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dropout(0.4),
        layers.Dense(10)])


class PositionEmbedding(layers.Layer):
    """BERT's learned position embeddings, added to the tokens'."""

    def build(self, shape):
        self.table = self.add_weight(shape=shape[1:], initializer="zeros")

    def call(self, x):
        return x + self.table


def small_bert():
    """A BERT-style encoder layer: token and position embeddings, 2-head self-attention,
    residuals with layer norms, a GELU feed-forward, the first token's pooled classifier."""
    ids = keras.Input((16,), dtype="int32", name="ids")
    x = layers.Embedding(100, 32)(ids)
    x = PositionEmbedding()(x)
    a = layers.MultiHeadAttention(num_heads=2, key_dim=16)(x, x)
    x = layers.LayerNormalization(epsilon=1e-12)(x + a)
    # BERT's exact GELU written out (Keras's own goes through erfc, which tf2onnx lacks).
    gelu = layers.Lambda(lambda t: 0.5 * t * (1.0 + tf.math.erf(t / np.sqrt(2.0))))
    f = layers.Dense(32)(gelu(layers.Dense(64)(x)))
    x = layers.LayerNormalization(epsilon=1e-12)(x + f)
    out = layers.Dense(2)(layers.Dense(32, activation="tanh")(x[:, 0]))
    return keras.Model(ids, out)


def mobilenet_v2():
    """Keras's MobileNetV2 (depthwise convolutions, ReLU6 as Clip, strided convolutions with
    explicit zero padding), narrow and small to keep the tier quick."""
    return keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), alpha=0.35,
                                          classes=10)


def small_vit():
    """A ViT: 4x4 patches of a 32x32 image embedded by a strided convolution, position
    embeddings, one encoder layer (4-head attention, layer norms, a GELU MLP), mean over the
    patches, a classifier."""
    images = keras.Input((32, 32, 3))
    x = layers.Conv2D(48, 4, strides=4)(images)
    x = layers.Reshape((64, 48))(x)
    x = PositionEmbedding()(x)
    h = layers.LayerNormalization(epsilon=1e-6)(x)
    x = x + layers.MultiHeadAttention(num_heads=4, key_dim=12)(h, h)
    h = layers.LayerNormalization(epsilon=1e-6)(x)
    gelu = layers.Lambda(lambda t: 0.5 * t * (1.0 + tf.math.erf(t / np.sqrt(2.0))))
    x = x + layers.Dense(48)(gelu(layers.Dense(96)(h)))
    x = layers.GlobalAveragePooling1D()(layers.LayerNormalization(epsilon=1e-6)(x))
    return keras.Model(images, layers.Dense(10)(x))


def resnet50():
    return keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000)


def export(model, spec, path, opset):
    fn = tf.function(lambda x: model(x, training=False))
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=[spec], opset=opset,
                                             output_path=path)
    return proto


def check(name, make, shape, dtype, opset, batch, backends, tmp, forward, tpusim):
    model = make()
    randomize(model)
    path = os.path.join(tmp, f"{name}.onnx")
    spec = tf.TensorSpec((None,) + shape, dtype, name="x")
    proto = export(model, spec, path, opset)
    if dtype == tf.int32:
        x = RNG.integers(0, 100, (batch,) + shape).astype(np.int32)
    else:
        x = RNG.normal(0, 1, (batch,) + shape).astype(np.float32)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    reference = session.run(None, {input_name: x})
    output_names = [o.name for o in session.get_outputs()]
    inputs = os.path.join(tmp, f"{name}.in.json")
    with open(inputs, "w") as f:
        json.dump({input_name: {"shape": list(x.shape), "values": x.ravel().tolist()}}, f)
    failed = 0
    for backend in backends:
        outputs = os.path.join(tmp, f"{name}.{backend}.json")
        run = subprocess.run([forward, path, inputs, backend, outputs], capture_output=True,
                             text=True)
        if run.returncode != 0:
            print(f"FAIL {name} on {backend}: {run.stderr.strip()}")
            failed += 1
            continue
        with open(outputs) as f:
            ours = json.load(f)
        for out_name, ref in zip(output_names, reference):
            got = np.asarray(ours[out_name]["values"], np.float32).reshape(ours[out_name]["shape"])
            err = float(np.max(np.abs(got - ref)) / max(1e-30, np.max(np.abs(ref))))
            ok = got.shape == ref.shape and err <= TOLERANCE[backend]
            print(f"{'ok  ' if ok else 'FAIL'} {name} ({len(proto.graph.node)} nodes, opset {opset})"
                  f" on {backend}: relative error {err:.2e} (tolerance {TOLERANCE[backend]:.0e})")
            failed += not ok
    summary = subprocess.run([tpusim, "import", path, "--json"], capture_output=True, text=True)
    if summary.returncode != 0:
        print(f"FAIL tpusim import {name}: {summary.stdout}{summary.stderr}")
        return failed + 1
    params = json.loads(summary.stdout)["parameters"]
    # Every float initializer of more than one element is a weight, and only they are: the
    # file's own count (an inference export folds batch norm into a scale and shift, or into
    # the convolution before it, so it can be below Keras's trainable weights).
    in_file = sum(int(np.prod(t.dims)) for t in proto.graph.initializer
                  if t.data_type == onnx.TensorProto.FLOAT and int(np.prod(t.dims)) > 1)
    keras_count = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    ok = params == in_file
    print(f"{'ok  ' if ok else 'FAIL'} tpusim import {name}: {params} parameters (the file's "
          f"weights: {in_file}; Keras's trainable: {keras_count})")
    return failed + (not ok)


def check_small_bert_trains(tmp, tpusim):
    """The exported BERT layer trains on synthetic token ids (drawn below its embedding table's
    rows) on tpusim and the cpu, step for step alike."""
    path = os.path.join(tmp, "small_bert.onnx")
    run = subprocess.run([tpusim, "compare", "--onnx", path, "--input", "synthetic", "--steps",
                          "2", "--batch-size", "16", "--json"], capture_output=True, text=True)
    verdict = json.loads(run.stdout)["verdict"] if run.returncode == 0 else run.stderr.strip()
    ok = verdict == "agree"
    print(f"{'ok  ' if ok else 'FAIL'} small_bert trains on synthetic tokens: tpusim and cpu "
          f"{verdict}")
    return not ok


def check_regression_records(tmp, tpusim):
    """The Keras regression example and its tf.Example records (examples/onnx): tpusim's mean
    squared error of the file's weights over the eval records equals onnxruntime's on the same
    records, parsed here by tf.data."""
    path, data = os.path.join(tmp, "regression.onnx"), os.path.join(tmp, "regression")
    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "onnx",
                          "export_keras_regression.py")
    made = subprocess.run([sys.executable, script, path, data], capture_output=True, text=True)
    if made.returncode != 0:
        print(f"FAIL export_keras_regression.py: {made.stderr.strip()[-500:]}")
        return 1
    run = subprocess.run([tpusim, "evaluate", "--onnx", path, "--loss", "mean_squared_error",
                          "--input", "examples", "--data", data, "--backend", "cpu", "--json"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(f"FAIL tpusim evaluate on the regression records: {run.stderr.strip()}")
        return 1
    ours = json.loads(run.stdout)["mean_squared_error"]
    spec = {"features": tf.io.FixedLenFeature([8], tf.float32),
            "label": tf.io.FixedLenFeature([1], tf.float32)}
    records = tf.data.TFRecordDataset([os.path.join(data, "eval-00000-of-00001")])
    batch = next(iter(records.map(lambda r: tf.io.parse_single_example(r, spec)).batch(4096)))
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    predicted = session.run(None, {session.get_inputs()[0].name: batch["features"].numpy()})[0]
    reference = float(np.mean((predicted.astype(np.float64) - batch["label"].numpy()) ** 2))
    err = abs(ours - reference) / reference
    # The cpu backend's matmuls take bf16 operands (its mxu precision): 1e-2 of the error.
    ok = err <= 1e-2
    print(f"{'ok  ' if ok else 'FAIL'} regression on tf.Example records: mean squared error "
          f"{ours:.6f}, onnxruntime's {reference:.6f} (relative {err:.1e}, tolerance 1e-2)")
    return not ok


def gpu_available(tpusim):
    """Whether this machine runs the gpu backend (a CUDA device), and if not why."""
    run = subprocess.run([tpusim, "backends", "--json"], capture_output=True, text=True)
    if run.returncode != 0:
        return False, run.stderr.strip()
    for b in json.loads(run.stdout)["backends"]:
        if b["name"] == "gpu":
            return b["available"], b["reason"]
    return False, "no gpu backend"


def main():
    forward, tpusim = sys.argv[1], sys.argv[2]
    failed = 0
    gpu, why = gpu_available(tpusim)
    if not gpu:
        print(f"skip gpu: {why}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("mlp", mlp, (784,), tf.float32, 13, 4, ["cpu", "tpusim"]),
            ("mnist_cnn", mnist_cnn, (28, 28, 1), tf.float32, 13, 4, ["cpu", "tpusim"]),
            ("small_bert", small_bert, (16,), tf.int32, 13, 2, ["cpu", "tpusim"]),
            ("small_bert_opset17", small_bert, (16,), tf.int32, 17, 2, ["cpu"]),
            ("mobilenet_v2", mobilenet_v2, (96, 96, 3), tf.float32, 13, 2, ["cpu", "tpusim"]),
            ("small_vit", small_vit, (32, 32, 3), tf.float32, 17, 2, ["cpu", "tpusim"]),
            ("resnet50", resnet50, (224, 224, 3), tf.float32, 13, 1, ["cpu"]),
        ]
        for case in cases:
            if gpu:  # the gpu beside the cpu, in fp32 as it
                case = case[:6] + (case[6] + ["gpu"],)
            failed += check(*case, tmp, forward, tpusim)
        failed += check_small_bert_trains(tmp, tpusim)
        failed += check_regression_records(tmp, tpusim)
    if failed:
        print(f"{failed} check(s) failed")
        return 1
    print("every imported model agrees with onnxruntime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
