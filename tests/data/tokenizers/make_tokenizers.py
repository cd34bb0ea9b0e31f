#!/usr/bin/env python3
"""Trains small tokenizers with Hugging Face `tokenizers` and `sentencepiece` (no downloads)
and writes the parity corpus, for tests/data/tokenizers/tokenizer_parity_test.py and
bench/tokenizer.

  make_tokenizers.py OUTDIR [SHIPPED_CORPUS]

OUTDIR/<name>/ gets tokenizer.json or tokenizer.model plus tokenizer_config.json:
  gpt2       byte-level BPE: ByteLevel pre-tokenizer (GPT-2 regex), <|endoftext|> special
  llama3     Split(Llama 3 regex, Isolated) + ByteLevel(use_regex=false), ignore_merges,
             TemplateProcessing that adds <|begin_of_text|>; Llama 3.1's 256 special tokens
             after the vocabulary in its order (<|begin_of_text|>, <|end_of_text|>,
             reserved 0-1, <|finetune_right_pad_id|>, reserved 2, the header tokens,
             <|eom_id|>, <|eot_id|>, <|python_tag|>, reserved 3-247)
  qwen2      Qwen2's byte-level BPE: normalizer NFC, Split(Qwen2 regex: single digits,
             Isolated) + ByteLevel(use_regex=false), specials <|endoftext|>, <|im_start|>,
             <|im_end|>, no BOS
  tinyllama  SentencePiece-style BPE in tokenizer.json (TinyLlama's form): normalizer
             Prepend('▁') + Replace(' ', '▁'), byte_fallback, fuse_unk, <unk> <s> </s>,
             decoder Replace + ByteFallback + Fuse + Strip; its vocabulary trained split at
             whitespace (no '▁' inside a token), as SentencePiece trains Llama's
  metaspace  Metaspace(prepend_scheme "first") pre-tokenizer with byte fallback (Mistral's
             newer tokenizer.json form); trained on whole lines (tokens such as 'e▁')
  gemma3     Gemma 3's form (transformers' GemmaTokenizer / GemmaConverter): normalizer
             Replace(' ', '▁'), pre-tokenizer Split(' ', MergedWithPrevious), BPE with
             byte_fallback and fuse_unk, <unk>; decoder Replace + ByteFallback + Fuse; BOS by
             template; google/gemma-3-*'s ids: <pad> <eos> <bos> <unk> <mask> [multimodal],
             <unused0-98>, <start_of_turn> 105, <end_of_turn> 106, newline and '▁' runs and HTML
             tags as plain added tokens, <start_of_image> 255999, <end_of_image> 256000,
             <unused99-6241>, <image_soft_token> 262144 (262,145 tokens)
  o200k_harmony gpt-oss's form (transformers' GptOssConverter, a TikTokenConverter):
             Split(tiktoken's o200k regex, Isolated) + ByteLevel(use_regex=false), ignore_merges,
             no BOS; openai/gpt-oss-*'s 21 specials at 199998-200018 (<|startoftext|>,
             <|endoftext|>, <|return|> 200002, <|constrain|>, <|channel|>, <|start|>, <|end|>,
             <|message|>, <|call|> 200012, <|endofprompt|> 200018, the reserved ones between)
  qwen3_5    Qwen3.5's form, made by transformers' own Qwen3_5Tokenizer from a small trained
             vocabulary and saved by it: NFC, Split(Qwen3.5's regex: letters with their marks
             [\p{L}\p{M}]+, single digits) + ByteLevel, no BOS; Qwen3's added tokens after the
             vocabulary in their order (<|endoftext|>, <|im_start|>, <|im_end|>, ..., <tool_call>,
             </tool_call>, ..., <think>, </think>; <think> and </think> not special);
             config.json model_type qwen3_5 (how transformers picks the class for a Qwen3.5
             folder); skipped, with a message, without transformers
  spm_bpe    SentencePiece BPE tokenizer.model with byte_fallback (Llama 2's kind)
  spm_unigram SentencePiece unigram tokenizer.model
OUTDIR/corpus.bin: the parity corpus (bytes, one case per line; some lines invalid UTF-8),
OUTDIR/train.txt: the training text.
"""
import json
import os
import sys
import unicodedata

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen2's (Qwen/Qwen2.5-7B's tokenizer.json): Llama 3's with single digits (\p{N}).
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen3.5's (transformers' models/qwen3_5/tokenization_qwen3_5.py): Qwen2's with letters and
# their combining marks together ([\p{L}\p{M}]+) and marks kept out of the punctuation run.
QWEN3_5_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen3's added tokens after its vocabulary (151643-151668 there), in order; special unless
# listed in QWEN_PLAIN.
QWEN_ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
              "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
              "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
              "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
              "<tool_response>", "</tool_response>", "<think>", "</think>"]
