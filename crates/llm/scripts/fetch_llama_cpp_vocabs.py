#!/usr/bin/env python3
"""Fetch llama.cpp's tokenizer test vocabularies into a folder.

llama.cpp ships vocab-only GGUF files with test inputs and expected ids
(`models/ggml-vocab-*.gguf`, `.gguf.inp`, `.gguf.out`). They are too large for the
repository; the llama-cpp-python source package on PyPI vendors them. This script
downloads that sdist (pinned version and SHA-256), and unpacks only
`vendor/llama.cpp/models/ggml-vocab-*` into DIR, flat. tempra's
`crates/llm/tests/tokenizer_llama_cpp_vocabs.rs` and `benches/tokenize.rs` read them
through `TEMPRA_VOCAB_DIR=DIR`.

    crates/llm/scripts/fetch_llama_cpp_vocabs.py target/llama-cpp-vocab

Idempotent: when DIR already holds the files of this version (a `.fetched` stamp naming
the sdist and its hash, and every file it lists), nothing is downloaded. The sdist is
found through PyPI's Simple API (PEP 691 JSON; `PIP_INDEX_URL` is honoured), not
`pip download`, which would build the package's metadata (and, with
`--no-binary :all:`, CMake from source) just to download it. Any failure (network, hash
mismatch, missing files) exits non-zero with a message: CI must not go on without them.

Standard library only.
"""

import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request

PACKAGE = "llama-cpp-python"
VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
MEMBER_PREFIX = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/models/ggml-vocab-"
STAMP = ".fetched"
# Files the tests cannot do without: a sanity check on what was unpacked.
REQUIRED = [
    f"ggml-vocab-{name}.gguf{ext}"
    for name in ["llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2"]
    for ext in ["", ".inp", ".out"]
]


def fail(message):
    print(f"fetch_llama_cpp_vocabs: {message}", file=sys.stderr)
    sys.exit(1)


def already_fetched(dest):
    """Whether `dest` holds a complete unpacking of this sdist."""
    try:
        with open(os.path.join(dest, STAMP), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    if not lines or lines[0] != f"{SDIST} {SHA256}":
        return False
    return all(os.path.isfile(os.path.join(dest, name)) for name in lines[1:])


def sdist_url():
    """The sdist's URL, from the package index's Simple API."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    request = urllib.request.Request(
        f"{index}/{PACKAGE}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        listing = json.load(response)
    for entry in listing.get("files", []):
        if entry.get("filename") == SDIST:
            listed = entry.get("hashes", {}).get("sha256")
            if listed is not None and listed != SHA256:
                fail(f"the index lists {SDIST} with sha256 {listed}, expected {SHA256}")
            return entry["url"]
    fail(f"{index}/{PACKAGE}/ does not list {SDIST}")


def download(url, path):
    """Downloads `url` to `path`, checking the pinned SHA-256."""
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=600) as response, open(path, "wb") as out:
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != SHA256:
        fail(f"{SDIST}: sha256 {digest.hexdigest()}, expected {SHA256}")


def unpack(archive, dest):
    """Extracts the `ggml-vocab-*` members of `archive` into `dest`, flat; returns their names."""
    names = []
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if not member.name.startswith(MEMBER_PREFIX) or not member.isfile():
                continue
            name = os.path.basename(member.name)
            source = tar.extractfile(member)
            with open(os.path.join(dest, name), "wb") as out:
                shutil.copyfileobj(source, out)
            names.append(name)
    return sorted(names)


def main():
    if len(sys.argv) != 2:
        fail("usage: fetch_llama_cpp_vocabs.py DIR")
    dest = sys.argv[1]
    if already_fetched(dest):
        print(f"fetch_llama_cpp_vocabs: {dest} already holds the {SDIST} vocabularies")
        return
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = os.path.join(tmp, SDIST)
        try:
            url = sdist_url()
            print(f"fetch_llama_cpp_vocabs: downloading {url}")
            download(url, archive)
        except OSError as e:
            fail(f"downloading {SDIST}: {e}")
        names = unpack(archive, dest)
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        fail(f"{SDIST} lacks {', '.join(missing)}")
    with open(os.path.join(dest, STAMP), "w", encoding="utf-8") as f:
        f.write("\n".join([f"{SDIST} {SHA256}", *names]) + "\n")
    print(f"fetch_llama_cpp_vocabs: {len(names)} files in {dest}")


if __name__ == "__main__":
    main()
