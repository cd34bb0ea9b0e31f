#!/usr/bin/env python3
"""Writes examples/tokenizer-bytes/: a Hugging Face byte-level tokenizer whose ids are the
bytes themselves (0-255) plus one special token, </s> = 256, the EOS that ends every
example of `zt convert sft-to-tokens`. So the `tiny` preset (model.vocab = 257) can be
pre-trained on text and fine-tuned on instruction data with one tokenizer; the Python
`tokenizers` package checks the result (ids == UTF-8 bytes).

  python3 examples/make_byte_tokenizer.py [OUT_DIR]
"""
import json
import os
import sys


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (what the ByteLevel pre-tokenizer emits)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "tokenizer-bytes")
    os.makedirs(out, exist_ok=True)
    m = bytes_to_unicode()
    vocab = {m[b]: b for b in range(256)}
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": 256, "content": "</s>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")
    cfg = {"add_bos_token": False, "add_eos_token": False, "eos_token": "</s>",
           "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 256}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("wrote", out, "(not checked: python package tokenizers missing)")
        return 0
    t = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    text = "Hello, wörld! 12 + 30 = 42\n\t</s>"
    ids = t.encode(text, add_special_tokens=False).ids
    expect = list("Hello, wörld! 12 + 30 = 42\n\t".encode()) + [256]
    assert ids == expect, (ids, expect)
    print("wrote", out, "- ids are the UTF-8 bytes (checked with tokenizers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
