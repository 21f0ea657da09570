"""Word-level tokenizers of the tiny describers, built in code over the smoke word list.

Each checkpoint builder (:mod:`.llava`, :mod:`.qwen2_vl`, :mod:`.janus`,
:mod:`.describers`, :mod:`.pipelines`) names its own special tokens and chat template;
the vocabulary and the tokenizer around it are the same for all. Decoding joins
words by spaces, so a tiny model's output reads as word salad of real image words.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BOS", "EOS", "PAD", "SOURCES", "TEMPLATE_WORDS", "UNK", "read_words", "word_level_tokenizer",
           "word_vocab"]

WORDS_FILE = Path(__file__).resolve().parent / "assets" / "words.txt"
#: what a tokenizer built here depends on: a builder's key hashes them (:func:`.checkpoints.builder_key`)
SOURCES = (Path(__file__), WORDS_FILE)

UNK, BOS, EOS, PAD = "<unk>", "<s>", "</s>", "<pad>"
PUNCTUATION = list(".,:;!?'\"()-/")
# Needed by the chat templates ("USER: ... ASSISTANT:"), so they must not map to <unk>.
TEMPLATE_WORDS = ["user", "assistant", "system"]


def read_words() -> list[str]:
    """Return the packaged vocabulary words, lowercased, first occurrence kept."""
    words: list[str] = []
    for line in WORDS_FILE.read_text(encoding="utf-8").splitlines():
        word = line.strip().lower()
        if word and not word.startswith("#"):
            words.append(word)
    return list(dict.fromkeys(words))


def word_vocab(specials: list[str]) -> dict[str, int]:
    """Token -> id: ``specials`` first, then punctuation, template words and the word list."""
    tokens = specials + PUNCTUATION + TEMPLATE_WORDS + read_words()
    return {tok: i for i, tok in enumerate(dict.fromkeys(tokens))}


def word_level_tokenizer(
    vocab: dict[str, int],
    specials: list[str],
    *,
    eos: str,
    pad: str,
    bos: str | None,
    extra_special_tokens: dict[str, str],
    chat_template: str,
):
    """A word-level fast tokenizer over ``vocab`` that decodes to space-joined words.

    Args:
        vocab: token -> id, holding every entry of ``specials`` and ``UNK``.
        specials: tokens matched verbatim before word splitting (and skipped when
            decoding with ``skip_special_tokens``).
        eos, pad: the tokenizer's end-of-sequence and padding tokens.
        bos: prepended when special tokens are added (Llama-style); ``None`` for
            none (Qwen-style).
        extra_special_tokens: named extras such as ``{"image_token": "<image>"}``,
            which processors read as tokenizer attributes.
        chat_template: Jinja template stored with the tokenizer.
    """
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    # WordPiece decoding with no "##" pieces joins tokens by spaces and tidies " ." -> ".".
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    if bos is not None:
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, vocab[bos])]
        )
    backend.add_special_tokens(specials)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=bos,
        eos_token=eos,
        unk_token=UNK,
        pad_token=pad,
        extra_special_tokens=extra_special_tokens,
        model_max_length=4096,
        # Generation appends on the right, so batched prompts must be padded on the left.
        padding_side="left",
        chat_template=chat_template,
    )
