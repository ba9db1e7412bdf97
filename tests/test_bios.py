"""The synthetic biography corpus: determinism, held-out text, two-hop isolation, round trips."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from looped.cli import main as cli
from looped.data.bios import ATTRIBUTES, BiosConfig, BiosCorpus, WordTokenizer, generate
from looped.errors import UserError

SMALL = dict(n_persons=40, n_years=6, n_cities=12, n_universities=8, n_majors=8, n_employers=10)


@pytest.fixture(scope="module")
def corpus() -> BiosCorpus:
    return generate(BiosConfig(seed=3, **SMALL))


def sentences(text: str) -> list[str]:
    return [s if s.endswith(".") else s + "." for s in re.split(r"(?<=\.) ", text)]


def test_same_seed_same_corpus_other_seed_other_corpus(corpus):
    again = generate(BiosConfig(seed=3, **SMALL))
    assert again.train_texts == corpus.train_texts
    assert again.queries == corpus.queries and again.persons == corpus.persons
    assert again.pools == corpus.pools and again.tokenizer == corpus.tokenizer
    other = generate(BiosConfig(seed=4, **SMALL))
    assert other.train_texts != corpus.train_texts
    assert [p.name for p in other.persons] != [p.name for p in corpus.persons]


def test_names_are_unique_even_when_every_name_is_used():
    cfg = BiosConfig(n_persons=12, n_first=2, n_middle=2, n_last=3, two_hop=False)
    names = [p.name for p in generate(cfg).persons]
    assert len(set(names)) == 12
    with pytest.raises(UserError, match="distinct names"):
        generate(dataclasses.replace(cfg, n_persons=13))


def test_default_entropy_and_bioS_scale():
    def bits(cfg: BiosConfig) -> float:
        return sum(math.log2(n) for n in cfg.pool_sizes().values())

    assert bits(BiosConfig()) == pytest.approx(33.909, abs=1e-3)
    # bioS: 12*28*200 dates, 200 cities, 300 universities, 100 majors, 263 employers, 2 genders
    assert bits(BiosConfig.bioS()) == pytest.approx(47.6, abs=0.01)
    c = generate(BiosConfig(seed=1, n_persons=200))
    sizes = BiosConfig().pool_sizes()
    assert {a: len(c.pools.values(a)) for a in ATTRIBUTES} == sizes
    s = c.summary()
    assert s["bits_per_person"] == pytest.approx(bits(BiosConfig()))
    assert s["vocab_size"] < 600 and s["tokens_per_bio_max"] < 128  # demo-sized, packs into T=128


def test_biographies_name_the_person_first_then_use_the_pronoun(corpus):
    by_name = {p.name: p for p in corpus.persons}
    bios = [t for t in corpus.train_texts if len(sentences(t)) > 1]
    assert len(bios) == corpus.config.bios_per_person * len(corpus.persons)
    for text in bios:
        person = by_name[" ".join(text.split()[:3])]
        rest = sentences(text)
        assert len(rest) == 5 and text.count(person.name) == 1
        pronoun = "She" if person.gender == "female" else "He"
        assert all(s.split()[0] == pronoun for s in rest[1:])
        for attr in ("birth_city", "university", "major", "employer"):
            assert person.value(attr) in text
        assert f"{person.birth_day} {person.birth_month} {person.birth_year}" in text


def test_query_spans_hold_exactly_the_values(corpus):
    tok = corpus.tokenizer
    for q in corpus.queries:
        ids = tok.encode(q.text)
        for attr, start, end in q.spans:
            got = tok.decode(ids[start:end])
            if q.kind == "employer_city":
                assert got == list(corpus.pools.employer_city.values())[q.index]
            else:
                assert got == corpus.persons[q.index].value(attr)
    bio = [q for q in corpus.queries if q.kind == "bio"]
    assert [q.index for q in bio] == list(range(len(corpus.persons)))
    assert all([s[0] for s in q.spans] == list(ATTRIBUTES) for q in bio)


def test_heldout_templates_never_appear_in_training_text(corpus):
    train = "\n".join(corpus.train_texts)
    for q in corpus.queries:
        if q.kind == "two_hop":
            continue
        for sentence in sentences(q.text):
            assert sentence not in train, sentence
    # and the held-out phrasing is new even without the person: the words after the subject
    heldout = {" ".join(s.split()[1:]) for t in corpus.eval_texts for s in sentences(t)[1:]}
    seen = {" ".join(s.split()[1:]) for t in corpus.train_texts for s in sentences(t)}
    assert heldout and not heldout & seen


def test_every_query_token_is_trained(corpus):
    """Held-out phrasings reuse training words: no query hits an untrained embedding."""
    tok = corpus.tokenizer
    trained = {i for t in corpus.train_texts for i in tok.encode(t)}
    for q in corpus.queries:
        assert set(tok.encode(q.text)) <= trained, q.text


def test_two_hop_queries_never_appear_verbatim_and_bios_never_state_employer_city(corpus):
    tok = corpus.tokenizer
    train = "\n".join(corpus.train_texts)
    two_hop = [q for q in corpus.queries if q.kind == "two_hop"]
    assert len(two_hop) == 20  # two_hop_train_frac=0.5 of 40 persons
    for q in two_hop:
        (_, start, _), ids = q.spans[0], tok.encode(q.text)
        prefix = tok.decode(ids[:start])  # "The employer of X is based in"
        assert prefix not in train and corpus.persons[q.index].name in prefix
        assert corpus.persons[q.index].two_hop_split == "query"
    # the training split does see the phrasing, so the query's wording is familiar
    trained = [p for p in corpus.persons if p.two_hop_split == "train"]
    assert all(f"The employer of {p.name} is based in" in train for p in trained[:5])
    # a person's biographies never state the employer's city: only company sentences do
    for p in corpus.persons:
        if p.employer_city == p.birth_city:
            continue
        bios = [t for t in corpus.train_texts if t.startswith(p.name) and len(sentences(t)) > 1]
        assert bios and not any(p.employer_city in t for t in bios)
    # ...and each employer's city is stated in exactly company_texts sentences of its own kind
    names = [p.name for p in corpus.persons]
    for employer, city in corpus.pools.employer_city.items():
        company = [t for t in corpus.train_texts if employer in t and city in t]
        company = [t for t in company if not any(n in t for n in names)]
        assert len(company) == corpus.config.company_texts


def test_tokenizer_round_trips_and_falls_back_to_unk(corpus, tmp_path):
    tok = corpus.tokenizer
    for text in corpus.train_texts + corpus.eval_texts:
        ids = tok.encode(text)
        assert tok.unk_id not in ids and tok.decode(ids) == text
    ids = list(range(3, tok.vocab_size))  # every non-special token, in any order
    assert tok.encode(tok.decode(ids)) == ids
    name = corpus.persons[0].name
    ids = tok.encode(f"{name} was born in Qwertyzz in 2999.")
    assert ids.count(tok.unk_id) == 2 and tok.decode(ids) == f"{name} was born in <unk> in <unk>."
    tok.save(tmp_path / "tok.json")
    assert WordTokenizer.load(tmp_path / "tok.json") == tok
    assert (tok.pad_id, tok.eos_id, tok.unk_id) == (0, 1, 2)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([-100])


def test_corpus_save_load_round_trip(corpus, tmp_path):
    corpus.save(tmp_path / "c")
    loaded = BiosCorpus.load(tmp_path / "c")
    assert loaded.config == corpus.config and loaded.pools == corpus.pools
    assert loaded.persons == corpus.persons and loaded.queries == corpus.queries
    assert loaded.train_texts == corpus.train_texts and loaded.eval_texts == corpus.eval_texts
    assert loaded.tokenizer == corpus.tokenizer
    corpus.save(tmp_path / "c")  # overwriting a corpus is fine
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not a bios corpus"):
        corpus.save(tmp_path / "other")
    with pytest.raises(UserError, match="looped data bios"):
        BiosCorpus.load(tmp_path / "missing")


def test_cli_writes_a_loadable_corpus(tmp_path, capsys):
    out = str(tmp_path / "bios")
    assert cli(["data", "bios", "--persons", "20", "--seed", "1", "--out", out]) == 0
    assert "20 persons" in capsys.readouterr().out
    loaded = BiosCorpus.load(out)
    fresh = generate(BiosConfig(n_persons=20, seed=1))
    assert loaded.train_texts == fresh.train_texts and loaded.queries == fresh.queries


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    args = ["data", "bios", "--persons", "0", "--out", str(tmp_path / "x")]
    assert cli(args) == 2
    err = capsys.readouterr().err
    assert "n_persons=0" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(UserError, match="n_templates"):
        generate(BiosConfig(n_templates=13, n_heldout_templates=2))


def test_pools_entropy_counts_shared_employer_cities():
    c = generate(BiosConfig(n_persons=5, n_cities=3, n_employers=6))  # more employers than cities
    counts = [list(c.pools.employer_city.values()).count(x) / 6 for x in c.pools.values("two_hop")]
    assert c.pools.entropy_bits("two_hop") == pytest.approx(-sum(p * math.log2(p) for p in counts))
    assert c.pools.entropy_bits("two_hop") <= math.log2(3) + 1e-12