QWEN_PLAIN = {"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
              "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
# tiktoken's o200k_base / o200k_harmony pattern (tiktoken_ext/openai_public.py).
O200K_REGEX = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"])
# openai/gpt-oss-*'s added tokens (tokenizer_config.json's added_tokens_decoder), from 199998.
HARMONY_SPECIALS = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>",
                    200003: "<|constrain|>", 200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>",
                    200008: "<|message|>", 200012: "<|call|>", 200018: "<|endofprompt|>"}
HARMONY_SPECIALS = [HARMONY_SPECIALS.get(i, f"<|reserved_{i}|>") for i in range(199998, 200019)]
# Gemma 3's control and user-defined tokens below its text vocabulary (ids 0-106).
GEMMA3_LOW = (["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]"]
              + [f"<unused{i}>" for i in range(99)] + ["<start_of_turn>", "<end_of_turn>"])
# Llama 3.1's 256 special tokens (ids 128000-128255 there), in order.
LLAMA3_SPECIALS = (["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
                    "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
                    "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
                   + [f"<|reserved_special_token_{i}|>" for i in range(3, 248)])

# Cases for parity: Unicode scripts, whitespace runs, digits, emoji, CRLF, contractions,
# special-token text, and invalid UTF-8 (bytes objects).
CASES = [
    "Hello, world! It's a test; they'll see we're fine, I'M sure, y'all'd DON'T.",
    "  leading spaces,\ttabs\t\tand   runs    of     spaces  ",
    "trailing spaces   ",
    "line one\r\nline two\r\n\r\nline four\rcarriage\n\n\nthree newlines",
    "digits 0 12 345 6789 1234567890 3.14159 -42 1e10 ١٢٣ ४५६ ½ ²",
    "Ünïcödé: naïve café Ωμέγα Привет мир こんにちは世界 你好 안녕하세요 مرحبا שלום",
    "combining: e\u0301 a\u0308 n\u0303; zero\u200bwidth; nbsp\u00a0here; ideographic\u3000space; nel\u0085end",
    "normal forms: \u212b A\u030a \u00c5 o\u0308\u0304 \u1100\u1161\u11a8 \uac01 \ufb01 \u2460 x\u0323\u0307 1\u20442",
    "emoji: 😀 🎉🎉 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷",
    "special tokens in text: <s> </s> <unk> <|endoftext|> <|begin_of_text|> <0x41> <0xZZ>",
    # multilingual text with code, emoji and each new family's special tokens' text
    "<bos><start_of_turn>user\nÜbersetze: «¿Dónde está?» 日本語のテキスト 🙂 <end_of_turn>\n<start_of_turn>model\n"
    "def f(x):\n    return x ** 2  # квадрат 👍🏽<end_of_turn><eos><pad><mask><unused0><unused98>[multimodal]"
    "<start_of_image><image_soft_token><end_of_image>\n\n\n\t\t<table><h1>x</h1>\u2581\u2581 pre",
    "<|start|>system<|message|>Reasoning: high<|end|><|start|>user<|message|>Wie geht's? Ça va? 🤖 "
    "printf(\"%d\\n\", a[i]);<|end|><|start|>assistant<|channel|>analysis<|message|>思考中…<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>"
    "<|start|>assistant<|channel|>final<|message|>Done ✅<|return|><|startoftext|><|endoftext|>"
    "<|endofprompt|><|reserved_200000|><|reserved_200017|> IT'S I'm WE'LL don'T HTTPServer/x\r\n/\n",
    # Qwen3.5: ChatML and think tags, marks after letters (Devanagari, Thai, Hebrew points,
    # Arabic harakat, Vietnamese and stacked Latin marks NFC cannot compose), digit runs
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nहिन्दी ไทย שָׁלוֹם مَرْحَبًا Tiếng Việt "
    "q\u0307\u0323x\u0301\u0302 ǹ 2026-12-07 123456789<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    "x = 42  # ✓<tool_call>\n{\"a\": 1}\n</tool_call><|im_end|><|endoftext|><|vision_start|><|image_pad|>",
    "Titlecase ǅemal ǈubljana ᾈ; marks नमस्ते क्षि é; modifiers ʰa ˢup; HELLOworld XMLHttpRequest's URL https://x.org/a//b/",
    "unicode space runs: a\u3000\u3000b\u00a0\u00a0c\u2003\u2003\u2003d \u3000\u3000 e\u2028f\u0085\u0085g",
    "<s>at the start and at the end</s>",
    "mixed CASE words: HTTPServer getHTTPResponseCode snake_case kebab-case CamelCase",
    "punctuation!!! ??? ... --- *** ((nested)) [brackets] {braces} \"quotes\" 'single'",
    "code: for (int i = 0; i < n; ++i) { x += a[i] * b[i]; }  // comment",
    "    indented\n        more indented\n\ttab indented",
    " ",
    "a",
    "\n",
    "x" * 300,
    " " * 1000 + "after a thousand spaces",
    "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east, and Juliet is the sun.",
    b"invalid utf-8: \xff\xfe lone bytes",
    b"truncated: \xe2\x82 and \xf0\x9f\x98 end",
    b"overlong \xc0\xaf and surrogate \xed\xa0\x80 and too big \xf4\x90\x80\x80",
    b"bad continuation \xc3( and \xe0\x80\xaf and \x80\x80 stray",
    b"\xc3",
]


def case_bytes():
    return [c if isinstance(c, bytes) else c.encode("utf-8") for c in CASES]


def training_text(shipped):
    text = ""
    if shipped and os.path.exists(shipped):
        with open(shipped, encoding="utf-8") as f:
            text = f.read(200_000)
    extra = [c for c in CASES if isinstance(c, str) and len(c) < 200]
    return text + "\n" + "\n".join(extra * 20) + "\n"


def write_config(folder, **cfg):
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)


