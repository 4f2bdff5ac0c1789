"""JAX, an outside reference, against tpusim's cpu backend (fp32): a sample of ops with their
gradients, and a forward and backward pass of mnist_cnn, on the same inputs and weights.

Usage: check_jax.py DUMP_BINARY
Runs DUMP_BINARY (tests/interop/dump_reference.cc) into a temporary folder, recomputes every case
it knows with JAX, and compares: max |ours - jax| / max |jax| must stay within 1e-5.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
TOLERANCE = 1e-5


def arr(t):
    dtype = np.int32 if t["dtype"] == "s32" else np.float32
    return np.asarray(t["values"], dtype=dtype).reshape(t["shape"])


def conv(x, kernel, bias, stride, padding):
    y = lax.conv_general_dilated(x, kernel, (stride, stride), padding, dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return y + bias


def pool(x, size, stride, padding, kind):
    window, strides = (1, size, size, 1), (1, stride, stride, 1)
    if kind == "max":
        return lax.reduce_window(x, -jnp.inf, lax.max, window, strides, padding)
    total = lax.reduce_window(x, 0.0, lax.add, window, strides, padding)
    count = lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, window, strides, padding)
    return total / count


def layer_norm(x, gamma, beta):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-12) * gamma + beta


def xent(labels, logits):
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1)[:, 0]


# (op, shape) -> f(inputs, variables); inputs and variables are dicts of jnp arrays.
CASES = {
    "add": lambda i, v: i["a"] + i["b"],
    "sub": lambda i, v: i["a"] - i["b"],
    "mul": lambda i, v: i["a"] * i["b"],
    "div": lambda i, v: i["a"] / i["b"],
    "max": lambda i, v: jnp.maximum(i["a"], i["b"]),
    "min": lambda i, v: jnp.minimum(i["a"], i["b"]),
    "neg": lambda i, v: -i["x"],
    "relu": lambda i, v: jnp.maximum(i["x"], 0),
    "tanh": lambda i, v: jnp.tanh(i["x"]),
    "sigmoid": lambda i, v: jax.nn.sigmoid(i["x"]),
    "exp": lambda i, v: jnp.exp(i["x"]),
    "log": lambda i, v: jnp.log(i["x"]),
    "rsqrt": lambda i, v: lax.rsqrt(i["x"]),
    "square": lambda i, v: i["x"] * i["x"],
    "erf": lambda i, v: jax.scipy.special.erf(i["x"]),
    "select": lambda i, v: jnp.where(i["c"] > 0, i["a"], i["b"]),
    ("reduce_sum", "[4, 5, 6] axes 0,2"): lambda i, v: jnp.sum(i["x"], axis=(0, 2)),
    ("reduce_mean", "[4, 5, 6] axis 1"): lambda i, v: jnp.mean(i["x"], axis=1),
    ("reduce_max", "[4, 37] axis 1"): lambda i, v: jnp.max(i["x"], axis=1),
    ("transpose", "[2, 3, 4] perm 2,0,1"): lambda i, v: jnp.transpose(i["x"], (2, 0, 1)),
    ("transpose", "[2, 3, 4, 5] perm 0,2,1,3"): lambda i, v: jnp.transpose(i["x"], (0, 2, 1, 3)),
    ("transpose", "[2, 3, 4, 5] perm 3,1,0,2"): lambda i, v: jnp.transpose(i["x"], (3, 1, 0, 2)),
    ("broadcast", "[3, 1] -> [2, 3, 4]"): lambda i, v: jnp.broadcast_to(i["x"], (2, 3, 4)),
    ("concat", "[2, 3] [2, 5] axis 1"): lambda i, v: jnp.concatenate([i["a"], i["b"]], axis=1),
    ("slice", "[5, 8] [1:4, 2:7]"): lambda i, v: i["x"][1:4, 2:7],
    ("pad", "[3, 4] +(1,2),(0,3)"): lambda i, v: jnp.pad(i["x"], ((1, 2), (0, 3))),
    ("matmul", "transpose([150, 40]) x [150, 12]"): lambda i, v: jnp.matmul(i["a"].T, i["b"]),
    "matmul": lambda i, v: jnp.matmul(i["a"], i["b"]),
    ("conv2d", "[2, 9, 9, 3] k3 s1 SAME f5"): lambda i, v: conv(i["x"], v["conv2d_1/kernel"], v["conv2d_1/bias"], 1, "SAME"),
    ("conv2d", "[2, 10, 10, 4] k5 s2 VALID f6"): lambda i, v: conv(i["x"], v["conv2d_1/kernel"], v["conv2d_1/bias"], 2, "VALID"),
    ("max_pool", "[2, 8, 8, 3] 2x2 s2"): lambda i, v: pool(i["x"], 2, 2, "VALID", "max"),
    ("max_pool", "[1, 7, 7, 2] 3x3 s2 SAME"): lambda i, v: pool(i["x"], 3, 2, "SAME", "max"),
    ("avg_pool", "[2, 6, 6, 3] 3x3 s1 SAME"): lambda i, v: pool(i["x"], 3, 1, "SAME", "avg"),
    "softmax": lambda i, v: jax.nn.softmax(i["x"]),
    "log_softmax": lambda i, v: jax.nn.log_softmax(i["x"]),
    "sparse_softmax_cross_entropy": lambda i, v: xent(i["labels"], i["logits"]),
    "batch_norm": lambda i, v: (i["x"] - jnp.mean(i["x"], 0)) * lax.rsqrt(jnp.var(i["x"], 0) + 1e-3)
    * v["batch_normalization_1/gamma"] + v["batch_normalization_1/beta"],
    "dense": lambda i, v: jnp.maximum(i["x"] @ v["dense_1/kernel"] + v["dense_1/bias"], 0),
    "one_hot": lambda i, v: jax.nn.one_hot(i["labels"], 5),
    "argmax": lambda i, v: jnp.argmax(i["x"], axis=1).astype(jnp.float32),  # axis 1 in both cases
    "equal": lambda i, v: (i["a"] == i["b"]).astype(jnp.float32),
    "cast": lambda i, v: i["x"].astype(jnp.bfloat16).astype(jnp.float32),
    # BERT's ops: out-of-range ids clamp, as XLA's gather on TPU (take's mode "clip").
    "gather": lambda i, v: jnp.take(i["table"], i["ids"], axis=0, mode="clip"),
    "scatter_add": lambda i, v: jnp.zeros((6, 5), jnp.float32).at[i["ids"]].add(i["updates"]),
    "embedding": lambda i, v: jnp.take(v["word_embeddings"], i["ids"], axis=0),
    "gelu": lambda i, v: jax.nn.gelu(i["x"], approximate=False),
    "layer_norm": lambda i, v: layer_norm(i["x"], v["layer_normalization_1/gamma"], v["layer_normalization_1/beta"]),
}


def rel_error(ours, ref):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        return float("inf")
    scale = np.max(np.abs(ref)) if ref.size else 0.0
    diff = np.max(np.abs(ours - ref)) if ref.size else 0.0
    return diff / scale if scale > 0 else diff


def check_case(case, failures):
    f = CASES.get((case["op"], case["shape"])) or CASES.get(case["op"])
    if f is None:
        return 0  # dropout: our counter-based RNG has no JAX counterpart
    inputs = {k: jnp.asarray(arr(t)) for k, t in case["inputs"].items()}
    variables = {k: jnp.asarray(arr(t)) for k, t in case["variables"].items()}
    outputs = {k: arr(t) for k, t in case["outputs"].items()}
    label = f'{case["op"]} {case["shape"]}'
    checked = 0
    err = rel_error(outputs["output"], f(inputs, variables))
    checked += 1
    if err > TOLERANCE:
        failures.append(f"{label} output: rel error {err:.3g}")
    if "cotangent" in case:
        floating = {k: x for k, x in inputs.items() if x.dtype == jnp.float32}
        names = sorted(floating) + sorted(variables)

        def g(*args):
            ins = dict(inputs)
            vs = dict(variables)
            for name, a in zip(names, args):
                (ins if name in floating else vs)[name] = a
            return f(ins, vs)

        args = [floating[n] if n in floating else variables[n] for n in names]
        _, vjp = jax.vjp(g, *args)
        grads = vjp(jnp.asarray(arr(case["cotangent"])))
        for name, grad in zip(names, grads):
            err = rel_error(outputs[f"grad({name})"], grad)
            checked += 1
            if err > TOLERANCE:
                failures.append(f"{label} grad({name}): rel error {err:.3g}")
    return checked


def mnist_cnn(v, images):
    h = jnp.maximum(conv(images, v["conv2d_1/kernel"], v["conv2d_1/bias"], 1, "SAME"), 0)
    h = pool(h, 2, 2, "VALID", "max")
    h = jnp.maximum(conv(h, v["conv2d_2/kernel"], v["conv2d_2/bias"], 1, "SAME"), 0)
    h = pool(h, 2, 2, "VALID", "max")
    h = jnp.maximum(h.reshape(h.shape[0], -1) @ v["dense_1/kernel"] + v["dense_1/bias"], 0)
    return h @ v["dense_2/kernel"] + v["dense_2/bias"]


def check_mnist_cnn(model, failures):
    variables = {k: jnp.asarray(arr(t)) for k, t in model["variables"].items()}
    images = jnp.asarray(arr(model["inputs"]["image"]))
    labels = jnp.asarray(arr(model["inputs"]["label"]))
    outputs = {k: arr(t) for k, t in model["outputs"].items()}

    def loss_fn(v):
        logits = mnist_cnn(v, images)
        return jnp.mean(xent(labels, logits)), logits

    (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(variables)
    checked = 0
    for name, ours, ref in [("logits", outputs["logits"], logits), ("loss", outputs["loss"], loss)] + [
        (f"grad({k})", outputs[f"grad({k})"], g) for k, g in grads.items()
    ]:
        err = rel_error(ours, ref)
        checked += 1
        print(f"mnist_cnn {name}: rel error {err:.3g}")
        if err > TOLERANCE:
            failures.append(f"mnist_cnn {name}: rel error {err:.3g}")
    return checked


def main():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.argv[1], tmp], check=True)
        failures = []
        checked = 0
        for path in sorted(glob.glob(os.path.join(tmp, "case_*.json")), key=lambda p: int(p.split("_")[-1][:-5])):
            with open(path) as f:
                checked += check_case(json.load(f), failures)
        with open(os.path.join(tmp, "mnist_cnn.json")) as f:
            checked += check_mnist_cnn(json.load(f), failures)
    for failure in failures:
        print("FAILED:", failure)
    print(f"{checked - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
