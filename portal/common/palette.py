"""The portal's colours: one colour per queue, the same on every chart and page for every viewer.

A queue's colour comes from its id alone (never from which queues the viewer can see, nor
from their order), so the nlp-train of one page is the nlp-train of every other page. Ids
are assigned in creation order, so the first dozen queues all differ; past that the colours
repeat.

Colours mean queues and nothing else. Everything that is not a queue is drawn in the neutral
greys below and told apart by shape: guarantee, deserved and capability by marker and outline
on the quota chart, the kinds of eviction by bar pattern.
"""

from __future__ import annotations

from collections.abc import Iterable

# Tableau's 10-colour palette without its grey, plus three of its 20-colour companions:
# distinct hues that stay apart for the common colour-vision deficiencies in adjacent pairs.
QUEUE_PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#499894",
    "#d37295",
    "#8cd17d",
)
# Not queues: free GPUs, the queues of tenants the viewer is not in, and the ink of lines,
# markers and outlines that carry other meanings.
FREE = "#e9edf3"
OTHER_TENANTS = "#9aa4b2"
OTHER_WORKLOADS = "#5f6b7a"  # pods the portal did not start (other teams, other schedulers)
INK = "#1d2330"
INK_MUTED = "#5f6b7a"


def queue_colour(queue_id: int) -> str:
    """The colour of the queue with this id (ids start at 1)."""
    return QUEUE_PALETTE[(int(queue_id) - 1) % len(QUEUE_PALETTE)]


def queue_colours(queues: Iterable[tuple[int, str]]) -> dict[str, str]:
    """Queue name -> colour, for (id, name) pairs."""
    return {name: queue_colour(queue_id) for queue_id, name in queues}
