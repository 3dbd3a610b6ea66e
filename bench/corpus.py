"""Generated data with the statistics of real logs, for the count estimate's benchmark and
tests: audit text whose words follow a Zipf-like law and come in topics (so that patterns
correlate, as "sshd" and "publickey" do), and flows whose ports, protocols and addresses go
together (DNS is UDP to a few resolvers). Deterministic for a seed."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import numpy as np

SYLLABLES = [consonant + vowel for consonant in "ktnrsmpld" for vowel in "aeiou"]
# Words holding characters that are wildcards or escapes elsewhere (LIKE's %, _ and \):
# patterns made of them match them literally.
LITERAL_WORDS = ("cpu=97%", "disk_usage", "user_id", r"C:\Temp", r"a\_b", "50%_off")


def _vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        length = int(rng.integers(1, 4))
        word = "".join(SYLLABLES[int(i)] for i in rng.integers(0, len(SYLLABLES), length))
        if word not in seen:
            seen.add(word)
            words.append(word)
    # Mid-frequency ranks, so that each appears in a few per cent of the lines.
    for offset, literal in enumerate(LITERAL_WORDS):
        words[40 + 7 * offset] = literal
    return words


def _zipf(size: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, size + 1) ** exponent
    return np.asarray(weights / weights.sum())


@dataclass
class TextCorpus:
    """Lines of ``chars`` characters: each line has a topic (topics are Zipf-distributed
    too); a share of its words come from the topic's own vocabulary, the rest from the
    global one."""

    seed: int = 1
    vocabulary_size: int = 3000
    topics: int = 40
    topic_words: int = 60
    topic_share: float = 0.35
    exponent: float = 1.05
    chars: int = 512
    words: list[str] = field(init=False)
    _topic_vocabulary: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.words = _vocabulary(self.vocabulary_size, rng)
        self._topic_vocabulary = np.stack(
            [rng.permutation(self.vocabulary_size)[: self.topic_words] for _ in range(self.topics)]
        )

    def topic_word(self, topic: int, rank: int) -> str:
        """The ``rank``-th most frequent word of a topic: words of one topic co-occur."""
        return self.words[int(self._topic_vocabulary[topic, rank])]

    def lines(self, count: int, seed: int) -> list[str]:
        rng = np.random.default_rng((self.seed, seed))
        per_line = self.chars // 3  # more words than fit; each line is cut at ``chars``
        topic_of = rng.choice(self.topics, size=count, p=_zipf(self.topics, 1.0))
        from_topic = rng.random((count, per_line)) < self.topic_share
        topic_rank = rng.choice(
            self.topic_words, size=(count, per_line), p=_zipf(self.topic_words, 1.0)
        )
        global_weights = _zipf(self.vocabulary_size, self.exponent)
        global_word = rng.choice(self.vocabulary_size, size=(count, per_line), p=global_weights)
        chosen = np.where(
            from_topic, self._topic_vocabulary[topic_of[:, None], topic_rank], global_word
        )
        words = self.words
        out = []
        for row in chosen:
            line = " ".join([words[i] for i in row])
            out.append(line[: self.chars])
        return out


# --- flows -----------------------------------------------------------------------------------

# (dst port, proto, servers, weight from client networks, weight from the server network):
# services with their protocol and a few servers each; servers talk to other services than
# clients do.
SERVICES = (
    (443, 6, 200, 40, 4),
    (80, 6, 120, 12, 1),
    (53, 17, 4, 18, 10),
    (123, 17, 3, 4, 4),
    (22, 6, 30, 3, 15),
    (5432, 6, 10, 1, 30),
    (8080, 6, 40, 5, 20),
    (993, 6, 6, 2, 0),
    (3478, 17, 12, 5, 0),
    (25, 6, 4, 1, 6),
)
CLIENT_NETS = ("10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/20")
SERVER_NETS = ("172.16.0.0/14",)
SERVICE_NET = ipaddress.ip_network("192.0.0.0/16")  # service n's servers: 192.0.n.1, ...


@dataclass
class FlowCorpus:
    """Flows from hosts in a few networks (Zipf over hosts) to services: the port fixes the
    protocol and the servers, and hosts of the server network use other services than
    clients; source ports are ephemeral (32768-60999)."""

    seed: int = 1
    hosts: int = 50_000

    def rows(self, count: int, seed: int) -> list[tuple[str, str, int, int, int]]:
        """(src_ip, dst_ip, src_port, dst_port, proto), possibly repeated."""
        rng = np.random.default_rng((self.seed, seed))
        nets = [ipaddress.ip_network(n) for n in CLIENT_NETS + SERVER_NETS]
        starts = np.array([int(n.network_address) for n in nets], dtype=np.int64)
        sizes = np.array([n.num_addresses - 2 for n in nets], dtype=np.int64)
        host = rng.choice(self.hosts, size=count, p=_zipf(self.hosts, 0.9)).astype(np.int64)
        net = host % len(nets)
        src = starts[net] + (host * 7919) % sizes[net] + 1
        from_server = net >= len(CLIENT_NETS)
        table = np.array(SERVICES, dtype=np.int64)
        service = np.where(
            from_server,
            rng.choice(len(SERVICES), size=count, p=table[:, 4] / table[:, 4].sum()),
            rng.choice(len(SERVICES), size=count, p=table[:, 3] / table[:, 3].sum()),
        )
        base = int(SERVICE_NET.network_address)
        dst = base + service * 256 + rng.integers(0, table[service, 2]) + 1
        src_port = rng.integers(32768, 61000, size=count)
        return [
            (_dotted(int(a)), _dotted(int(b)), int(c), int(d), int(e))
            for a, b, c, d, e in zip(
                src, dst, src_port, table[service, 0], table[service, 1], strict=True
            )
        ]


def _dotted(value: int) -> str:
    return f"{value >> 24}.{(value >> 16) & 255}.{(value >> 8) & 255}.{value & 255}"