def train_hf(out, train_path):
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)

    # gpt2: byte-level BPE
    d = os.path.join(out, "gpt2")
    os.makedirs(d, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=800, special_tokens=["<|endoftext|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([train_path], tr)
    tok.save(os.path.join(d, "tokenizer.json"))
    write_config(d, bos_token="<|endoftext|>", eos_token="<|endoftext|>", add_bos_token=False,
                 add_eos_token=False, tokenizer_class="GPT2TokenizerFast")

    # llama3: Split + ByteLevel(use_regex=False), ignore_merges, BOS by template
    d = os.path.join(out, "llama3")
    os.makedirs(d, exist_ok=True)
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=900, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([train_path], tr)
    # Llama 3's layout: the BPE vocabulary, then its 256 special tokens (ids 128000-128255 in
    # the real one): the trained specials moved after the vocabulary in Llama 3.1's order.
    trained = json.loads(tok.to_str())["model"]
    vocab = {t: i for t, i in trained["vocab"].items() if t not in LLAMA3_SPECIALS}
    vocab = {t: k for k, (t, _) in enumerate(sorted(vocab.items(), key=lambda kv: kv[1]))}
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    pre, dec = tok.pre_tokenizer, tok.decoder
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    tok.pre_tokenizer, tok.decoder = pre, dec
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in LLAMA3_SPECIALS])
    bos = tok.token_to_id("<|begin_of_text|>")
    assert bos == len(vocab) and tok.get_vocab_size(with_added_tokens=True) == len(vocab) + 256
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    tok.save(os.path.join(d, "tokenizer.json"))
    write_config(d, bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>",
                 tokenizer_class="PreTrainedTokenizerFast")

    # qwen2: NFC + Split(Qwen2 regex) + ByteLevel(use_regex=False); no BOS, EOS <|endoftext|>
    d = os.path.join(out, "qwen2")
    os.makedirs(d, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=900, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([train_path], tr)
    tok.save(os.path.join(d, "tokenizer.json"))
    write_config(d, bos_token=None, eos_token="<|endoftext|>", pad_token="<|endoftext|>", errors="replace",
                 tokenizer_class="Qwen2TokenizerFast")

    # tinyllama / metaspace: SentencePiece-style BPE with byte fallback. Merges come from a
    # BpeTrainer run on '▁'-joined text (tinyllama's split at each '▁'); the vocabulary is <unk> <s> </s>, the 256 byte
    # tokens, then the trained tokens (TinyLlama's layout).
    for name in ("tinyllama", "metaspace"):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        base = Tokenizer(models.BPE())
        if name == "tinyllama":
            # Trained split at whitespace, as SentencePiece trains Llama's (split_by_whitespace):
            # no token holds '▁' after its first character, so text-to-tokens can cut at spaces.
            base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
        else:  # trained on whole lines: tokens such as 'e▁' (encoded whole by text-to-tokens)
            base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tr = trainers.BpeTrainer(vocab_size=700, show_progress=False, max_token_length=16)
        base.train([train_path], tr)
        model = json.loads(base.to_str())["model"]
        trained = sorted(model["vocab"].items(), key=lambda kv: kv[1])
        vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
        for b in range(256):
            vocab[f"<0x{b:02X}>"] = len(vocab)
        for t, _ in trained:
            if t not in vocab:
                vocab[t] = len(vocab)
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True,
                                   byte_fallback=True))
        tok.add_special_tokens([AddedToken("<unk>", normalized=False, special=True),
                                AddedToken("<s>", normalized=False, special=True),
                                AddedToken("</s>", normalized=False, special=True)])
        if name == "tinyllama":
            tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
            tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                             decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        else:
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
            tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False),
                                             decoders.ByteFallback(), decoders.Fuse()])
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
        tok.save(os.path.join(d, "tokenizer.json"))
        write_config(d, bos_token="<s>", eos_token="</s>", unk_token="<unk>", add_bos_token=True,
                     add_eos_token=False, tokenizer_class="LlamaTokenizerFast")


