"""The world the biographies describe: its config (``BiosConfig``), the value pools and the
persons drawn from them; synthetic words are distinct from each other and the template words."""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter
from dataclasses import dataclass

from looped.data.bios_templates import PRONOUNS, bank_size, template_words
from looped.errors import UserError

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
N_DAYS = 28  # days 1..28 in every month, so the date pool is a plain product
MAJORS = (
    "Physics",
    "Chemistry",
    "Biology",
    "Mathematics",
    "History",
    "Philosophy",
    "Economics",
    "Linguistics",
    "Geology",
    "Astronomy",
    "Psychology",
    "Sociology",
    "Anthropology",
    "Architecture",
    "Music",
    "Literature",
    "Statistics",
    "Nursing",
    "Law",
    "Medicine",
    "Accounting",
    "Finance",
    "Marketing",
    "Journalism",
    "Education",
    "Theology",
    "Zoology",
    "Botany",
    "Ecology",
    "Robotics",
    "Neuroscience",
    "Genetics",
    "Archaeology",
    "Classics",
    "Geography",
    "Dance",
    "Theatre",
    "Photography",
    "Agriculture",
    "Forestry",
)
UNIVERSITY_FORMS = ("University of {}", "{} University", "{} College", "{} Institute of Technology")
EMPLOYER_SUFFIXES = ("Labs", "Group", "Systems", "Industries", "Partners", "Works", "Motors")
CITY_ENDINGS = ("ton", "vik", "burg", "dale", "mere", "ford", "grad", "stad", "holm", "port")
ONSETS = (
    "b",
    "br",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "j",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "pr",
    "r",
    "s",
    "st",
    "t",
    "tr",
    "v",
    "z",
    "sh",
    "th",
)
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "a", "ai", "ou")
CODAS = ("", "", "", "n", "r", "l", "s", "k", "m", "x")


@dataclass
class Pools:
    """The values each fact is drawn from (saved with the corpus, so loading never regenerates)."""

    first: list[str]
    middle: list[str]
    last: list[str]
    years: list[int]
    cities: list[str]
    universities: list[str]
    majors: list[str]
    employers: list[str]
    employer_city: dict[str, str]  # each employer's city

    def values(self, attr: str) -> list[str]:
        """Every value `attr` can take, as written in text (the pool its bits are counted over)."""
        if attr == "birth_date":
            return [
                f"{d} {m} {y}" for y in self.years for m in MONTHS for d in range(1, N_DAYS + 1)
            ]
        if attr == "gender":
            return [PRONOUNS[g][0] for g in sorted(PRONOUNS)]
        if attr in ("employer_city", "two_hop"):
            return sorted(set(self.employer_city.values()))
        pools = {"birth_city": self.cities, "university": self.universities}
        pools |= {
            "major": self.majors,
            "employer": self.employers,
        }
        return list(pools[attr])

    def entropy_bits(self, attr: str) -> float:
        """Entropy of `attr` for a random person: log2 of the pool size, except the employer's
        city (several employers may share a city)."""
        if attr not in ("employer_city", "two_hop"):
            return math.log2(len(self.values(attr)))
        counts = Counter(self.employer_city.values())
        n = sum(counts.values())
        return -sum(c / n * math.log2(c / n) for c in counts.values())


@dataclass
class Person:
    index: int
    first: str
    middle: str
    last: str
    gender: str  # "female" | "male"
    birth_day: int
    birth_month: str
    birth_year: int
    birth_city: str
    university: str
    major: str
    employer: str
    employer_city: str  # the employer's city (a function of the employer)
    two_hop_split: str  # "train" (two-hop sentence in training) | "query" | "" (two_hop off)

    @property
    def name(self) -> str:
        return f"{self.first} {self.middle} {self.last}"

    def value(self, attr: str) -> str:
        """The value of `attr` as written in text."""
        if attr == "birth_date":
            return f"{self.birth_day} {self.birth_month} {self.birth_year}"
        if attr == "gender":
            return PRONOUNS[self.gender][0]
        if attr == "two_hop":
            return self.employer_city
        return getattr(self, attr)


# The pool sizes of the capacity studies' bioS setting: 47.6 bits per person.
BIOS_S_SIZES = {
    "n_first": 400,
    "n_middle": 400,
    "n_last": 1000,
    "first_year": 1900,
    "n_years": 200,
    "n_cities": 200,
    "n_universities": 300,
    "n_majors": 100,
    "n_employers": 263,
}


