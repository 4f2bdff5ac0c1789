"""One fp32 training step of three of tpusim's zoo models in JAX (XLA CPU), timed.

The outside reference for tpusim's cpu backend: bench/README.md compares the cpu backend's
training step (build_training_step in runtime/models/zoo.cc, timed by bench/cpu_backend_bench.cc)
with JAX's step of the same network on the same machine, at the same batch, in fp32. The
networks are tpusim's layer for layer (runtime/models/zoo.cc and runtime/graph/layers.cc): the
same variable shapes, the mean sparse softmax cross-entropy over the batch as the loss, plain
SGD `var - grad * learning_rate` on every trained variable, and the batch-norm moving statistics
updated in the step (not trained), as layers::batch_normalization does in training mode. They
are written as a JAX user would write them (lax.conv_general_dilated, lax.reduce_window, jnp,
jax.value_and_grad), and the whole step is one jax.jit.

Usage:
  .venv/bin/python bench/jax_training_step.py --model mnist_cnn --batch 1024 [--steps 5]
      [--warmup 2] [--learning-rate 0.01]
  .venv/bin/python bench/jax_training_step.py --all --batch 1024

The step is compiled ahead of time (not timed), run --warmup times, then timed --steps times
with time.perf_counter, each step waited on with block_until_ready. One JSON object per model on
stdout, one a line; the parameter counts on stderr (`tpusim compile --model NAME` reports the
same total: trained variables plus batch-norm statistics). The batch (uniform [0, 1) images
[batch, 28, 28, 1] f32, labels s32 [batch] in [0, 10)) stays on the device for every step, and
the parameters and statistics are donated to the step, as a training loop would run it.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
from typing import Callable, NamedTuple

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")  # fp32 products, no bf16 passes

IMAGE_SIDE = 28  # ModelInfo's image_side: Fashion-MNIST's 28 x 28 x 1
IMAGE_CHANNELS = 1
CLASSES = 10
LEARNING_RATE = 0.01  # bench/cpu_backend_bench.cc's build_training_step(..., 0.01f, ...)
DROPOUT_RATE = 0.4  # mnist_cnn's
BN_MOMENTUM = 0.99  # layers::batch_normalization's defaults
BN_EPSILON = 1e-3
LN_EPSILON = 1e-6  # the transformer's layer_normalization(..., 1e-6f, false)
SEED = 1

# --------------------------------------------------------------------------------------------
# Initialisers (the values do not matter for timing; the shapes do).


def glorot_uniform(key, shape):
    """Keras' Glorot uniform, as tpusim's kGlorotUniform: fans over the receptive field."""
    receptive = math.prod(shape[:-2]) if len(shape) > 2 else 1
    fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return jax.random.uniform(key, shape, jnp.float32, -limit, limit)


def dense_init(key, fan_in, units):
    return {"kernel": glorot_uniform(key, (fan_in, units)),
            "bias": jnp.zeros((units,), jnp.float32)}


def conv_init(key, kernel, channels, filters):
    return {"kernel": glorot_uniform(key, (kernel, kernel, channels, filters)),
            "bias": jnp.zeros((filters,), jnp.float32)}


def batch_norm_init(channels):
    """(gamma and beta, trained; the moving mean and variance, not trained)."""
    params = {"gamma": jnp.ones((channels,), jnp.float32),
              "beta": jnp.zeros((channels,), jnp.float32)}
    stats = {"moving_mean": jnp.zeros((channels,), jnp.float32),
             "moving_variance": jnp.ones((channels,), jnp.float32)}
    return params, stats


# --------------------------------------------------------------------------------------------
# Layers, as runtime/graph/layers.cc computes them.


def dense(p, x):
    return x @ p["kernel"] + p["bias"]


def conv2d(p, x, stride=1):
    """NHWC images, HWIO kernel, TensorFlow's SAME padding, bias; no activation."""
    y = lax.conv_general_dilated(x, p["kernel"], (stride, stride), "SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return y + p["bias"]


def max_pool(x, pool=2, stride=2):
    """max_pooling2d's default VALID padding."""
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, pool, pool, 1), (1, stride, stride, 1),
                             "VALID")


def dropout(key, x, rate):
    """Inverted dropout: keep with probability 1 - rate, scale the kept by 1 / (1 - rate)."""
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return x * keep.astype(x.dtype) * (1.0 / (1.0 - rate))