def train_gemma3_harmony(out, train_path):
    """gemma3 and o200k_harmony: trained small, then laid out at the published ids (a filler
    token holds each id the small vocabulary leaves empty: text never reaches one, as it holds
    a space, which Gemma's normalizer and the byte-level alphabet both replace)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers

    def trained(tok, vocab_size, alphabet=()):
        tok.train([train_path], trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, max_token_length=16,
                                                    initial_alphabet=list(alphabet)))
        model = json.loads(tok.to_str())["model"]
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
        return [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])], merges

    def filled(vocab, size):
        for k in range(size - len(vocab)):
            vocab[f"filler {k}"] = len(vocab)
        return vocab

    # gemma3: its vocabulary trained split at whitespace and single digits, as SentencePiece
    # trained Gemma's (split_by_whitespace, split_digits)
    d = os.path.join(out, "gemma3")
    os.makedirs(d, exist_ok=True)
    base = Tokenizer(models.BPE())
    base.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True),
        pre_tokenizers.Digits(individual_digits=True)])
    tokens, merges = trained(base, 1200)
    plain = (["\n" * k for k in range(1, 32)] + ["▁" * k for k in range(2, 32)] + ["\t" * k for k in range(1, 32)]
             + ["<table>", "</table>", "<tr>", "<td>", "<h1>", "</h1>", "<b>", "</b>"])
    vocab = {t: i for i, t in enumerate(GEMMA3_LOW + plain + [f"<0x{b:02X}>" for b in range(256)])}
    for t in tokens:
        vocab.setdefault(t, len(vocab))
    vocab = filled(vocab, 255999)
    for t in ["<start_of_image>", "<end_of_image>"] + [f"<unused{i}>" for i in range(99, 6242)]:
        vocab[t] = len(vocab)
    assert len(vocab) == 262144 and vocab["<start_of_turn>"] == 105 and vocab["<end_of_image>"] == 256000
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    control = set(GEMMA3_LOW[:6] + ["<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>"])
    added = GEMMA3_LOW + plain + ["<start_of_image>", "<end_of_image>"] + [f"<unused{i}>" for i in range(99, 6242)]
    tok.add_tokens([AddedToken(t, normalized=False, special=t in control) for t in added])
    tok.add_special_tokens([AddedToken("<image_soft_token>", normalized=False, special=True)])
    assert tok.token_to_id("<image_soft_token>") == 262144
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B",
                                                       special_tokens=[("<bos>", 2)])
    tok.save(os.path.join(d, "tokenizer.json"))
    write_config(d, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>", add_bos_token=True,
                 add_eos_token=False, tokenizer_class="GemmaTokenizer")

    # o200k_harmony: byte-level BPE on tiktoken's o200k split, ignore_merges (TikTokenConverter)
    d = os.path.join(out, "o200k_harmony")
    os.makedirs(d, exist_ok=True)
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(O200K_REGEX), behavior="isolated", invert=False),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    base = Tokenizer(models.BPE())
    base.pre_tokenizer = pre
    tokens, merges = trained(base, 1200, pre_tokenizers.ByteLevel.alphabet())
    vocab = filled({t: i for i, t in enumerate(tokens)}, 199998)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, ignore_merges=True))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in HARMONY_SPECIALS])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    assert tok.token_to_id("<|start|>") == 200006 and tok.get_vocab_size(with_added_tokens=True) == 200019
    tok.save(os.path.join(d, "tokenizer.json"))
    write_config(d, bos_token="<|startoftext|>", eos_token="<|return|>", pad_token="<|endoftext|>",
                 tokenizer_class="PreTrainedTokenizerFast")


def train_qwen3_5(out, train_path):
    """qwen3_5: the vocabulary trained on Qwen3.5's split, then the tokenizer built and saved by
    transformers' Qwen3_5Tokenizer (its normalizer, pre-tokenizer and decoder, not ours)."""
    try:
        from transformers.models.qwen3_5.tokenization_qwen3_5 import Qwen3_5Tokenizer
    except ImportError as e:
        print(f"make_tokenizers: qwen3_5 not made: {e} (transformers 5.24 makes it)")
        return
    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    base = Tokenizer(models.BPE())
    base.normalizer = normalizers.NFC()
    base.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN3_5_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    # the training text and the cases with marks after letters, so that merges join them
    marked = [c for c in CASES if isinstance(c, str) and any(unicodedata.category(ch)[0] == "M" for ch in c)]
    with open(train_path, encoding="utf-8") as f:
        text = f.read()
    base.train_from_iterator([text] + marked * 20, trainers.BpeTrainer(
        vocab_size=1100, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    model = json.loads(base.to_str())["model"]
    vocab = {t: k for k, (t, _) in enumerate(sorted(model["vocab"].items(), key=lambda kv: kv[1]))}
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tok = Qwen3_5Tokenizer(vocab=vocab, merges=merges)
    tok.add_tokens([AddedToken(t, normalized=False, special=t not in QWEN_PLAIN) for t in QWEN_ADDED])
    assert tok.convert_tokens_to_ids("</think>") == len(vocab) + len(QWEN_ADDED) - 1
    d = os.path.join(out, "qwen3_5")
    tok.save_pretrained(d)
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"]}, f, indent=1)


def train_spm(out, train_path):
    import sentencepiece as spm
    for name, kind in (("spm_bpe", "bpe"), ("spm_unigram", "unigram")):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        spm.SentencePieceTrainer.train(input=train_path, model_prefix=os.path.join(d, "tokenizer"),
                                       vocab_size=600, model_type=kind, byte_fallback=(kind == "bpe"),
                                       character_coverage=0.9995, bos_id=1, eos_id=2, unk_id=0,
                                       minloglevel=2, num_threads=1)
        os.remove(os.path.join(d, "tokenizer.vocab"))
        write_config(d, bos_token="<s>", eos_token="</s>", add_bos_token=True, add_eos_token=False,
                     tokenizer_class="LlamaTokenizer")


def fresh(out, shipped=None):
    """OUT emptied, then the tokenizers made in it (a child process, as from the command line)."""
    import shutil
    import subprocess
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    subprocess.run([sys.executable, os.path.abspath(__file__), out] + ([shipped] if shipped else []), check=True)


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    train_path = os.path.join(out, "train.txt")
    with open(train_path, "w", encoding="utf-8") as f:
        f.write(training_text(sys.argv[2] if len(sys.argv) == 3 else None))
    with open(os.path.join(out, "corpus.bin"), "wb") as f:
        f.write(b"\n".join(case_bytes()))
    train_hf(out, train_path)
    train_gemma3_harmony(out, train_path)
    train_qwen3_5(out, train_path)
    train_spm(out, train_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
