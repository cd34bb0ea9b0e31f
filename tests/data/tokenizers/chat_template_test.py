#!/usr/bin/env python3
"""`zt convert sft-to-tokens --format chat` against Hugging Face's apply_chat_template.

  chat_template_test.py ZT WORKDIR [SHIPPED_CORPUS]

make_tokenizers.py trains small tokenizers (no downloads); each case copies one, adds the
template's special tokens (Python's tokenizers) and writes the family's official template
string into tokenizer_config.json:
  llama2  Llama-2-*-chat-hf's template on the TinyLlama-form tokenizer (<s> </s>, Prepend)
  llama3  Meta-Llama-3-8B-Instruct's template on the Llama 3-form tokenizer
  chatml  the ChatML template (transformers' docs, OpenHermes) on the GPT-2 and the
          TinyLlama forms
  qwen    Qwen2.5 instruct's template (default system turn; tools branch shortened) on the
          GPT-2 form (byte-level BPE, as Qwen2's)
  mistral Mistral-7B-Instruct-v0.3's template (tools branches left out; the system message
          before the last message when that is a user turn) on the Metaspace form with
          [INST] and [/INST] special, and on the TinyLlama form as text
  gemma3  Gemma 3 instruct's template on the Gemma 3 form (262,145 tokens, byte fallback)
  gpt-oss gpt-oss's harmony template (tools branches left out; today's date) on the
          o200k_harmony form, with developer messages and thinking (its own conversations)
  qwen3.5 Qwen3.5's template (vision and tool branches shortened) in chat_template.jinja
          (tokenizer_config.json holding ChatML's: the file wins, as in transformers) on the
          Qwen3.5 form made by transformers' Qwen3_5Tokenizer, with reasoning_content, <think>
          blocks in contents, reasoning before the last user query (dropped), a
          <tool_response> user turn; the same ids with enable_thinking=False
For every conversation the token ids zt writes (one example per row, --no-pack) equal
transformers' `apply_chat_template(messages, tokenize=True)`, and the loss mask is 1
exactly on the tokens that overlap an assistant turn's text and its end token (located in
transformers' rendered text, mapped to tokens by the fast tokenizer's offsets), except an
example's first token (gpt-oss: all the turn writes after "<|start|>assistant", channel
tags and the last turn's thinking included; qwen3.5: all after "<|im_start|>assistant\n",
the think block included). `--chat-template auto` recognises each
template; an unknown one, Qwen3's, variants (Llama 3.1's, Mistral v0.2's, Unsloth's
gpt-oss, Qwen3.6's preserve_thinking), a developer message, thinking or reasoning_content
where the template writes none, a Qwen3.5 conversation without a user query, and malformed lines are
exit 2 naming the option or file:line and the field.
Exit 77 (CTest skip) without tokenizers, transformers (with jinja2) or h5py.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "ckpt", "hf")]
import make_tokenizers  # noqa: E402
from hf_common import Checker, require  # noqa: E402  (exit 77 naming a missing module)

ZT_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
    "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) "
    "%}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
    "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}")
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}")
# Qwen2.5 instruct's template (Qwen/Qwen2.5-7B-Instruct's tokenizer_config.json; the tools
# branch shortened: zt's conversations carry no tools, so it is never taken).
QWEN = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n<|im_end|>\\n' }}{%- else %}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}{%- endif %}{%- for message in messages %}"
    "{%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
    "(message.role == \"assistant\" and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
# Mistral 7B instruct v0.3's template (mistralai/Mistral-7B-Instruct-v0.3's
# tokenizer_config.json; the tools branches left out: zt's conversations carry no tools).
# The system message goes before the content of the user message only when that message
# is the last one (`loop.last`).
MISTRAL = (
    "{%- if messages[0][\"role\"] == \"system\" %}{%- set system_message = messages[0][\"content\"] %}"
    "{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}"
    "{%- set ns = namespace() %}{%- set ns.index = 0 %}{%- for message in loop_messages %}"
    "{%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0) %}"
    "{{- raise_exception(\"After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...\") }}{%- endif %}{%- set ns.index = ns.index + 1 %}{%- endfor %}"
    "{{- bos_token }}{%- for message in loop_messages %}{%- if message[\"role\"] == \"user\" %}"
    "{%- if loop.last and system_message is defined %}"
    "{{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}"
    "{%- else %}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}{%- endif %}"
    "{%- elif message[\"role\"] == \"assistant\" %}{{- \" \" + message[\"content\"]|trim + eos_token}}"
    "{%- else %}{{- raise_exception(\"Only user and assistant roles are supported, with the exception of an "
    "initial optional system message!\") }}{%- endif %}{%- endfor %}")
# Gemma 3 instruct's template (google/gemma-3-1b-it's tokenizer_config.json): BOS, the system
# message + "\n\n" before the first user turn, "model" for the assistant, content trimmed.
GEMMA3 = (
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}{%- if messages[0]['content'] is string -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- else -%}"
    "{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}{%- endif -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = \"\" -%}"
    "{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}{%- endif -%}"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}"
    "{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}"
    "{%- if message['content'] is string -%}{{ message['content'] | trim }}"
    "{%- elif message['content'] is iterable -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{ '<start_of_image>' }}{%- elif item['type'] == 'text' -%}"
    "{{ item['text'] | trim }}{%- endif -%}{%- endfor -%}{%- else -%}{{ raise_exception(\"Invalid content type\") }}"
    "{%- endif -%}{{ '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}"
    "{%- endif -%}")
# gpt-oss's template (openai/gpt-oss-20b's chat_template.jinja; the tool, builtin-tool and
# tool-call branches left out: zt's conversations carry no tools, so they are never taken).
GPT_OSS = (
    "{%- macro build_system_message() -%}{%- if model_identity is not defined %}"
    "{%- set model_identity = \"You are ChatGPT, a large language model trained by OpenAI.\" %}{%- endif %}"
    "{{- model_identity + \"\\n\" }}{{- \"Knowledge cutoff: 2024-06\\n\" }}"
    "{{- \"Current date: \" + strftime_now(\"%Y-%m-%d\") + \"\\n\\n\" }}"
    "{%- if reasoning_effort is not defined %}{%- set reasoning_effort = \"medium\" %}{%- endif %}"
    "{{- \"Reasoning: \" + reasoning_effort + \"\\n\\n\" }}"
    "{{- \"# Valid channels: analysis, commentary, final. Channel must be included for every message.\" }}"
    "{%- if tools -%}{{- \"\\nCalls to these tools must go to the commentary channel: 'functions'.\" }}{%- endif -%}"
    "{%- endmacro -%}{{- \"<|start|>system<|message|>\" }}{{- build_system_message() }}{{- \"<|end|>\" }}"
    "{%- if messages[0].role == \"developer\" or messages[0].role == \"system\" %}"
    "{%- set developer_message = messages[0].content %}{%- set loop_messages = messages[1:] %}{%- else %}"
    "{%- set developer_message = \"\" %}{%- set loop_messages = messages %}{%- endif %}"
    "{%- if developer_message or tools %}{{- \"<|start|>developer<|message|>\" }}{%- if developer_message %}"
    "{{- \"# Instructions\\n\\n\" }}{{- developer_message }}{%- endif %}{{- \"<|end|>\" }}{%- endif %}"
    "{%- for message in loop_messages -%}{%- if message.role == 'assistant' -%}"
    "{%- if \"<|channel|>analysis<|message|>\" in message.content or \"<|channel|>final<|message|>\" in message.content %}"
    "{{- raise_exception(\"channel tags in the content field\") }}{%- endif %}{%- if \"thinking\" in message %}"
    "{%- if \"<|channel|>analysis<|message|>\" in message.thinking or \"<|channel|>final<|message|>\" in message.thinking %}"
    "{{- raise_exception(\"channel tags in the thinking field\") }}{%- endif %}{%- endif %}"
    "{%- if loop.last and not add_generation_prompt %}{%- if \"thinking\" in message %}"
    "{{- \"<|start|>assistant<|channel|>analysis<|message|>\" + message.thinking + \"<|end|>\" }}{%- endif %}"
    "{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|return|>\" }}{%- else %}"
    "{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|end|>\" }}{%- endif %}"
    "{%- elif message.role == 'user' -%}{{- \"<|start|>user<|message|>\" + message.content + \"<|end|>\" }}"
    "{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}\n<|start|>assistant\n{%- endif -%}")
# Qwen3.5's template (Qwen/Qwen3.5-*'s chat_template.jinja as its users quote it: the
# render_content macro, the last user query, think blocks after it, a generation prompt that
# opens <think>; the vision items, tools, tool calls and tool messages shortened: zt's
# conversations carry none, so those branches are never taken).
QWEN3_5 = r"""{%- macro render_content(content, do_vision_count, is_system_content=false) %}
    {%- if content is string %}
        {{- content }}
    {%- elif content is none or content is undefined %}
        {{- '' }}
    {%- else %}
        {{- raise_exception('Unexpected content type.') }}
    {%- endif %}
{%- endmacro %}
{%- if not messages %}
    {{- raise_exception('No messages provided.') }}
{%- endif %}
{%- if tools and tools is iterable and tools is not mapping %}
    {{- '<|im_start|>system\n# Tools<|im_end|>\n' }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {%- set content = render_content(messages[0].content, false, true)|trim %}
        {{- '<|im_start|>system\n' + content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" %}
        {%- set content = render_content(message.content, false)|trim %}
        {%- if not(content.startswith('<tool_response>') and content.endswith('</tool_response>')) %}
            {%- set ns.multi_step_tool = false %}
            {%- set ns.last_query_index = index %}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if ns.multi_step_tool %}
    {{- raise_exception('No user query found in messages.') }}
{%- endif %}
{%- for message in messages %}
    {%- set content = render_content(message.content, true)|trim %}
    {%- if message.role == "system" %}
        {%- if not loop.first %}
            {{- raise_exception('System message must be at the beginning.') }}
        {%- endif %}
    {%- elif message.role == "user" %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- set reasoning_content = reasoning_content|trim %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content + '\n</think>\n\n' + content }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- else %}
        {{- raise_exception('Unexpected message role.') }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- else %}
        {{- '<think>\n' }}
    {%- endif %}
{%- endif %}"""
# Qwen3.6's keeps earlier turns' reasoning with preserve_thinking: a variant zt refuses.
QWEN3_6_LIKE = QWEN3_5.replace("{%- if loop.index0 > ns.last_query_index %}",
                               "{%- if (preserve_thinking is defined and preserve_thinking is true) or "
                               "(loop.index0 > ns.last_query_index) %}")
# Qwen3's template (no <think> opened by the generation prompt; a think block only in the
# last turns that have reasoning): not Qwen3.5's, not recognised.
QWEN3_LIKE = QWEN3_5.replace("{%- else %}\n        {{- '<think>\\n' }}\n", "")
# Conversations Qwen3.5's template renders its own way: reasoning_content, a <think> block in
# the content, reasoning in turns before the last user query (dropped), assistant turns in a
# row, a <tool_response> user turn (not a query), contents to trim.
QWEN3_5_CONVERSATIONS = [
    [{"role": "user", "content": "2 + 2?"},
     {"role": "assistant", "reasoning_content": "\nSimple sum: 4.\n", "content": "4"}],
    [{"role": "system", "content": "  Be brief.\n"}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "<think>\nA greeting… 😀\n</think>\n\nHello!"},
     {"role": "user", "content": " Bye \n"}, {"role": "assistant", "content": "\n<think>r</think>\n\nBye.  "}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "reasoning_content": "dropped", "content": "a1"},
     {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"},
     {"role": "assistant", "reasoning_content": "", "content": "a3 <think> not closed"}],
    [{"role": "user", "content": "Look it up."}, {"role": "assistant", "content": "Calling."},
     {"role": "user", "content": "<tool_response>\n42\n</tool_response>"}, {"role": "assistant", "content": "42."}],
]
# Unsloth's gpt-oss template ends the last final message with <|end|>: a variant zt refuses.
GPT_OSS_UNSLOTH_LIKE = GPT_OSS.replace("{%- if messages[0].role", "{%- if developer_instructions is defined %}"
                                       "{%- endif %}{%- if messages[0].role")
# Conversations only gpt-oss's template writes: a developer message, an assistant's thinking
# (written in the last turn, dropped in earlier ones), two user turns in a row, empty content.
GPT_OSS_CONVERSATIONS = [
    [{"role": "developer", "content": "Answer briefly."}, {"role": "user", "content": "2 + 2?"},
     {"role": "assistant", "thinking": "Simple sum: 4.", "content": "4"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Colour of sky?"},
     {"role": "assistant", "thinking": "dropped: not the last turn", "content": "Blue."},
     {"role": "user", "content": "Grass? 🌱"}, {"role": "assistant", "thinking": "Grün… 😀", "content": "Green."}],
    [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}, {"role": "assistant", "content": ""}],
]
# Mistral 7B instruct v0.2's (" [INST] ... [/INST]", the system message in the first turn):
# a variant zt refuses by its " [/INST]".
MISTRAL_V02_LIKE = MISTRAL.replace("\"[/INST]\"", "\" [/INST]\"")
# Llama 3.1's template opens with a default system header holding dates: a variant zt refuses.
LLAMA31_LIKE = LLAMA3.replace("{% set loop_messages", "{{- 'Cutting Knowledge Date: December 2023' }}{% set loop_messages")

# (case, base tokenizer, template, special tokens to add, end text of an assistant turn);
# the template's name is the case's up to a '-' (gpt-oss: the whole)
CASES = [
    ("gemma3", "gemma3", GEMMA3, [], "<end_of_turn>"),
    ("gpt-oss", "o200k_harmony", GPT_OSS, [], "<|return|>"),
    # Qwen3.5's form (transformers' Qwen3_5Tokenizer), its template in chat_template.jinja as
    # transformers 5 saves it
    ("qwen3.5", "qwen3_5", QWEN3_5, [], "<|im_end|>"),
    ("llama2", "tinyllama", LLAMA2, [], "</s>"),
    ("llama3", "llama3", LLAMA3, ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"], "<|eot_id|>"),
    ("chatml", "gpt2", CHATML, ["<|im_start|>", "<|im_end|>"], "<|im_end|>"),
    ("qwen", "gpt2", QWEN, ["<|im_start|>", "<|im_end|>"], "<|im_end|>"),
    ("chatml-spm-form", "tinyllama", CHATML, ["<|im_start|>", "<|im_end|>"], "<|im_end|>"),
    # Mistral v0.3's [INST] and [/INST] are control tokens of its tokenizer; on the Metaspace
    # form (Mistral's tokenizer.json) with them special, and on the TinyLlama form as text.
    ("mistral", "metaspace", MISTRAL, ["[INST]", "[/INST]"], "</s>"),
    ("mistral-text-inst", "tinyllama", MISTRAL, [], "</s>"),
]

CONVERSATIONS = [
    [{"role": "user", "content": "Hello! How are you?"},
     {"role": "assistant", "content": "I'm fine, thanks. And you?"}],
    [{"role": "system", "content": "You are a pirate. Answer like one."},
     {"role": "user", "content": "  Where is the treasure?\n"},
     {"role": "assistant", "content": "  Arr, under the old oak tree!  \n\n"},
     {"role": "user", "content": "Café 😀 naïve Ωμέγα?"},
     {"role": "assistant", "content": "Aye: café 😀, 12 345 doubloons.\nLine two\r\nthree."}],
    [{"role": "user", "content": "Count: 1 2 3"},
     {"role": "assistant", "content": "4 5 6"},
     {"role": "user", "content": "x" * 50},
     {"role": "assistant", "content": "ROMEO:\nBut soft, what light through yonder window breaks?"}],
    [{"role": "system", "content": ""},
     {"role": "user", "content": "\u3000ideographic space\u00a0and nbsp\u2003"},
     {"role": "assistant", "content": "\u00a0trimmed?\u2003"}],
    # Past 16 bytes per token of a row + 64 (issue 36 class 6): encoded from a prefix, the row
    # kept (ids and mask) equal to the first row of the whole encode. A long reply; a long
    # user turn after a short exchange (the turns after it past the row).
    [{"role": "user", "content": "Tell me all of it."},
     {"role": "assistant", "content": "They have their exits and their entrances; café 😀 one man plays many parts. " * 400}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there."},
     {"role": "user", "content": "His acts being seven ages. At first the infant, mewling. " * 600},
     {"role": "assistant", "content": "A life."}],
    # Ends with a user turn: Mistral's template writes the system message there.
    [{"role": "system", "content": "Answer in one word."},
     {"role": "user", "content": "Sky colour?"}, {"role": "assistant", "content": " Blue. "},
     {"role": "user", "content": "And grass?\n"}],
]


def assistant_spans(text, conv, name, end):
    """Character spans of each assistant turn's text and its end token in `text` (found in
    order after the previous turn), as each family's template writes them."""
    spans, at = [], 0
    for m in conv:
        if m["role"] != "assistant":
            continue
        if name == "llama2":
            piece = " " + m["content"].strip() + " " + end
        elif name.startswith("mistral"):
            piece = " " + m["content"].strip() + end
        elif name in ("llama3", "gemma3"):
            piece = m["content"].strip() + end
        elif name == "qwen3.5":  # all after "<|im_start|>assistant\n", think block included
            k = text.index("<|im_start|>assistant\n", at) + len("<|im_start|>assistant\n")
            e = text.index(end, k) + len(end)
            spans.append((k, e))
            at = e
            continue
        elif name == "gpt-oss":  # all after "<|start|>assistant": channel tags, thinking when last
            last = m is conv[-1]
            piece = "<|channel|>final<|message|>" + m["content"] + (end if last else "<|end|>")
            if last and "thinking" in m:
                piece = "<|channel|>analysis<|message|>" + m["thinking"] + "<|end|><|start|>assistant" + piece
        else:
            piece = m["content"] + end
        k = text.index(piece, at)
        spans.append((k, k + len(piece)))
        at = k + len(piece)
    return spans