@dataclass
class BiosConfig:
    """What to generate. Bits per person with the defaults: 33.90 (bioS pools: 47.60)."""

    n_persons: int = 100  # persons, each with a unique full name
    seed: int = 0  # generator seed: pools, facts, templates, sentence order
    bios_per_person: int = 4  # training biographies per person (fresh templates each)
    two_hop: bool = True  # company sentences + two-hop sentences/queries (employer -> city)
    two_hop_train_frac: float = 0.5  # persons with two-hop sentences in training; rest queried
    company_texts: int = 8  # training sentences stating each employer's city
    n_first: int = 40  # first-name pool (bioS 400)
    n_middle: int = 20  # middle-name pool (bioS 400)
    n_last: int = 40  # last-name pool (bioS 1000)
    first_year: int = 1950  # earliest birth year
    n_years: int = 50  # birth years; dates 12 x 28 x 50: 14.04 bits (bioS 200 years: 16.04)
    n_cities: int = 40  # birth (and employer) cities: 5.32 bits (bioS 200: 7.64)
    n_universities: int = 20  # 4.32 bits (bioS 300: 8.23)
    n_majors: int = 20  # 4.32 bits; 40 real subjects, then "X Studies" (bioS 100: 6.64)
    n_employers: int = 30  # 4.91 bits (bioS 263: 8.04); gender adds 1 bit
    n_templates: int = 10  # training templates per sentence kind
    n_heldout_templates: int = 2  # further templates per kind, used only for evaluation text
    permute_sentences: bool = True  # shuffle the sentence order of each training biography

    @classmethod
    def bioS(cls, **overrides: object) -> BiosConfig:
        """The pool sizes of the capacity studies (47.6 bits per person)."""
        return cls(**{**BIOS_S_SIZES, **overrides})

    def pool_sizes(self) -> dict[str, int]:
        sizes = {"birth_date": len(MONTHS) * N_DAYS * self.n_years, "birth_city": self.n_cities}
        sizes |= {
            "university": self.n_universities,
            "major": self.n_majors,
        }
        return sizes | {"employer": self.n_employers, "gender": len(PRONOUNS)}

    def check(self) -> None:
        """Raise UserError naming the first field that cannot work."""
        names = self.n_first * self.n_middle * self.n_last
        counts = {k: v for k, v in dataclasses.asdict(self).items() if k.startswith("n_")}
        small = [k for k, v in counts.items() if v < 1]
        if small:
            raise UserError(f"bios {small[0]}={counts[small[0]]} must be at least 1")
        if self.n_persons > names:
            msg = f"bios n_persons={self.n_persons} exceeds the {names} distinct names"
            raise UserError(msg + "; enlarge the name pools")
        if (n := self.n_templates + self.n_heldout_templates) > bank_size():
            msg = f"bios n_templates + n_heldout_templates = {n} exceeds the {bank_size()}"
            raise UserError(msg + " templates per kind; lower one of them")
        if self.bios_per_person < 1 or self.company_texts < 0:
            raise UserError("bios bios_per_person must be >= 1 and company_texts >= 0")
        if not 0.0 <= self.two_hop_train_frac < 1.0:
            msg = f"bios two_hop_train_frac={self.two_hop_train_frac} must be in [0, 1)"
            raise UserError(msg + " so some persons are queried")


def _words(rng: random.Random, n: int, used: set[str], endings: tuple[str, ...] = ()) -> list[str]:
    """`n` new pronounceable capitalized words, none in `used` (case-insensitive)."""
    out: list[str] = []
    while len(out) < n:
        word = "".join(
            rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(rng.choice((2, 2, 2, 3)))
        )
        word = (word + (rng.choice(endings) if endings else rng.choice(CODAS))).capitalize()
        if len(word) >= 4 and word.lower() not in used:
            used.add(word.lower())
            out.append(word)
    return out


def make_pools(cfg: BiosConfig) -> Pools:
    rng = random.Random(f"looped-bios:{cfg.seed}:pools")
    used = {w.lower() for w in template_words() | set(MONTHS) | set(MAJORS)}
    used |= {
        w.lower() for w in (*EMPLOYER_SUFFIXES, "University", "College", "Institute", "Studies")
    }
    first, middle, last = (_words(rng, n, used) for n in (cfg.n_first, cfg.n_middle, cfg.n_last))
    cities = _words(rng, cfg.n_cities, used, CITY_ENDINGS)
    universities = [
        rng.choice(UNIVERSITY_FORMS).format(w) for w in _words(rng, cfg.n_universities, used)
    ]
    extra = max(0, cfg.n_majors - len(MAJORS))
    majors = [*MAJORS[: cfg.n_majors], *(f"{w} Studies" for w in _words(rng, extra, used))]
    employers = [f"{w} {rng.choice(EMPLOYER_SUFFIXES)}" for w in _words(rng, cfg.n_employers, used)]
    # Distinct cities per employer when there are enough, so the city identifies the employer.
    if cfg.n_employers <= cfg.n_cities:
        hq = rng.sample(cities, cfg.n_employers)
    else:
        hq = [rng.choice(cities) for _ in employers]
    years = list(range(cfg.first_year, cfg.first_year + cfg.n_years))
    hq_of = dict(zip(employers, hq))
    return Pools(first, middle, last, years, cities, universities, majors, employers, hq_of)


def make_persons(cfg: BiosConfig, pools: Pools) -> list[Person]:
    rng = random.Random(f"looped-bios:{cfg.seed}:persons")
    n_ml = len(pools.middle) * len(pools.last)
    codes = rng.sample(range(len(pools.first) * n_ml), cfg.n_persons)  # distinct full names
    two_hop_train = set(
        rng.sample(range(cfg.n_persons), int(cfg.two_hop_train_frac * cfg.n_persons))
    )
    persons = []
    for i, code in enumerate(codes):
        f, rest = divmod(code, n_ml)
        m, last = divmod(rest, len(pools.last))
        employer = rng.choice(pools.employers)
        split = ("train" if i in two_hop_train else "query") if cfg.two_hop else ""
        name = (pools.first[f], pools.middle[m], pools.last[last])
        # drawn in the order of Person's fields: gender, day, month, year, city, university, major
        facts = (rng.choice(sorted(PRONOUNS)), rng.randint(1, N_DAYS), rng.choice(MONTHS))
        drawn = (pools.years, pools.cities, pools.universities, pools.majors)
        facts += tuple(rng.choice(pool) for pool in drawn)
        persons.append(Person(i, *name, *facts, employer, pools.employer_city[employer], split))
    return persons
