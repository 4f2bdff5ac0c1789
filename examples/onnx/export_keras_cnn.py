"""Exports the TPUEstimator MNIST guide's CNN (tpusim's zoo mnist_cnn), built in Keras, to ONNX
with tf2onnx, for `tpusim import` and `tpusim train --onnx` (docs/onnx.md).

Usage (the project's virtualenv, which `make deps` makes):
  .venv/bin/python examples/onnx/export_keras_cnn.py OUT.onnx [--opset 13]

The biases start at 0.01, not Keras's zeros: tf2onnx folds away an Add of an all-zero constant,
and the imported model would have no biases to train. A trained model's biases are not zero.
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402
from keras import layers  # noqa: E402


def guide_cnn():
    bias = keras.initializers.Constant(0.01)
    return keras.Sequential([
        keras.Input((28, 28, 1), name="image"),
        layers.Conv2D(32, 5, padding="same", activation="relu", bias_initializer=bias),
        layers.MaxPooling2D(2),
        layers.Conv2D(64, 5, padding="same", activation="relu", bias_initializer=bias),
        layers.MaxPooling2D(2),
        layers.Flatten(),
        layers.Dense(128, activation="relu", bias_initializer=bias),
        layers.Dropout(0.4),
        layers.Dense(10, bias_initializer=bias),
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()
    keras.utils.set_random_seed(1)
    model = guide_cnn()
    fn = tf.function(lambda x: model(x, training=False))
    spec = tf.TensorSpec((None, 28, 28, 1), tf.float32, name="image")
    tf2onnx.convert.from_function(fn, input_signature=[spec], opset=args.opset,
                                  output_path=args.out)
    print(f"wrote {args.out}: {model.count_params()} parameters, opset {args.opset}")


if __name__ == "__main__":
    main()