def batch_norm(p, s, x):
    """Training mode: normalise with the batch's moments over N, H, W; update the moving ones.

    Var[x] = E[x^2] - E[x]^2 as tpusim (and XLA's BatchNormExpander) computes it; the moving
    variance takes the batch variance with Bessel's correction n / (n - 1), as the fused op's
    variance output does.
    """
    axes = tuple(range(x.ndim - 1))
    mean = jnp.mean(x, axis=axes)
    var = jnp.mean(jnp.square(x), axis=axes) - jnp.square(mean)
    n = x.size // x.shape[-1]
    bessel = n / max(1, n - 1)
    new_s = {"moving_mean": s["moving_mean"] * BN_MOMENTUM + mean * (1.0 - BN_MOMENTUM),
             "moving_variance": (s["moving_variance"] * BN_MOMENTUM
                                 + var * (bessel * (1.0 - BN_MOMENTUM)))}
    y = (x - mean) * lax.rsqrt(var + BN_EPSILON) * p["gamma"] + p["beta"]
    return y, new_s


def layer_norm(x, epsilon=LN_EPSILON):
    """Over the last axis, without gamma and beta (scale_and_center false)."""
    centred = x - jnp.mean(x, axis=-1, keepdims=True)
    return centred * lax.rsqrt(jnp.mean(jnp.square(centred), axis=-1, keepdims=True) + epsilon)


def cross_entropy(logits, labels):
    """image_training_loss: the batch mean of sparse_softmax_cross_entropy(labels, logits)."""
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(log_probs, labels[:, None], axis=1))


# --------------------------------------------------------------------------------------------
# The models. Each has an init (key -> params, stats) and an apply
# (params, stats, images, dropout key) -> (logits, new stats).


def mnist_cnn_init(key):
    # zoo.cc mnist_cnn, tpusim's variables (28 x 28 x 1 images):
    #   conv2d_1/kernel [5, 5, 1, 32], conv2d_1/bias [32]      relu, max-pool 2/2 -> 14 x 14
    #   conv2d_2/kernel [5, 5, 32, 64], conv2d_2/bias [64]     relu, max-pool 2/2 -> 7 x 7
    #   dense_1/kernel [3136, 128], dense_1/bias [128]         relu (3136 = 7 * 7 * 64)
    #   dropout 0.4
    #   dense_2/kernel [128, 10], dense_2/bias [10]
    #   = 454,922 parameters
    k = jax.random.split(key, 4)
    params = {"conv1": conv_init(k[0], 5, IMAGE_CHANNELS, 32),
              "conv2": conv_init(k[1], 5, 32, 64),
              "dense1": dense_init(k[2], 7 * 7 * 64, 128),
              "dense2": dense_init(k[3], 128, CLASSES)}
    return params, {}


def mnist_cnn_apply(params, stats, images, dropout_key):
    h = max_pool(jax.nn.relu(conv2d(params["conv1"], images)))
    h = max_pool(jax.nn.relu(conv2d(params["conv2"], h)))
    h = jax.nn.relu(dense(params["dense1"], h.reshape(h.shape[0], -1)))
    h = dropout(dropout_key, h, DROPOUT_RATE)
    return dense(params["dense2"], h), stats


def residual_block_init(key, channels, filters, stride):
    # zoo.cc residual_block: conv 3x3 / stride (bias) -> BN -> relu -> conv 3x3 (bias) -> BN,
    # plus the input, or a 1x1 / stride conv (bias) of it where the stride or width changes;
    # relu after the sum.
    k = jax.random.split(key, 3)
    bn1, bn1_stats = batch_norm_init(filters)
    bn2, bn2_stats = batch_norm_init(filters)
    params = {"conv1": conv_init(k[0], 3, channels, filters), "bn1": bn1,
              "conv2": conv_init(k[1], 3, filters, filters), "bn2": bn2}
    if stride != 1 or channels != filters:
        params["skip"] = conv_init(k[2], 1, channels, filters)
    return params, {"bn1": bn1_stats, "bn2": bn2_stats}


def residual_block_apply(params, stats, x, stride):
    h, bn1 = batch_norm(params["bn1"], stats["bn1"], conv2d(params["conv1"], x, stride))
    h = jax.nn.relu(h)
    h, bn2 = batch_norm(params["bn2"], stats["bn2"], conv2d(params["conv2"], h))
    skip = conv2d(params["skip"], x, stride) if "skip" in params else x
    return jax.nn.relu(h + skip), {"bn1": bn1, "bn2": bn2}