def make_case(work, name, base, template, add, transformers, tokenizers):
    folder = os.path.join(work, f"chat-{name}")
    shutil.copytree(os.path.join(work, base), folder)
    if add:
        tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        tok.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True) for t in add])
        tok.save(os.path.join(folder, "tokenizer.json"))
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    cfg = json.load(open(cfg_path))
    if name == "qwen3.5":  # transformers 5's file, which wins over tokenizer_config.json's
        cfg["chat_template"] = CHATML
        with open(os.path.join(folder, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(template)
    else:
        cfg["chat_template"] = template
    # transformers 5 rebuilds a LlamaTokenizer(Fast) pipeline (Metaspace, prepend_scheme
    # "first": no '▁' after a special token) instead of the tokenizer.json as written, which
    # `tokenizers`, transformers 4 and zt follow; the generic class reads the file as is.
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    json.dump(cfg, open(cfg_path, "w"), indent=1)
    return folder


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    zt, work = sys.argv[1:3]
    h5py, _, tokenizers, transformers = require("h5py", "jinja2", "tokenizers", "transformers")
    print(f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}", flush=True)
    make_tokenizers.fresh(work, sys.argv[3] if len(sys.argv) == 4 else None)
    c = Checker()
    check = c.check

    def zt_run(*args):
        return subprocess.run([zt, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ZT_ENV,
                              timeout=120)

    def write_jsonl(path, convs):
        with open(path, "w", encoding="utf-8") as f:
            for conv in convs:
                f.write(json.dumps({"messages": conv}, ensure_ascii=False) + "\n")
        return path

    data = write_jsonl(os.path.join(work, "chat.jsonl"), CONVERSATIONS)
    for name, base, template, add, end in CASES:
        folder = make_case(work, name, base, template, add, transformers, tokenizers)
        hf = transformers.AutoTokenizer.from_pretrained(folder)
        seq_len = 400
        extra = {"gpt-oss": GPT_OSS_CONVERSATIONS, "qwen3.5": QWEN3_5_CONVERSATIONS}.get(name, [])
        convs = CONVERSATIONS + extra
        case_data = write_jsonl(os.path.join(work, f"chat-{name}.jsonl"), convs) if extra else data
        if name == "qwen3.5":
            check(type(hf).__name__ == "Qwen3_5Tokenizer", f"qwen3.5: AutoTokenizer is {type(hf).__name__}")
        for choice in ("auto", name if name == "gpt-oss" else name.split("-")[0]):
            out = os.path.join(work, f"chat-{name}-{choice}.h5")
            p = zt_run("convert", "sft-to-tokens", "--tokenizer", folder, "--format", "chat", "--chat-template",
                       choice, "--seq-len", str(seq_len), "--no-pack", case_data, out)
            check(p.returncode == 0, f"{name}: sft-to-tokens --format chat --chat-template {choice} "
                                     f"(exit {p.returncode})")
            if p.returncode != 0:
                print(p.stdout)
                continue
            with h5py.File(out, "r") as f:
                tokens, mask = f["tokens"][:].tolist(), f["loss_mask"][:].tolist()
                starts = f["doc_starts"][:].tolist() if "doc_starts" in f else [0]
            check(len(starts) == len(convs), f"{name}: {len(starts)} examples written")
            check("2 truncated" in p.stdout, f"{name}: the 2 long conversations truncated to a row")
            for i, conv in enumerate(convs):
                want = hf.apply_chat_template(conv, tokenize=True)
                if not isinstance(want, list):  # transformers 5 returns a BatchEncoding
                    want = want["input_ids"]
                text = hf.apply_chat_template(conv, tokenize=False)
                enc = hf(text, add_special_tokens=False, return_offsets_mapping=True)
                check(enc["input_ids"] == want, f"{name}: conversation {i}: HF's ids are its text encoded whole")
                if name == "qwen3.5":  # enable_thinking changes only the generation prompt
                    off = hf.apply_chat_template(conv, tokenize=True, enable_thinking=False)["input_ids"]
                    check(off == want, f"{name}: conversation {i}: the same ids with enable_thinking=False")
                want_mask = [0] * len(want)
                for s, e in assistant_spans(text, conv, name, end):
                    for t, (a, b) in enumerate(enc["offset_mapping"]):
                        if (a < e and b > s) or (a == b and s <= a < e):
                            want_mask[t] = 1
                want_mask[0] = 0
                s = starts[i] if i < len(starts) else 0
                n = min(len(want), seq_len + 1)  # a longer conversation is truncated to a row
                want, want_mask = want[:n], want_mask[:n]
                got = tokens[s:s + n]
                check(got == want, f"{name}/{choice}: conversation {i}: ids equal apply_chat_template "
                                   f"({n} tokens{' of a row' if n == seq_len + 1 else ''})")
                if got != want:
                    print(f"    zt {got[:60]}\n    hf {want[:60]}")
                got_mask = mask[s:s + n]
                check(got_mask == want_mask, f"{name}/{choice}: conversation {i}: the mask covers exactly the "
                                             f"assistant turns ({sum(want_mask)} targets)")
                if got_mask != want_mask:
                    print(f"    zt {got_mask}\n    hf {want_mask}\n    text {text!r}")
                rest = mask[s + len(want):s + seq_len + 1]
                check(not any(rest), f"{name}/{choice}: conversation {i}: padding is masked")

    # alpaca (LitGPT's prompt style, no Hugging Face template): BOS + the Alpaca prompt of the
    # user turn + the reply + EOS, encoded whole by Python's tokenizers; the reply and EOS trained.
    from sft_check import alpaca
    folder = os.path.join(work, "tinyllama")
    pytok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    conv = CONVERSATIONS[0]
    prompt = "<s>" + alpaca(conv[0]["content"], "")
    want = pytok.encode(prompt + conv[1]["content"] + "</s>", add_special_tokens=False).ids
    n_prompt = len(pytok.encode(prompt, add_special_tokens=False).ids)
    one = os.path.join(work, "one.jsonl")
    with open(one, "w") as f:
        f.write(json.dumps({"messages": conv}) + "\n")
    out = os.path.join(work, "chat-alpaca.h5")
    p = zt_run("convert", "sft-to-tokens", "--tokenizer", folder, "--format", "chat", "--chat-template", "alpaca",
               "--seq-len", "200", "--no-pack", one, out)
    check(p.returncode == 0, f"alpaca: sft-to-tokens --chat-template alpaca (exit {p.returncode})")
    if p.returncode == 0:
        with h5py.File(out, "r") as f:
            tokens, mask = f["tokens"][:len(want)].tolist(), f["loss_mask"][:len(want)].tolist()
        check(tokens == want and mask == [0] * n_prompt + [1] * (len(want) - n_prompt),
              f"alpaca: ids == Python's encoding of BOS + the Alpaca prompt + reply + EOS; the reply and EOS "
              f"trained ({len(want) - n_prompt} targets)")

    # Refusals: exit 2 naming the option and the known names, or file:line and the field.
    folder = os.path.join(work, "chat-llama3")
    variant = os.path.join(work, "chat-variant")
    shutil.copytree(folder, variant)
    cfg = json.load(open(os.path.join(variant, "tokenizer_config.json")))
    for label, tmpl, needles in (("Llama 3.1-like variant", LLAMA31_LIKE, ["--chat-template", "Cutting Knowledge"]),
                                 ("Mistral v0.2-like variant", MISTRAL_V02_LIKE, ["--chat-template", "' [/INST]'"]),
                                 ("Unsloth-like gpt-oss variant", GPT_OSS_UNSLOTH_LIKE,
                                  ["--chat-template", "developer_instructions"]),
                                 ("Qwen3.6-like variant", QWEN3_6_LIKE, ["--chat-template", "preserve_thinking"]),
                                 ("Qwen3-like template", QWEN3_LIKE, ["--chat-template", "qwen3.5"]),
                                 ("unknown template", "{{ messages }}", ["--chat-template", "llama2", "chatml"]),
                                 ("no template", None, ["--chat-template", "no chat_template"])):
        if tmpl is None:
            cfg.pop("chat_template", None)
        else:
            cfg["chat_template"] = tmpl
        json.dump(cfg, open(os.path.join(variant, "tokenizer_config.json"), "w"))
        p = zt_run("convert", "sft-to-tokens", "--tokenizer", variant, "--format", "chat", "--seq-len", "64",
                   data, os.path.join(work, "refused.h5"))
        check(p.returncode == 2 and all(n in p.stdout for n in needles),
              f"--chat-template auto with an {label}: exit 2 naming {needles} (exit {p.returncode})")
        if p.returncode != 2:
            print(p.stdout[-1500:])
    # an unrecognised chat_template.jinja: the message names that file, not tokenizer_config.json
    qvariant = os.path.join(work, "chat-qwen3.5-variant")
    shutil.copytree(os.path.join(work, "chat-qwen3.5"), qvariant)
    with open(os.path.join(qvariant, "chat_template.jinja"), "w") as f:
        f.write("{{ messages }}")
    p = zt_run("convert", "sft-to-tokens", "--tokenizer", qvariant, "--format", "chat", "--seq-len", "64", data,
               os.path.join(work, "refused.h5"))
    check(p.returncode == 2 and "chat_template.jinja" in p.stdout and "--chat-template" in p.stdout,
          f"an unrecognised chat_template.jinja: exit 2 naming the file (exit {p.returncode})")
    p = zt_run("convert", "sft-to-tokens", "--tokenizer", folder, "--format", "chat", "--chat-template", "jinja",
               "--seq-len", "64", data, os.path.join(work, "refused.h5"))
    check(p.returncode == 2 and "--chat-template" in p.stdout and "llama3" in p.stdout,
          f"--chat-template jinja: exit 2 naming the option and the known names (exit {p.returncode})")
    good = json.dumps({"messages": CONVERSATIONS[0]})
    for label, line, needles in (
            ("unknown role", {"messages": [{"role": "robot", "content": "x"}]}, ["role", "robot"]),
            ("missing content", {"messages": [{"role": "user"}]}, ["messages[0]", "'content'"]),
            ("empty messages", {"messages": []}, ["'messages'", "empty"]),
            ("content not a string", {"messages": [{"role": "user", "content": 5}]}, ["'content'", "5"]),
            ("messages not a list", {"messages": "hi"}, ["'messages'", "not a list"]),
            ("no messages", {"prompt": "x"}, ["'messages'", "missing"]),
            ("system turns only", {"messages": [{"role": "system", "content": "s"}]},
             ["'messages' has no user turn", "What every example needs"]),
            ("thinking where llama3 writes none", {"messages": [{"role": "user", "content": "u"},
                                                                {"role": "assistant", "content": "x", "thinking": "t"}]},
             ["message 1", "'thinking'", "gpt-oss"]),
            ("reasoning_content where llama3 writes none",
             {"messages": [{"role": "user", "content": "u"},
                           {"role": "assistant", "content": "x", "reasoning_content": "r"}]},
             ["message 1", "'reasoning_content'", "qwen3.5"]),
            ("no user query but a <tool_response> (qwen3.5)",
             {"messages": [{"role": "user", "content": " <tool_response>42</tool_response>\n"},
                           {"role": "assistant", "content": "x"}]},
             ["No user query found in messages."]),
            ("a developer message where llama3 writes none", {"messages": [{"role": "developer", "content": "d"},
                                                                           {"role": "user", "content": "u"},
                                                                           {"role": "assistant", "content": "x"}]},
             ["message 0", "developer", "gpt-oss"]),
            ("channel tags in an assistant's content (gpt-oss)",
             {"messages": [{"role": "user", "content": "u"},
                           {"role": "assistant", "content": "<|channel|>final<|message|>x"}]},
             ["message 1", "<|channel|>final<|message|>", "'thinking'"]),
            ("roles out of order (llama2)", {"messages": [{"role": "assistant", "content": "x"},
                                                          {"role": "user", "content": "u"},
                                                          {"role": "assistant", "content": "y"}]},
             ["message 0", "user"])):
        bad = os.path.join(work, "bad.jsonl")
        with open(bad, "w") as f:
            f.write(good + "\n\n" + json.dumps(line) + "\n")
        if os.path.exists(os.path.join(work, "refused.h5")):  # written where a refusal failed
            os.remove(os.path.join(work, "refused.h5"))
        use = os.path.join(work, "chat-llama2" if "llama2" in label else "chat-gpt-oss" if "gpt-oss" in label
                           else "chat-qwen3.5" if "qwen3.5" in label else "chat-llama3")
        p = zt_run("convert", "sft-to-tokens", "--tokenizer", use, "--format", "chat", "--seq-len", "64", bad,
                   os.path.join(work, "refused.h5"))
        check(p.returncode == 2 and f"{bad}:3" in p.stdout and all(n in p.stdout for n in needles),
              f"{label}: exit 2 naming {bad}:3 and {needles} (exit {p.returncode})")
        if p.returncode != 2 or f"{bad}:3" not in p.stdout:
            print(p.stdout[-1500:])
    c.finish()


if __name__ == "__main__":
    sys.exit(main() or 0)
