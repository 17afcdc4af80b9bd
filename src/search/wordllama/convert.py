"""Make tokens.bin, the static token embeddings tool search pools into a vector per text.

Source: the `wordllama` wheel 0.4.0.post1 from PyPI (MIT, see LICENSE here), its model
`l2_supercat_256` (static embeddings of the Llama 2 tokenizer's 32,000 tokens, trained for
sentence similarity; Matryoshka-trained, so a prefix of the dimensions is a smaller model).

Kept: the tokens made only of ASCII and the word-start mark, the first 128 dimensions,
quantized to int8 with one scale per token, and the BPE merges between kept tokens in their
rank order. Run from an unpacked wheel:

    pip download --no-deps wordllama==0.4.0.post1 && unzip wordllama-*.whl -d wl
    python3 convert.py wl/wordllama  # needs numpy and safetensors

File layout (little-endian): b"OPWL", u32 tokens, u32 dims, u32 merges; per token a u8
length and its bytes (the word-start mark written as a space); per merge u16 left, u16
right, u16 merged token; per token an f32 scale; tokens x dims int8 weights.
"""

import json
import struct
import sys

import numpy as np
from safetensors.numpy import load_file

DIMS = 128
MARK = "\u2581"

root = sys.argv[1]
tokenizer = json.load(open(f"{root}/tokenizers/l2_supercat_tokenizer_config.json"))
weights = load_file(f"{root}/weights/l2_supercat_256.safetensors")["embedding.weight"]
vocab = tokenizer["model"]["vocab"]

kept = sorted(
    (i, piece)
    for piece, i in vocab.items()
    if all(ord(c) < 128 or c == MARK for c in piece)
    and not (piece.startswith("<") and piece.endswith(">"))
)
new_id = {piece: n for n, (_, piece) in enumerate(kept)}
assert all(" " not in piece for _, piece in kept)
assert len(kept) < 65536

merges = []
for m in tokenizer["model"]["merges"]:
    left, right = m.split(" ") if isinstance(m, str) else m
    if left in new_id and right in new_id and left + right in new_id:
        merges.append((new_id[left], new_id[right], new_id[left + right]))

rows = weights[[i for i, _ in kept], :DIMS].astype(np.float32)
scales = np.maximum(np.abs(rows).max(axis=1), 1e-12) / 127.0
quantized = np.round(rows / scales[:, None]).astype(np.int8)

out = bytearray(b"OPWL")
out += struct.pack("<III", len(kept), DIMS, len(merges))
for _, piece in kept:
    raw = piece.replace(MARK, " ").encode("ascii")
    out += struct.pack("<B", len(raw)) + raw
for left, right, merged in merges:
    out += struct.pack("<HHH", left, right, merged)
out += scales.astype("<f4").tobytes()
out += quantized.tobytes()
open("tokens.bin", "wb").write(out)
print(f"{len(kept)} tokens, {DIMS} dims, {len(merges)} merges, {len(out)} bytes")