# (input channels, filters, stride) of resnet_small's three residual blocks.
RESNET_SMALL_BLOCKS = ((16, 16, 1), (16, 16, 1), (16, 32, 2))


def resnet_small_init(key):
    # zoo.cc resnet_small, tpusim's variables (each batch_normalization_N has gamma, beta
    # (trained) and moving_mean, moving_variance (statistics), all [C]):
    #   conv2d_1 [3, 3, 1, 16] + [16], batch_normalization_1 [16]    relu
    #   block 1: conv2d_2 [3, 3, 16, 16] + [16], BN_2 [16], relu,
    #            conv2d_3 [3, 3, 16, 16] + [16], BN_3 [16]; + x, relu
    #   block 2: conv2d_4, BN_4, conv2d_5, BN_5 as block 1
    #   block 3: conv2d_6 [3, 3, 16, 32] + [32] stride 2 (28 -> 14), BN_6 [32], relu,
    #            conv2d_7 [3, 3, 32, 32] + [32], BN_7 [32];
    #            + conv2d_8 [1, 1, 16, 32] + [32] stride 2 (the projection), relu
    #   global average pool (reduce_mean over H, W) -> [N, 32]
    #   dense_1 [32, 10] + [10]
    #   = 24,490 trained + 288 statistics = 24,778 parameters
    k = jax.random.split(key, 2 + len(RESNET_SMALL_BLOCKS))
    bn, bn_stats = batch_norm_init(16)
    params = {"conv": conv_init(k[0], 3, IMAGE_CHANNELS, 16), "bn": bn, "blocks": [],
              "dense": dense_init(k[1], 32, CLASSES)}
    stats = {"bn": bn_stats, "blocks": []}
    for block_key, (channels, filters, stride) in zip(k[2:], RESNET_SMALL_BLOCKS):
        block, block_stats = residual_block_init(block_key, channels, filters, stride)
        params["blocks"].append(block)
        stats["blocks"].append(block_stats)
    return params, stats


def resnet_small_apply(params, stats, images, dropout_key):
    del dropout_key  # no dropout
    h, bn = batch_norm(params["bn"], stats["bn"], conv2d(params["conv"], images))
    h = jax.nn.relu(h)
    new_stats = {"bn": bn, "blocks": []}
    for block, block_stats, (_, _, stride) in zip(params["blocks"], stats["blocks"],
                                                  RESNET_SMALL_BLOCKS):
        h, block_stats = residual_block_apply(block, block_stats, h, stride)
        new_stats["blocks"].append(block_stats)
    h = jnp.mean(h, axis=(1, 2))  # global average pool
    return dense(params["dense"], h), new_stats


TOKENS, WIDTH, D_MODEL, HEADS, D_FF = 28, 28, 64, 4, 128


def transformer_init(key):
    # zoo.cc transformer, tpusim's variables (the image's 28 rows as 28 tokens of width 28):
    #   dense_1 [28, 64] + [64]                   -> x [N, 28, 64]
    #   dense_2, dense_3, dense_4 [64, 64] + [64]   q, k, v; 4 heads of 16;
    #                                               softmax(q k^T / 4) v
    #   dense_5 [64, 64] + [64]                   the merged heads; x + it, layer norm (1e-6,
    #                                             no gamma or beta)
    #   dense_6 [64, 128] + [128] relu, dense_7 [128, 64] + [64]; x + ff, layer norm
    #   mean over the tokens -> [N, 64]
    #   dense_8 [64, 10] + [10]
    #   = 35,722 parameters
    k = jax.random.split(key, 8)
    params = {"embed": dense_init(k[0], WIDTH, D_MODEL),
              "query": dense_init(k[1], D_MODEL, D_MODEL),
              "key": dense_init(k[2], D_MODEL, D_MODEL),
              "value": dense_init(k[3], D_MODEL, D_MODEL),
              "out": dense_init(k[4], D_MODEL, D_MODEL),
              "ff1": dense_init(k[5], D_MODEL, D_FF),
              "ff2": dense_init(k[6], D_FF, D_MODEL),
              "logits": dense_init(k[7], D_MODEL, CLASSES)}
    return params, {}


