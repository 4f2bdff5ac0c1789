"""TensorFlow, the format's owner, against tpusim's TFRecord reader and writer.

Usage: check_tfrecord.py TPUSIM_BINARY IMAGES_IDX LABELS_IDX
1. TensorFlow writes tf.Example records uncompressed, GZIP and ZLIB; `tpusim data inspect --json`
   must find the compression itself, count every record, and report the first example's features.
2. `tpusim data convert-idx` writes the IDX pair as shards in each compression; TensorFlow's
   TFRecordDataset reads every record (checking each CRC) and parse_single_example must give back
   the IDX pixels and labels exactly. JPEG shards decode in TensorFlow to its own bilinear upscale
   of the IDX image, within JPEG's loss.
3. A file with one flipped data byte: TensorFlow and tpusim both refuse it, and tpusim names the
   byte offset of the bad record.
"""
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

LIMIT = 1000  # examples converted per compression


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        raw = f.read()
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw[4 + 4 * rank:], dtype=np.uint8).reshape(dims)


def tpusim(binary, *args, check=True):
    run = subprocess.run([binary, *args], capture_output=True, text=True)
    if check and run.returncode != 0:
        sys.exit(f"FAIL: tpusim {' '.join(args)} exited {run.returncode}: {run.stderr}")
    return run


def tf_writes_tpusim_reads(binary, tmp):
    failures = 0
    for compression in ["", "GZIP", "ZLIB"]:
        path = os.path.join(tmp, f"tf_{compression or 'none'}.tfrecord")
        with tf.io.TFRecordWriter(path, options=tf.io.TFRecordOptions(compression_type=compression)) as w:
            for i in range(257):
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i, -i])),
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5 * i] * (i % 7 + 1))),
                    "blob": tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes(range(i % 256))])),
                }))
                w.write(ex.SerializeToString())
        summary = json.loads(tpusim(binary, "data", "inspect", "--json", path).stdout)["files"][0]
        want_compression = (compression or "none").lower()
        first = {f["name"]: f for f in summary["first_example"]}
        ok = (summary["records"] == 257 and summary["compression"] == want_compression
              and summary["tf_example"] and first["id"]["kind"] == "int64" and first["id"]["values"] == 2
              and first["x"]["kind"] == "float" and first["blob"]["kind"] == "bytes")
        print(f"{'ok' if ok else 'FAIL'}: TensorFlow {want_compression} file: tpusim reads "
              f"{summary['records']} records, compression {summary['compression']}")
        failures += not ok
    return failures


def tpusim_writes_tf_reads(binary, tmp, images_idx, labels_idx):
    images, labels = read_idx(images_idx)[:LIMIT], read_idx(labels_idx)[:LIMIT]
    spec = {"label": tf.io.FixedLenFeature([], tf.int64), "image_raw": tf.io.FixedLenFeature([], tf.string)}
    failures = 0
    for compression, shards in [("none", 1), ("gzip", 3), ("zlib", 2)]:
        out = os.path.join(tmp, f"fashion_{compression}")
        tpusim(binary, "data", "convert-idx", "--images", images_idx, "--labels", labels_idx, "--out", out,
               "--shards", str(shards), "--compression", compression, "--limit", str(LIMIT))
        files = sorted(glob.glob(os.path.join(out, "*")))
        tf_compression = "" if compression == "none" else compression.upper()
        got_images, got_labels = [], []
        for rec in tf.data.TFRecordDataset(files, compression_type=tf_compression):
            ex = tf.io.parse_single_example(rec, spec)
            got_images.append(tf.io.decode_raw(ex["image_raw"], tf.uint8).numpy().reshape(28, 28))
            got_labels.append(int(ex["label"]))
        ok = (len(files) == shards and len(got_labels) == LIMIT and np.array_equal(np.stack(got_images), images)
              and np.array_equal(np.array(got_labels), labels))
        print(f"{'ok' if ok else 'FAIL'}: tpusim {compression} files ({len(files)} shards): TensorFlow reads "
              f"{len(got_labels)} examples, pixels and labels {'equal' if ok else 'DIFFER'}")
        failures += not ok

    # JPEG shards: TensorFlow decodes our JPEGs, and they match TensorFlow's own bilinear upscale
    # of the IDX image (to JPEG's loss at quality 95).
    out = os.path.join(tmp, "fashion_jpeg")
    tpusim(binary, "data", "convert-idx", "--images", images_idx, "--labels", labels_idx, "--out", out,
           "--jpeg", "--image-size", "64", "--quality", "95", "--limit", "100")
    worst = 0.0
    count = 0
    for i, rec in enumerate(tf.data.TFRecordDataset(sorted(glob.glob(os.path.join(out, "*"))))):
        ex = tf.io.parse_single_example(rec, spec)
        decoded = tf.io.decode_jpeg(ex["image_raw"], channels=1).numpy().astype(np.float32)
        want = tf.image.resize(images[i][..., None].astype(np.float32), [64, 64], method="bilinear").numpy()
        worst = max(worst, float(np.mean(np.abs(decoded - np.clip(np.round(want), 0, 255)))))
        count += int(ex["label"]) == labels[i]
    ok = count == 100 and worst < 3.0
    print(f"{'ok' if ok else 'FAIL'}: tpusim JPEG shards: TensorFlow decodes {count}/100 with their labels; worst mean "
          f"|decoded - tf.image.resize| = {worst:.3f} (limit 3)")
    failures += not ok
    return failures


def both_refuse_corruption(binary, tmp):
    path = os.path.join(tmp, "corrupt.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for payload in [b"first", b"second", b"third"]:
            w.write(payload)
    raw = bytearray(open(path, "rb").read())
    second = 16 + len(b"first")
    raw[second + 12 + 2] ^= 0x10  # a data byte of the second record
    open(path, "wb").write(bytes(raw))
    try:
        list(tf.data.TFRecordDataset(path))
        tf_refuses = False
    except tf.errors.DataLossError:
        tf_refuses = True
    run = tpusim(binary, "data", "inspect", path, check=False)
    ours = run.returncode == 1 and f"byte offset {second}" in run.stderr
    lenient = json.loads(tpusim(binary, "data", "inspect", "--skip-corrupt", "--json", path).stdout)["files"][0]
    ok = tf_refuses and ours and lenient["records"] == 2 and lenient["skipped_corrupt"] == 1
    print(f"{'ok' if ok else 'FAIL'}: corrupt record: TensorFlow refuses={tf_refuses}, tpusim says "
          f"'{run.stderr.strip()}', --skip-corrupt keeps {lenient['records']} of 3")
    return not ok


def main():
    binary, images_idx, labels_idx = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        failures = tf_writes_tpusim_reads(binary, tmp)
        failures += tpusim_writes_tf_reads(binary, tmp, images_idx, labels_idx)
        failures += both_refuse_corruption(binary, tmp)
    if failures:
        sys.exit(f"{failures} TFRecord interop check(s) failed")
    print("TFRecord interop: all checks pass")


if __name__ == "__main__":
    main()
