"""TensorFlow reads the BERT pretraining records `tpusim data make-bert` writes, as BERT does.

Usage: check_bert_records.py TPUSIM_BINARY
For each shape (128 tokens with 20 predictions in 3 GZIP shards; 512 with 76, uncompressed):
tf.data.TFRecordDataset reads every shard (checking each CRC) and tf.io.parse_single_example
parses every record with google-research/bert run_pretraining.py's name_to_features, then casts
int64 to int32 as its _decode_record does. Each example must hold create_pretraining_data.py's
layout: [CLS] first, two [SEP]s, input_mask 1 over exactly the real tokens, segment_ids 0 up to
the first [SEP] and 1 to the second, masked_lm_positions ascending inside the real tokens and
off the specials with weight 1, then zero padding with weight 0; about 80% of the masked
positions hold [MASK]. The record counts and the first example's previews must equal what
`tpusim data inspect --json` reports.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

CLS, SEP, MASK = 101, 102, 103


def name_to_features(max_seq_length, max_predictions_per_seq):
    # run_pretraining.py's input_fn_builder, in TF2 spelling (tf.io.FixedLenFeature).
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def decode_record(record, features):
    # run_pretraining.py's _decode_record: tf.Example only supports int64, TPUs want int32.
    example = tf.io.parse_single_example(record, features)
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}


def tpusim(binary, *args):
    run = subprocess.run([binary, *args], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"FAIL: tpusim {' '.join(args)} exited {run.returncode}: {run.stderr}")
    return run.stdout


def layout_problems(ex, seq_length, max_predictions, vocab):
    """What is wrong with one parsed example's layout; empty when it holds."""
    ids, mask, seg = ex["input_ids"], ex["input_mask"], ex["segment_ids"]
    pos, lm_ids, w = ex["masked_lm_positions"], ex["masked_lm_ids"], ex["masked_lm_weights"]
    real = int(mask.sum())
    seps = np.flatnonzero(ids[:real] == SEP)
    count = int((w == 1.0).sum())
    checks = {
        "shapes": ids.shape == (seq_length,) and pos.shape == (max_predictions,) and w.dtype == np.float32,
        "[CLS] first": ids[0] == CLS,
        "mask is a prefix": np.all(mask[:real] == 1) and np.all(mask[real:] == 0),
        "two [SEP]s, the last real token": len(seps) == 2 and seps[1] == real - 1 and 2 <= seps[0] <= real - 3,
        "padding is [PAD] in segment 0": np.all(ids[real:] == 0) and np.all(seg[real:] == 0),
        "segments": len(seps) == 2 and np.all(seg[:seps[0] + 1] == 0) and np.all(seg[seps[0] + 1:real] == 1),
        "weights 1 then 0": 1 <= count and np.all(w[:count] == 1.0) and np.all(w[count:] == 0.0),
        "positions ascending in A and B": np.all(np.diff(pos[:count]) > 0) and pos[0] > 0
        and pos[count - 1] < real - 1 and not np.isin(pos[:count], seps).any(),
        "padding predictions 0": np.all(pos[count:] == 0) and np.all(lm_ids[count:] == 0),
        "ids in range": np.all((lm_ids[:count] >= 999) & (lm_ids[:count] < vocab)) and np.all(ids < vocab),
        "label 0 or 1": ex["next_sentence_labels"].shape == (1,) and ex["next_sentence_labels"][0] in (0, 1),
    }
    return [name for name, ok in checks.items() if not ok]


def check_shape(binary, tmp, seq_length, max_predictions, examples, shards, compression):
    out = os.path.join(tmp, f"bert{seq_length}")
    made = json.loads(tpusim(binary, "data", "make-bert", "--out", out, "--seq-length", str(seq_length),
                             "--examples", str(examples), "--shards", str(shards), "--compression",
                             compression, "--json"))
    files = sorted(glob.glob(os.path.join(out, "*")))
    features = name_to_features(seq_length, max_predictions)
    dataset = tf.data.TFRecordDataset(files, compression_type="" if compression == "none" else compression.upper())
    parsed = [{k: v.numpy() for k, v in decode_record(r, features).items()} for r in dataset]
    bad = {}
    masked = predictions = 0
    for i, ex in enumerate(parsed):
        for problem in layout_problems(ex, seq_length, max_predictions, made["vocab"]):
            bad.setdefault(problem, i)
        count = int(ex["masked_lm_weights"].sum())
        predictions += count
        masked += int((ex["input_ids"][ex["masked_lm_positions"][:count]] == MASK).sum())
    inspect = json.loads(tpusim(binary, "data", "inspect", "--json", *files))["files"]
    first = {f["name"]: f["preview"] for f in inspect[0]["first_example"]}
    preview = "[" + ", ".join(str(v) for v in parsed[0]["input_ids"][:4]) + ", ...]"
    ok = (made["max_predictions"] == max_predictions and len(files) == shards and len(parsed) == examples
          and [f["records"] for f in inspect] == [s["examples"] for s in made["shards"]]
          and first["input_ids"] == preview and not bad and 0.7 < masked / predictions < 0.9)
    print(f"{'ok' if ok else 'FAIL'}: {seq_length} tokens, {shards} {compression} shard(s): TensorFlow parses "
          f"{len(parsed)}/{examples} examples with run_pretraining.py's name_to_features; "
          f"{predictions} predictions, {masked / predictions:.1%} [MASK]; layout "
          f"{'holds' if not bad else 'BROKEN: ' + str(bad)}; inspect's preview {first['input_ids']} vs {preview}")
    return not ok


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        failures = check_shape(binary, tmp, 128, 20, 300, 3, "gzip")
        failures += check_shape(binary, tmp, 512, 76, 40, 1, "none")
    if failures:
        sys.exit(f"{failures} BERT record interop check(s) failed")
    print("BERT record interop: all checks pass")


if __name__ == "__main__":
    main()
