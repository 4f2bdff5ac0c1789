"""Exports a Keras regression (8 tabular features to one value) to ONNX with tf2onnx and writes
its data as TFRecords of tf.Example, for `tpusim train --onnx FILE --loss mean_squared_error
--input examples --data DIR` (docs/onnx.md, "Models fed by name").

Usage (the project's virtualenv, which `make deps` makes):
  .venv/bin/python examples/onnx/export_keras_regression.py OUT.onnx DATA_DIR

DATA_DIR gets train-0000N-of-00004 (8,192 examples) and eval-00000-of-00001 (2,048): each
example a float feature "features" of 8 values in [0, 1) and a float "label", the target
sum(w * x) + sin(3 x0) + 0.5 plus noise of 0.05: what a user's own tf.data pipeline writes.
The features' name is the ONNX input's, which tpusim feeds it from.
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402
from keras import layers  # noqa: E402

FEATURES = 8
WEIGHTS = np.linspace(-1.0, 1.0, FEATURES).astype(np.float32)


def regression():
    bias = keras.initializers.Constant(0.01)  # tf2onnx folds away an Add of zeros
    return keras.Sequential([
        keras.Input((FEATURES,), name="features"),
        layers.Dense(32, activation="relu", bias_initializer=bias),
        layers.Dense(1, bias_initializer=bias),
    ])


def write_records(path, count, rng):
    with tf.io.TFRecordWriter(path) as out:
        for _ in range(count):
            x = rng.uniform(0.0, 1.0, FEATURES).astype(np.float32)
            y = float(x @ WEIGHTS + np.sin(3.0 * x[0]) + 0.5 + rng.normal(0.0, 0.05))
            example = tf.train.Example(features=tf.train.Features(feature={
                "features": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                "label": tf.train.Feature(float_list=tf.train.FloatList(value=[y])),
            }))
            out.write(example.SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("data")
    args = parser.parse_args()
    keras.utils.set_random_seed(1)
    model = regression()
    fn = tf.function(lambda x: model(x, training=False))
    spec = tf.TensorSpec((None, FEATURES), tf.float32, name="features")
    tf2onnx.convert.from_function(fn, input_signature=[spec], opset=13, output_path=args.out)
    os.makedirs(args.data, exist_ok=True)
    rng = np.random.default_rng(7)
    for shard in range(4):
        write_records(os.path.join(args.data, f"train-{shard:05d}-of-00004"), 2048, rng)
    write_records(os.path.join(args.data, "eval-00000-of-00001"), 2048, rng)
    print(f"wrote {args.out}: {model.count_params()} parameters, opset 13; {args.data}: 8192 "
          "train and 2048 eval examples")


if __name__ == "__main__":
    main()
