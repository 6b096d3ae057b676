"""A tiny, randomly initialised transformers causal LM with a locally trained tokenizer, for tests.

:func:`build_tiny_model` writes a directory exactly like the one a user points
``--backbone hf:PATH`` at (``save_pretrained`` of a tokenizer and of a model):

* the tokenizer is a byte-level BPE trained here with the ``tokenizers``
  library on cfjax's own prompt and SQL-domain source text (so its vocabulary
  looks like the text the backbone reads), wrapped in
  ``PreTrainedTokenizerFast`` with ``<pad>``, ``<s>`` and ``</s>`` and a chat
  template;
* the model is a 2-layer Llama (hidden size 32) initialised from a fixed seed.
  Its weights are drawn wider than usual (``initializer_range``) so that its
  logits are well separated: a greedy reply is then far from argmax ties, and
  equal across batch compositions up to float32 rounding.

Nothing is downloaded. The model writes garbage; tests use it for the
pipeline, the batching and the exact token counts, never for quality.
"""

from __future__ import annotations

import json
from pathlib import Path

#: The chat template of the tiny tokenizer: a BOS, each message in role tags ending in EOS, and
#: the assistant tag as the generation prompt.
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n"
                 "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>")

_ROOT = Path(__file__).resolve().parents[2]
_CORPUS_FILES = ("cfjax/llm/prompts.py", "cfjax/domains/sql/tasks.py", "cfjax/domains/sql/databases.py",
                 "cfjax/domains/sql/edits.py")


def corpus() -> list[str]:
    """Training text for the tokenizer: cfjax's prompt templates and SQL-domain source."""
    return [(_ROOT / f).read_text(encoding="utf-8") for f in _CORPUS_FILES]


def build_tiny_model(out: str | Path, *, vocab_size: int = 1000, seed: int = 0, chat_template: bool = True) -> Path:
    """Train the tokenizer, initialise the model and ``save_pretrained`` both into ``out``.

    Args:
      out: the directory to write (created).
      vocab_size: the BPE vocabulary size (special tokens included).
      seed: the weight initialisation seed.
      chat_template: give the tokenizer the chat template (``False``: a tokenizer without one).

    Returns:
      The directory.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(corpus(), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    if chat_template:
        tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(out)

    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         initializer_range=0.5, tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.save_pretrained(out)
    return out


def with_eos(src: str | Path, dst: str | Path, eos_token_id: int | list[int]) -> Path:
    """A copy of the model directory ``src`` whose ``generation_config.json`` declares other EOS ids."""
    import shutil

    dst = Path(dst)
    shutil.copytree(src, dst)
    p = dst / "generation_config.json"
    cfg = json.loads(p.read_text())
    cfg["eos_token_id"] = eos_token_id
    p.write_text(json.dumps(cfg, indent=2))
    return dst
