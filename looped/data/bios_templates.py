"""Sentence templates for the synthetic biographies, and the function that fills one in.

Placeholders: ``{S}`` the subject (the full name in a biography's first sentence, He/She after),
``{p}`` the possessive pronoun (his/her), ``{E}`` an employer's name (company sentences),
``{V}`` the attribute value. Every biography template opens with ``{S}`` and holds one ``{V}``.

The first ``n_templates`` of each bank write training text, the next ``n_heldout_templates`` only
evaluation text (rearranging words the first ten use). Birth-date templates never use ``{p}``:
the evaluation biography's first gendered word must be the scored He/She.
"""

from __future__ import annotations

import re

from looped.data.bios_tokenizer import split_words

TEMPLATES: dict[str, tuple[str, ...]] = {
    "birth_date": (
        "{S} was born on {V}.",
        "{S} came into the world on {V}.",
        "{S} celebrates a birthday on {V}.",
        "{S} arrived on {V}.",
        "{S} was welcomed into the world on {V}.",
        "{S} entered life on {V}.",
        "{S} has a birth date of {V}.",
        "{S} first saw daylight on {V}.",
        "{S} was brought into this world on {V}.",
        "{S} was delivered on {V}.",
        "{S} was born into the world on {V}.",
        "{S} first arrived in this world on {V}.",
        "{S} has a birthday on {V}.",
        "{S} came into life on {V}.",
    ),
    "birth_city": (
        "{S} was born in {V}.",
        "{S} spent {p} early years in {V}.",
        "{S} grew up in {V}.",
        "{S} hails from {V}.",
        "{S} is a native of {V}.",
        "{S} comes from {V}.",
        "{S} was raised in {V}.",
        "{S} has roots in {V}.",
        "{S} spent {p} childhood in {V}.",
        "{S} calls {V} {p} hometown.",
        "{S} spent {p} first years in {V}.",
        "{S} has {p} roots in {V}.",
        "{S} was brought up in {V}.",
        "{S} spent {p} early life in {V}.",
    ),
    "university": (
        "{S} studied at {V}.",
        "{S} graduated from {V}.",
        "{S} received {p} education at {V}.",
        "{S} attended {V}.",
        "{S} earned a degree at {V}.",
        "{S} completed {p} studies at {V}.",
        "{S} was a student at {V}.",
        "{S} enrolled at {V}.",
        "{S} is a graduate of {V}.",
        "{S} spent {p} college years at {V}.",
        "{S} was a college student at {V}.",
        "{S} received a degree from {V}.",
        "{S} completed {p} education at {V}.",
        "{S} earned {p} degree at {V}.",
    ),
    "major": (
        "{S} majored in {V}.",
        "{S} studied {V}.",
        "{S} focused on {V}.",
        "{S} earned a degree in {V}.",
        "{S} specialized in {V}.",
        "{S} chose {V} as {p} major.",
        "{S} concentrated on {V}.",
        "{S} completed a major in {V}.",
        "{S} pursued {V}.",
        "{S} wrote {p} thesis in {V}.",
        "{S} completed {p} studies in {V}.",
        "{S} received a degree in {V}.",
        "{S} focused {p} studies on {V}.",
        "{S} wrote a thesis in {V}.",
    ),
    "employer": (
        "{S} works for {V}.",
        "{S} is employed by {V}.",
        "{S} has a job at {V}.",
        "{S} works at {V}.",
        "{S} is on the staff of {V}.",
        "{S} joined {V}.",
        "{S} earns a living at {V}.",
        "{S} holds a position at {V}.",
        "{S} is an employee of {V}.",
        "{S} took a job with {V}.",
        "{S} holds a job at {V}.",
        "{S} took a position at {V}.",
        "{S} earns {p} living at {V}.",
        "{S} was employed by {V}.",
    ),
    # company sentences: the only place an employer's city is stated
    "employer_city": (
        "{E} is based in {V}.",
        "{E} has its headquarters in {V}.",
        "{E} is headquartered in {V}.",
        "{E} operates out of {V}.",
        "{E} has its main office in {V}.",
        "The offices of {E} are in {V}.",
        "{E} runs its business from {V}.",
        "{E} keeps its head office in {V}.",
        "{E} was set up in {V}.",
        "{E} has its home in {V}.",
        "{E} is located in {V}.",
        "The main office of {E} is in {V}.",
        "{E} keeps its offices in {V}.",
        "{E} runs its business out of {V}.",
    ),
}

# Two-hop sentences name a person and state the employer's city without naming the employer.
# Training text holds them only for the persons in the two-hop training split; the evaluation
# query is TWO_HOP[0] for each of the other persons, so it never appears in training text.
TWO_HOP: tuple[str, ...] = (
    "The employer of {S} is based in {V}.",
    "The company where {S} works is located in {V}.",
    "{S} works for a company based in {V}.",
)

# One sentence each, in the evaluation biography's order; gender shows in the pronouns.
BIO_ATTRIBUTES = ("birth_date", "birth_city", "university", "major", "employer")
ATTRIBUTES = (*BIO_ATTRIBUTES, "gender")  # the facts whose bits add up to bits per person
PLACEHOLDER_RE = re.compile(r"(\{[SpEV]\})")
PRONOUNS = {"female": ("She", "her"), "male": ("He", "his")}  # subject, possessive

assert all("{p}" not in t for t in TEMPLATES["birth_date"])
assert all(len(set(bank)) == len(bank) for bank in TEMPLATES.values())


def bank_size() -> int:
    """Templates per attribute available to split between training and held-out use."""
    return min(len(bank) for bank in TEMPLATES.values())


def fill(
    template: str, value: str, value_tag: str, subject: str = "", subject_tag: str = "", **more: str
) -> list[tuple[str, str]]:
    """A template as (text, tag) pieces; tags name what a piece holds ("" for template words),
    so the generator knows which tokens are the value without searching for it."""
    fills = {"{V}": (value, value_tag), "{S}": (subject, subject_tag)}
    fills["{p}"] = (more.get("possessive", ""), "gender")
    fills["{E}"] = (more.get("employer", ""), "")
    return [fills.get(part, (part, "")) for part in PLACEHOLDER_RE.split(template) if part]


def template_words() -> set[str]:
    """Every word the templates and pronouns can write (for the tokenizer's vocabulary)."""
    words = {w for pair in PRONOUNS.values() for w in pair}
    for template in [*TWO_HOP, *(t for bank in TEMPLATES.values() for t in bank)]:
        words.update(split_words(PLACEHOLDER_RE.sub(" ", template)))
    return words
