"""`tpusim analyze` reads a profile another tool wrote: JAX's own profiler on this machine's CPU
(`jax.profiler.trace`) profiles five steps of a small jitted training step, each in a
StepTraceAnnotation, after one warm-up step outside the profile. tpusim finds the five steps and
exactly the XLA ops JAX compiled for the step (the ENTRY computation's instructions less its
parameters and result tuple, from the compiled module's own text), each run once a step.

Usage: check_jax_profile.py TPUSIM
"""
import glob
import json
import re
import subprocess
import sys
import tempfile

STEPS = 5


def profile(log_dir):
    import jax
    import jax.numpy as jnp

    def loss(w, x, y):
        h = jnp.tanh(x @ w[0])
        return jnp.mean((h @ w[1] - y) ** 2)

    @jax.jit
    def train_step(w, x, y):
        grads = jax.grad(loss)(w, x, y)
        return [wi - 0.1 * gi for wi, gi in zip(w, grads)]

    key = jax.random.PRNGKey(0)
    w = [jax.random.normal(key, (64, 128)), jax.random.normal(key, (128, 10))]
    x, y = jnp.ones((32, 64)), jnp.zeros((32, 10))
    hlo = train_step.lower(w, x, y).compile().as_text()
    w = jax.block_until_ready(train_step(w, x, y))  # compiled and run before the profile
    jax.profiler.start_trace(log_dir)
    for step in range(STEPS):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            w = jax.block_until_ready(train_step(w, x, y))
    jax.profiler.stop_trace()
    return hlo


def entry_ops(hlo):
    """The names of the ENTRY computation's instructions that run: not parameters or tuples."""
    entry = hlo[hlo.index("\nENTRY ") + 1:]
    entry = entry[: entry.index("\n}")]
    ops = set()
    for line in entry.splitlines()[1:]:
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = .*?\b([a-z\-]+)\(", line)
        assert m, line
        if m.group(2) not in ("parameter", "tuple", "get-tuple-element", "constant", "bitcast"):
            ops.add(m.group(1))
    return ops


def main():
    tpusim = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        want = entry_ops(profile(tmp))
        (path,) = glob.glob(f"{tmp}/plugins/profile/*/*.xplane.pb")
        out = subprocess.run([tpusim, "analyze", path, "--json", "--ops", "0"], check=True,
                             capture_output=True, text=True).stdout
        analysis = json.loads(out)
        assert analysis["steps"] == STEPS, analysis["steps"]
        print(f"tpusim analyze: {analysis['steps']} steps of JAX's CPU profile: ok")
        got = {op["name"]: op for op in analysis["ops"]}
        assert set(got) == want, (sorted(got), sorted(want))
        for name, op in got.items():
            assert op["executions"] == STEPS, (name, op)
            assert op["seconds_per_step"] > 0, (name, op)
        print(f"the {len(want)} XLA ops JAX compiled for the step, each run once a step: ok")
        text = subprocess.run([tpusim, "analyze", path], check=True, capture_output=True,
                              text=True).stdout
        assert f"average of {STEPS} step(s)" in text, text
        assert f"ops ({min(10, len(want))} of {len(want)}" in text, text


if __name__ == "__main__":
    main()