def split_heads(x):
    """[N, T, D] -> [N, heads, T, D / heads]."""
    n, t, d = x.shape
    return x.reshape(n, t, HEADS, d // HEADS).transpose(0, 2, 1, 3)


def self_attention(params, x):
    q, k, v = (split_heads(dense(params[name], x)) for name in ("query", "key", "value"))
    scale = 1.0 / math.sqrt(D_MODEL // HEADS)  # 1 / 4
    weights = jax.nn.softmax(jnp.einsum("nhqd,nhkd->nhqk", q, k) * scale, axis=-1)
    attended = jnp.einsum("nhqk,nhkd->nhqd", weights, v)
    merged = attended.transpose(0, 2, 1, 3).reshape(x.shape)
    return dense(params["out"], merged)


def transformer_apply(params, stats, images, dropout_key):
    del dropout_key  # no dropout
    x = dense(params["embed"], images.reshape(images.shape[0], TOKENS, WIDTH))
    x = layer_norm(x + self_attention(params, x))
    ff = dense(params["ff2"], jax.nn.relu(dense(params["ff1"], x)))
    x = layer_norm(x + ff)
    return dense(params["logits"], jnp.mean(x, axis=1)), stats


class Model(NamedTuple):
    init: Callable
    apply: Callable


MODELS = {
    "mnist_cnn": Model(mnist_cnn_init, mnist_cnn_apply),
    "resnet_small": Model(resnet_small_init, resnet_small_apply),
    "transformer": Model(transformer_init, transformer_apply),
}

# --------------------------------------------------------------------------------------------
# The training step and its timing.


def make_train_step(model, learning_rate):
    """(params, stats, images, labels, step) -> (new params, new stats, loss), jitted.

    `step` seeds the dropout mask, a new one each step as tpusim's counter-based RNG draws.
    """
    def loss_fn(params, stats, images, labels, dropout_key):
        logits, new_stats = model.apply(params, stats, images, dropout_key)
        return cross_entropy(logits, labels), new_stats

    def train_step(params, stats, images, labels, step):
        dropout_key = jax.random.fold_in(jax.random.key(SEED), step)
        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, stats, images, labels, dropout_key)
        new_params = jax.tree.map(lambda p, g: p - g * learning_rate, params, grads)
        return new_params, new_stats, loss

    return jax.jit(train_step, donate_argnums=(0, 1))


def count(tree):
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(tree))


def make_batch(batch):
    rng = np.random.default_rng(SEED)
    images = rng.random((batch, IMAGE_SIDE, IMAGE_SIDE, IMAGE_CHANNELS), dtype=np.float32)
    labels = rng.integers(0, CLASSES, size=(batch,), dtype=np.int32)
    return jax.device_put(images), jax.device_put(labels)


def benchmark(name, batch, steps, warmup, learning_rate):
    params, stats = MODELS[name].init(jax.random.key(SEED))
    trained, statistics_count = count(params), count(stats)
    print(f"{name}: {trained + statistics_count} parameters ({trained} trained, "
          f"{statistics_count} batch-norm statistics)", file=sys.stderr)
    images, labels = make_batch(batch)

    t0 = time.perf_counter()
    step_fn = make_train_step(MODELS[name], learning_rate).lower(
        params, stats, images, labels, np.uint32(0)).compile()
    compile_seconds = time.perf_counter() - t0

    losses, times = [], []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        params, stats, loss = jax.block_until_ready(
            step_fn(params, stats, images, labels, np.uint32(i)))
        elapsed = time.perf_counter() - t0
        losses.append(float(loss))
        if i >= warmup:
            times.append(elapsed)

    return {"model": name, "batch": batch, "steps": steps, "warmup": warmup,
            "seconds_per_step_median": statistics.median(times),
            "seconds_per_step_min": min(times),
            "compile_seconds": compile_seconds,
            "loss": losses[-1], "first_loss": losses[0],
            "parameters": trained + statistics_count, "learning_rate": learning_rate,
            "jax": jax.__version__, "devices": jax.default_backend(),
            "threads": os.cpu_count()}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", choices=sorted(MODELS))
    which.add_argument("--all", action="store_true", help="every model in turn")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--steps", type=int, default=5, help="timed steps (default 5)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed steps after compiling (default 2)")
    parser.add_argument("--learning-rate", type=float, default=LEARNING_RATE)
    args = parser.parse_args(argv)
    if args.batch < 1 or args.steps < 1 or args.warmup < 0:
        parser.error("--batch and --steps must be positive, --warmup not negative")
    return args


def main(argv=None):
    args = parse_args(argv)
    names = list(MODELS) if args.all else [args.model]
    for name in names:
        result = benchmark(name, args.batch, args.steps, args.warmup, args.learning_rate)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
